//! A role's configuration: its own file (written by the launcher or Scribe), with `REACH_LOG__LEVEL`
//! as the one environment override. No secret is ever read from the environment.
//!
//! `log.otlp_endpoint`, when set, must be a loopback collector (`http://127.0.0.1:<port>` or
//! `http://[::1]:<port>`): core and ward have no network in this profile, so anything else is
//! refused before the role starts.

use std::ffi::OsString;
use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use reach_manifest::plan::RoleConfig;

/// Why the configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// the command line must be `--config <path>`
    #[error("usage: --config <path>")]
    Usage,
    /// the config file is missing
    #[error("config file {0} is missing")]
    Missing(PathBuf),
    /// the config file does not match the schema
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// `log.otlp_endpoint` is not a loopback collector
    #[error("config: {0}")]
    OtlpEndpoint(#[from] OtlpEndpointError),
}

/// Why `log.otlp_endpoint` was refused. The endpoint itself is not echoed: it could carry
/// userinfo, and telemetry never carries credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OtlpEndpointError {
    /// not a URI
    #[error("log.otlp_endpoint is not a URI; {ALLOWED}")]
    Malformed,
    /// a scheme other than `http` (a loopback collector needs no TLS)
    #[error("log.otlp_endpoint must use http; {ALLOWED}")]
    Scheme,
    /// user information in the authority
    #[error("log.otlp_endpoint must not carry user information; {ALLOWED}")]
    UserInfo,
    /// a host other than 127.0.0.1 or ::1 (names are not resolved)
    #[error("log.otlp_endpoint is not loopback; {ALLOWED}")]
    NotLoopback,
    /// no port, or port 0
    #[error("log.otlp_endpoint needs a non-zero port; {ALLOWED}")]
    Port,
    /// a path, query or fragment
    #[error("log.otlp_endpoint must have no path or query; {ALLOWED}")]
    Path,
}

const ALLOWED: &str = "allowed: http://127.0.0.1:<port> or http://[::1]:<port>";

/// Accepts exactly `http://127.0.0.1:<port>` and `http://[::1]:<port>` (a trailing `/` allowed).
pub fn check_otlp_endpoint(endpoint: &str) -> Result<(), OtlpEndpointError> {
    let uri: http::Uri = endpoint.parse().map_err(|_| OtlpEndpointError::Malformed)?;
    if uri.scheme_str() != Some("http") {
        return Err(OtlpEndpointError::Scheme);
    }
    let authority = uri.authority().ok_or(OtlpEndpointError::Malformed)?;
    if authority.as_str().contains('@') {
        return Err(OtlpEndpointError::UserInfo);
    }
    if !matches!(authority.host(), "127.0.0.1" | "[::1]") {
        return Err(OtlpEndpointError::NotLoopback);
    }
    if !matches!(authority.port_u16(), Some(p) if p != 0) {
        return Err(OtlpEndpointError::Port);
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() || endpoint.contains('#') {
        return Err(OtlpEndpointError::Path);
    }
    Ok(())
}

/// Reads `--config <path>` from the arguments and loads it.
pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Result<RoleConfig, ConfigError> {
    let mut args = args.into_iter().skip(1);
    let path = match (args.next(), args.next(), args.next()) {
        (Some(flag), Some(path), None) if flag == "--config" => PathBuf::from(path),
        _ => return Err(ConfigError::Usage),
    };
    load(path)
}

/// Loads a role configuration file.
pub fn load(path: PathBuf) -> Result<RoleConfig, ConfigError> {
    if !path.exists() {
        return Err(ConfigError::Missing(path));
    }
    let config: RoleConfig = Figment::from(Toml::file(&path))
        .merge(Env::prefixed("REACH_").split("__").only(&["log.level"]))
        .extract()
        .map_err(|e| ConfigError::Invalid {
            path,
            message: e.to_string(),
        })?;
    if let Some(endpoint) = &config.log.otlp_endpoint {
        check_otlp_endpoint(endpoint)?;
    }
    Ok(config)
}
