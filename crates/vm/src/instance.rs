//! The broker: contained instances from pinned images, guest operations, confirmed destruction
//! and start-up reaping.
//!
//! Each instance lives in `run_dir/instances/<id>/`: its qcow2 overlay over the pinned
//! read-only rootfs, the QMP and guest-agent sockets, QEMU's pidfile and the serial console
//! log. QEMU daemonizes, so an instance survives a broker crash; the next broker finds it by
//! that directory, its pidfile and its command line (which names the directory), and reaps it.
//!
//! Refusals happen before anything is journaled or created: a network request, an unknown
//! image, an image whose manifest or artifacts differ from the pinned digest, ceilings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reach_clock::Clock;
use reach_digest::Sha256Digest;
use tokio::process::Command;

use crate::agent::ExecBounds;
use crate::agent::{Agent, ExecOutcome, FileContent, FileStat};
use crate::journal::{Confirmation, InstanceRecord, InstanceState, Journal, OrphanRecord};
use crate::machine::{Disks, Machine};
use crate::manifest::{Artifact, ImageManifest, KERNEL_FILE};
use crate::observe;
use crate::prepared::PreparedManifest;
use crate::probe::{self, Accel};
use crate::profile::{Confinement, ProfileSet, SERVICE_RESTART};
use crate::refusal::BrokerError;
use crate::spec::guest_path;
use crate::{host, manifest};

/// How long QMP `quit` gets before SIGKILL.
pub const QUIT_GRACE: Duration = Duration::from_secs(2);
/// How long a killed QEMU gets to disappear before destruction reports failure.
pub const KILL_WAIT: Duration = Duration::from_secs(5);

const INSTANCES: &str = "instances";
const OVERLAY: &str = "overlay.qcow2";
const QMP_SOCK: &str = "qmp.sock";
const QGA_SOCK: &str = "qga.sock";
const PIDFILE: &str = "qemu.pid";
const CONSOLE: &str = "console.log";
/// How often a restoring QEMU is asked whether it has loaded the captured state.
const RESUME_POLL: Duration = Duration::from_millis(20);

/// The network a binding asks for. Only `None` is admitted: instances are contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkRequest {
    None,
    /// Any other ceiling (`isolated`, `egress`…), by name.
    Other(String),
}

/// An image the broker may boot, or a prepared system it may restore, pinned by its digest.
#[derive(Debug, Clone)]
pub struct PinnedImage {
    pub digest: Sha256Digest,
    pub dir: PathBuf,
}

/// Which accelerator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccelChoice {
    /// Probe KVM with a real boot; TCG if it does not boot.
    Probe,
    Force(Accel),
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub run_dir: PathBuf,
    pub journal: PathBuf,
    pub qemu: PathBuf,
    pub qemu_img: PathBuf,
    pub images: Vec<PinnedImage>,
    /// Prepared systems (see [`crate::prepared`]); each one's base must be in `images`.
    pub prepared: Vec<PinnedImage>,
    pub accel: AccelChoice,
    pub profiles: ProfileSet,
    pub max_memory_mib: u32,
    pub max_cpus: u32,
    /// Create → guest agent answered.
    pub ready_timeout: Duration,
}

impl BrokerConfig {
    pub fn new(run_dir: &Path, images: Vec<PinnedImage>) -> Self {
        Self {
            journal: run_dir.join("journal.db"),
            run_dir: run_dir.to_owned(),
            qemu: "qemu-system-x86_64".into(),
            qemu_img: "qemu-img".into(),
            images,
            prepared: Vec::new(),
            accel: AccelChoice::Probe,
            profiles: ProfileSet::builtin(),
            max_memory_mib: 2048,
            max_cpus: 2,
            ready_timeout: Duration::from_secs(120),
        }
    }
}

/// What a create asks for.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub image: Sha256Digest,
    pub network: NetworkRequest,
    pub memory_mib: u32,
    pub cpus: u32,
    /// Wait for the guest agent before returning.
    pub wait_ready: bool,
    /// The instance's own command profiles (a verified task pack's), in place of the
    /// broker's configured set for every exec in it; `None`: the configured set.
    pub profiles: Option<Arc<ProfileSet>>,
}

/// A created instance.
#[derive(Debug, Clone)]
pub struct Created {
    pub id: String,
    pub pid: i32,
    pub accel: Accel,
    pub state: InstanceState,
    /// Create request → QEMU started, and → guest agent answered (when waited for).
    pub booted_after: Duration,
    pub ready_after: Option<Duration>,
    /// Restored from a prepared system's captured state rather than booted.
    pub restored: bool,
}

/// What the start-up recovery did.
#[derive(Debug, Default, Clone)]
pub struct StartReport {
    /// Live records of an earlier session torn down and recorded as reaped.
    pub reaped: Vec<String>,
    /// Destroys in flight at the crash, confirmed now.
    pub confirmed: Vec<String>,
    /// Directories or processes with no live record, removed.
    pub orphans: Vec<OrphanRecord>,
}

/// The result of a write, re-read from the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResult {
    pub path: String,
    pub sha256: Sha256Digest,
    pub bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A stamp of a verified file: any write changes ctime, which userspace cannot set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
    })
}

