//! Starting, watching and stopping role processes.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, SystemTime};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_scribe::identities::{self, Rotation};
use tokio::net::UnixDatagram;
use tokio::process::{Child, Command};

/// How long a stopping role may drain before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Options for `reach up`.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    pub bin_dir: PathBuf,
    /// How long one role may take to send `READY=1`.
    pub ready_timeout: Duration,
    /// Passed to roles as `REACH_LOG__LEVEL`.
    pub log_level: String,
    /// How often, while the body runs, Scribe renews every leaf within its renewal window
    /// (`reach_scribe::identities::RENEW_BEFORE` of its end). Roles reload a renewed leaf from
    /// their secret directory; a body up longer than a leaf's 24 hours keeps talking.
    pub renew_every: Duration,
}

/// How often a running body's leaves are looked at by default: far inside the renewal window.
pub const RENEW_EVERY: Duration = Duration::from_secs(10 * 60);

impl Default for LaunchOptions {
    fn default() -> Self {
        Self {
            bin_dir: crate::default_bin_dir(),
            ready_timeout: Duration::from_secs(30),
            log_level: "info".into(),
            renew_every: RENEW_EVERY,
        }
    }
}

/// Why the body did not come up. Roles already started are stopped before this is returned.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// this build cannot keep a promise the manifest makes (e.g. encrypted backups)
    #[error("{code}: {refusal}", code = .0.code(), refusal = .0)]
    Build(#[from] reach_manifest::schema::BuildRefusal),
    #[error(transparent)]
    Scribe(#[from] identities::ScribeError),
    /// external credentials the manifest names are missing
    #[error("missing credential files (provide each with `reach secret set <role> <file> --state <dir>`): {}",
        .0.iter().map(|(r, f)| format!("{r}/{f}")).collect::<Vec<_>>().join(", "))]
    MissingCredentials(Vec<(String, String)>),
    /// a role binary is not where the launcher looks
    #[error("role binary {0} not found (build with `cargo build --bins`)")]
    MissingBinary(PathBuf),
    /// a role exited before it became ready
    #[error("role `{role}` exited with {status} before it was ready; last log lines:\n{log_tail}")]
    Exited {
        role: String,
        status: ExitStatus,
        log_tail: String,
    },
    /// a role did not become ready in time
    #[error("role `{role}` sent no READY=1 within {timeout:?}; last log lines:\n{log_tail}")]
    NotReady {
        role: String,
        timeout: Duration,
        log_tail: String,
    },
    /// a file or socket of the state directory could not be prepared
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LaunchError + '_ {
    move |source| LaunchError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One running role.
#[derive(Debug)]
struct Running {
    role: String,
    child: Child,
}

/// The running body: every role, in start order.
#[derive(Debug)]
pub struct Body {
    layout: StateLayout,
    running: Vec<Running>,
    options: LaunchOptions,
    manifest: Manifest,
    /// Renews leaves while the body runs; stopped with it.
    _renewal: Renewal,
}

/// The leaf-renewal task of a running body, aborted when the body goes.
#[derive(Debug)]
struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Renewal {
    /// Every `every`, renews each leaf within its renewal window (Scribe's `IfNeeded`: nothing
    /// else is minted or rotated). A failure is logged and tried again next time; the roles keep
    /// the leaves they have.
    fn start(manifest: &Manifest, layout: &StateLayout, every: Duration) -> Self {
        let (manifest, layout) = (manifest.clone(), layout.clone());
        Renewal(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // `up` has just materialized them.
            loop {
                tick.tick().await;
                let (m, l) = (manifest.clone(), layout.clone());
                let renewed = tokio::task::spawn_blocking(move || {
                    identities::materialize_identities(
                        &m,
                        &l,
                        Rotation::IfNeeded,
                        SystemTime::now(),
                    )
                })
                .await;
                match renewed {
                    Ok(Ok(report)) if !report.leaves_issued.is_empty() => {
                        tracing::info!(principals = ?report.leaves_issued, "leaves renewed")
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "leaf renewal failed"),
                    Err(e) => tracing::warn!(error = %e, "leaf renewal task failed"),
                }
            }
        }))
    }
}

/// What a stop did.
#[derive(Debug, Default)]
pub struct StopReport {
    pub stopped: Vec<(String, Option<i32>)>,
    pub killed: Vec<String>,
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn mkdir(path: &Path) -> Result<(), LaunchError> {
    std::fs::create_dir_all(path).map_err(io(path))
}

impl Body {
    /// Materializes identities and configs, then starts every role in order.
    pub async fn up(
        manifest: &Manifest,
        layout: &StateLayout,
        options: LaunchOptions,
    ) -> Result<Body, LaunchError> {
        // Before anything is written or started: a body that cannot keep the manifest's
        // recovery promise does not start at all.
        manifest.recovery.policy.honoured_by_this_build()?;
        prepare(manifest, layout)?;
        let mut body = Body {
            layout: layout.clone(),
            running: Vec::new(),
            _renewal: Renewal::start(manifest, layout, options.renew_every),
            options,
            manifest: manifest.clone(),
        };
        for role in manifest
            .roles
            .iter()
            .map(|r| r.name.as_str().to_owned())
            .collect::<Vec<_>>()
        {
            if let Err(e) = body.start_role(&role).await {
                body.stop().await;
                return Err(e);
            }
        }
        body.write_pids()?;
        Ok(body)
    }

    pub fn layout(&self) -> &StateLayout {
        &self.layout
    }

    /// (role, pid) of every running role, in start order.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.running
            .iter()
            .filter_map(|r| r.child.id().map(|p| (r.role.clone(), p)))
            .collect()
    }

