//! Rootless Podman as the test user (scripts/podman-setup.sh creates `reach-ci`), driven from a
//! root test process with `runuser`: image builds, Scribe's materialization for a temporary
//! state directory, and roles started with exactly the `podman run` line the real Quadlet
//! generator writes for their units. Shared by tests/containers.rs and benches/scribe.rs.
//!
//! systemd is not PID 1 here, so what only systemd provides is substituted, and nothing else:
//! `%t` (the runtime directory) and `%N` (the unit name) are expanded, `NOTIFY_SOCKET` is a
//! datagram socket this harness reads (readiness is the role's own `READY=1`, relayed by
//! `--sdnotify=container`), and `--cgroups=split` is dropped (it needs the cgroup systemd
//! delegates to the service). Podman 4.3 has no `--ignore` on `volume create` and `network
//! create` (Quadlet 5.4 assumes a newer Podman), so volumes and networks are removed first
//! and created without it.
#![allow(clippy::disallowed_methods)] // REACH_REQUIRE_PODMAN and CARGO_TARGET_DIR: test knobs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_scribe::image_build::{Podman, build_context, write_context};
use reach_scribe::images::{DigestSource, PinnedImage, pin_images};
use reach_scribe::quadlet::{QuadletInput, derive, write_out};

/// The unprivileged user scripts/podman-setup.sh creates.
pub const USER: &str = "reach-ci";
/// How long a role may take to report ready: the units' `TimeoutStartSec=`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// The probe image (tests only; never a role).
pub const PROBE_IMAGE: &str = "localhost/reach/port-probe";

/// The test user's facts, if rootless Podman can run here.
#[derive(Debug, Clone)]
pub struct Rootless {
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    pub runtime_dir: PathBuf,
}

/// Finds rootless Podman, or says loudly why not. With `REACH_REQUIRE_PODMAN` set, absence
/// is a failure instead.
pub fn rootless_or_skip(test: &str) -> Option<Rootless> {
    let why = detect();
    match why {
        Ok(r) => Some(r),
        Err(why) => {
            if std::env::var_os("REACH_REQUIRE_PODMAN").is_some() {
                panic!("{test}: rootless Podman is required (REACH_REQUIRE_PODMAN) but {why}");
            }
            // Straight to the stderr handle: the test harness captures `eprintln!` of a
            // passing test, and a skip must be seen.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n!!!!!!!! SKIPPED {test}: {why}.\n!!!!!!!! Run scripts/podman-setup.sh as root \
                 (and set REACH_REQUIRE_PODMAN=1 to make this a failure).\n"
            );
            None
        }
    }
}

fn detect() -> Result<Rootless, String> {
    let ok = |c: &mut Command| c.output().map(|o| o.status.success()).unwrap_or(false);
    if !ok(Command::new("podman").arg("--version")) {
        return Err("podman is not installed".into());
    }
    if !ok(Command::new("id").arg("-u")) || !nix_is_root() {
        return Err("the test must run as root to act as the test user".into());
    }
    let id = |flag: &str| -> Result<u32, String> {
        let o = Command::new("id")
            .args([flag, USER])
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!("user {USER} does not exist"));
        }
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .map_err(|e| format!("id {flag} {USER}: {e}"))
    };
    let uid = id("-u")?;
    let gid = id("-g")?;
    let home = PathBuf::from(format!("/home/{USER}"));
    let runtime_dir = PathBuf::from(format!("/run/user/{uid}"));
    if !runtime_dir.is_dir() {
        return Err(format!("{} is missing", runtime_dir.display()));
    }
    Ok(Rootless {
        uid,
        gid,
        home,
        runtime_dir,
    })
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Rootless {
    /// The words that run a program as the test user with its Podman environment.
    pub fn prefix(&self) -> Vec<OsString> {
        vec![
            "runuser".into(),
            "-u".into(),
            USER.into(),
            "--".into(),
            "env".into(),
            "-i".into(),
            format!("XDG_RUNTIME_DIR={}", self.runtime_dir.display()).into(),
            format!("HOME={}", self.home.display()).into(),
            "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
        ]
    }
    /// Podman as the test user (for Scribe's image builds).
    pub fn podman(&self) -> Podman {
        let mut argv = self.prefix();
        argv.push("podman".into());
        Podman::with_prefix(argv)
    }
    /// `words` (a program and its arguments) as the test user, with `env` added, from `/`.
    pub fn command(&self, words: &[String], env: &[(&str, String)]) -> Command {
        let mut argv = self.prefix();
        for (k, v) in env {
            argv.push(format!("{k}={v}").into());
        }
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]).args(words).current_dir("/");
        c
    }
    /// `podman ARGS` as the test user; its output.
    pub fn podman_out(&self, args: &[&str]) -> Output {
        let mut words = vec!["podman".to_owned()];
        words.extend(args.iter().map(|s| (*s).to_owned()));
        self.command(&words, &[]).output().expect("podman runs")
    }
    /// Gives `path` (recursively) to the test user.
    pub fn give(&self, path: &Path) {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path)
            .status()
            .expect("chown");
        assert!(status.success(), "chown {}", path.display());
    }
}

