//! The pinned image builder: spec → mmdebstrap → kernel, initrd and an ext4 rootfs → manifest.
//!
//! Runs as root (`mmdebstrap --mode=root`). Reproducibility measures: SOURCE_DATE_EPOCH for
//! every package script, mtimes clamped to it, a fixed filesystem UUID and directory hash
//! seed derived from the spec digest, E2FSPROGS_FAKE_TIME for mke2fs, and the removal of
//! files that record the build machine or the build moment. What still varies is listed in
//! the manifest's `nondeterminism` field.
//!
//! The rootfs is made without loop mounts (`mkfs.ext4 -d`), so building needs no block
//! devices, only a directory.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;

use crate::manifest::{
    Artifact, DIGEST_FILE, GUEST_AGENT_CHANNEL, GuestAgent, INITRD_FILE, ImageManifest,
    KERNEL_FILE, LocalDebRecord, MANIFEST_FILE, MANIFEST_FORMAT, ManifestError, Package,
    ROOTFS_FILE, file_digest, parse_apt_show,
};
use crate::spec::{ImageSpec, parse_mode};

/// Names the builder logic; part of every manifest, so a change to how images are made
/// changes the image digest even for the same spec.
pub const BUILDER_REVISION: &str = concat!("reach-vm/", env!("CARGO_PKG_VERSION"), " builder-10");

/// Kernel command line for direct boot: serial console, the virtio disk as root, no network
/// configuration, panic → poweroff so a broken guest ends its QEMU instead of spinning.
pub const KERNEL_CMDLINE: &str =
    "console=ttyS0 root=/dev/vda rw panic=-1 quiet systemd.show_status=false net.ifnames=0";

const GUEST_HOSTNAME: &str = "reach-guest";
/// Lines of mmdebstrap output kept for an error report.
const TAIL_LINES: usize = 30;

/// Files that record the build host or moment, removed after the bootstrap.
const VOLATILE: &[&str] = &[
    "var/cache/ldconfig/aux-cache",
    "var/lib/dbus/machine-id",
    "var/log/dpkg.log",
    "var/log/alternatives.log",
    "var/log/apt/history.log",
    "var/log/apt/term.log",
    "var/log/apt/eipp.log.xz",
    "var/log/bootstrap.log",
    "var/lib/systemd/catalog/database",
    "var/cache/debconf/config.dat-old",
    "var/cache/debconf/templates.dat-old",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "var/lib/dpkg/statoverride-old",
    "etc/shadow-",
    "etc/gshadow-",
    "etc/passwd-",
    "etc/group-",
    "etc/subuid-",
    "etc/subgid-",
];

/// Units masked in every guest: consoles nobody attaches to and periodic maintenance. Under
/// TCG every unit started costs boot time, and a disposable instance never lives for a timer.
const MASKED_UNITS: &[&str] = &[
    "getty@.service",
    "serial-getty@.service",
    "console-getty.service",
    // Fails without dbus and logind, leaving the system "degraded" (a prepared system is
    // captured only from a "running" one).
    "getty-static.service",
    "man-db.timer",
    "logrotate.timer",
    "e2scrub_reap.service",
    "e2scrub_all.timer",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
];

/// Where a build is in its course, for progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    VerifyInputs,
    Bootstrap,
    Prepare,
    ExtractKernel,
    MakeRootfs,
    Digest,
    Done,
}

impl Stage {
    pub fn label(self) -> &'static str {
        match self {
            Stage::VerifyInputs => "verify inputs",
            Stage::Bootstrap => "bootstrap (mmdebstrap)",
            Stage::Prepare => "prepare system",
            Stage::ExtractKernel => "extract kernel",
            Stage::MakeRootfs => "make rootfs (mkfs.ext4 -d)",
            Stage::Digest => "digest artifacts",
            Stage::Done => "done",
        }
    }
    pub const COUNT: u64 = 7;
    pub fn index(self) -> u64 {
        self as u64
    }
}

/// Receives build progress; the CLI draws bars, tests ignore it.
pub trait Progress {
    fn stage(&self, stage: Stage);
    /// One line of tool output (download and unpack progress).
    fn line(&self, line: &str);
}