#[derive(Debug)]
pub struct Broker {
    cfg: BrokerConfig,
    journal: Journal,
    clock: Arc<dyn Clock>,
    session: String,
    accel: Accel,
    /// The host QEMU's version line; a prepared system restores only into the QEMU that
    /// captured it.
    qemu_version: Result<String, String>,
    /// Artifacts verified since their last change (see [`Stamp`]).
    verified: Mutex<HashMap<(PathBuf, Sha256Digest), Stamp>>,
    agents: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Agent>>>>>,
    /// Instances created with their own profiles ([`CreateRequest::profiles`]).
    profiles: Mutex<HashMap<String, Arc<ProfileSet>>>,
    counter: std::sync::atomic::AtomicU64,
    #[cfg(feature = "fault-injection")]
    pub crash_before_confirm: std::sync::atomic::AtomicBool,
}

impl Broker {
    /// Opens the journal, probes the accelerator, and reaps everything an earlier broker left.
    pub async fn start(
        cfg: BrokerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, StartReport), BrokerError> {
        let inst = cfg.run_dir.join(INSTANCES);
        std::fs::create_dir_all(&inst)
            .map_err(|e| BrokerError::Host(format!("{}: {e}", inst.display())))?;
        let journal = Journal::open(&cfg.journal, clock.clone()).await?;
        let session = Sha256Digest::of_parts([
            std::process::id().to_le_bytes().as_slice(),
            &clock.now().0.to_le_bytes(),
            &host::nanos().to_le_bytes(),
        ])
        .hex()[..16]
            .to_owned();
        let accel = match cfg.accel {
            AccelChoice::Force(a) => a,
            AccelChoice::Probe => match cfg.images.first() {
                Some(img) => {
                    probe::probe(&cfg.qemu, &img.dir.join(KERNEL_FILE), &cfg.run_dir).await
                }
                None => Accel::Tcg,
            },
        };
        let qemu_version = crate::machine::qemu_version(&cfg.qemu)
            .await
            .map_err(|e| e.to_string());
        let broker = Broker {
            cfg,
            journal,
            clock,
            session,
            accel,
            qemu_version,
            verified: Mutex::new(HashMap::new()),
            agents: Mutex::new(HashMap::new()),
            profiles: Mutex::new(HashMap::new()),
            counter: Default::default(),
            #[cfg(feature = "fault-injection")]
            crash_before_confirm: Default::default(),
        };
        let report = broker.recover().await?;
        Ok((broker, report))
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }
    pub fn session(&self) -> &str {
        &self.session
    }
    pub fn journal(&self) -> &Journal {
        &self.journal
    }
    pub fn instances_dir(&self) -> PathBuf {
        self.cfg.run_dir.join(INSTANCES)
    }
    fn dir(&self, id: &str) -> PathBuf {
        self.instances_dir().join(id)
    }

    /// Reaps every instance no live session owns; confirms destroys that were in flight.
    async fn recover(&self) -> Result<StartReport, BrokerError> {
        let mut report = StartReport::default();
        for rec in self.journal.live().await? {
            // Every live record belongs to an earlier session: this broker just started.
            let started = Instant::now();
            let teardown = self.teardown(&rec.id, rec.pid).await;
            let outcome = if rec.state == InstanceState::Destroying {
                report.confirmed.push(rec.id.clone());
                InstanceState::Destroyed
            } else {
                report.reaped.push(rec.id.clone());
                InstanceState::Reaped
            };
            self.journal
                .confirm(
                    rec.state,
                    &self.confirmation(&rec.id, outcome, &teardown, started, true),
                )
                .await?;
        }
        // Anything left on disk or in the process table has no live record.
        let dir = self.instances_dir();
        for e in std::fs::read_dir(&dir)
            .map_err(|e| BrokerError::Host(format!("{}: {e}", dir.display())))?
        {
            let Ok(e) = e else { continue };
            let id = e.file_name().to_string_lossy().into_owned();
            let pid = host::read_pidfile(&e.path().join(PIDFILE));
            self.teardown(&id, pid).await;
            let o = OrphanRecord {
                session: self.session.clone(),
                what: format!("dir:{id}"),
                pid,
            };
            self.journal.record_orphan(&o).await?;
            report.orphans.push(o);
        }
        for pid in host::processes_naming(&dir) {
            host::kill_and_wait(pid, &dir, KILL_WAIT).await;
            let o = OrphanRecord {
                session: self.session.clone(),
                what: "process".into(),
                pid: Some(pid),
            };
            self.journal.record_orphan(&o).await?;
            report.orphans.push(o);
        }
        Ok(report)
    }

    /// Checks a create request and the pinned image (and prepared system); nothing exists
    /// yet when this refuses.
    fn admit(&self, req: &CreateRequest) -> Result<Admitted, BrokerError> {
        if let NetworkRequest::Other(n) = &req.network {
            return Err(BrokerError::NotContained(n.clone()));
        }
        if let Some(prep) = self.cfg.prepared.iter().find(|i| i.digest == req.image) {
            return self.admit_prepared(req, prep);
        }
        let img = self
            .cfg
            .images
            .iter()
            .find(|i| i.digest == req.image)
            .ok_or(BrokerError::UnknownImage(req.image))?;
        self.check_ceilings(req.memory_mib, req.cpus)?;
        let manifest = self.verified_image(img)?;
        Ok(Admitted {
            image: img.clone(),
            manifest,
            prepared: None,
            memory_mib: req.memory_mib,
            cpus: req.cpus,
        })
    }

    fn check_ceilings(&self, memory_mib: u32, cpus: u32) -> Result<(), BrokerError> {
        if memory_mib == 0 || memory_mib > self.cfg.max_memory_mib {
            return Err(BrokerError::CeilingExceeded(format!(
                "memory {} MiB (ceiling {})",
                memory_mib, self.cfg.max_memory_mib
            )));
        }
        if cpus == 0 || cpus > self.cfg.max_cpus {
            return Err(BrokerError::CeilingExceeded(format!(
                "{} CPUs (ceiling {})",
                cpus, self.cfg.max_cpus
            )));
        }
        Ok(())
    }

