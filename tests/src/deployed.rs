//! The deployment guest of tests/tests/deployed_host.rs and benches/deployed_host.rs (issue
//! #32): a real QEMU machine (KVM where a boot under it succeeds, TCG otherwise) booted from
//! the pinned image `deploy/guest/image.toml` describes, with a writable qcow2 overlay that
//! survives its reboots and power cycles, a read-only second disk carrying Reach (the release
//! binaries and `deploy/guest/install.sh`), no network device, and the guest agent as the
//! only way in: every command runs through it, as root or as the body's user.
//!
//! The machine is `reach_vm::machine::Machine`, the one definition every guest of the crate
//! uses; the agent is `reach_vm::agent::Agent`.
#![allow(clippy::disallowed_methods)] // REACH_BINS: a test knob.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use reach_vm::agent::{Agent, ExecBounds, ExecOutcome};
use reach_vm::machine::{DATA_DISK_SERIAL, Disks, Machine};
use reach_vm::manifest::ImageManifest;
use reach_vm::probe::Accel;

use crate::workbench::CACHE;

/// The image spec of the deployment guest.
pub fn spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/guest/image.toml")
}

/// The body's account in the guest (deploy/guest/image.toml).
pub const BODY_USER: &str = "reach";
/// Its uid.
pub const BODY_UID: u32 = 1500;
/// Where install.sh has Scribe write the state and the units.
pub const STATE: &str = "/var/lib/reach";
pub const UNITS: &str = "/home/reach/.config/containers/systemd";

/// The guest's memory: eight roles' ceilings (704 MiB together), Podman and systemd.
const MEMORY_MIB: u32 = 3072;
const CPUS: u32 = 2;
/// How long install.sh may take (TCG).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long a boot may take to answer the agent (TCG on two shared cores).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(600);
const AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";

/// The pinned deployment image, built (or found) in the shared image cache.
#[derive(Debug, Clone)]
pub struct Image {
    pub dir: PathBuf,
    pub manifest: ImageManifest,
}

/// Builds the image (minutes, once per spec) or finds it in the cache.
pub fn image() -> Image {
    let path = spec_path();
    let text = std::fs::read_to_string(&path).expect("deploy/guest/image.toml");
    let spec = reach_vm::spec::ImageSpec::parse(&text).expect("the guest spec parses");
    let (dir, manifest, _) = reach_vm::image::cached_build(
        &spec,
        path.parent().unwrap(),
        Path::new(CACHE),
        &reach_vm::image::Quiet,
    )
    .expect("the deployment image builds");
    Image { dir, manifest }
}

/// The directory of the role binaries and `reach` (`REACH_BINS` or the launcher's default).
fn bins_dir() -> PathBuf {
    std::env::var_os("REACH_BINS")
        .map(PathBuf::from)
        .unwrap_or_else(reach_launcher::default_bin_dir)
}