    /// Starts one role (again) and waits for its readiness.
    pub async fn start_role(&mut self, role: &str) -> Result<(), LaunchError> {
        let spec = self.manifest.role(role).expect("role from the manifest");
        let binary = self.options.bin_dir.join(&spec.binary);
        if !binary.exists() {
            return Err(LaunchError::MissingBinary(binary));
        }
        let run = self.layout.run_dir();
        let notify_path = run.join(format!("notify-{role}.sock"));
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path).map_err(io(&notify_path))?;
        let log_path = self.layout.log_path(role);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?;
        let log_err = log.try_clone().map_err(io(&log_path))?;
        let config = self.layout.config_path(role);
        let mut child = Command::new(&binary)
            .arg("--config")
            .arg(&config)
            .args(&spec.args)
            .env_clear()
            .env("NOTIFY_SOCKET", &notify_path)
            .env("REACH_LOG__LEVEL", &self.options.log_level)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(io(&binary))?;
        // Recorded before readiness: a role may answer on its health port before its READY=1
        // reaches us, and whoever sees it healthy must also find its pid.
        if let Some(pid) = child.id() {
            self.write_pids_with(Some((role, pid)))?;
        }
        let ready = wait_ready(&notify, &mut child, self.options.ready_timeout).await;
        let _ = std::fs::remove_file(&notify_path);
        match ready {
            Readiness::Ready => {
                tracing::info!(role, pid = child.id(), "ready");
                self.running.retain(|r| r.role != role);
                self.running.push(Running {
                    role: role.to_owned(),
                    child,
                });
                Ok(())
            }
            Readiness::Exited(status) => Err(LaunchError::Exited {
                role: role.to_owned(),
                status,
                log_tail: log_tail(&log_path),
            }),
            Readiness::TimedOut => {
                let _ = child.kill().await;
                Err(LaunchError::NotReady {
                    role: role.to_owned(),
                    timeout: self.options.ready_timeout,
                    log_tail: log_tail(&log_path),
                })
            }
        }
    }

    /// Sends SIGKILL to one role and reaps it (crash drills).
    pub async fn kill_role(&mut self, role: &str) -> Option<ExitStatus> {
        let pos = self.running.iter().position(|r| r.role == role)?;
        let mut r = self.running.remove(pos);
        let _ = r.child.kill().await;
        r.child.wait().await.ok()
    }

    /// Waits until any role exits on its own; returns which and how.
    pub async fn wait_any_exit(&mut self) -> (String, Option<ExitStatus>) {
        loop {
            for r in &mut self.running {
                if let Ok(Some(status)) = r.child.try_wait() {
                    return (r.role.clone(), Some(status));
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops every role in reverse start order: SIGTERM, then SIGKILL after `STOP_TIMEOUT` (15 s).
    pub async fn stop(mut self) -> StopReport {
        let mut report = StopReport::default();
        while let Some(mut r) = self.running.pop() {
            if let Some(pid) = r.child.id() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
            match tokio::time::timeout(STOP_TIMEOUT, r.child.wait()).await {
                Ok(status) => report
                    .stopped
                    .push((r.role.clone(), status.ok().and_then(|s| s.code()))),
                Err(_) => {
                    let _ = r.child.kill().await;
                    let _ = r.child.wait().await;
                    report.killed.push(r.role.clone());
                }
            }
        }
        let _ = std::fs::remove_file(self.layout.run_dir().join("roles"));
        report
    }

    fn write_pids(&self) -> Result<(), LaunchError> {
        self.write_pids_with(None)
    }

    /// Writes `run/roles` (role and pid per line, in start order) atomically, with `starting`
    /// in place of that role's earlier entry.
    fn write_pids_with(&self, starting: Option<(&str, u32)>) -> Result<(), LaunchError> {
        let path = self.layout.run_dir().join("roles");
        let mut pids = self.pids();
        if let Some((role, pid)) = starting {
            pids.retain(|(r, _)| r != role);
            pids.push((role.to_owned(), pid));
        }
        let text: String = pids.iter().map(|(r, p)| format!("{r} {p}\n")).collect();
        reach_durable_file::replace(&path, text.as_bytes(), 0o644).map_err(io(&path))
    }
}

/// Writes identities, configs and directories for every role. Idempotent.
pub fn prepare(manifest: &Manifest, layout: &StateLayout) -> Result<(), LaunchError> {
    for dir in [
        layout.run_dir(),
        layout.root().join("logs"),
        layout.root().join("config"),
    ] {
        mkdir(&dir)?;
    }
    identities::materialize_identities(manifest, layout, Rotation::IfNeeded, SystemTime::now())?;
    let missing = identities::missing_credentials(manifest, layout);
    if !missing.is_empty() {
        return Err(LaunchError::MissingCredentials(missing));
    }
    for port in &manifest.ports {
        mkdir(&layout.socket_dir(&port.name))?;
    }
    for role in &manifest.roles {
        let name = role.name.as_str();
        mkdir(&layout.data_dir(name))?;
        let config = manifest.role_config(role, layout);
        let text = toml_string(&config);
        let path = layout.config_path(name);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(())
}

fn toml_string(config: &reach_manifest::plan::RoleConfig) -> String {
    reach_manifest::plan::to_toml(config)
}

enum Readiness {
    Ready,
    Exited(ExitStatus),
    TimedOut,
}

async fn wait_ready(notify: &UnixDatagram, child: &mut Child, timeout: Duration) -> Readiness {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            got = notify.recv(&mut buf) => {
                if let Ok(n) = got {
                    let msg = String::from_utf8_lossy(&buf[..n]);
                    if msg.lines().any(|l| l == "READY=1") {
                        return Readiness::Ready;
                    }
                }
            }
            status = child.wait() => {
                if let Ok(status) = status {
                    return Readiness::Exited(status);
                }
            }
            _ = &mut deadline => return Readiness::TimedOut,
        }
    }
}