    /// The pinned image's manifest, checked against its digest, its artifacts re-hashed.
    fn verified_image(&self, img: &PinnedImage) -> Result<ImageManifest, BrokerError> {
        let m = ImageManifest::read(&img.dir)?;
        let actual = m.digest();
        if actual != img.digest {
            return Err(BrokerError::ImageMismatch(format!(
                "manifest digest {actual} differs from the pinned {}",
                img.digest
            )));
        }
        for a in [&m.kernel, &m.initrd, &m.rootfs] {
            self.verify_cached(&img.dir, a)?;
        }
        Ok(m)
    }

    /// A prepared system: its manifest and layer against its pinned digest, its base against
    /// the base's, and the machine it was captured on against this broker's.
    fn admit_prepared(
        &self,
        req: &CreateRequest,
        prep: &PinnedImage,
    ) -> Result<Admitted, BrokerError> {
        let pm = PreparedManifest::read(&prep.dir)?;
        let actual = pm.digest();
        if actual != prep.digest {
            return Err(BrokerError::ImageMismatch(format!(
                "prepared manifest digest {actual} differs from the pinned {}",
                prep.digest
            )));
        }
        // A request names the prepared system's shape, or leaves it to the prepared system.
        let memory_mib = if req.memory_mib == 0 {
            pm.memory_mib
        } else {
            req.memory_mib
        };
        let cpus = if req.cpus == 0 { pm.cpus } else { req.cpus };
        if (memory_mib, cpus) != (pm.memory_mib, pm.cpus) {
            return Err(BrokerError::ShapeMismatch(format!(
                "{memory_mib} MiB / {cpus} CPUs asked; the prepared system was captured with {} MiB / {} CPUs",
                pm.memory_mib, pm.cpus
            )));
        }
        self.check_ceilings(memory_mib, cpus)?;
        let base = self
            .cfg
            .images
            .iter()
            .find(|i| i.digest == pm.base_image)
            .ok_or_else(|| {
                BrokerError::ImageMismatch(format!(
                    "the prepared system's base {} is not a pinned image",
                    pm.base_image
                ))
            })?;
        let host_qemu = self
            .qemu_version
            .as_ref()
            .map_err(|e| BrokerError::Host(e.clone()))?;
        if &pm.qemu_version != host_qemu
            || pm.machine_type != crate::machine::MACHINE_TYPE
            || pm.accel != self.accel.as_str()
        {
            return Err(BrokerError::ImageMismatch(format!(
                "captured by {:?} on {} under {}; this broker has {host_qemu:?} on {} under {}",
                pm.qemu_version,
                pm.machine_type,
                pm.accel,
                crate::machine::MACHINE_TYPE,
                self.accel.as_str()
            )));
        }
        let manifest = self.verified_image(base)?;
        for a in [&pm.disk, &pm.state] {
            self.verify_cached(&prep.dir, a)?;
        }
        Ok(Admitted {
            image: base.clone(),
            manifest,
            prepared: Some((prep.clone(), pm)),
            memory_mib,
            cpus,
        })
    }

    fn is_prepared(&self, digest: &Sha256Digest) -> bool {
        self.cfg.prepared.iter().any(|p| &p.digest == digest)
    }

    /// Re-hashes an artifact unless it is unchanged since it last verified.
    fn verify_cached(&self, dir: &Path, a: &Artifact) -> Result<(), BrokerError> {
        let path = dir.join(&a.file);
        let key = (path.clone(), a.sha256);
        let now = stamp(&path);
        if now.is_some() && self.verified.lock().expect("lock").get(&key) == now.as_ref() {
            return Ok(());
        }
        manifest::verify_artifact(dir, a)?;
        if let Some(s) = now {
            self.verified.lock().expect("lock").insert(key, s);
        }
        Ok(())
    }

    fn new_id(&self) -> String {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Sha256Digest::of_parts([
            self.session.as_bytes(),
            &n.to_le_bytes(),
            &host::nanos().to_le_bytes(),
        ])
        .hex()[..20]
            .to_owned()
    }

    /// Creates a contained instance.
    pub async fn create(&self, req: &CreateRequest) -> Result<Created, BrokerError> {
        let started = Instant::now();
        let admitted = self.admit(req)?;
        let id = self.new_id();
        if let Some(p) = &req.profiles {
            self.profiles
                .lock()
                .expect("lock")
                .insert(id.clone(), p.clone());
        }
        self.journal
            .request(&InstanceRecord {
                id: id.clone(),
                session: self.session.clone(),
                image_digest: req.image,
                state: InstanceState::Requested,
                pid: None,
                memory_mib: admitted.memory_mib,
                cpus: admitted.cpus,
                requested_at: self.clock.now(),
            })
            .await?;
        match self.boot(&id, &admitted, req.wait_ready, started).await {
            Ok(c) => Ok(c),
            Err(e) => {
                // Nothing half-made survives a failed create.
                let _ = self.destroy(&id).await;
                Err(e)
            }
        }
    }