/// No progress display.
#[derive(Debug)]
pub struct Quiet;
impl Progress for Quiet {
    fn stage(&self, _: Stage) {}
    fn line(&self, _: &str) {}
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// a file operation failed
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// a local .deb does not match its pinned digest
    #[error("local deb {path}: digest {actual} differs from the spec's {expected}")]
    LocalDebMismatch {
        path: PathBuf,
        expected: String,
        actual: Sha256Digest,
    },
    /// a build tool failed
    #[error("{tool} failed ({status}): {tail}")]
    Tool {
        tool: &'static str,
        status: String,
        tail: String,
    },
    /// the bootstrapped tree is not what the builder expects
    #[error("bootstrapped tree: {0}")]
    Tree(String),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BuildError + 'a {
    move |source| BuildError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// A finished build.
#[derive(Debug)]
pub struct BuiltImage {
    pub dir: PathBuf,
    pub manifest: ImageManifest,
    pub digest: Sha256Digest,
    pub elapsed: Duration,
}

/// Quotes a string for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs a command, streaming its merged output lines to `progress`; keeps a tail for errors.
fn run_streamed(
    tool: &'static str,
    mut cmd: Command,
    progress: &dyn Progress,
) -> Result<(), BuildError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| BuildError::Tool {
        tool,
        status: "spawn".into(),
        tail: e.to_string(),
    })?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tx2 = tx.clone();
    let t1 = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let t2 = std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx2.send(l);
        }
    });
    let mut tail = std::collections::VecDeque::new();
    for l in rx {
        progress.line(&l);
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(l);
    }
    let _ = t1.join();
    let _ = t2.join();
    let status = child.wait().map_err(|e| BuildError::Tool {
        tool,
        status: "wait".into(),
        tail: e.to_string(),
    })?;
    if !status.success() {
        return Err(BuildError::Tool {
            tool,
            status: status.to_string(),
            tail: Vec::from(tail).join("\n"),
        });
    }
    Ok(())
}

