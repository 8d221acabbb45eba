//! The shared skeleton of every role binary.
//!
//! A role's `main` is one call to [`run`]: read its own config ([`config`]), check its secret
//! files, set up JSON telemetry (and, if configured, OTLP trace export: [`telemetry`]), load
//! its TLS material, serve its ports (the health port is added here), signal readiness to
//! systemd or the launcher ([`notify`]), wait for SIGTERM, then drain (and flush the export).
//! First of all, it disables its own core dumps ([`no_core_dumps`]).
//! Tests start the same roles as processes, so there is one startup path.
//!
//! **Architecture Invariant:** a role reads only its own config file and its own secret
//! directory; secrets never come from the environment.

pub mod config;
mod health;
pub mod notify;
pub mod telemetry;

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_identity::{Principal, TrustDomain, files};
use reach_manifest::CredentialKind;
use reach_manifest::plan::RoleConfig;
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::server::NamedService;

pub use config::ConfigError;
pub use telemetry::{Telemetry, TelemetryError, init_telemetry};

/// How long in-flight RPCs may take to finish after SIGTERM.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a role did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// a secret or TLS file is missing, too open, or unusable
    #[error(transparent)]
    Material(#[from] reach_port::MaterialError),
    /// a credential file the manifest names is missing or too open
    #[error("credential {kind}: {source}")]
    Credential {
        kind: &'static str,
        source: files::SecretFileError,
    },
    /// the config names a port this binary does not serve
    #[error("port `{0}` is in the config but this role serves no handler for it")]
    UnservedPort(String),
    /// the config does not name a port this binary needs
    #[error("port `{0}` is not in this role's config")]
    UnknownPort(String),
    /// a port could not be bound
    #[error("port `{port}` could not be bound: {source}")]
    Bind {
        port: String,
        source: std::io::Error,
    },
    /// a name in the config is malformed
    #[error("config names a malformed principal: {0}")]
    Principal(#[from] reach_identity::PrincipalError),
    /// role-specific wiring failed
    #[error("{0:#}")]
    Role(#[from] anyhow::Error),
}

/// A running role: its config, identity and the ports it serves.
#[derive(Debug)]
pub struct Role {
    pub config: RoleConfig,
    pub material: Arc<PortMaterial>,
    pub principal: Principal,
    credentials: Vec<(CredentialKind, Option<Vec<u8>>)>,
    started: Instant,
    shutdown: watch::Sender<bool>,
    served: Vec<(String, JoinHandle<Result<(), tonic::transport::Error>>)>,
}

impl Role {
    /// Loads material and credentials for `config`; serves nothing yet.
    pub fn new(config: RoleConfig) -> Result<Self, StartError> {
        let trust_domain = TrustDomain::new(&config.trust_domain)?;
        let principal = Principal::new(trust_domain.clone(), &config.role)?;
        let material = PortMaterial::load(&config.secret_dir, trust_domain)?;
        let mut credentials = Vec::new();
        for c in &config.credentials {
            match files::read_secret(&c.path) {
                Ok(bytes) => credentials.push((c.kind, Some(bytes))),
                Err(files::SecretFileError::Missing(_)) if c.optional => {
                    tracing::info!(
                        kind = c.kind.as_str(),
                        "optional credential absent; capability disabled"
                    );
                    credentials.push((c.kind, None));
                }
                Err(source) => {
                    return Err(StartError::Credential {
                        kind: c.kind.as_str(),
                        source,
                    });
                }
            }
        }
        let (shutdown, _) = watch::channel(false);
        Ok(Self {
            config,
            material,
            principal,
            credentials,
            started: Instant::now(),
            shutdown,
            served: Vec::new(),
        })
    }

    /// The bytes of a credential this role owns, if present.
    pub fn credential(&self, kind: CredentialKind) -> Option<&[u8]> {
        self.credentials
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, b)| b.as_deref())
    }

    /// Resolves when shutdown begins.
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }

    /// Serves `service` on the port named `port` with that port's grants.
    pub fn serve<S>(&mut self, port: &str, service: S) -> Result<(), StartError>
    where
        S: tower_service::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<tonic::body::Body>,
                Error = std::convert::Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let spec = self
            .config
            .serves
            .iter()
            .find(|p| p.name == port)
            .ok_or_else(|| StartError::UnknownPort(port.to_owned()))?;
        let mut policy = PortPolicy::new(port);
        for g in &spec.grants {
            policy = policy.allow(g.caller.parse()?, g.method.clone());
        }
        let server = PortServer::bind(
            &PortAddress::Unix(spec.socket.clone()),
            self.material.clone(),
            policy,
        )
        .map_err(|source| StartError::Bind {
            port: port.to_owned(),
            source,
        })?;
        let stop = self.shutdown_signal();
        self.served
            .push((port.to_owned(), tokio::spawn(server.serve(service, stop))));
        tracing::info!(port, "serving");
        Ok(())
    }

    /// A lazily connecting client for the port named `port`; only its manifest server answers.
    pub fn client(&self, port: &str) -> Result<tonic::transport::Channel, StartError> {
        let spec = self
            .config
            .calls
            .iter()
            .find(|p| p.name == port)
            .ok_or_else(|| StartError::UnknownPort(port.to_owned()))?;
        Ok(reach_port::connect_lazy(
            PortAddress::Unix(spec.socket.clone()),
            &self.material,
            spec.server.parse()?,
        ))
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    fn check_all_served(&self) -> Result<(), StartError> {
        for p in &self.config.serves {
            if !self.served.iter().any(|(name, _)| *name == p.name) {
                return Err(StartError::UnservedPort(p.name.clone()));
            }
        }
        Ok(())
    }

    async fn drain(self) {
        let _ = self.shutdown.send(true);
        for (port, task) in self.served {
            match tokio::time::timeout(DRAIN_TIMEOUT, task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::warn!(%port, error = %e, "port ended with an error"),
                Ok(Err(e)) => tracing::warn!(%port, error = %e, "port task failed"),
                Err(_) => tracing::warn!(%port, "drain timed out"),
            }
        }
    }
}

