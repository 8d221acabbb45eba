//! The prepared-system layer against real QEMU: instances restored from the captured state
//! answer at once, start from the identical pinned state, keep nothing between instances,
//! and a substituted layer or a different shape is refused before anything is created; a
//! spec the guest cannot apply pins nothing and leaves no guest behind; a restore the broker
//! cannot make its own is destroyed, never handed out.

mod common;

use std::path::Path;
use std::time::Duration;

use reach_vm::journal::InstanceState;
use reach_vm::prepared::{PreparedManifest, STATE_FILE};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_instances_are_ready_clocked_and_disposable() {
    let (pdir, pm, _) = common::prepared();
    assert_eq!(pm.system_state, "running");
    assert_eq!(pm.base_image, common::image().2);
    assert_eq!(PreparedManifest::read(pdir).unwrap(), *pm);
    pm.verify_artifacts(pdir).unwrap();

    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, _) = common::start_with_prepared(run.path()).await;

    let a = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap();
    assert!(a.restored);
    assert_eq!(a.state, InstanceState::Ready);
    eprintln!("restored instance ready after {:?}", a.ready_after);

    // The service was active at the capture, so it is active at once: no boot to wait for.
    let s = broker
        .exec(&a.id, "service-status", &[common::service()])
        .await
        .unwrap();
    assert_eq!(text(&s.stdout).trim(), "active");
    // The prepared system's file, with the digest its manifest pinned.
    let placed = broker
        .read_file(&a.id, &common::prepared_file())
        .await
        .unwrap();
    assert_eq!(placed.sha256, pm.files[0].sha256);
    // The clock was set at restore (the capture is older than this test).
    let date = broker.exec(&a.id, "date-epoch", &[]).await.unwrap();
    let guest_now: i64 = text(&date.stdout).trim().parse().unwrap();
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (guest_now - host_now).abs() <= 5,
        "guest {guest_now}, host {host_now}"
    );
    // Still contained after a restore.
    let ifaces = broker.exec(&a.id, "net-interfaces", &[]).await.unwrap();
    assert_eq!(
        text(&ifaces.stdout).split_whitespace().collect::<Vec<_>>(),
        ["lo"]
    );

    // What one instance writes never reaches the next.
    let w = broker
        .write_file(&a.id, &common::prepared_file(), b"changed\n", 0o600, 0, 0)
        .await
        .unwrap();
    assert_ne!(w.sha256, pm.files[0].sha256);
    let c = broker.destroy(&a.id).await.unwrap();
    assert!(
        c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );

    let b = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap();
    let again = broker
        .read_file(&b.id, &common::prepared_file())
        .await
        .unwrap();
    assert_eq!(again.sha256, pm.files[0].sha256);
    // Two instances of one capture get their own random streams after restore: the broker
    // mixed host randomness into each pool and reseeded the CRNG (without that, both read the
    // same "random" UUID here).
    let r1 = broker
        .read_file(&b.id, "/proc/sys/kernel/random/uuid")
        .await
        .unwrap();
    let b2 = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap();
    let r2 = broker
        .read_file(&b2.id, "/proc/sys/kernel/random/uuid")
        .await
        .unwrap();
    assert_ne!(r1.bytes, r2.bytes);
    // And their own /etc/machine-id, in systemd's format (the capture's was the same for all).
    let mut ids = Vec::new();
    for id in [&b.id, &b2.id] {
        let m = broker.read_file(id, "/etc/machine-id").await.unwrap();
        let t = text(&m.bytes);
        assert!(
            t.len() == 33
                && t.ends_with('\n')
                && t[..32]
                    .bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{t:?}"
        );
        ids.push(t);
    }
    assert_ne!(ids[0], ids[1]);
    for id in [&b.id, &b2.id] {
        broker.destroy(id).await.unwrap();
    }
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(common::leftovers(run.path()).is_empty());
    assert_eq!(
        broker.journal().history(&b.id).await.unwrap(),
        [
            InstanceState::Requested,
            InstanceState::Allocated,
            InstanceState::Booted,
            InstanceState::Ready,
            InstanceState::Destroying,
            InstanceState::Destroyed
        ]
    );
}