    async fn boot(
        &self,
        id: &str,
        adm: &Admitted,
        wait_ready: bool,
        started: Instant,
    ) -> Result<Created, BrokerError> {
        let dir = self.dir(id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| BrokerError::Host(format!("{}: {e}", dir.display())))?;
        let m = &adm.manifest;
        let img = &adm.image;
        let overlay = dir.join(OVERLAY);
        // The overlay's header names its backing only for qemu-img; QEMU gets the chain
        // explicitly (see `machine`), so `-u` skips opening it here.
        let (backing, format) = match &adm.prepared {
            Some((p, pm)) => (p.dir.join(&pm.disk.file), "qcow2"),
            None => (img.dir.join(&m.rootfs.file), "raw"),
        };
        host::run(
            Command::new(&self.cfg.qemu_img)
                .args(["create", "-q", "-f", "qcow2", "-u", "-F", format, "-b"])
                .arg(&backing)
                .arg(&overlay)
                .arg(m.rootfs.bytes.to_string()),
        )
        .await?;
        self.journal
            .transition(
                id,
                &self.session,
                InstanceState::Requested,
                InstanceState::Allocated,
                None,
            )
            .await?;
        let kernel = img.dir.join(&m.kernel.file);
        let initrd = img.dir.join(&m.initrd.file);
        let state = adm
            .prepared
            .as_ref()
            .map(|(p, pm)| p.dir.join(&pm.state.file));
        let name = format!("reach-vm-{id}");
        let machine = Machine {
            accel: self.accel,
            memory_mib: adm.memory_mib,
            cpus: adm.cpus,
            kernel: &kernel,
            initrd: &initrd,
            cmdline: &m.kernel_cmdline,
            disks: Disks {
                base_raw: img.dir.join(&m.rootfs.file),
                prepared: adm
                    .prepared
                    .as_ref()
                    .map(|(p, pm)| p.dir.join(&pm.disk.file)),
                top: overlay,
                throwaway: true,
                data: None,
            },
            agent_channel: &m.guest_agent.channel,
            dir: &dir,
            qmp_sock: &dir.join(QMP_SOCK),
            qga_sock: &dir.join(QGA_SOCK),
            console: &dir.join(CONSOLE),
            pidfile: &dir.join(PIDFILE),
            incoming: state.as_deref(),
            daemonize: true,
            name: &name,
        };
        let mut cmd = Command::new(&self.cfg.qemu);
        cmd.args(machine.args());
        host::run(&mut cmd).await?;
        let pid = host::read_pidfile(&dir.join(PIDFILE))
            .ok_or_else(|| BrokerError::Host("QEMU wrote no pidfile".into()))?;
        self.journal
            .transition(
                id,
                &self.session,
                InstanceState::Allocated,
                InstanceState::Booted,
                Some(pid),
            )
            .await?;
        let booted_after = started.elapsed();
        let mut created = Created {
            id: id.to_owned(),
            pid,
            accel: self.accel,
            state: InstanceState::Booted,
            booted_after,
            ready_after: None,
            restored: adm.prepared.is_some(),
        };
        self.agents
            .lock()
            .expect("lock")
            .insert(id.to_owned(), Arc::new(tokio::sync::Mutex::new(None)));
        if wait_ready {
            self.wait_ready(id).await?;
            created.state = InstanceState::Ready;
            created.ready_after = Some(started.elapsed());
        }
        Ok(created)
    }

    /// Waits until the guest agent answers, then journals `Ready`.
    pub async fn wait_ready(&self, id: &str) -> Result<(), BrokerError> {
        let slot = self.agent_slot(id)?;
        let mut guard = slot.lock().await;
        let rec = self.journal.get(id).await?;
        if rec.state == InstanceState::Ready && guard.is_some() {
            return Ok(());
        }
        if rec.state != InstanceState::Booted {
            return Err(BrokerError::NotReady(id.to_owned(), rec.state.as_str()));
        }
        let deadline = std::time::Instant::now() + self.cfg.ready_timeout;
        let restored = self.is_prepared(&rec.image_digest);
        if restored {
            self.resume(id, deadline).await?;
        }
        let mut agent = Agent::connect(&self.dir(id).join(QGA_SOCK), deadline)
            .await
            .map_err(|_| BrokerError::BootTimeout(id.to_owned()))?;
        if restored {
            // The guest resumes at the capture's moment and with the capture's random state.
            let now = host::nanos() as i64;
            agent.set_time(now).await?;
            let mut seed = [0u8; 64];
            host::fill_random(&mut seed)?;
            agent.reseed_rng(&seed).await?;
            // And with the capture's /etc/machine-id: each instance gets its own for what reads
            // it from now on (processes already running keep the captured one in memory).
            let mut id = [0u8; 16];
            host::fill_random(&mut id)?;
            agent.set_machine_id(id).await?;
        }
        *guard = Some(agent);
        self.journal
            .transition(
                id,
                &self.session,
                InstanceState::Booted,
                InstanceState::Ready,
                None,
            )
            .await?;
        Ok(())
    }