/// A UUID text derived from the spec digest (fixed per spec, distinct across specs).
fn uuid_from(d: &Sha256Digest) -> String {
    let h = d.hex();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Builds the image described by `spec` into `out` (created; must be empty or absent).
pub fn build(
    spec: &ImageSpec,
    spec_dir: &Path,
    out: &Path,
    progress: &dyn Progress,
) -> Result<BuiltImage, BuildError> {
    let started = Instant::now();
    let spec_digest = spec.digest();
    progress.stage(Stage::VerifyInputs);
    fs::create_dir_all(out).map_err(io("create", out))?;
    let work = out.join(".work");
    if work.exists() {
        fs::remove_dir_all(&work).map_err(io("clear", &work))?;
    }
    let root = work.join("root");
    let debs = work.join("debs");
    fs::create_dir_all(&debs).map_err(io("create", &debs))?;

    let mut local_debs = Vec::new();
    let mut includes = spec.all_packages();
    for d in &spec.local_debs {
        let src = if d.path.is_absolute() {
            d.path.clone()
        } else {
            spec_dir.join(&d.path)
        };
        let actual = file_digest(&src)?;
        if actual.to_string() != d.sha256 {
            return Err(BuildError::LocalDebMismatch {
                path: src,
                expected: d.sha256.clone(),
                actual,
            });
        }
        let name = src
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("local.deb")
            .to_owned();
        let dst = debs.join(&name);
        fs::copy(&src, &dst).map_err(io("copy", &src))?;
        includes.push(dst.display().to_string());
        local_debs.push(LocalDebRecord {
            file: name,
            sha256: actual,
        });
    }

    progress.stage(Stage::Bootstrap);
    let apt_show = work.join("apt-show.txt");
    let mut hooks = Vec::new();
    for s in &spec.services {
        hooks.push(format!("chroot \"$1\" systemctl enable {}", sh_quote(s)));
    }
    // The archive's digest of every installed .deb, read while apt's lists still exist
    // (mmdebstrap removes them after the customize hooks).
    hooks.push(format!(
        "chroot \"$1\" dpkg-query -W -f='${{Package}}=${{Version}}\\n' | chroot \"$1\" xargs apt-cache show --no-all-versions > {} 2>/dev/null || true",
        sh_quote(&apt_show.display().to_string())
    ));
    let mut cmd = Command::new("mmdebstrap");
    cmd.env("SOURCE_DATE_EPOCH", spec.source_date_epoch.to_string())
        .arg("--mode=root")
        .arg(format!("--variant={}", spec.variant))
        .arg("--format=directory")
        .arg("--verbose")
        .arg(format!("--include={}", includes.join(",")));
    for h in &hooks {
        cmd.arg(format!("--customize-hook={h}"));
    }
    cmd.arg(&spec.suite).arg(&root).arg(&spec.mirror);
    run_streamed("mmdebstrap", cmd, progress)?;

    progress.stage(Stage::Prepare);
    prepare_tree(spec, &root)?;
    let left_out = leave_out_generated(spec, &root)?;

    progress.stage(Stage::ExtractKernel);
    let (kernel_src, initrd_src) = find_kernel(&root)?;
    let kernel_dst = out.join(KERNEL_FILE);
    let initrd_dst = out.join(INITRD_FILE);
    fs::copy(&kernel_src, &kernel_dst).map_err(io("copy", &kernel_src))?;
    fs::copy(&initrd_src, &initrd_dst).map_err(io("copy", &initrd_src))?;
    let packages = read_packages(&root, &apt_show)?;
    let guest_agent = guest_agent_identity(&root, &packages)?;
    clamp_mtimes(&root, spec.source_date_epoch as i64)?;

    progress.stage(Stage::MakeRootfs);
    let uuid = uuid_from(&spec_digest);
    let rootfs = out.join(ROOTFS_FILE);
    let _ = fs::remove_file(&rootfs);
    let mut mkfs = Command::new("mkfs.ext4");
    mkfs.env("E2FSPROGS_FAKE_TIME", spec.source_date_epoch.to_string())
        .args([
            "-q",
            "-F",
            "-t",
            "ext4",
            "-b",
            "4096",
            "-L",
            "reach-root",
            "-U",
            &uuid,
        ])
        .arg("-E")
        .arg(format!("hash_seed={uuid},root_owner=0:0"))
        .arg("-d")
        .arg(&root)
        .arg(&rootfs)
        .arg(format!("{}M", spec.rootfs_mib));
    run_streamed("mkfs.ext4", mkfs, progress)?;
    clamp_inode_ctimes(&rootfs, spec.source_date_epoch, progress)?;

    progress.stage(Stage::Digest);
    let artifact = |file: &str| -> Result<Artifact, BuildError> {
        let p = out.join(file);
        let bytes = fs::metadata(&p).map_err(io("stat", &p))?.len();
        Ok(Artifact {
            file: file.to_owned(),
            sha256: file_digest(&p)?,
            bytes,
        })
    };
    let manifest = ImageManifest {
        format: MANIFEST_FORMAT.to_owned(),
        spec_digest,
        builder_revision: BUILDER_REVISION.to_owned(),
        suite: spec.suite.clone(),
        mirror: spec.mirror.clone(),
        source_date_epoch: spec.source_date_epoch,
        kernel: artifact(KERNEL_FILE)?,
        initrd: artifact(INITRD_FILE)?,
        rootfs: artifact(ROOTFS_FILE)?,
        kernel_cmdline: KERNEL_CMDLINE.to_owned(),
        rootfs_uuid: uuid,
        packages,
        local_debs,
        guest_agent,
        nondeterminism: nondeterminism_notes(spec),
        unpinned_inputs: unpinned_inputs(spec),
        reproducibility_notes: reproducibility_notes(&left_out),
    };
    let digest = manifest.digest();
    let mpath = out.join(MANIFEST_FILE);
    fs::write(&mpath, manifest.canonical_json()).map_err(io("write", &mpath))?;
    let dpath = out.join(DIGEST_FILE);
    fs::write(&dpath, format!("{digest}\n")).map_err(io("write", &dpath))?;
    // The base image is never written by an instance (each one gets an overlay); keep it
    // read-only so an accidental write fails loudly.
    for f in [
        KERNEL_FILE,
        INITRD_FILE,
        ROOTFS_FILE,
        MANIFEST_FILE,
        DIGEST_FILE,
    ] {
        let p = out.join(f);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).map_err(io("chmod", &p))?;
    }
    fs::remove_dir_all(&work).map_err(io("clean", &work))?;
    progress.stage(Stage::Done);
    Ok(BuiltImage {
        dir: out.to_owned(),
        manifest,
        digest,
        elapsed: started.elapsed(),
    })
}