/// Writes the install disk into `dir`: `bin/reach`, the role images Scribe builds here from the
/// role binaries (debug information stripped), as OCI archives in `images/` with the digests
/// that pin them in `digests.toml`, and install.sh, as one ext4 image. Returns its path.
///
/// The images are built on this host, as a release pipeline would, rather than in the guest:
/// the same `reach scribe images`, minutes faster than under TCG. They are saved uncompressed,
/// so the guest's `podman load` keeps each manifest, and with it the digest the units pin.
pub fn install_disk(dir: &Path, manifest: &reach_manifest::Manifest) -> PathBuf {
    let root = dir.join("install");
    let bins = dir.join("bins");
    let images = root.join("images");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(&bins).unwrap();
    std::fs::create_dir_all(&images).unwrap();
    let from = bins_dir();
    let strip = |src: &Path, dst: &Path| {
        assert!(
            src.is_file(),
            "{} is missing: build the binaries first (`cargo build --bins`; scripts/test.sh does)",
            src.display()
        );
        let o = std::process::Command::new("objcopy")
            .arg("--strip-debug")
            .arg(src)
            .arg(dst)
            .output()
            .expect("objcopy runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    strip(&from.join("reach"), &root.join("bin/reach"));
    for role in &manifest.roles {
        strip(&from.join(&role.binary), &bins.join(&role.binary));
    }
    let run = |cmd: &mut std::process::Command| {
        let o = cmd.output().expect("runs");
        assert!(
            o.status.success(),
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(std::process::Command::new(root.join("bin/reach"))
        .args(["scribe", "images", "--bins"])
        .arg(&bins)
        .arg("--digests-out")
        .arg(root.join("digests.toml")));
    for role in &manifest.roles {
        run(std::process::Command::new("podman")
            .args([
                "save",
                "--quiet",
                "--uncompressed",
                "--format",
                "oci-archive",
                "-o",
            ])
            .arg(images.join(format!("{}.tar", role.name)))
            .arg(format!("{}:latest", role.image)));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/guest/install.sh");
    std::fs::copy(&script, root.join("install.sh")).unwrap();
    let bytes: u64 = walk_bytes(&root);
    let disk = dir.join("install.ext4");
    let o = std::process::Command::new("mkfs.ext4")
        .args([
            "-q",
            "-F",
            "-L",
            "reach-install",
            "-E",
            "root_owner=0:0",
            "-d",
        ])
        .arg(&root)
        .arg(&disk)
        .arg(format!("{}M", bytes / (1 << 20) + 64))
        .output()
        .expect("mkfs.ext4 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    disk
}

fn walk_bytes(p: &Path) -> u64 {
    let m = std::fs::symlink_metadata(p).unwrap();
    if m.is_dir() {
        std::fs::read_dir(p)
            .unwrap()
            .map(|e| walk_bytes(&e.unwrap().path()))
            .sum()
    } else {
        m.len()
    }
}

/// A writable qcow2 overlay over the image's rootfs: the guest's disk for its whole life.
pub fn overlay(image: &Image, at: &Path) -> PathBuf {
    let base = image.dir.join(&image.manifest.rootfs.file);
    let o = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b"])
        .arg(&base)
        .arg(at)
        .arg(image.manifest.rootfs.bytes.to_string())
        .output()
        .expect("qemu-img runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    at.to_owned()
}

/// KVM if a boot under it succeeds here, TCG otherwise (`reach_vm::probe`).
pub async fn accel(image: &Image) -> Accel {
    reach_vm::probe::probe(
        Path::new("qemu-system-x86_64"),
        &image.dir.join(&image.manifest.kernel.file),
        Path::new(CACHE),
    )
    .await
}

/// One running guest.
#[derive(Debug)]
pub struct Guest {
    child: tokio::process::Child,
    agent: Agent,
    qga: PathBuf,
    pub console: PathBuf,
    pub accel: Accel,
}

impl Guest {
    /// Starts QEMU on `disk` (an [`overlay`]) with `install` as the read-only second disk,
    /// and waits until the agent answers and systemd says the boot is finished.
    pub async fn boot(
        image: &Image,
        accel: Accel,
        run: &Path,
        disk: &Path,
        install: Option<&Path>,
    ) -> Guest {
        std::fs::create_dir_all(run).unwrap();
        let (qmp, qga, console, pidfile) = (
            run.join("qmp.sock"),
            run.join("qga.sock"),
            run.join("console.log"),
            run.join("qemu.pid"),
        );
        for p in [&qmp, &qga, &pidfile] {
            let _ = std::fs::remove_file(p);
        }
        let kernel = image.dir.join(&image.manifest.kernel.file);
        let initrd = image.dir.join(&image.manifest.initrd.file);
        let machine = Machine {
            accel,
            memory_mib: MEMORY_MIB,
            cpus: CPUS,
            kernel: &kernel,
            initrd: &initrd,
            cmdline: &image.manifest.kernel_cmdline,
            disks: Disks {
                base_raw: image.dir.join(&image.manifest.rootfs.file),
                prepared: None,
                top: disk.to_owned(),
                throwaway: false,
                data: install.map(Path::to_owned),
            },
            agent_channel: AGENT_CHANNEL,
            dir: run,
            qmp_sock: &qmp,
            qga_sock: &qga,
            console: &console,
            pidfile: &pidfile,
            incoming: None,
            daemonize: false,
            name: "reach-deployed-host",
        };
        let child = tokio::process::Command::new("qemu-system-x86_64")
            .args(machine.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("qemu starts");
        let agent = Agent::connect(&qga, Instant::now() + BOOT_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("the guest agent never answered: {e}\n{}", tail(&console)));
        let mut g = Guest {
            child,
            agent,
            qga,
            console,
            accel,
        };
        g.settled().await;
        g
    }

    /// Waits for `systemctl is-system-running --wait` (the boot's jobs are done).
    async fn settled(&mut self) {
        let o = self
            .sh("systemctl is-system-running --wait || true", BOOT_TIMEOUT)
            .await;
        let state = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        assert!(
            state == "running" || state == "degraded",
            "system state {state:?}"
        );
    }

    /// Runs `script` with `/bin/sh -c` as root; its whole outcome.
    pub async fn sh(&mut self, script: &str, timeout: Duration) -> ExecOutcome {
        let argv = ["/bin/sh", "-c", script].map(String::from).to_vec();
        self.agent
            .exec(
                &argv,
                ExecBounds {
                    timeout,
                    max_output: 4 << 20,
                },
            )
            .await
            .unwrap_or_else(|e| panic!("guest-exec {script}: {e}"))
    }

    /// Runs `script` as root and asserts it succeeded; its stdout. A failure reports the
    /// body's units and its user's journal with the script's output.
    pub async fn ok(&mut self, script: &str, timeout: Duration) -> String {
        let o = self.sh(script, timeout).await;
        self.succeeded(script, o).await
    }

    /// `o`'s stdout, after asserting that `script` exited 0; a failure panics with both
    /// outputs and [`Guest::diagnose`]'s report.
    async fn succeeded(&mut self, script: &str, o: ExecOutcome) -> String {
        if o.exit_code != Some(0) {
            let why = self.diagnose().await;
            panic!(
                "{script}: exit {:?} (timed out: {})\nstdout:\n{}\nstderr:\n{}\n{why}",
                o.exit_code,
                o.timed_out,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The body's units and the last of its user's journal, for a failure report.
    pub async fn diagnose(&mut self) -> String {
        let units = self
            .body(
                "systemctl --user list-units 'reach-*' --all --no-pager",
                Duration::from_secs(60),
            )
            .await;
        let journal = self
            .sh(
                &format!("journalctl --no-pager -n 120 _UID={BODY_UID}"),
                Duration::from_secs(60),
            )
            .await;
        format!(
            "units:\n{}\njournal of uid {BODY_UID}:\n{}",
            String::from_utf8_lossy(&units.stdout),
            String::from_utf8_lossy(&journal.stdout)
        )
    }

    /// Runs `script` as the body's user with its manager's environment, through `/bin/sh -c`.
    pub async fn body(&mut self, script: &str, timeout: Duration) -> ExecOutcome {
        let wrapped = format!(
            "exec runuser -u {BODY_USER} -- env -i HOME=/home/{BODY_USER} \
             XDG_RUNTIME_DIR=/run/user/{BODY_UID} \
             DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/{BODY_UID}/bus \
             PATH=/usr/local/bin:/usr/bin:/bin sh -c {}",
            sh_quote(script)
        );
        self.sh(&wrapped, timeout).await
    }

    /// Runs `script` as the body's user and asserts it succeeded; its stdout. A failure reports
    /// as [`Guest::ok`]'s does.
    pub async fn body_ok(&mut self, script: &str, timeout: Duration) -> String {
        let o = self.body(script, timeout).await;
        self.succeeded(script, o).await
    }

    /// Runs install.sh from the install disk as root (`mode`: "" installs, "rebuild" rebuilds),
    /// mounting the disk first if it is not mounted (a reboot unmounts it).
    pub async fn install(&mut self, mode: &str) {
        self.ok(
            &format!(
                "mkdir -p /mnt/reach-install && \
                 {{ mountpoint -q /mnt/reach-install || \
                   mount -o ro /dev/disk/by-id/virtio-{DATA_DISK_SERIAL} /mnt/reach-install; }} && \
                 sh /mnt/reach-install/install.sh {mode}"
            ),
            INSTALL_TIMEOUT,
        )
        .await;
    }

    /// `reach vault status` as the body's user: its output, stdout then stderr.
    pub async fn vault_status(&mut self) -> String {
        let o = self
            .body(
                &format!("reach vault status --podman --state {STATE}"),
                Duration::from_secs(120),
            )
            .await;
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// `reach vault reconcile` as the body's user (`--genesis` for a first start), asserted to
    /// succeed; `note` is kept in the trail.
    pub async fn reconcile(&mut self, note: &str, genesis: bool) {
        self.body_ok(
            &format!(
                "reach vault reconcile {}--note {} --podman --state {STATE}",
                if genesis { "--genesis " } else { "" },
                sh_quote(note)
            ),
            Duration::from_secs(120),
        )
        .await;
    }

    /// Polls `reach status --podman` as the body's user until all `roles` are healthy; how
    /// long that took.
    pub async fn healthy(&mut self, roles: usize) -> Duration {
        let started = Instant::now();
        let want = format!("{roles}/{roles} roles healthy");
        let mut last = String::new();
        while started.elapsed() < BOOT_TIMEOUT {
            let o = self
                .body(
                    &format!("reach status --podman --state {STATE}"),
                    Duration::from_secs(120),
                )
                .await;
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            if o.exit_code == Some(0) && last.contains(&want) {
                return started.elapsed();
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let why = self.diagnose().await;
        panic!("the body never became healthy: {last}\n{why}");
    }

    /// `reach audit --podman --units` in the guest, as the body's user: (passed, receipt); a
    /// failed receipt's plain summary (its stderr) is kept in the receipt as `"stderr"`.
    pub async fn receipt(&mut self) -> (bool, serde_json::Value) {
        let o = self
            .body(
                &format!("reach audit --podman --state {STATE} --units {UNITS}"),
                Duration::from_secs(600),
            )
            .await;
        let mut receipt: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
                panic!(
                    "{e}: {}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            });
        let ok = o.exit_code == Some(0);
        if !ok {
            receipt["stderr"] = String::from_utf8_lossy(&o.stderr).into_owned().into();
        }
        (ok, receipt)
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`).
    pub async fn boot_id(&mut self) -> String {
        self.ok(
            "cat /proc/sys/kernel/random/boot_id",
            Duration::from_secs(30),
        )
        .await
        .trim()
        .to_owned()
    }

    /// `systemctl reboot` in the guest; returns when the new boot has settled.
    pub async fn reboot(&mut self) {
        let before = self.boot_id().await;
        // Not waited for: the agent goes down with the system.
        let _ = self
            .agent
            .call(
                "guest-exec",
                serde_json::json!({"path": "/usr/bin/systemctl", "arg": ["reboot"]}),
            )
            .await;
        let deadline = Instant::now() + BOOT_TIMEOUT;
        loop {
            assert!(
                Instant::now() < deadline,
                "no new boot within {BOOT_TIMEOUT:?}\n{}",
                tail(&self.console)
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
            // The same connection: QEMU's socket takes one client and keeps it across the
            // guest's reset, and the new boot's agent answers on it once it runs. Only a
            // connection QEMU closed is replaced.
            match self.agent.sync(Duration::from_secs(5)).await {
                Ok(()) => {}
                Err(reach_vm::agent::AgentError::Timeout) => continue,
                Err(_) => {
                    if let Ok(agent) =
                        Agent::connect(&self.qga, Instant::now() + Duration::from_secs(10)).await
                    {
                        self.agent = agent;
                    }
                    continue;
                }
            }
            let o = self
                .sh(
                    "cat /proc/sys/kernel/random/boot_id",
                    Duration::from_secs(30),
                )
                .await;
            let id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            if o.exit_code == Some(0) && !id.is_empty() && id != before {
                break;
            }
        }
        self.settled().await;
    }

    /// `systemctl poweroff` in the guest; returns when QEMU has exited.
    pub async fn poweroff(mut self) {
        let _ = self
            .agent
            .call(
                "guest-exec",
                serde_json::json!({"path": "/usr/bin/systemctl", "arg": ["poweroff"]}),
            )
            .await;
        let status = tokio::time::timeout(BOOT_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no power-off within {BOOT_TIMEOUT:?}\n{}",
                    tail(&self.console)
                )
            })
            .expect("qemu waited");
        assert!(status.success(), "qemu: {status}");
    }
}

/// Quotes `s` for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The console log's last lines, for a failure report.
pub fn tail(console: &Path) -> String {
    let text = std::fs::read_to_string(console).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