/// The directory the role binaries are in: `REACH_BINS` if set, else the debug directory of
/// the target this binary was built into (tests live in `target/debug/deps/`, benchmarks in
/// `target/release/deps/`; scripts/test.sh builds the debug role binaries).
pub fn bins_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REACH_BINS") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("test binary");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("the target directory")
        .join("debug")
}

/// The debug directory of the target (the port probe example is built there by `cargo test`).
fn debug_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("the target directory")
        .join("debug")
}

/// A body materialized for containers: state (identities, placeholder credentials), the units
/// and configs in `out`, the images built, the Podman secrets created.
pub struct Materialized {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub out: PathBuf,
    pub runtime: PathBuf,
    /// Every role's image as `reach scribe images` built and pinned it.
    pub images: BTreeMap<String, PinnedImage>,
    /// Each role's image content in MiB, as `reach scribe images` printed it.
    pub sizes: BTreeMap<String, f64>,
    /// What `reach scribe images` printed.
    pub report: String,
    /// Generated service name (`reach-ward.service`) to its text.
    pub services: BTreeMap<String, String>,
}

/// Builds every role image (and the probe image if `with_probe`), materializes `m` with
/// Scribe, creates the secrets with the generated secrets.sh, and runs the generator on the
/// units.
pub fn materialize(r: &Rootless, m: &Manifest, with_probe: bool) -> Materialized {
    let dir = tempfile::Builder::new()
        .prefix("reach-containers-")
        .tempdir_in("/var/tmp")
        .expect("temp dir");
    let (state, out, work, runtime) = (
        dir.path().join("state"),
        dir.path().join("out"),
        dir.path().join("work"),
        dir.path().join("run"),
    );
    for d in [&work, &runtime] {
        std::fs::create_dir_all(d).unwrap();
    }
    r.give(dir.path());

    let bins = bins_dir();
    for role in &m.roles {
        assert!(
            bins.join(&role.binary).is_file(),
            "{} is missing: build the role binaries first (`cargo build --bins`; scripts/test.sh does)",
            bins.join(&role.binary).display()
        );
    }
    // The operator's path: `reach scribe images` as the user who owns the image store (a
    // rootless build records context files of ids outside its namespace as 65534, so the
    // builder must own its context for the digest to depend on the binaries alone).
    let digests = dir.path().join("digests.toml");
    let o = r
        .command(
            &[
                bins.join("reach").display().to_string(),
                "scribe".into(),
                "images".into(),
                "--bins".into(),
                bins.display().to_string(),
                "--digests-out".into(),
                digests.display().to_string(),
            ],
            &[("TMPDIR", work.display().to_string())],
        )
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "reach scribe images: {report}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let images = pin_images(m, &DigestSource::File(digests)).expect("the built images pin");
    let sizes = parse_sizes(&report);
    if with_probe {
        build_probe(r, &work);
    }

    let layout = StateLayout::new(&state);
    reach_scribe::materialize_identities(
        m,
        &layout,
        reach_scribe::Rotation::IfNeeded,
        SystemTime::now(),
    )
    .expect("identities");
    for (role, file) in reach_scribe::identities::missing_credentials(m, &layout) {
        let d = layout.secret_dir(&role);
        reach_identity::files::ensure_secret_dir(&d).unwrap();
        reach_identity::files::write_secret(&d.join(file), b"placeholder-credential").unwrap();
    }
    // The renewal timer runs the binary that wrote the units, as `reach scribe quadlet` does.
    let renewal = reach_scribe::renewal::Renewal {
        reach: bins.join("reach").canonicalize().unwrap(),
        manifest: None,
    };
    let input = QuadletInput::new(m, images.clone(), layout.clone()).with_renewal(renewal);
    let units = derive(&input).expect("units derive");
    write_out(&units, &out).expect("units written");
    r.give(dir.path());

    // Secrets an earlier run (or an older Scribe, which made Podman secrets of leaves) left in
    // the test user's store: `reach audit --units` reports any `reach.*` secret no unit mounts.
    let listed = r.podman_out(&["secret", "ls", "--format", "{{.Name}}"]);
    for name in String::from_utf8_lossy(&listed.stdout).lines() {
        if name.starts_with("reach.") {
            r.podman_out(&["secret", "rm", name]);
        }
    }
    let secrets = out.join("secrets.sh");
    let o = r
        .command(
            &[
                "sh".into(),
                secrets.display().to_string(),
                state.display().to_string(),
            ],
            &[],
        )
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "secrets.sh: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let services = super::dryrun(&out);
    Materialized {
        dir,
        state,
        out,
        runtime,
        images,
        sizes,
        report,
        services,
    }
}