/// Known byte differences between two builds of one spec from one package set on one host:
/// none since `builder-7` (two builds compared byte for byte by the lifecycle bench with
/// `REACH_VM_BENCH_FRESH_BUILD=1`); what used to differ is regenerated at first boot
/// instead (see [`FIRST_BOOT_UNIT`]).
fn nondeterminism_notes(_spec: &ImageSpec) -> Vec<String> {
    Vec::new()
}

/// Inputs the spec leaves unpinned.
fn unpinned_inputs(spec: &ImageSpec) -> Vec<String> {
    if spec.mirror.contains("snapshot.debian.org") {
        return Vec::new();
    }
    vec![format!(
        "package set: mirror {} is not a snapshot.debian.org URL, so the same spec built after an archive update installs newer versions",
        spec.mirror
    )]
}

/// What the builder does so that builds agree, and what still depends on the build host.
fn reproducibility_notes(removed: &[&str]) -> Vec<String> {
    let mut v = vec![
        "rootfs inode order: mkfs.ext4 -d allocates inodes in the build directory's readdir order, which depends on the host filesystem; builds on one host agree".to_owned(),
        "rootfs ctimes and atimes: mkfs.ext4 -d copies each file's ctime and atime; the builder resets both to source_date_epoch on every used inode with debugfs afterwards".to_owned(),
    ];
    for r in removed {
        v.push(format!(
            "{r}: generated from randomness by a maintainer script; left out of the image and generated at first boot by {FIRST_BOOT_UNIT}"
        ));
    }
    v
}

/// The unit that regenerates, at first boot, what the builder leaves out of the image because
/// a maintainer script generated it from randomness (ssl-cert's snakeoil key pair; the
/// aliases database, a Berkeley DB hash whose page bytes differ between runs). It is ordered
/// before the spec's `first_boot_before` units (by default its `services`).
pub const FIRST_BOOT_UNIT: &str = "reach-first-boot.service";

/// One left-out file and the command that makes it again in the guest.
struct Regenerated {
    /// Present in the tree when the package that generates it is installed.
    marker: &'static str,
    /// Removed from the tree (relative to the root).
    remove: &'static [&'static str],
    /// Symlinks in this directory that point at one of the removed files are removed too.
    link_dir: Option<&'static str>,
    /// Runs in the guest when `marker` is absent.
    command: &'static str,
}

const REGENERATED: &[Regenerated] = &[
    Regenerated {
        marker: "etc/ssl/private/ssl-cert-snakeoil.key",
        remove: &[
            "etc/ssl/private/ssl-cert-snakeoil.key",
            "etc/ssl/certs/ssl-cert-snakeoil.pem",
        ],
        // The subject-hash link names the build host in its hash.
        link_dir: Some("etc/ssl/certs"),
        command: "/usr/sbin/make-ssl-cert generate-default-snakeoil",
    },
    Regenerated {
        marker: "etc/aliases.db",
        remove: &["etc/aliases.db"],
        link_dir: None,
        command: "/usr/bin/newaliases",
    },
];

