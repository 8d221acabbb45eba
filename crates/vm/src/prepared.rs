//! The prepared-system layer: a pinned qcow2 layer over a pinned base image, captured
//! together with the running guest's memory, so instances are restored instead of booted.
//!
//! Preparing (`reach image prepare`) boots the base image once on a fresh qcow2 layer, waits
//! until systemd reports the boot finished, places the spec's files through the guest agent
//! (the prepared system: for a task pack, e.g. a service's configuration broken in a known
//! way), restarts the named units, waits until the settle units are active, and then stops
//! the guest and writes its whole state with a QMP `migrate` to a file. The layer's disk and
//! that state stream are artifacts of a [`PreparedManifest`], whose digest is the
//! prepared-system digest; a broker pins it like an image and re-hashes both before use.
//!
//! An instance of a prepared system is a fresh throwaway overlay over the layer plus QEMU
//! started with `-incoming` on the state: every instance resumes from the identical pinned
//! moment, nothing of one instance reaches another (its writes go to its own overlay, which
//! destruction deletes), and the guest agent answers within about a second of `cont`.
//!
//! Not reproducible by construction (the state holds the guest's memory, random pools
//! included); it is pinned by digest instead, and bound to the QEMU version, machine type,
//! accelerator and shape that wrote it (a stream loads only into the same machine).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::process::Command;

use crate::agent::{Agent, AgentError, ExecBounds};
use crate::image::{BuildError, Progress};
use crate::machine::{Disks, Machine, sh_quote};
use crate::manifest::{Artifact, ImageManifest, ManifestError, file_digest};
use crate::probe::Accel;
use crate::qmp::{Qmp, QmpError};
use crate::spec::{FileSpec, guest_path, parse_mode, valid_name};

pub const PREPARED_SPEC_FORMAT: &str = "reach.vm.prepared-spec.v1";
pub const PREPARED_MANIFEST_FORMAT: &str = "reach.vm.prepared-manifest.v1";
/// File names inside a prepared-system directory.
pub const PREPARED_MANIFEST_FILE: &str = "prepared.json";
pub const PREPARED_DIGEST_FILE: &str = "prepared.digest";
pub const DISK_FILE: &str = "disk.qcow2";
pub const STATE_FILE: &str = "state.mig";

/// Names how prepared layers are made; part of every prepared manifest.
pub const PREPARE_REVISION: &str = concat!("reach-vm/", env!("CARGO_PKG_VERSION"), " prepare-1");

/// The capture boot is a cold boot under TCG (about 30–45 s here); generous for a loaded host.
pub const PREPARE_BOOT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the settle units get to become active.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long writing the state stream may take.
pub const CAPTURE_TIMEOUT: Duration = Duration::from_secs(180);
/// Bounds on the shape a prepared system may be captured with (the broker's own ceilings
/// apply again at create).
pub const MAX_MEMORY_MIB: u32 = 8192;
pub const MAX_CPUS: u32 = 8;

/// The declarative prepared system (`reach.vm.prepared-spec.v1`, TOML), layered on a base
/// image given at prepare time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreparedSpec {
    pub format: String,
    /// The shape every instance of this prepared system has (a state stream loads only into
    /// the same memory size and CPU count).
    pub memory_mib: u32,
    pub cpus: u32,
    /// Files placed through the guest agent.
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// Units restarted after the files are placed.
    #[serde(default)]
    pub restart: Vec<String>,
    /// Units that must be active before the capture.
    #[serde(default)]
    pub settle: Vec<String>,
}

/// Why a prepared spec was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreparedSpecError {
    /// not valid TOML for reach.vm.prepared-spec.v1
    #[error("prepared spec is not valid TOML for {PREPARED_SPEC_FORMAT}: {0}")]
    Syntax(String),
    /// a field has an invalid value
    #[error("prepared spec field {0}: {1}")]
    Field(&'static str, String),
}