/// The MiB figure of each `role  image  N.N MiB (k files)` line of `reach scribe images`.
fn parse_sizes(report: &str) -> BTreeMap<String, f64> {
    report
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| *x == "MiB")?;
            Some((
                w.first()?.to_string(),
                w.get(at.checked_sub(1)?)?.parse().ok()?,
            ))
        })
        .filter(|(role, _)| role != "8")
        .collect()
}

fn build_probe(r: &Rootless, work: &Path) {
    let probe = debug_dir().join("examples/port_probe");
    assert!(
        probe.is_file(),
        "{} is missing (cargo test builds the examples)",
        probe.display()
    );
    let ctx = work.join("port-probe");
    write_context("port-probe", &probe, &ctx).expect("probe context");
    r.give(work);
    build_context(&r.podman(), "port-probe", PROBE_IMAGE, &ctx).expect("probe image");
}

impl Materialized {
    /// The `podman run` words of `role`'s generated service, as systemd would run them.
    pub fn run_words(&self, role: &str) -> Vec<String> {
        let svc = &self.services[&format!("reach-{role}.service")];
        super::exec_start(svc)
            .into_iter()
            .filter(|w| w != "--cgroups=split")
            .map(|w| {
                w.replace("%t", &self.runtime.display().to_string())
                    .replace("%N", &format!("reach-{role}"))
            })
            .collect()
    }

    /// The `ExecStart=` words of every volume and network service.
    pub fn create_words(&self) -> Vec<Vec<String>> {
        self.services
            .iter()
            .filter(|(n, _)| n.ends_with("-volume.service") || n.ends_with("-network.service"))
            .map(|(_, svc)| {
                super::exec_start(svc)
                    .into_iter()
                    .filter(|w| w != "--ignore")
                    .collect()
            })
            .collect()
    }
}

/// Removes every container, volume and network a run of the body leaves, and untagged
/// images, as the test user.
pub fn clean(r: &Rootless, m: &Manifest) {
    let mut names: Vec<String> = Vec::new();
    for role in &m.roles {
        names.push(format!("reach-{}", role.name));
        names.push(format!("reach-{}-probe", role.name));
    }
    let mut args = vec!["rm", "-f", "-i", "-t", "0"];
    args.extend(names.iter().map(String::as_str));
    r.podman_out(&args);
    let vols = r.podman_out(&["volume", "ls", "-q", "--filter", "name=reach-"]);
    for v in String::from_utf8_lossy(&vols.stdout).split_whitespace() {
        r.podman_out(&["volume", "rm", "-f", v]);
    }
    for role in &m.roles {
        r.podman_out(&[
            "network",
            "rm",
            "-f",
            &format!("reach-egress-{}", role.name),
        ]);
    }
    // Images a rebuild untagged (each run builds the eight again): vfs keeps whole copies.
    r.podman_out(&["image", "prune", "-f"]);
}

/// Removes the body's containers, volumes and networks when dropped (a failing test included).
pub struct Cleanup<'a> {
    pub rootless: &'a Rootless,
    pub manifest: &'a Manifest,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        clean(self.rootless, self.manifest);
    }
}