/// Removes what maintainer scripts generated from randomness and installs the first-boot
/// unit that regenerates it; returns the removed markers.
fn leave_out_generated(spec: &ImageSpec, root: &Path) -> Result<Vec<&'static str>, BuildError> {
    let mut removed = Vec::new();
    let mut exec = String::new();
    for r in REGENERATED {
        if fs::symlink_metadata(root.join(r.marker)).is_err() {
            continue;
        }
        if let Some(dir) = r.link_dir {
            let d = root.join(dir);
            for e in fs::read_dir(&d).map_err(io("read", &d))? {
                let p = e.map_err(io("read", &d))?.path();
                if let Ok(target) = fs::read_link(&p)
                    && r.remove
                        .iter()
                        .any(|rm| Path::new(rm).file_name() == target.file_name())
                {
                    fs::remove_file(&p).map_err(io("remove", &p))?;
                }
            }
        }
        for rm in r.remove {
            let p = root.join(rm);
            if fs::symlink_metadata(&p).is_ok() {
                fs::remove_file(&p).map_err(io("remove", &p))?;
            }
        }
        exec.push_str(&format!(
            "ExecStart=/bin/sh -c 'test -e /{} || exec {}'\n",
            r.marker, r.command
        ));
        removed.push(r.marker);
    }
    if removed.is_empty() {
        return Ok(removed);
    }
    let before = if spec.first_boot_before.is_empty() {
        spec.services
            .iter()
            .map(|s| format!("{s}.service"))
            .collect::<Vec<_>>()
    } else {
        spec.first_boot_before.clone()
    };
    let before = match before.is_empty() {
        true => String::new(),
        false => format!("Before={}\n", before.join(" ")),
    };
    let unit = format!(
        "[Unit]\nDescription=Regenerate what the reproducible image leaves out\n{before}\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{exec}\n[Install]\nWantedBy=multi-user.target\n"
    );
    let system = root.join("etc/systemd/system");
    let path = system.join(FIRST_BOOT_UNIT);
    fs::write(&path, unit).map_err(io("write", &path))?;
    // Ordered only before the services that use what it makes (a snakeoil key takes about
    // 20 s under TCG): before sysinit.target it held up the guest agent by as much.
    let wants = system.join("multi-user.target.wants");
    fs::create_dir_all(&wants).map_err(io("create", &wants))?;
    let link = wants.join(FIRST_BOOT_UNIT);
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{FIRST_BOOT_UNIT}"), &link)
        .map_err(io("enable", &link))?;
    Ok(removed)
}

/// Places the spec's files and the guest's fixed configuration; removes volatile files.
fn prepare_tree(spec: &ImageSpec, root: &Path) -> Result<(), BuildError> {
    let write = |rel: &str, content: &str| -> Result<(), BuildError> {
        let p = root.join(rel);
        fs::write(&p, content).map_err(io("write", &p))
    };
    write("etc/hostname", &format!("{GUEST_HOSTNAME}\n"))?;
    write(
        "etc/hosts",
        &format!(
            "127.0.0.1 localhost\n127.0.1.1 {GUEST_HOSTNAME}\n::1 localhost ip6-localhost ip6-loopback\n"
        ),
    )?;
    write("etc/fstab", "/dev/vda / ext4 rw,relatime 0 1\n")?;
    // Empty: systemd generates the identity at first boot, so no two instances share one.
    write("etc/machine-id", "")?;
    write("etc/resolv.conf", "")?;
    let system = root.join("etc/systemd/system");
    for unit in MASKED_UNITS {
        let link = system.join(unit);
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/null", &link).map_err(io("mask", &link))?;
    }
    for rel in VOLATILE {
        let p = root.join(rel);
        if p.exists() {
            fs::remove_file(&p).map_err(io("remove", &p))?;
        }
    }
    for f in &spec.files {
        let rel = f.path.trim_start_matches('/');
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(io("create", parent))?;
        }
        // Refuse to follow a symlink the packages placed at the target or a parent.
        if fs::symlink_metadata(&p)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
        {
            return Err(BuildError::Tree(format!(
                "{} is a symlink in the tree",
                f.path
            )));
        }
        fs::write(&p, &f.content).map_err(io("write", &p))?;
        let mode = parse_mode(&f.mode).expect("validated");
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(io("chmod", &p))?;
        nix::unistd::chown(&p, Some(f.uid.into()), Some(f.gid.into())).map_err(|e| {
            BuildError::Io {
                what: "chown",
                path: p.clone(),
                source: e.into(),
            }
        })?;
    }
    Ok(())
}

