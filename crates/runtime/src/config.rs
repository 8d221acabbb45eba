//! A role's configuration: its own file (written by the launcher or Scribe), with `REACH_LOG__LEVEL`
//! as the one environment override. No secret is ever read from the environment.

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
    Figment::from(Toml::file(&path))
        .merge(Env::prefixed("REACH_").split("__").only(&["log.level"]))
        .extract()
        .map_err(|e| ConfigError::Invalid {
            path,
            message: e.to_string(),
        })
}
