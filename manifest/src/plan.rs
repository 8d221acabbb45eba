//! The compiled plan: where each role's files live and what each role's configuration says.
//!
//! The local launcher and Scribe's units use the same [`StateLayout`] and [`RoleConfig`], so a
//! role cannot tell whether it runs as a dev process or in its container.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Manifest;
use crate::schema::CredentialKind;
use crate::validate::{OPERATOR, Role};

/// The directory layout of one body's state.
#[derive(Clone, Debug)]
pub struct StateLayout {
    root: PathBuf,
    /// Socket directories that live elsewhere (a Quadlet body's ports are Podman volumes).
    sockets: std::collections::BTreeMap<String, PathBuf>,
}

impl StateLayout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            sockets: Default::default(),
        }
    }
    /// The same layout with `port`'s socket directory at `dir` (where the host sees the
    /// volume a Quadlet unit mounts there).
    pub fn with_socket_dir(mut self, port: &str, dir: impl Into<PathBuf>) -> Self {
        self.sockets.insert(port.to_owned(), dir.into());
        self
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// Scribe's own directory: the trust root key never leaves it.
    pub fn scribe_dir(&self) -> PathBuf {
        self.root.join("scribe")
    }
    /// The secret directory of a role or of the operator (mode 0700).
    pub fn secret_dir(&self, principal_name: &str) -> PathBuf {
        self.root.join("secrets").join(principal_name)
    }
    /// One directory per port, mounted only into its server and allowed callers.
    pub fn socket_dir(&self, port: &str) -> PathBuf {
        match self.sockets.get(port) {
            Some(dir) => dir.clone(),
            None => self.root.join("sockets").join(port),
        }
    }
    pub fn socket_path(&self, port: &str) -> PathBuf {
        self.socket_dir(port).join("port.sock")
    }
    /// A role's private writable data (the Phylactery, ward's store, snapshots…).
    pub fn data_dir(&self, role: &str) -> PathBuf {
        self.root.join("data").join(role)
    }
    pub fn config_path(&self, role: &str) -> PathBuf {
        self.root.join("config").join(format!("{role}.toml"))
    }
    pub fn log_path(&self, role: &str) -> PathBuf {
        self.root.join("logs").join(format!("{role}.log"))
    }
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
}

/// Everything one role reads at start. Non-secret; secrets are files in `secret_dir`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    pub role: String,
    pub trust_domain: String,
    pub habitat: String,
    /// How long an external effect may still be live (core's fresh-vault rule).
    #[serde(default = "default_horizon")]
    pub idempotency_horizon_hours: u32,
    pub secret_dir: PathBuf,
    pub data_dir: PathBuf,
    #[serde(default)]
    pub serves: Vec<ServedPort>,
    #[serde(default)]
    pub calls: Vec<CalledPort>,
    #[serde(default)]
    pub credentials: Vec<CredentialFile>,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub settings: toml::Table,
    /// The role's own process ceiling: it sets RLIMIT_NPROC, soft and hard, to this at start.
    /// Scribe's Quadlet configs carry the manifest's `pids` here, since each container's role
    /// user is a host id of its own, so the count is the role's alone; the launcher's body
    /// leaves it unset, since its roles share one user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_ceiling: Option<u32>,
}

fn default_horizon() -> u32 {
    24
}

/// A port this role serves, with its exact grants.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServedPort {
    pub name: String,
    pub service: String,
    pub socket: PathBuf,
    pub grants: Vec<PortGrant>,
}

/// One (caller principal, full method path) pair.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortGrant {
    pub caller: String,
    pub method: String,
}

/// A port this role calls, and the one principal that must answer on it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CalledPort {
    pub name: String,
    pub service: String,
    pub socket: PathBuf,
    pub server: String,
}

/// A secret file the role owns.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CredentialFile {
    pub kind: CredentialKind,
    pub path: PathBuf,
    #[serde(default)]
    pub optional: bool,
}

/// Telemetry settings. Never carries payloads, prompts, passages or credentials.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    pub level: String,
    /// An OTLP/gRPC collector to export trace spans to (`http://127.0.0.1:<port>` or
    /// `http://[::1]:<port>`; the runtime refuses anything else). Absent: no export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".to_owned(),
            otlp_endpoint: None,
        }
    }
}

/// The directory, inside corpus-builder's data directory, holding its snapshot store.
pub const CORPUS_STORE_DIR: &str = "store";

impl Manifest {
    /// Compiles the configuration of `role` for a body laid out as `layout`.
    pub fn role_config(&self, role: &Role, layout: &StateLayout) -> RoleConfig {
        let name = role.name.as_str();
        let serves = self
            .ports
            .iter()
            .filter(|p| p.server == role.name)
            .map(|p| ServedPort {
                name: p.name.clone(),
                service: p.service.clone(),
                socket: layout.socket_path(&p.name),
                grants: p
                    .grants
                    .iter()
                    .map(|g| PortGrant {
                        caller: self.principal(&g.caller).to_string(),
                        method: p.path(&g.method),
                    })
                    .collect(),
            })
            .collect();
        let calls = self
            .ports
            .iter()
            .filter(|p| p.grants.iter().any(|g| g.caller == name))
            .map(|p| CalledPort {
                name: p.name.clone(),
                service: p.service.clone(),
                socket: layout.socket_path(&p.name),
                server: self.principal(p.server.as_str()).to_string(),
            })
            .collect();
        let credentials = role
            .credentials
            .iter()
            .map(|c| CredentialFile {
                kind: c.kind,
                path: layout.secret_dir(name).join(&c.file),
                optional: c.optional,
            })
            .collect();
        RoleConfig {
            role: name.to_owned(),
            trust_domain: self.trust_domain.to_string(),
            habitat: self.habitat.id.clone(),
            idempotency_horizon_hours: self.recovery.idempotency_horizon_hours,
            secret_dir: layout.secret_dir(name),
            data_dir: layout.data_dir(name),
            serves,
            calls,
            credentials,
            log: LogConfig::default(),
            settings: self.resolved_settings(role, layout),
            process_ceiling: None,
        }
    }

    /// The role's settings, with `corpus_from = "<role>"` resolved to that role's snapshot
    /// store as `corpus_root` (mounted read-only into the reader by Scribe).
    fn resolved_settings(&self, role: &Role, layout: &StateLayout) -> toml::Table {
        let mut settings = role.settings.clone();
        if let Some(from) = settings
            .get("corpus_from")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
        {
            let root = layout.data_dir(&from).join(CORPUS_STORE_DIR);
            settings.insert(
                "corpus_root".into(),
                toml::Value::String(root.display().to_string()),
            );
        }
        settings
    }

    /// The ports the operator CLI may call, with the principal that must answer.
    pub fn operator_calls(&self, layout: &StateLayout) -> Vec<CalledPort> {
        self.ports
            .iter()
            .filter(|p| p.grants.iter().any(|g| g.caller == OPERATOR))
            .map(|p| CalledPort {
                name: p.name.clone(),
                service: p.service.clone(),
                socket: layout.socket_path(&p.name),
                server: self.principal(p.server.as_str()).to_string(),
            })
            .collect()
    }
}

/// The TOML text of a role configuration, as the launcher and Scribe write it.
pub fn to_toml(config: &RoleConfig) -> String {
    toml::to_string(config).expect("role configs always serialize")
}