/// The one kernel and initrd under /boot.
fn find_kernel(root: &Path) -> Result<(PathBuf, PathBuf), BuildError> {
    let boot = root.join("boot");
    let mut kernels = Vec::new();
    for e in fs::read_dir(&boot).map_err(io("read", &boot))? {
        let name = e
            .map_err(io("read", &boot))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(v) = name.strip_prefix("vmlinuz-") {
            kernels.push(v.to_owned());
        }
    }
    kernels.sort();
    let [version] = kernels.as_slice() else {
        return Err(BuildError::Tree(format!(
            "expected one kernel in /boot, found {kernels:?}"
        )));
    };
    let initrd = boot.join(format!("initrd.img-{version}"));
    if !initrd.exists() {
        return Err(BuildError::Tree(format!("no initrd for kernel {version}")));
    }
    // Backups update-initramfs leaves behind are build debris.
    for suffix in [".dpkg-bak", ".new", ".old-dkms"] {
        let _ = fs::remove_file(boot.join(format!("initrd.img-{version}{suffix}")));
    }
    Ok((boot.join(format!("vmlinuz-{version}")), initrd))
}

/// Every installed package from the tree's dpkg database, with apt's .deb digest.
fn read_packages(root: &Path, apt_show: &Path) -> Result<Vec<Package>, BuildError> {
    let out = Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args([
            "-W",
            "-f=${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BuildError::Tool {
            tool: "dpkg-query",
            status: "spawn".into(),
            tail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool: "dpkg-query",
            status: out.status.to_string(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let shas: BTreeMap<(String, String), String> =
        parse_apt_show(&fs::read_to_string(apt_show).unwrap_or_default());
    let mut pkgs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, version, arch, status] = f.as_slice() else {
            continue;
        };
        if !status.starts_with("ii") {
            continue;
        }
        pkgs.push(Package {
            name: (*name).to_owned(),
            version: (*version).to_owned(),
            architecture: (*arch).to_owned(),
            deb_sha256: shas
                .get(&((*name).to_owned(), (*version).to_owned()))
                .cloned(),
        });
    }
    pkgs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pkgs)
}

fn guest_agent_identity(root: &Path, packages: &[Package]) -> Result<GuestAgent, BuildError> {
    let pkg = packages
        .iter()
        .find(|p| p.name == "qemu-guest-agent")
        .ok_or_else(|| BuildError::Tree("qemu-guest-agent is not installed".into()))?;
    let binary = "/usr/sbin/qemu-ga";
    Ok(GuestAgent {
        package: pkg.name.clone(),
        version: pkg.version.clone(),
        binary: binary.to_owned(),
        binary_sha256: file_digest(&root.join(binary.trim_start_matches('/')))?,
        channel: GUEST_AGENT_CHANNEL.to_owned(),
    })
}

/// `mkfs.ext4 -d` copies each source file's ctime, which is the moment the bootstrap wrote it
/// and cannot be set from userspace, and its atime, which mkfs's own read just moved to now
/// (relatime updates an atime older than a day); so every used inode's ctime and atime are set
/// to `epoch` afterwards with debugfs (`sif <ino> ctime @epoch`), the used inodes read from
/// dumpe2fs's bitmaps.
fn clamp_inode_ctimes(
    rootfs: &Path,
    epoch: u64,
    progress: &dyn Progress,
) -> Result<(), BuildError> {
    let out = std::process::Command::new("dumpe2fs")
        .arg(rootfs)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| BuildError::Tool {
            tool: "dumpe2fs",
            status: "spawn".into(),
            tail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool: "dumpe2fs",
            status: out.status.to_string(),
            tail: String::new(),
        });
    }
    let used = used_inodes(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| BuildError::Tree("dumpe2fs output has no inode bitmaps".into()))?;
    let script: String = used
        .iter()
        .map(|i| format!("sif <{i}> ctime @{epoch}\nsif <{i}> atime @{epoch}\n"))
        .collect();
    let path = rootfs.with_extension("debugfs");
    fs::write(&path, script).map_err(io("write", &path))?;
    let mut cmd = Command::new("debugfs");
    cmd.env("E2FSPROGS_FAKE_TIME", epoch.to_string())
        .arg("-w")
        .arg("-f")
        .arg(&path)
        .arg(rootfs);
    // debugfs echoes every command; only failures matter.
    cmd.stdout(Stdio::null());
    let r = run_streamed("debugfs", cmd, &Quiet);
    let _ = fs::remove_file(&path);
    progress.line(&format!("clamped the ctime of {} inodes", used.len()));
    r
}