    /// Waits until QEMU has loaded the captured state, then lets the guest run.
    async fn resume(&self, id: &str, deadline: std::time::Instant) -> Result<(), BrokerError> {
        let dir = self.dir(id);
        let failed = |what: String| {
            let console = std::fs::read_to_string(dir.join(CONSOLE)).unwrap_or_default();
            BrokerError::Host(format!(
                "{id}: restore: {what}; console tail: {}",
                console
                    .chars()
                    .rev()
                    .take(400)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            ))
        };
        // QMP's own timeout is what is left of the ready deadline, so QEMU not answering in
        // it is the guest not being ready in time, not a failure of the host. (Not compared
        // with `deadline` again: the timer may fire a hair before it.)
        let qmp_failed = |e: crate::qmp::QmpError| match e {
            crate::qmp::QmpError::Timeout => BrokerError::BootTimeout(id.to_owned()),
            e => failed(e.to_string()),
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut q = crate::qmp::Qmp::connect(&dir.join(QMP_SOCK), left)
            .await
            .map_err(qmp_failed)?;
        loop {
            let st = q.execute("query-status", None).await.map_err(qmp_failed)?;
            match st.get("status").and_then(|s| s.as_str()) {
                Some("inmigrate") if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(RESUME_POLL).await;
                }
                Some("inmigrate") => return Err(BrokerError::BootTimeout(id.to_owned())),
                Some("running") => return Ok(()),
                // A stream captured from a stopped guest arrives paused.
                Some("paused" | "postmigrate" | "prelaunch") => {
                    q.execute("cont", None).await.map_err(qmp_failed)?;
                    return Ok(());
                }
                other => return Err(failed(format!("QEMU status {other:?}"))),
            }
        }
    }

    fn agent_slot(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<Option<Agent>>>, BrokerError> {
        self.agents
            .lock()
            .expect("lock")
            .get(id)
            .cloned()
            .ok_or_else(|| BrokerError::UnknownInstance(id.to_owned()))
    }

    /// Runs `f` with the ready instance's agent.
    async fn with_agent<T>(
        &self,
        id: &str,
        f: impl AsyncFnOnce(&mut Agent) -> Result<T, BrokerError>,
    ) -> Result<T, BrokerError> {
        let slot = self.agent_slot(id)?;
        let mut guard = slot.lock().await;
        let rec = self.journal.get(id).await?;
        let Some(agent) = guard.as_mut().filter(|_| rec.state == InstanceState::Ready) else {
            return Err(BrokerError::NotReady(id.to_owned(), rec.state.as_str()));
        };
        f(agent).await
    }

    /// Runs an allow-listed profile.
    pub async fn exec(
        &self,
        id: &str,
        profile: &str,
        args: &[String],
    ) -> Result<ExecOutcome, BrokerError> {
        let own = self.profiles.lock().expect("lock").get(id).cloned();
        let set = own.as_deref().unwrap_or(&self.cfg.profiles);
        let (argv, p) = set.argv(profile, args)?;
        let bounds = p.bounds();
        let confined = p.confinement == Confinement::ReadOnly;
        self.with_agent(id, async |a| {
            let o = a.exec(&argv, bounds).await?;
            if !(confined && observe::no_session(o.exit_code, &o.stderr)) {
                return Ok(o);
            }
            // Nothing ran: start the instance's observation session, then ask once more.
            start_session(a).await?;
            Ok(a.exec(&argv, bounds).await?)
        })
        .await
    }

    /// The instance's network as its running QEMU process shows it (`/proc/<pid>/cmdline`),
    /// not as it was asked for: `none` when the machine has `-nic none` and no network
    /// backend or network device; otherwise `present`.
    pub async fn network(&self, id: &str) -> Result<&'static str, BrokerError> {
        let rec = self.journal.get(id).await?;
        let pid = rec
            .pid
            .ok_or_else(|| BrokerError::NotReady(id.to_owned(), rec.state.as_str()))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map_err(|e| BrokerError::Host(format!("instance {id}: qemu process: {e}")))?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let nic_none = args.windows(2).any(|w| w == [b"-nic".as_slice(), b"none"]);
        let backend = args.iter().any(|a| {
            matches!(*a, b"-netdev" | b"-net")
                || [b"virtio-net".as_slice(), b"e1000", b"rtl8139", b"netdev="]
                    .iter()
                    .any(|n| a.windows(n.len()).any(|w| w == *n))
        });
        Ok(if nic_none && !backend {
            "none"
        } else {
            "present"
        })
    }

    /// Owner, mode and size of a file in the guest.
    pub async fn stat_file(&self, id: &str, path: &str) -> Result<FileStat, BrokerError> {
        let p = guest_path(path).ok_or_else(|| BrokerError::PathRefused(path.to_owned()))?;
        let p = p.display().to_string();
        self.with_agent(id, async |a| Ok(a.stat_file(&p).await?))
            .await
    }

    /// Restarts a named service through the `service-restart` profile.
    pub async fn restart_service(&self, id: &str, unit: &str) -> Result<ExecOutcome, BrokerError> {
        self.exec(id, SERVICE_RESTART, &[unit.to_owned()]).await
    }

    pub async fn read_file(&self, id: &str, path: &str) -> Result<FileContent, BrokerError> {
        let p = guest_path(path).ok_or_else(|| BrokerError::PathRefused(path.to_owned()))?;
        let p = p.display().to_string();
        self.with_agent(id, async |a| Ok(a.read_file(&p).await?))
            .await
    }