/// Creates the volumes and networks, then starts `roles` in order, each with its unit's exact
/// `podman run` line, waiting for its `READY=1`. Returns the time each took to be ready.
pub fn start(r: &Rootless, mat: &Materialized, roles: &[&str]) -> Vec<(String, Duration)> {
    for words in mat.create_words() {
        let o = r.command(&words, &[]).output().unwrap();
        assert!(
            o.status.success(),
            "{words:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    run_ready(r, mat, roles)
}

/// Restarts `role`'s container as systemd restarts its unit: the service's `ExecStop=` line,
/// then its `ExecStart=` line (a new container, which copies the secrets afresh), until ready.
pub fn restart(r: &Rootless, mat: &Materialized, role: &str) {
    let svc = &mat.services[&format!("reach-{role}.service")];
    let stop: Vec<String> = super::exec_line(svc, "ExecStop")
        .into_iter()
        .map(|w| {
            w.replace("%t", &mat.runtime.display().to_string())
                .replace("%N", &format!("reach-{role}"))
        })
        .collect();
    let o = r.command(&stop, &[]).output().unwrap();
    assert!(
        o.status.success(),
        "{stop:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Podman 5's `rm --cidfile` also removes the file, which the next `run --cidfile` refuses
    // to overwrite; this host's Podman 4.3 leaves it (deploy/README: use the Podman release of
    // the Quadlet generator in use).
    let _ = std::fs::remove_file(mat.runtime.join(format!("reach-{role}.cid")));
    run_ready(r, mat, &[role]);
}

/// Runs each role's `ExecStart=` line and waits for its `READY=1`, as `Type=notify` does.
fn run_ready(r: &Rootless, mat: &Materialized, roles: &[&str]) -> Vec<(String, Duration)> {
    let mut ready = Vec::new();
    for role in roles {
        let notify = mat.runtime.join(format!("notify-{role}.sock"));
        let _ = std::fs::remove_file(&notify);
        let sock = UnixDatagram::bind(&notify).expect("notify socket");
        r.give(&notify);
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let started = Instant::now();
        let words = mat.run_words(role);
        let o = r
            .command(&words, &[("NOTIFY_SOCKET", notify.display().to_string())])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{role}: podman run failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut buf = [0u8; 4096];
        let mut said = String::new();
        loop {
            if let Ok(n) = sock.recv(&mut buf) {
                said.push_str(&String::from_utf8_lossy(&buf[..n]));
                said.push('\n');
                if said.lines().any(|l| l == "READY=1") {
                    break;
                }
            }
            if started.elapsed() > READY_TIMEOUT {
                let logs = r.podman_out(&["logs", &format!("reach-{role}")]);
                panic!(
                    "{role}: not ready after {READY_TIMEOUT:?} (notify said {said:?}); logs:\n{}{}",
                    String::from_utf8_lossy(&logs.stdout),
                    String::from_utf8_lossy(&logs.stderr)
                );
            }
        }
        ready.push(((*role).to_owned(), started.elapsed()));
    }
    ready
}

/// Runs the port probe in a container built from `role`'s unit line: the same user, user
/// namespace, umask, network, mounts and secrets, with the probe image and `steps` in place of
/// the role's image and command. Mounts lose `:U`, so the probe never takes a volume away
/// from the running role. Returns the probe's result lines.
pub fn probe(r: &Rootless, mat: &Materialized, role: &str, steps: &[&str]) -> Vec<String> {
    let words = mat.run_words(role);
    let image_at = words
        .iter()
        .position(|w| w.contains("@sha256:"))
        .expect("image by digest");
    let mut run: Vec<String> = Vec::new();
    let mut i = 0;
    while i < image_at {
        let w = &words[i];
        match w.as_str() {
            "--sdnotify=container" | "-d" | "--replace" => {}
            "--name" => {
                run.push("--name".into());
                run.push(format!("reach-{role}-probe"));
                i += 1;
            }
            _ if w.starts_with("--cidfile=") => {}
            _ if w.ends_with(":U") => run.push(w.trim_end_matches(":U").to_owned()),
            _ => run.push(w.clone()),
        }
        i += 1;
    }
    run.push(PROBE_IMAGE.into());
    run.push(format!("/reach/secrets/{role}"));
    run.push("reach.local".into());
    run.extend(steps.iter().map(|s| (*s).to_owned()));
    let o = r.command(&run, &[]).output().unwrap();
    assert!(
        o.status.success(),
        "probe as {role}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
