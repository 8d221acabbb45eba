//! The broker against real QEMU (TCG unless the KVM probe boots a guest) and the reference
//! pack's image.

mod common;

use std::path::Path;

use reach_vm::instance::NetworkRequest;
use reach_vm::journal::InstanceState;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_through_the_agent_then_confirmed_destruction() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, report) = common::start_with_prepared(run.path()).await;
    assert!(report.reaped.is_empty() && report.orphans.is_empty());
    // Restored from the prepared system (the capture itself is the cold boot to the agent).
    let created = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap();
    assert_eq!(created.state, InstanceState::Ready);
    assert!(created.restored);
    eprintln!(
        "accel {:?}, ready after {:?}",
        created.accel, created.ready_after
    );
    let id = created.id.as_str();
    let (placed, content) = common::placed_file();
    let service = common::service();

    let shown = broker
        .exec(id, "show-file", std::slice::from_ref(&placed))
        .await
        .unwrap();
    assert_eq!(shown.exit_code, Some(0), "{}", text(&shown.stderr));
    assert_eq!(text(&shown.stdout), content);
    assert_eq!(
        shown.stdout_sha256,
        reach_digest::Sha256Digest::of(&shown.stdout)
    );

    // The agent may answer before the service has finished starting: poll, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let active = loop {
        let s = broker
            .exec(id, "service-status", std::slice::from_ref(&service))
            .await
            .unwrap();
        if text(&s.stdout).trim() == "active" || std::time::Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(text(&active.stdout).trim(), "active");
    assert_eq!(active.exit_code, Some(0));

    // Containment, asserted from inside the guest: loopback is the only interface.
    let ifaces = broker.exec(id, "net-interfaces", &[]).await.unwrap();
    assert_eq!(
        text(&ifaces.stdout).split_whitespace().collect::<Vec<_>>(),
        ["lo"]
    );
    let links = broker.exec(id, "ip-link", &[]).await.unwrap();
    let links = text(&links.stdout);
    assert_eq!(links.lines().count(), 1, "{links}");
    assert!(links.contains(": lo:"), "{links}");

    let file = broker.read_file(id, &placed).await.unwrap();
    assert_eq!(file.bytes, content.as_bytes());
    assert_eq!(file.sha256, reach_digest::Sha256Digest::of(&content));

    let body = b"reach.test\nguest.reach.test\n";
    let w = broker
        .write_file(id, "/etc/reach-extra", body, 0o640, 0, 0)
        .await
        .unwrap();
    assert_eq!(w.sha256, reach_digest::Sha256Digest::of(body));
    let st = broker.stat_file(id, "/etc/reach-extra").await.unwrap();
    assert_eq!(
        (st.regular, st.mode, st.uid, st.size),
        (true, 0o640, 0, body.len() as u64)
    );
    let stat = broker
        .exec(id, "stat-file", &["/etc/reach-extra".into()])
        .await;
    assert_eq!(stat.unwrap_err().code(), "broker/profile-refused");

    let restart = broker.restart_service(id, &service).await.unwrap();
    assert_eq!(
        restart.exit_code,
        Some(0),
        "{} (timed out: {}, after {:?})",
        text(&restart.stderr),
        restart.timed_out,
        restart.elapsed
    );
    let again = broker
        .exec(id, "service-status", std::slice::from_ref(&service))
        .await
        .unwrap();
    assert_eq!(text(&again.stdout).trim(), "active");

    // Refusals at the guest-operation boundary.
    assert_eq!(
        broker.read_file(id, "etc/passwd").await.unwrap_err().code(),
        "broker/path-refused"
    );
    assert_eq!(
        broker
            .exec(id, "service-status", &["--all".into()])
            .await
            .unwrap_err()
            .code(),
        "broker/profile-refused"
    );
    assert_eq!(
        broker
            .exec("nope", "show-file", std::slice::from_ref(&placed))
            .await
            .unwrap_err()
            .code(),
        "environment/unknown-instance"
    );

    let c = broker.destroy(id).await.unwrap();
    assert!(
        c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    assert_eq!(c.outcome, InstanceState::Destroyed);
    eprintln!(
        "destroy confirmed in {} ms (stop {} ms, killed {})",
        c.total_ms, c.stop_ms, c.killed
    );
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(
        common::leftovers(run.path()).is_empty(),
        "{:?}",
        common::leftovers(run.path())
    );
    // A second destroy returns the one recorded confirmation.
    assert_eq!(broker.destroy(id).await.unwrap(), c);
    assert_eq!(broker.journal().confirmation_count(id).await.unwrap(), 1);
    assert_eq!(
        broker.journal().history(id).await.unwrap(),
        [
            InstanceState::Requested,
            InstanceState::Allocated,
            InstanceState::Booted,
            InstanceState::Ready,
            InstanceState::Destroying,
            InstanceState::Destroyed
        ]
    );
    // Destroyed instances take no more guest operations.
    assert_eq!(
        broker
            .exec(id, "show-file", std::slice::from_ref(&placed))
            .await
            .unwrap_err()
            .code(),
        "environment/unknown-instance"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_create_destroy_cycles_leave_no_process_overlay_or_socket() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, _) = common::start_with_prepared(run.path()).await;
    for i in 0..20 {
        // Alternately a cold boot of the base image and a restore of the prepared system,
        // each destroyed while the guest is still booting or loading its state.
        let req = if i % 2 == 0 {
            common::request(false)
        } else {
            common::prepared_request(false)
        };
        let created = broker.create(&req).await.unwrap();
        assert_eq!(created.state, InstanceState::Booted);
        let c = broker.destroy(&created.id).await.unwrap();
        assert!(
            c.process_gone && c.overlay_deleted && c.sockets_deleted,
            "{c:?}"
        );
    }
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(
        common::leftovers(run.path()).is_empty(),
        "{:?}",
        common::leftovers(run.path())
    );
    assert!(broker.journal().live().await.unwrap().is_empty());
}