/// Copies the prepared layer (sparse) so a test can tamper with it.
fn copy_dir(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp")
        .args(["-r", "--sparse=always"])
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_substituted_layer_an_unpinned_base_another_qemu_or_shape_is_refused_before_boot() {
    let (pdir, _, _) = common::prepared();
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());

    // Another shape than the capture's.
    let (broker, _) = common::start_with_prepared(run.path()).await;
    let mut req = common::prepared_request(false);
    req.memory_mib = 512;
    assert_eq!(
        broker.create(&req).await.unwrap_err().code(),
        "environment/shape-mismatch"
    );
    drop(broker);

    // The base is not pinned.
    let mut cfg = common::config_with_prepared(run.path());
    cfg.images.clear();
    let (nobase, _) =
        reach_vm::instance::Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
    let err = nobase
        .create(&common::prepared_request(false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "environment/image-mismatch", "{err}");
    drop(nobase);

    // One byte of the captured state substituted.
    let copy = tempfile::tempdir().unwrap();
    let layer = copy.path().join("prepared");
    copy_dir(pdir, &layer);
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(layer.join(STATE_FILE))
            .unwrap();
        f.seek(SeekFrom::Start(1 << 20)).unwrap();
        f.write_all(b"X").unwrap();
    }
    let mut cfg = common::config_with_prepared(run.path());
    cfg.prepared[0].dir = layer;
    let (tampered, _) =
        reach_vm::instance::Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
    let err = tampered
        .create(&common::prepared_request(false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "environment/image-mismatch", "{err}");
    assert!(tampered.journal().live().await.unwrap().is_empty());

    drop(tampered);

    // The manifest substituted: another QEMU named, the pinned digest unchanged.
    let copy2 = tempfile::tempdir().unwrap();
    let layer2 = copy2.path().join("prepared");
    copy_dir(pdir, &layer2);
    let mut m = PreparedManifest::read(&layer2).unwrap();
    m.qemu_version = "QEMU emulator version 0.0.1".into();
    std::fs::write(layer2.join("prepared.json"), m.canonical_json()).unwrap();
    let mut cfg = common::config_with_prepared(run.path());
    cfg.prepared[0].dir = layer2.clone();
    let (b, _) = reach_vm::instance::Broker::start(
        cfg.clone(),
        std::sync::Arc::new(reach_clock::SystemClock),
    )
    .await
    .unwrap();
    let err = b
        .create(&common::prepared_request(false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "environment/image-mismatch", "{err}");
    assert!(
        err.to_string().contains("prepared manifest digest"),
        "{err}"
    );
    drop(b);
    // Pinned as it is, it is still refused: this host's QEMU did not capture it.
    cfg.prepared[0].digest = m.digest();
    let mut req = common::prepared_request(false);
    req.image = m.digest();
    let (b, _) =
        reach_vm::instance::Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
    let err = b.create(&req).await.unwrap_err();
    assert_eq!(err.code(), "environment/image-mismatch", "{err}");
    assert!(err.to_string().contains("captured by"), "{err}");
    assert!(b.journal().live().await.unwrap().is_empty());

    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(common::leftovers(run.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_the_guest_cannot_apply_pins_nothing_and_leaves_no_guest() {
    use reach_vm::agent::AgentError;
    use reach_vm::prepared::{self, PrepareError, PrepareInputs};
    let (base, _, _) = common::image();
    let mut inputs = PrepareInputs::new(base, common::accel());
    let out = tempfile::tempdir().unwrap();

    // A unit that fails once started: it is settled on, and the preparation ends at once with
    // its status instead of waiting out the settle timeout for a unit that gave up. (The
    // image's service restarts after it, so it has failed by the time it is looked at.)
    let mut spec = common::prepared_spec();
    spec.files.push(reach_vm::spec::FileSpec {
        path: "/etc/systemd/system/reach-fails.service".into(),
        content: "[Service]\nExecStart=/bin/false\n".into(),
        mode: "0644".into(),
        uid: 0,
        gid: 0,
    });
    spec.restart = vec!["reach-fails".into(), common::service()];
    spec.settle = vec!["reach-fails".into()];
    let failing = out.path().join("failing");
    let err = prepared::prepare(&spec, &inputs, &failing, &reach_vm::image::Quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PrepareError::Guest(m) if m.starts_with("reach-fails failed")),
        "{err}"
    );

    // The service restarts; the second unit does not exist, so the guest refuses the spec.
    let mut spec = common::prepared_spec();
    spec.restart = vec![common::service(), "reach-no-such-unit".into()];
    let dir = out.path().join("prepared");
    let err = prepared::prepare(&spec, &inputs, &dir, &reach_vm::image::Quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PrepareError::Agent(AgentError::Guest(m)) if m.contains("reach-no-such-unit")),
        "{err}"
    );
    // A unit that never becomes active nor fails: it exits at once and systemd waits an hour
    // to start it again, so it sits in `activating (auto-restart)`. The settle timeout ends the
    // preparation, naming the unit.
    let mut spec = common::prepared_spec();
    spec.files.push(reach_vm::spec::FileSpec {
        path: "/etc/systemd/system/reach-never-up.service".into(),
        content: "[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=1h\n".into(),
        mode: "0644".into(),
        uid: 0,
        gid: 0,
    });
    spec.restart = vec!["reach-never-up".into()];
    spec.settle = vec!["reach-never-up".into()];
    inputs.settle_timeout = Duration::from_secs(10);
    let stuck = out.path().join("stuck");
    let err = prepared::prepare(&spec, &inputs, &stuck, &reach_vm::image::Quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PrepareError::Guest(m) if m == "reach-never-up is not active after 10s"),
        "{err}"
    );

    nothing_pinned(&[&failing, &dir, &stuck]);
}

/// A capture that fails (the state stream unwritable, QEMU killed while writing it) or a
/// guest that is not ready in time pins nothing and leaves no guest. Apart from the spec
/// failures above, so the two run side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_that_fails_or_a_slow_guest_pins_nothing_and_leaves_no_guest() {
    use reach_vm::prepared::{self, PrepareError, PrepareInputs};
    let (base, _, _) = common::image();
    let mut inputs = PrepareInputs::new(base, common::accel());
    let out = tempfile::tempdir().unwrap();

    // The guest is ready and the spec applied, but the state stream cannot be written: a QEMU
    // wrapper makes its path a directory just before the real QEMU starts. The migration
    // fails, and the preparation ends with a capture error carrying QEMU's own report.
    let unwritable = out.path().join("unwritable");
    let wrapper = out.path().join("qemu-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nmkdir -p '{}'\nexec qemu-system-x86_64 \"$@\"\n",
            unwritable.join(prepared::STATE_FILE).display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The default settle timeout: the service restarts under TCG in more than the 10 s above.
    let mut wrapped = PrepareInputs::new(base, common::accel());
    wrapped.qemu = &wrapper;
    let err = prepared::prepare(
        &common::prepared_spec(),
        &wrapped,
        &unwritable,
        &reach_vm::image::Quiet,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, PrepareError::Capture(m) if m.starts_with("migration") && m.contains(r#""status":"failed""#)),
        "{err}"
    );

    // QEMU dies while it writes the state stream: a wrapper (QEMU itself for `--version`) makes
    // the stream's path a FIFO, reads its first 64 KiB, then kills QEMU with SIGKILL while the migration waits on the
    // full pipe. The QMP socket goes with it, and the capture error names QEMU's exit.
    let killed = out.path().join("killed");
    let state = killed.join(prepared::STATE_FILE);
    let wrapper = out.path().join("qemu-killed");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && exec qemu-system-x86_64 \"$@\"\nmkfifo '{s}' || exit 1\nqemu-system-x86_64 \"$@\" &\nqemu=$!\n\
             (exec 3<'{s}'; head -c 65536 <&3 >/dev/null; kill -9 $qemu) &\nwatcher=$!\n\
             wait $qemu\nstatus=$?\nkill $watcher 2>/dev/null\nexit $status\n",
            s = state.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    wrapped.qemu = &wrapper;
    let err = prepared::prepare(
        &common::prepared_spec(),
        &wrapped,
        &killed,
        &reach_vm::image::Quiet,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, PrepareError::Capture(m) if m.starts_with("QEMU exited while writing the state stream")),
        "{err}"
    );

    // A capture guest whose agent has not answered when the boot timeout runs out: refused
    // as a boot timeout naming it, and torn down like the others.
    let spec = common::prepared_spec();
    inputs.boot_timeout = Duration::from_millis(200);
    let slow = out.path().join("slow");
    let err = prepared::prepare(&spec, &inputs, &slow, &reach_vm::image::Quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(err, PrepareError::BootTimeout(d) if d == Duration::from_millis(200)),
        "{err}"
    );

    nothing_pinned(&[&unwritable, &killed, &slow]);
}

/// Asserts each failed preparation's directory pins nothing (no manifest, no digest a broker
/// could name) and that no QEMU still runs on its layer.
fn nothing_pinned(dirs: &[&Path]) {
    use reach_vm::prepared::{DISK_FILE, PREPARED_DIGEST_FILE, PREPARED_MANIFEST_FILE};
    for d in dirs {
        for f in [PREPARED_MANIFEST_FILE, PREPARED_DIGEST_FILE] {
            assert!(!d.join(f).exists(), "{f} written for a failed preparation");
        }
        // The capture guest did not outlive the call.
        let disk = d.join(DISK_FILE).display().to_string();
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            assert!(
                !text(&cmdline).contains(&disk),
                "a QEMU still runs on the failed layer: {}",
                p.path().display()
            );
        }
    }
}

/// Preparing refuses a base it cannot verify and fails on a host tool or a QEMU that refuses
/// the base, each with its own variant; none pins anything, none leaves a QEMU, and a refusal
/// before the work starts leaves an earlier layer in `out` as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverifiable_base_or_a_failing_host_tool_pins_nothing() {
    use reach_vm::image::BuildError;
    use reach_vm::manifest::ManifestError;
    use reach_vm::prepared::{
        self, DISK_FILE, PREPARED_DIGEST_FILE, PREPARED_MANIFEST_FILE, PrepareError, PrepareInputs,
    };
    use reach_vm::probe::Accel;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    common::tiny_image(&base);
    let spec = common::prepared_spec();
    let prepare = async |inputs: &PrepareInputs<'_>, out: &Path| {
        prepared::prepare(&spec, inputs, out, &reach_vm::image::Quiet)
            .await
            .unwrap_err()
    };
    // An earlier layer in `out`, which a refusal before any work must not clear.
    let earlier = tmp.path().join("earlier");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join(PREPARED_MANIFEST_FILE), "earlier").unwrap();
    let untouched = |what: &str| {
        assert_eq!(
            std::fs::read(earlier.join(PREPARED_MANIFEST_FILE)).unwrap(),
            b"earlier",
            "{what} cleared the earlier layer"
        );
        assert_eq!(std::fs::read_dir(&earlier).unwrap().count(), 1, "{what}");
    };

    // No manifest at all.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = prepare(&PrepareInputs::new(&empty, Accel::Tcg), &earlier).await;
    assert!(
        matches!(&err, PrepareError::Manifest(ManifestError::Io { path, .. }) if path.starts_with(&empty)),
        "{err:?}"
    );
    untouched("a base without a manifest");

    // A base whose rootfs is not the one its manifest names.
    let substituted = tmp.path().join("substituted");
    common::tiny_image(&substituted);
    std::fs::write(substituted.join("rootfs.raw"), "another rootfs\n").unwrap();
    let err = prepare(&PrepareInputs::new(&substituted, Accel::Tcg), &earlier).await;
    assert!(
        matches!(&err, PrepareError::Manifest(ManifestError::ArtifactMismatch { file, .. }) if file == "rootfs.raw"),
        "{err:?}"
    );
    untouched("a substituted base");

    // A QEMU that does not run.
    let mut inputs = PrepareInputs::new(&base, Accel::Tcg);
    inputs.qemu = Path::new("/nonexistent/qemu-system-x86_64");
    let err = prepare(&inputs, &earlier).await;
    assert!(
        matches!(&err, PrepareError::Build(BuildError::Tool { tool: "qemu", status, .. }) if status == "version"),
        "{err:?}"
    );
    untouched("a missing QEMU");

    // A qemu-img that fails making the layer.
    let mut inputs = PrepareInputs::new(&base, Accel::Tcg);
    inputs.qemu_img = Path::new("/bin/false");
    let failed_img = tmp.path().join("failed-img");
    let err = prepare(&inputs, &failed_img).await;
    assert!(
        matches!(&err, PrepareError::Build(BuildError::Tool { tool: "qemu-img", status, .. }) if status == "exit status: 1"),
        "{err:?}"
    );

    // The real QEMU refuses the base's kernel and exits at once: a capture failure naming its
    // exit, not a boot timeout.
    let refused = tmp.path().join("refused");
    let started = std::time::Instant::now();
    let err = prepare(&PrepareInputs::new(&base, Accel::Tcg), &refused).await;
    assert!(
        matches!(&err, PrepareError::Capture(m) if m.starts_with("QEMU exited before its guest agent answered")),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");

    for d in [&failed_img, &refused] {
        for f in [PREPARED_MANIFEST_FILE, PREPARED_DIGEST_FILE] {
            assert!(!d.join(f).exists(), "{f} written for a failed preparation");
        }
    }
    let disk = refused.join(DISK_FILE).display().to_string();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
        assert!(
            !text(&cmdline).contains(&disk),
            "a QEMU still runs on the refused layer: {}",
            p.path().display()
        );
    }
}