impl PreparedSpec {
    pub fn parse(text: &str) -> Result<Self, PreparedSpecError> {
        let s: PreparedSpec =
            toml::from_str(text).map_err(|e| PreparedSpecError::Syntax(e.message().to_owned()))?;
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), PreparedSpecError> {
        use PreparedSpecError::Field;
        if self.format != PREPARED_SPEC_FORMAT {
            return Err(Field("format", format!("must be {PREPARED_SPEC_FORMAT}")));
        }
        if !(64..=MAX_MEMORY_MIB).contains(&self.memory_mib) {
            return Err(Field(
                "memory_mib",
                format!("must be within 64..={MAX_MEMORY_MIB}"),
            ));
        }
        if !(1..=MAX_CPUS).contains(&self.cpus) {
            return Err(Field("cpus", format!("must be within 1..={MAX_CPUS}")));
        }
        for f in &self.files {
            if guest_path(&f.path).is_none() {
                return Err(Field(
                    "files.path",
                    format!("{:?} is not an absolute normal path", f.path),
                ));
            }
            if parse_mode(&f.mode).is_none() {
                return Err(Field("files.mode", format!("{:?} is not octal", f.mode)));
            }
            if f.content.len() > crate::agent::MAX_FILE_BYTES {
                return Err(Field("files.content", format!("{} is too large", f.path)));
            }
        }
        for u in self.restart.iter().chain(&self.settle) {
            if !valid_name(u) {
                return Err(Field("restart/settle", format!("{u:?} is not a unit name")));
            }
        }
        Ok(())
    }

    /// Digest of the canonical JSON form.
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(serde_json::to_vec(self).expect("spec serializes"))
    }
}

/// A file the prepared system placed, as the guest read it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacedFile {
    pub path: String,
    pub sha256: Sha256Digest,
}

/// The pinned prepared-system layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreparedManifest {
    pub format: String,
    pub spec_digest: Sha256Digest,
    /// The image digest of the base this layer lies on.
    pub base_image: Sha256Digest,
    pub prepare_revision: String,
    /// The QEMU that wrote the state stream (only it loads it).
    pub qemu_version: String,
    pub machine_type: String,
    pub accel: String,
    pub memory_mib: u32,
    pub cpus: u32,
    /// The qcow2 layer over the base rootfs, as it was at the capture.
    pub disk: Artifact,
    /// The guest's state (memory and devices) at the capture, a QEMU migration stream.
    pub state: Artifact,
    pub files: Vec<PlacedFile>,
    /// `systemctl is-system-running` at the capture.
    pub system_state: String,
    /// Why this layer is pinned rather than reproducible, and what instances share.
    pub notes: Vec<String>,
}

impl PreparedManifest {
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_json())
    }

    pub fn canonical_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("manifest serializes")
    }

    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        let m: PreparedManifest = crate::manifest::read_json(&dir.join(PREPARED_MANIFEST_FILE))?;
        crate::manifest::check_layout(&m.format, PREPARED_MANIFEST_FORMAT, [&m.disk, &m.state])?;
        Ok(m)
    }

    pub fn verify_artifacts(&self, dir: &Path) -> Result<(), ManifestError> {
        for a in [&self.disk, &self.state] {
            crate::manifest::verify_artifact(dir, a)?;
        }
        Ok(())
    }
}

/// Why preparing failed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// the capture guest did not answer its agent in time
    #[error("the capture guest did not answer its guest agent within {0:?}")]
    BootTimeout(Duration),
    #[error("guest agent: {0}")]
    Agent(#[from] AgentError),
    #[error("qmp: {0}")]
    Qmp(#[from] QmpError),
    /// the guest did not reach the state the spec asks for
    #[error("prepared system: {0}")]
    Guest(String),
    /// writing the state stream failed
    #[error("capture: {0}")]
    Capture(String),
}

/// A finished prepared layer.
#[derive(Debug)]
pub struct Prepared {
    pub dir: PathBuf,
    pub manifest: PreparedManifest,
    pub digest: Sha256Digest,
    pub elapsed: Duration,
    /// Cold boot of the capture guest until its agent answered.
    pub boot: Duration,
}

/// What preparing needs besides the spec.
#[derive(Debug, Clone)]
pub struct PrepareInputs<'a> {
    pub base_dir: &'a Path,
    pub qemu: &'a Path,
    pub qemu_img: &'a Path,
    pub accel: Accel,
    /// How long the restarts and the settle units get (`SETTLE_TIMEOUT` unless a test says).
    pub settle_timeout: Duration,
    /// How long the capture guest gets to boot until its agent answers, and then until systemd
    /// has finished booting (`PREPARE_BOOT_TIMEOUT` unless a test says).
    pub boot_timeout: Duration,
}