    /// Writes a file, sets owner and mode, and re-reads it: the result is the guest's bytes.
    pub async fn write_file(
        &self,
        id: &str,
        path: &str,
        content: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<WriteResult, BrokerError> {
        let p = guest_path(path).ok_or_else(|| BrokerError::PathRefused(path.to_owned()))?;
        let p = p.display().to_string();
        if mode > 0o7777 {
            return Err(BrokerError::PathRefused(format!("{path}: mode {mode:o}")));
        }
        self.with_agent(id, async |a| {
            let back = a.place_file(&p, content, mode, uid, gid).await?;
            Ok(WriteResult {
                path: p.clone(),
                sha256: back.sha256,
                bytes: back.bytes.len() as u64,
                mode,
                uid,
                gid,
            })
        })
        .await
    }

    /// `environment.destroy`: stops QEMU (QMP quit, SIGKILL after [`QUIT_GRACE`]), confirms
    /// the process is gone and the overlay and sockets deleted, and records the confirmation.
    /// A second destroy of the same instance returns the recorded confirmation.
    pub async fn destroy(&self, id: &str) -> Result<Confirmation, BrokerError> {
        let started = Instant::now();
        let rec = match self.journal.get(id).await {
            Ok(r) => r,
            Err(crate::journal::JournalError::Unknown(_)) => {
                return Err(BrokerError::UnknownInstance(id.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        if rec.state.is_terminal() {
            return self.journal.confirmation(id).await?.ok_or_else(|| {
                BrokerError::Host(format!(
                    "{id} is {} without a confirmation",
                    rec.state.as_str()
                ))
            });
        }
        if rec.session != self.session {
            // Start-up recovery handles earlier sessions; reaching here means it has not run.
            return Err(BrokerError::UnknownInstance(id.to_owned()));
        }
        if rec.state != InstanceState::Destroying {
            self.journal
                .transition(
                    id,
                    &self.session,
                    rec.state,
                    InstanceState::Destroying,
                    None,
                )
                .await?;
        }
        // The agent connection goes first: nothing may use the instance once destroying.
        self.profiles.lock().expect("lock").remove(id);
        if let Some(slot) = self.agents.lock().expect("lock").remove(id) {
            drop(slot);
        }
        let t = self.teardown(id, rec.pid).await;
        #[cfg(feature = "fault-injection")]
        if self
            .crash_before_confirm
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            // The destroy happened; its confirmation (the reply) is lost with the process.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        let c = self.confirmation(id, InstanceState::Destroyed, &t, started, false);
        if !(c.process_gone && c.overlay_deleted && c.sockets_deleted) {
            return Err(BrokerError::Host(format!(
                "{id}: destruction not confirmed: {t:?}"
            )));
        }
        self.journal.confirm(InstanceState::Destroying, &c).await?;
        Ok(c)
    }

    fn confirmation(
        &self,
        id: &str,
        outcome: InstanceState,
        t: &Teardown,
        started: Instant,
        recovered: bool,
    ) -> Confirmation {
        Confirmation {
            instance_id: id.to_owned(),
            outcome,
            session: self.session.clone(),
            process_gone: t.process_gone,
            overlay_deleted: t.overlay_deleted,
            sockets_deleted: t.sockets_deleted,
            killed: t.killed,
            stop_ms: t.stop.as_millis() as i64,
            total_ms: started.elapsed().as_millis() as i64,
            at: self.clock.now(),
            recovered,
        }
    }

    /// Stops the instance's QEMU and deletes its directory; reports what is confirmed gone.
    async fn teardown(&self, id: &str, pid: Option<i32>) -> Teardown {
        let dir = self.dir(id);
        let started = Instant::now();
        let pid = pid.or_else(|| host::read_pidfile(&dir.join(PIDFILE)));
        let mut killed = false;
        if let Some(pid) = pid.filter(|p| host::is_ours(*p, &dir)) {
            if let Ok(q) = crate::qmp::Qmp::connect(&dir.join(QMP_SOCK), QUIT_GRACE).await {
                let _ = tokio::time::timeout(QUIT_GRACE, q.quit()).await;
            }
            if !host::wait_gone(pid, &dir, QUIT_GRACE).await {
                killed = true;
                host::kill_and_wait(pid, &dir, KILL_WAIT).await;
            }
        }
        let stop = started.elapsed();
        let process_gone = pid.is_none_or(|p| !host::is_ours(p, &dir));
        let _ = std::fs::remove_dir_all(&dir);
        Teardown {
            process_gone,
            overlay_deleted: !dir.join(OVERLAY).exists(),
            sockets_deleted: !dir.join(QMP_SOCK).exists()
                && !dir.join(QGA_SOCK).exists()
                && !dir.exists(),
            killed,
            stop,
        }
    }
}

/// An admitted create: what to boot or restore, and with which shape.
#[derive(Debug)]
struct Admitted {
    /// The base image (for a prepared system, its base).
    image: PinnedImage,
    manifest: ImageManifest,
    prepared: Option<(PinnedImage, PreparedManifest)>,
    memory_mib: u32,
    cpus: u32,
}

#[derive(Debug)]
struct Teardown {
    process_gone: bool,
    overlay_deleted: bool,
    sockets_deleted: bool,
    killed: bool,
    stop: Duration,
}

/// Starts the instance's observation session ([`observe`]): the one read-only sandbox every
/// observation of the instance runs in.
async fn start_session(a: &mut Agent) -> Result<(), BrokerError> {
    let unit = observe::unit_name(host::nanos() as u64);
    let bounds = ExecBounds {
        timeout: Duration::from_secs(60),
        max_output: 4096,
    };
    let o = a.exec(&observe::start_argv(&unit), bounds).await?;
    if o.exit_code == Some(0) {
        return Ok(());
    }
    Err(BrokerError::Agent(crate::agent::AgentError::Guest(
        format!(
            "the observation session {unit} did not start (exit {:?}{}): {}",
            o.exit_code,
            if o.timed_out { ", timed out" } else { "" },
            String::from_utf8_lossy(&o.stderr).trim()
        ),
    )))
}

#[cfg(test)]
mod tests {
    //! Host and journal failures at the broker's boundary, with no guest: host tools that
    //! fail, a run directory or a journal the broker cannot use. The integration tests
    //! (`tests/refusals.rs`) cover what needs QEMU.

    use super::*;
    use crate::journal::JournalError;

    /// A pinned image of three tiny files that verifies like a built one: enough to reach
    /// the host tools, never enough to boot.
    fn tiny_image(dir: &Path) -> PinnedImage {
        PinnedImage {
            digest: crate::testing::tiny_image(dir).digest(),
            dir: dir.to_owned(),
        }
    }

    fn tiny_config(run_dir: &Path, img: &PinnedImage) -> BrokerConfig {
        let mut cfg = BrokerConfig::new(run_dir, vec![img.clone()]);
        cfg.accel = AccelChoice::Force(Accel::Tcg);
        cfg
    }

    fn tiny_request(img: &PinnedImage) -> CreateRequest {
        CreateRequest {
            image: img.digest,
            network: NetworkRequest::None,
            memory_mib: 128,
            cpus: 1,
            wait_ready: false,
            profiles: None,
        }
    }

    async fn start(cfg: BrokerConfig) -> Result<Broker, BrokerError> {
        Broker::start(cfg, Arc::new(reach_clock::SystemClock))
            .await
            .map(|(b, _)| b)
    }

    /// A second, read-only look at a journal file, beside the broker's own connection.
    async fn raw(path: &Path) -> sqlx::SqlitePool {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .read_only(true);
        sqlx::SqlitePool::connect_with(opts).await.unwrap()
    }

    async fn instance_ids(path: &Path) -> Vec<String> {
        sqlx::query_scalar("SELECT id FROM instances ORDER BY id")
            .fetch_all(&raw(path).await)
            .await
            .unwrap()
    }

    /// A create whose host tool fails: `environment/host-failure`, and the one instance it
    /// journaled is destroyed and confirmed, with nothing of it left on disk.
    async fn create_fails_on_the_host(
        configure: impl FnOnce(&mut BrokerConfig),
    ) -> (String, Vec<InstanceState>) {
        let tmp = tempfile::tempdir().unwrap();
        let img = tiny_image(&tmp.path().join("img"));
        let run = tmp.path().join("run");
        let mut cfg = tiny_config(&run, &img);
        configure(&mut cfg);
        let b = start(cfg).await.unwrap();
        let err = b.create(&tiny_request(&img)).await.unwrap_err();
        assert_eq!(err.code(), "environment/host-failure", "{err}");
        let BrokerError::Host(msg) = err else {
            panic!("{err:?}")
        };
        let ids = instance_ids(&run.join("journal.db")).await;
        let [id] = ids.as_slice() else {
            panic!("{ids:?}")
        };
        assert!(b.journal().live().await.unwrap().is_empty());
        let c = b.journal().confirmation(id).await.unwrap().unwrap();
        assert_eq!(c.outcome, InstanceState::Destroyed);
        assert!(
            c.process_gone && c.overlay_deleted && c.sockets_deleted,
            "{c:?}"
        );
        assert_eq!(
            std::fs::read_dir(b.instances_dir()).unwrap().count(),
            0,
            "an instance directory survived the failed create"
        );
        (msg, b.journal().history(id).await.unwrap())
    }

    #[tokio::test]
    async fn a_qemu_img_that_does_not_run_is_a_host_failure() {
        let (msg, hist) = create_fails_on_the_host(|c| {
            c.qemu_img = "/nonexistent/qemu-img".into();
        })
        .await;
        assert!(msg.contains("/nonexistent/qemu-img"), "{msg}");
        use InstanceState::*;
        assert_eq!(hist, [Requested, Destroying, Destroyed]);
    }

    #[tokio::test]
    async fn a_qemu_that_exits_non_zero_is_a_host_failure() {
        let (msg, hist) = create_fails_on_the_host(|c| c.qemu = "/bin/false".into()).await;
        assert!(msg.contains("\"/bin/false\" exit status: 1"), "{msg}");
        // The overlay was made (allocated), and deleted by the destroy.
        use InstanceState::*;
        assert_eq!(hist, [Requested, Allocated, Destroying, Destroyed]);
    }

    #[tokio::test]
    async fn a_qemu_that_writes_no_pidfile_is_a_host_failure() {
        let (msg, hist) = create_fails_on_the_host(|c| c.qemu = "/bin/true".into()).await;
        assert_eq!(msg, "QEMU wrote no pidfile");
        use InstanceState::*;
        assert_eq!(hist, [Requested, Allocated, Destroying, Destroyed]);
    }

    /// The journal fails mid-create: another writer holds its lock when the boot is to be
    /// journaled. The create fails `broker/journal`, and its destroy cannot journal either, so
    /// nothing is torn down behind the journal's back: the record stays live with its
    /// directory, and the next start reaps it (confirmed Reaped, nothing left on disk).
    #[tokio::test]
    async fn a_journal_that_fails_mid_create_leaves_the_instance_for_the_next_start() {
        let tmp = tempfile::tempdir().unwrap();
        let img = tiny_image(&tmp.path().join("img"));
        let run = tmp.path().join("run");
        let (ran, go) = (tmp.path().join("qemu-ran"), tmp.path().join("go"));
        // A QEMU that says it ran, waits until the test holds the journal's lock, then writes
        // its pidfile and exits, as a daemonizing QEMU's parent does.
        let qemu = tmp.path().join("qemu");
        std::fs::write(
            &qemu,
            format!(
                "#!/bin/sh\n\
                 [ \"$1\" = --version ] && exec echo 'QEMU emulator version 7.2.0'\n\
                 while [ $# -gt 0 ]; do [ \"$1\" = -pidfile ] && pidfile=\"$2\"; shift; done\n\
                 touch '{}'\n\
                 while [ ! -e '{}' ]; do sleep 0.05; done\n\
                 echo $$ > \"$pidfile\"\n",
                ran.display(),
                go.display()
            ),
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let config = || {
            let mut cfg = tiny_config(&run, &img);
            cfg.qemu = qemu.clone();
            cfg
        };
        let b = start(config()).await.unwrap();
        let lock = async {
            while !ran.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            use sqlx::Connection as _;
            let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(run.join("journal.db"));
            let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
            sqlx::raw_sql("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .unwrap();
            std::fs::write(&go, "").unwrap();
            conn
        };
        let request = tiny_request(&img);
        let (created, mut conn) = tokio::join!(b.create(&request), lock);
        let err = created.unwrap_err();
        assert_eq!(err.code(), "broker/journal", "{err}");
        sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap();
        drop(conn);
        let live = b.journal().live().await.unwrap();
        let [rec] = live.as_slice() else {
            panic!("{live:?}")
        };
        assert_eq!(rec.state, InstanceState::Allocated);
        let id = rec.id.clone();
        assert!(b.instances_dir().join(&id).join(OVERLAY).exists());
        drop(b);

        let (b, report) = Broker::start(config(), Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
        assert_eq!(report.reaped, std::slice::from_ref(&id));
        let c = b.journal().confirmation(&id).await.unwrap().unwrap();
        assert_eq!(c.outcome, InstanceState::Reaped);
        assert!(c.process_gone && c.overlay_deleted, "{c:?}");
        assert_eq!(std::fs::read_dir(b.instances_dir()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn start_refuses_a_run_dir_it_cannot_create() {
        let tmp = tempfile::tempdir().unwrap();
        let img = tiny_image(&tmp.path().join("img"));
        // The run directory is a file: its instances directory cannot be made (ENOTDIR, which
        // running as root does not bypass).
        let run = tmp.path().join("run");
        std::fs::write(&run, "mine").unwrap();
        let err = start(tiny_config(&run, &img)).await.unwrap_err();
        assert_eq!(err.code(), "environment/host-failure", "{err}");
        assert!(
            matches!(&err, BrokerError::Host(m) if m.starts_with(&run.join(INSTANCES).display().to_string())),
            "{err:?}"
        );
        assert_eq!(std::fs::read(&run).unwrap(), b"mine");
    }

    #[tokio::test]
    async fn start_refuses_a_journal_that_is_not_a_database_and_keeps_its_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let img = tiny_image(&tmp.path().join("img"));
        let run = tmp.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let journal = run.join("journal.db");
        let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        std::fs::write(&journal, &garbage).unwrap();
        let err = start(tiny_config(&run, &img)).await.unwrap_err();
        assert_eq!(err.code(), "broker/journal", "{err}");
        assert!(
            matches!(&err, BrokerError::Journal(JournalError::Db(_))),
            "{err:?}"
        );
        // Not truncated, recreated or "repaired": whatever it is, it is the operator's to look at.
        assert_eq!(std::fs::read(&journal).unwrap(), garbage);
    }

    #[tokio::test]
    async fn start_refuses_a_journal_row_it_cannot_read_and_reaps_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let img = tiny_image(&tmp.path().join("img"));
        let run = tmp.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let path = run.join("journal.db");
        // An earlier session's instance, in a state this broker does not know (say, one a
        // newer broker wrote), with its directory still on disk.
        let clock: Arc<dyn Clock> = Arc::new(reach_clock::SystemClock);
        {
            let j = Journal::open(&path, clock.clone()).await.unwrap();
            j.request(&InstanceRecord {
                id: "earlier".into(),
                session: "s0".into(),
                image_digest: img.digest,
                state: InstanceState::Requested,
                pid: None,
                memory_mib: 128,
                cpus: 1,
                requested_at: clock.now(),
            })
            .await
            .unwrap();
            j.transition(
                "earlier",
                "s0",
                InstanceState::Requested,
                InstanceState::Allocated,
                None,
            )
            .await
            .unwrap();
        }
        {
            let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
            let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
            sqlx::query("UPDATE instances SET state = 'hibernated' WHERE id = 'earlier'")
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }
        let dir = run.join(INSTANCES).join("earlier");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(OVERLAY), "overlay").unwrap();

        let err = start(tiny_config(&run, &img)).await.unwrap_err();
        assert_eq!(err.code(), "broker/journal", "{err}");
        assert!(
            matches!(&err, BrokerError::Journal(JournalError::Corrupt(m)) if m.contains("hibernated")),
            "{err:?}"
        );
        // Recovery stopped before touching anything: the row, its history and its directory
        // are as they were, and nothing was confirmed or recorded as an orphan.
        let pool = raw(&path).await;
        let state: String = sqlx::query_scalar("SELECT state FROM instances WHERE id = 'earlier'")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(state, "hibernated");
        let steps: Vec<String> = sqlx::query_scalar(
            "SELECT to_state FROM transitions WHERE instance_id = 'earlier' ORDER BY rowid",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(steps, ["requested", "allocated"]);
        for count in [
            "SELECT COUNT(*) FROM confirmations",
            "SELECT COUNT(*) FROM orphans",
        ] {
            let n: i64 = sqlx::query_scalar(count).fetch_one(&pool).await.unwrap();
            assert_eq!(n, 0, "{count}");
        }
        assert_eq!(std::fs::read(dir.join(OVERLAY)).unwrap(), b"overlay");
    }
}