/// A restored guest the broker cannot make its own is never handed out: here the prepared
/// system's `perl` exits 1, so reseeding the guest's CRNG at restore fails. The create fails
/// with the guest agent's report and is destroyed like any failed create: no QEMU, no files,
/// no live instance, its history ending Destroyed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_the_broker_cannot_make_its_own_is_destroyed() {
    use reach_vm::instance::{Broker, CreateRequest, NetworkRequest, PinnedImage};
    use reach_vm::prepared::{self, PrepareInputs};
    let (base, _, _) = common::image();
    let mut spec = common::prepared_spec();
    spec.files.push(reach_vm::spec::FileSpec {
        path: "/usr/bin/perl".into(),
        content: "#!/bin/sh\necho 'no perl in this system' >&2\nexit 1\n".into(),
        mode: "0755".into(),
        uid: 0,
        gid: 0,
    });
    let out = tempfile::tempdir().unwrap();
    let layer = out.path().join("layer");
    let p = prepared::prepare(
        &spec,
        &PrepareInputs::new(base, common::accel()),
        &layer,
        &reach_vm::image::Quiet,
    )
    .await
    .expect("the service does not need perl: the capture succeeds");

    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let mut cfg = common::config(run.path());
    cfg.prepared.push(PinnedImage {
        digest: p.digest,
        dir: layer.clone(),
    });
    let (broker, _) = Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
        .await
        .unwrap();
    let err = broker
        .create(&CreateRequest {
            image: p.digest,
            network: NetworkRequest::None,
            memory_mib: 0,
            cpus: 0,
            wait_ready: true,
            profiles: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "environment/guest-agent", "{err}");
    let message = err.to_string();
    assert!(
        message.contains("reseeding the guest's CRNG failed")
            && message.contains("no perl in this system"),
        "{message}"
    );
    assert!(broker.journal().live().await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(common::leftovers(run.path()).is_empty());
}