impl<'a> PrepareInputs<'a> {
    /// The base image directory and accelerator, with QEMU and qemu-img from `PATH` and the
    /// default timeouts.
    pub fn new(base_dir: &'a Path, accel: Accel) -> Self {
        Self {
            base_dir,
            qemu: Path::new("qemu-system-x86_64"),
            qemu_img: Path::new("qemu-img"),
            accel,
            settle_timeout: SETTLE_TIMEOUT,
            boot_timeout: PREPARE_BOOT_TIMEOUT,
        }
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BuildError + 'a {
    move |source| BuildError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

async fn tool(cmd: &mut Command, name: &'static str) -> Result<(), BuildError> {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| BuildError::Tool {
            tool: name,
            status: "spawn".into(),
            tail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool: name,
            status: out.status.to_string(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// Runs a guest command, bounded; stdout as text, or the failure.
async fn guest(agent: &mut Agent, argv: &[&str], timeout: Duration) -> Result<String, AgentError> {
    let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
    let o = agent
        .exec(
            &argv,
            ExecBounds {
                timeout,
                max_output: 64 * 1024,
            },
        )
        .await?;
    if o.exit_code != Some(0) {
        return Err(AgentError::Guest(format!(
            "{argv:?} exited {:?}: {}{}",
            o.exit_code,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

/// Prepares `spec` over the base image in `inputs.base_dir` into `out` (created; replaced if
/// present).
pub async fn prepare(
    spec: &PreparedSpec,
    inputs: &PrepareInputs<'_>,
    out: &Path,
    progress: &dyn Progress,
) -> Result<Prepared, PrepareError> {
    let started = Instant::now();
    let base = ImageManifest::read(inputs.base_dir)?;
    base.verify_artifacts(inputs.base_dir)?;
    let qemu_version = crate::machine::qemu_version(inputs.qemu)
        .await
        .map_err(|e| BuildError::Tool {
            tool: "qemu",
            status: "version".into(),
            tail: e.to_string(),
        })?;
    if out.exists() {
        let _ = std::process::Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(out)
            .status();
        std::fs::remove_dir_all(out).map_err(io("clear", out))?;
    }
    let work = out.join(".work");
    std::fs::create_dir_all(&work).map_err(io("create", &work))?;
    let disk = out.join(DISK_FILE);
    let state = out.join(STATE_FILE);
    // The backing name in the header is never used (the chain is given explicitly), so it is
    // the base's file name, not a path: the layer's bytes do not depend on where it lies.
    tool(
        Command::new(inputs.qemu_img)
            .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-u", "-b"])
            .arg(&base.rootfs.file)
            .arg(&disk)
            .arg(base.rootfs.bytes.to_string()),
        "qemu-img",
    )
    .await?;
    progress.line("capture guest: cold boot");
    let kernel = inputs.base_dir.join(&base.kernel.file);
    let initrd = inputs.base_dir.join(&base.initrd.file);
    // Unix socket paths must stay under 108 bytes, whatever `out` is: the sockets get a
    // short private directory of their own.
    let sockets = SocketDir::create()?;
    let qmp_sock = sockets.0.join("qmp.sock");
    let qga_sock = sockets.0.join("qga.sock");
    let machine = Machine {
        accel: inputs.accel,
        memory_mib: spec.memory_mib,
        cpus: spec.cpus,
        kernel: &kernel,
        initrd: &initrd,
        cmdline: &base.kernel_cmdline,
        disks: Disks {
            base_raw: inputs.base_dir.join(&base.rootfs.file),
            prepared: None,
            top: disk.clone(),
            throwaway: false,
            data: None,
        },
        agent_channel: &base.guest_agent.channel,
        dir: &sockets.0,
        qmp_sock: &qmp_sock,
        qga_sock: &qga_sock,
        console: &work.join("console.log"),
        pidfile: &work.join("qemu.pid"),
        incoming: None,
        daemonize: false,
        name: "reach-vm-prepare",
    };
    let mut child = Command::new(inputs.qemu)
        .args(machine.args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BuildError::Tool {
            tool: "qemu",
            status: "spawn".into(),
            tail: e.to_string(),
        })?;
    let result = capture(
        spec,
        &mut child,
        (&qmp_sock, &qga_sock),
        &state,
        (inputs.boot_timeout, inputs.settle_timeout),
        progress,
    )
    .await;
    // Whatever happened, the capture guest does not outlive this call.
    let _ = child.start_kill();
    let _ = child.wait().await;
    let (files, system_state, boot) = result?;
    let artifact = |file: &str| -> Result<Artifact, PrepareError> {
        let p = out.join(file);
        let bytes = std::fs::metadata(&p).map_err(io("stat", &p))?.len();
        Ok(Artifact {
            file: file.to_owned(),
            sha256: file_digest(&p)?,
            bytes,
        })
    };
    let manifest = PreparedManifest {
        format: PREPARED_MANIFEST_FORMAT.to_owned(),
        spec_digest: spec.digest(),
        base_image: base.digest(),
        prepare_revision: PREPARE_REVISION.to_owned(),
        qemu_version,
        machine_type: crate::machine::MACHINE_TYPE.to_owned(),
        accel: inputs.accel.as_str().to_owned(),
        memory_mib: spec.memory_mib,
        cpus: spec.cpus,
        disk: artifact(DISK_FILE)?,
        state: artifact(STATE_FILE)?,
        files,
        system_state,
        notes: vec![
            "pinned, not reproducible: the state stream is the guest's memory at the capture, so two preparations differ".to_owned(),
            "every instance resumes the same memory: the same kernel random state until the broker mixes host randomness into each instance's pool and reseeds its CRNG at restore, and the same /etc/machine-id until the broker writes each instance its own (processes running at the capture keep the captured one)".to_owned(),
            "the broker sets each instance's clock at restore (the guest resumes at the capture's time)".to_owned(),
        ],
    };
    let digest = manifest.digest();
    let mpath = out.join(PREPARED_MANIFEST_FILE);
    std::fs::write(&mpath, manifest.canonical_json()).map_err(io("write", &mpath))?;
    let dpath = out.join(PREPARED_DIGEST_FILE);
    std::fs::write(&dpath, format!("{digest}\n")).map_err(io("write", &dpath))?;
    std::fs::remove_dir_all(&work).map_err(io("clean", &work))?;
    for f in [
        DISK_FILE,
        STATE_FILE,
        PREPARED_MANIFEST_FILE,
        PREPARED_DIGEST_FILE,
    ] {
        let p = out.join(f);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444))
            .map_err(io("chmod", &p))?;
    }
    Ok(Prepared {
        dir: out.to_owned(),
        manifest,
        digest,
        elapsed: started.elapsed(),
        boot,
    })
}

/// A private directory for the capture guest's sockets, removed on drop.
struct SocketDir(PathBuf);

impl SocketDir {
    fn create() -> Result<Self, BuildError> {
        use std::os::unix::fs::DirBuilderExt;
        let name = format!(
            "reach-vm-prepare-{}-{}",
            std::process::id(),
            Sha256Digest::of(crate::host::nanos().to_le_bytes()).hex()[..12].to_owned()
        );
        let p = std::env::temp_dir().join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(io("create", &p))?;
        Ok(Self(p))
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Boots to a finished system, applies the spec, and writes the state stream.
async fn capture(
    spec: &PreparedSpec,
    child: &mut tokio::process::Child,
    (qmp_sock, qga_sock): (&Path, &Path),
    state: &Path,
    (boot_timeout, settle_timeout): (Duration, Duration),
    progress: &dyn Progress,
) -> Result<(Vec<PlacedFile>, String, Duration), PrepareError> {
    let t = Instant::now();
    // A QEMU that refuses its arguments exits at once: report that, not a boot timeout.
    let mut agent = tokio::select! {
        a = Agent::connect(qga_sock, Instant::now() + boot_timeout) => {
            a.map_err(|_| PrepareError::BootTimeout(boot_timeout))?
        }
        status = child.wait() => {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = (&mut e).take(4096).read_to_string(&mut err).await;
            }
            return Err(PrepareError::Capture(format!(
                "QEMU exited before its guest agent answered ({status:?}): {}",
                err.trim()
            )));
        }
    };
    let boot = t.elapsed();
    progress.line(&format!(
        "capture guest: agent answered after {:.1} s",
        boot.as_secs_f64()
    ));
    // `--wait` returns once the boot transaction is done: running, or degraded with a failure.
    let running = agent
        .exec(
            &[
                "/bin/systemctl".to_owned(),
                "is-system-running".into(),
                "--wait".into(),
            ],
            ExecBounds {
                timeout: boot_timeout,
                max_output: 4096,
            },
        )
        .await?;
    let system_state = String::from_utf8_lossy(&running.stdout).trim().to_owned();
    if system_state != "running" {
        let failed = guest(
            &mut agent,
            &["/bin/systemctl", "--failed", "--no-legend", "--plain"],
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_default();
        return Err(PrepareError::Guest(format!(
            "system is {system_state:?} after boot; failed units: {failed}"
        )));
    }
    let mut files = Vec::new();
    for f in &spec.files {
        let mode = parse_mode(&f.mode).expect("validated");
        let back = agent
            .place_file(&f.path, f.content.as_bytes(), mode, f.uid, f.gid)
            .await?;
        if back.bytes != f.content.as_bytes() {
            return Err(PrepareError::Guest(format!(
                "{} reads back other bytes",
                f.path
            )));
        }
        files.push(PlacedFile {
            path: f.path.clone(),
            sha256: back.sha256,
        });
    }
    for u in &spec.restart {
        guest(
            &mut agent,
            &["/bin/systemctl", "restart", "--", u],
            settle_timeout,
        )
        .await?;
    }
    let until = Instant::now() + settle_timeout;
    for u in &spec.settle {
        loop {
            let s = agent
                .exec(
                    &[
                        "/bin/systemctl".to_owned(),
                        "is-active".into(),
                        "--".into(),
                        u.clone(),
                    ],
                    ExecBounds {
                        timeout: Duration::from_secs(30),
                        max_output: 4096,
                    },
                )
                .await?;
            let state = String::from_utf8_lossy(&s.stdout).trim().to_owned();
            if state == "active" {
                break;
            }
            // Failed (its restarts, if any, given up): it will not become active by waiting.
            if state == "failed" {
                // `status` exits non-zero for a failed unit; its text is what matters.
                let status = agent
                    .exec(
                        &[
                            "/bin/systemctl".to_owned(),
                            "status".into(),
                            "--no-pager".into(),
                            "--lines=5".into(),
                            "--".into(),
                            u.clone(),
                        ],
                        ExecBounds {
                            timeout: Duration::from_secs(30),
                            max_output: 4096,
                        },
                    )
                    .await
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_default();
                return Err(PrepareError::Guest(format!("{u} failed: {status}")));
            }
            if Instant::now() > until {
                return Err(PrepareError::Guest(format!(
                    "{u} is not active after {settle_timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // Not needed for consistency (memory and disk are captured at one instant), but it makes
    // the disk layer a clean filesystem on its own.
    guest(&mut agent, &["/bin/sync"], Duration::from_secs(60)).await?;
    drop(agent);
    progress.line("capture guest: writing the state stream");
    let mut qmp = Qmp::connect(qmp_sock, Duration::from_secs(10)).await?;
    if let Err(e) = qmp.execute("stop", None).await {
        return Err(qmp_in_capture(e, child).await);
    }
    let uri = format!("exec:cat > {}", sh_quote(state));
    if let Err(e) = qmp.execute("migrate", Some(json!({ "uri": uri }))).await {
        return Err(qmp_in_capture(e, child).await);
    }
    let until = Instant::now() + CAPTURE_TIMEOUT;
    loop {
        let r = match qmp.execute("query-migrate", None).await {
            Ok(r) => r,
            Err(e) => return Err(qmp_in_capture(e, child).await),
        };
        match r.get("status").and_then(|s| s.as_str()) {
            Some("completed") => break,
            Some("failed" | "cancelled") => {
                return Err(PrepareError::Capture(format!("migration {r}")));
            }
            _ if Instant::now() > until => {
                return Err(PrepareError::Capture(format!(
                    "not done after {CAPTURE_TIMEOUT:?}"
                )));
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    // `quit` closes the block layer, which writes back the qcow2 metadata.
    let _ = qmp.quit().await;
    match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(Ok(s)) if s.success() => {}
        other => {
            return Err(PrepareError::Capture(format!(
                "QEMU did not exit cleanly after the capture: {other:?}"
            )));
        }
    }
    Ok((files, system_state, boot))
}

/// A QMP failure while the state stream is written. When QEMU itself is gone (killed, crashed:
/// its socket closes as it exits, so its exit is awaited briefly), the capture error names its
/// exit rather than the socket that went with it.
async fn qmp_in_capture(e: QmpError, child: &mut tokio::process::Child) -> PrepareError {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => PrepareError::Capture(format!(
            "QEMU exited while writing the state stream ({status}); qmp: {e}"
        )),
        _ => PrepareError::Qmp(e),
    }
}

/// Reuses `cache_root/prepared/<key>` when its manifest names this spec, base, QEMU and
/// accelerator and its artifacts verify; prepares it otherwise.
pub async fn cached_prepare(
    spec: &PreparedSpec,
    inputs: &PrepareInputs<'_>,
    cache_root: &Path,
    progress: &dyn Progress,
) -> Result<(PathBuf, PreparedManifest, Sha256Digest), PrepareError> {
    let base = ImageManifest::read(inputs.base_dir)?.digest();
    let key = Sha256Digest::of_parts([
        spec.digest().to_string().as_bytes(),
        base.to_string().as_bytes(),
        inputs.accel.as_str().as_bytes(),
    ]);
    let dir = crate::cache::prepared_dir(cache_root, &key);
    let qemu_version = crate::machine::qemu_version(inputs.qemu).await.ok();
    if let Ok(m) = PreparedManifest::read(&dir)
        && m.spec_digest == spec.digest()
        && m.base_image == base
        && m.prepare_revision == PREPARE_REVISION
        && Some(&m.qemu_version) == qemu_version.as_ref()
        && m.accel == inputs.accel.as_str()
        && m.verify_artifacts(&dir).is_ok()
    {
        let d = m.digest();
        return Ok((dir, m, d));
    }
    let p = prepare(spec, inputs, &dir, progress).await?;
    Ok((p.dir, p.manifest, p.digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_spec_refusals() {
        let ok = "format = \"reach.vm.prepared-spec.v1\"\nmemory_mib = 384\ncpus = 1\nrestart = [\"app\"]\n[[files]]\npath = \"/etc/x\"\ncontent = \"y\"\n";
        let s = PreparedSpec::parse(ok).unwrap();
        assert_eq!(s.digest(), PreparedSpec::parse(ok).unwrap().digest());
        for (bad, want) in [
            (ok.replace("v1", "v2"), "format"),
            (ok.replace("384", "16"), "memory_mib"),
            (ok.replace("cpus = 1", "cpus = 0"), "cpus"),
            (ok.replace("/etc/x", "etc/x"), "files.path"),
            (ok.replace("\"app\"", "\"-x\""), "restart/settle"),
        ] {
            match PreparedSpec::parse(&bad).unwrap_err() {
                PreparedSpecError::Field(f, _) => assert_eq!(f, want, "{bad}"),
                e => panic!("{bad}: {e}"),
            }
        }
        assert!(matches!(
            PreparedSpec::parse(&format!("{ok}network = \"isolated\"\n")),
            Err(PreparedSpecError::Syntax(_))
        ));
    }
}