/// Copies the pinned image (sparse) so a test can tamper with it.
fn copy_image(to: &Path) {
    let (dir, _, _) = common::image();
    let st = std::process::Command::new("cp")
        .args(["-r", "--sparse=always"])
        .arg(dir)
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
async fn substituted_image_and_network_requests_are_refused_before_boot() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, _) = common::start(run.path()).await;

    let mut req = common::request(false);
    req.network = NetworkRequest::Other("isolated".into());
    assert_eq!(
        broker.create(&req).await.unwrap_err().code(),
        "environment/not-contained"
    );

    let mut req = common::request(false);
    req.image = reach_digest::Sha256Digest::of(b"not an image");
    assert_eq!(
        broker.create(&req).await.unwrap_err().code(),
        "environment/unknown-image"
    );

    let mut req = common::request(false);
    req.memory_mib = 1 << 20;
    assert_eq!(
        broker.create(&req).await.unwrap_err().code(),
        "environment/ceiling-exceeded"
    );
    assert_eq!(
        broker.destroy("nope").await.unwrap_err().code(),
        "environment/unknown-instance"
    );
    assert!(broker.journal().live().await.unwrap().is_empty());

    // A rootfs substituted under the pinned manifest.
    let copy = tempfile::tempdir().unwrap();
    let img = copy.path().join("img");
    copy_image(&img);
    let tampered_run = tempfile::tempdir().unwrap();
    let mut cfg = common::config(tampered_run.path());
    cfg.images[0].dir = img.clone();
    let (tb, _) = reach_vm::instance::Broker::start(
        cfg.clone(),
        std::sync::Arc::new(reach_clock::SystemClock),
    )
    .await
    .unwrap();
    // The untouched copy boots (the check passes), then one byte of the rootfs changes.
    let ok = tb.create(&common::request(false)).await.unwrap();
    tb.destroy(&ok.id).await.unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(img.join("rootfs.raw"))
            .unwrap();
        f.seek(SeekFrom::Start(1 << 20)).unwrap();
        f.write_all(b"X").unwrap();
    }
    let err = tb.create(&common::request(false)).await.unwrap_err();
    assert_eq!(err.code(), "environment/image-mismatch", "{err}");

    // A manifest substituted (another image under the pinned digest).
    let copy2 = tempfile::tempdir().unwrap();
    let img2 = copy2.path().join("img");
    copy_image(&img2);
    let mpath = img2.join("manifest.json");
    let m = std::fs::read_to_string(&mpath)
        .unwrap()
        .replace(common::placed_file().1.trim(), "guest.evil.test");
    let m = if m.contains("guest.evil.test") {
        m
    } else {
        m.replacen("\"suite\":\"bookworm\"", "\"suite\":\"trixie\"", 1)
    };
    std::fs::write(&mpath, m).unwrap();
    let run3 = tempfile::tempdir().unwrap();
    let mut cfg = common::config(run3.path());
    cfg.images[0].dir = img2;
    let (b3, _) =
        reach_vm::instance::Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
    assert_eq!(
        b3.create(&common::request(false)).await.unwrap_err().code(),
        "environment/image-mismatch"
    );

    for r in [run.path(), tampered_run.path(), run3.path()] {
        assert!(common::qemu_processes(r).is_empty());
        assert!(common::leftovers(r).is_empty());
    }
}