/// Runs a role binary: `wire` serves the role's own ports on the started [`Role`].
pub fn run<W>(role_kind: &'static str, wire: W) -> ExitCode
where
    W: AsyncFnOnce(&mut Role) -> anyhow::Result<()>,
{
    // Before anything secret is in memory: no core dump of this process, and none it could
    // turn back on (the hard limit too; `reach audit` reads both as `process/core-dumps`).
    if let Err(e) = no_core_dumps() {
        eprintln!("reach-{role_kind}: cannot disable core dumps: {e}");
        return ExitCode::from(71); // EX_OSERR
    }
    let config = match config::from_args(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reach-{role_kind}: {e}");
            return ExitCode::from(78); // EX_CONFIG
        }
    };
    // Before any thread starts: the role's process ceiling, where its config sets one.
    if let Some(n) = config.process_ceiling
        && let Err(e) = process_ceiling(n)
    {
        eprintln!("reach-{role_kind}: cannot set the process ceiling {n}: {e}");
        return ExitCode::from(71); // EX_OSERR
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reach-{role_kind}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The OTLP exporter's connection runs on this runtime, so telemetry starts inside it.
    let telemetry = match rt.block_on(async { init_telemetry(&config.role, &config.log) }) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("reach-{role_kind}: {e}");
            return ExitCode::from(78); // EX_CONFIG
        }
    };
    let code = match rt.block_on(run_role(config, wire)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "role did not start");
            eprintln!("reach-{role_kind}: {e}");
            ExitCode::from(78)
        }
    };
    // After the drain, outside async code, while the runtime still drives the exporter.
    if let Err(e) = telemetry.shutdown() {
        tracing::warn!(error = %e, "trace export did not flush");
    }
    code
}

/// Sets this process's RLIMIT_NPROC, soft and hard, to `n`: the role's user may run at most
/// `n` tasks (threads count, as in a cgroup's pids.max), and cannot raise it again.
pub fn process_ceiling(n: u32) -> nix::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(Resource::RLIMIT_NPROC, u64::from(n), u64::from(n))
}

/// Sets this process's core-file size limit, soft and hard, to zero. A role's memory holds its
/// leaf key and its credentials: a dump would write them to disk. Where the kernel pipes dumps
/// to a helper (systemd-coredump), the helper honours the limit the same way.
pub fn no_core_dumps() -> nix::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(Resource::RLIMIT_CORE, 0, 0)
}

async fn run_role<W>(config: RoleConfig, wire: W) -> Result<(), StartError>
where
    W: AsyncFnOnce(&mut Role) -> anyhow::Result<()>,
{
    let mut role = Role::new(config)?;
    let _reloader = role.material.spawn_reloader();
    let health = health::HealthService::new(role.config.role.clone(), role.material.clone());
    let health_port = format!("{}.health", role.config.role);
    role.serve(&health_port, health.into_server())?;
    wire(&mut role).await?;
    role.check_all_served()?;
    notify::ready(&format!("serving {} ports", role.served.len()));
    let _watchdog = notify::spawn_watchdog();
    tracing::info!(role = %role.config.role, principal = %role.principal, "ready");

    wait_for_signal().await;
    tracing::info!("stopping: draining in-flight calls");
    notify::stopping();
    role.drain().await;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the role can only be killed; park instead of spinning.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