/// Used inode numbers from `dumpe2fs` output: every inode of every group minus its free ranges.
fn used_inodes(dump: &str) -> Option<Vec<u64>> {
    let per_group: u64 = dump
        .lines()
        .find_map(|l| l.strip_prefix("Inodes per group:"))?
        .trim()
        .parse()
        .ok()?;
    let mut used = Vec::new();
    let mut group: Option<u64> = None;
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix("Group ") {
            group = rest.split(':').next()?.trim().parse().ok();
        } else if let (Some(g), Some(free), true) = (
            group,
            line.trim_start().strip_prefix("Free inodes:"),
            line.starts_with(' '),
        ) {
            let first = g * per_group + 1;
            let mut free_set = std::collections::BTreeSet::new();
            for r in free.split(',').map(str::trim).filter(|r| !r.is_empty()) {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
                free_set.extend(a..=b);
            }
            used.extend((first..first + per_group).filter(|i| !free_set.contains(i)));
            group = None;
        }
    }
    (!used.is_empty()).then_some(used)
}

/// Sets every mtime later than `epoch` to `epoch` (symlinks included, not followed).
fn clamp_mtimes(root: &Path, epoch: i64) -> Result<(), BuildError> {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let mut stack = vec![root.to_owned()];
    let ts = TimeSpec::new(epoch, 0);
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).map_err(io("read", &dir))? {
            let e = e.map_err(io("read", &dir))?;
            let p = e.path();
            let m = fs::symlink_metadata(&p).map_err(io("stat", &p))?;
            if m.is_dir() {
                stack.push(p.clone());
            }
            if m.mtime() > epoch || m.atime() > epoch {
                utimensat(
                    nix::fcntl::AT_FDCWD,
                    &p,
                    &ts,
                    &ts,
                    UtimensatFlags::NoFollowSymlink,
                )
                .map_err(|e| BuildError::Io {
                    what: "utimensat",
                    path: p.clone(),
                    source: e.into(),
                })?;
            }
        }
    }
    utimensat(
        nix::fcntl::AT_FDCWD,
        root,
        &ts,
        &ts,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(|e| BuildError::Io {
        what: "utimensat",
        path: root.to_owned(),
        source: e.into(),
    })?;
    Ok(())
}

/// Reuses `cache_root/<spec digest hex>` when its manifest names this spec and builder and
/// its artifacts verify; builds it otherwise. Tests and benches share one build this way.
pub fn cached_build(
    spec: &ImageSpec,
    spec_dir: &Path,
    cache_root: &Path,
    progress: &dyn Progress,
) -> Result<(PathBuf, ImageManifest, Sha256Digest), BuildError> {
    let dir = crate::cache::image_dir(cache_root, &spec.digest());
    if let Ok(m) = ImageManifest::read(&dir)
        && m.spec_digest == spec.digest()
        && m.builder_revision == BUILDER_REVISION
        && m.verify_artifacts(&dir).is_ok()
    {
        let d = m.digest();
        return Ok((dir, m, d));
    }
    // A stale or half-written build.
    crate::cache::clear(&dir).map_err(io("clear", &dir))?;
    let built = build(spec, spec_dir, &dir, progress)?;
    Ok((built.dir, built.manifest, built.digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_fixed_per_digest() {
        let d = Sha256Digest::of(b"x");
        assert_eq!(uuid_from(&d), uuid_from(&d));
        assert_eq!(uuid_from(&d).len(), 36);
        assert_ne!(uuid_from(&d), uuid_from(&Sha256Digest::of(b"y")));
    }

    #[test]
    fn used_inodes_from_dumpe2fs() {
        let dump = "Inodes per group:         4\nGroup 0: (Blocks 0-9)\n  Free inodes: 3-4\nGroup 1: (Blocks 10-19) [INODE_UNINIT]\n  Free inodes: 5-8\nGroup 2: (Blocks 20-29)\n  Free inodes: 10, 12\n";
        assert_eq!(used_inodes(dump).unwrap(), [1, 2, 9, 11]);
        assert_eq!(used_inodes("nothing"), None);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }
}
