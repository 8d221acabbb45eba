//! SIGKILL the broker with a live instance, and in the middle of a destroy whose reply is lost.
//!
//! The parent test re-executes this test binary as a child broker (`REACH_VM_CRASH_CHILD`).
//! The child creates an instance and writes its id to a file; then it either waits to be
//! killed by the parent (a live instance) or destroys the instance with the fault hook armed,
//! so it kills itself after QEMU is gone but before the confirmation is journaled (the
//! reply is lost). A new broker on the same run directory must reap the live instance and
//! record it, and confirm the interrupted destroy exactly once.
#![allow(clippy::disallowed_methods)] // Test knobs (child mode, run directory), never secrets.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reach_vm::journal::InstanceState;

const CHILD_ENV: &str = "REACH_VM_CRASH_CHILD";
const RUN_ENV: &str = "REACH_VM_CRASH_RUN";

async fn child_main(mode: &str, run: PathBuf) {
    let (broker, _) = common::start(&run).await;
    let created = broker.create(&common::request(false)).await.unwrap();
    match mode {
        "live" => {
            std::fs::write(run.join("child-id"), &created.id).unwrap();
            // Wait for the parent's SIGKILL.
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        "destroy" => {
            std::fs::write(run.join("child-id"), &created.id).unwrap();
            broker
                .crash_before_confirm
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = broker.destroy(&created.id).await;
            panic!("the fault hook did not kill the broker");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// Child entry point: a no-op unless the parent started this binary in child mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        child_main(&mode, PathBuf::from(std::env::var(RUN_ENV).unwrap())).await;
    }
}

fn spawn_child(mode: &str, run: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .env(RUN_ENV, run)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for_id(run: &Path, child: &mut Child) -> String {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(id) = std::fs::read_to_string(run.join("child-id"))
            && !id.is_empty()
        {
            return id;
        }
        assert!(child.try_wait().unwrap().is_none(), "child exited early");
        assert!(Instant::now() < until, "child never created its instance");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_brokers_live_instance_is_reaped_and_recorded() {
    common::image();
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let mut child = spawn_child("live", run.path());
    let id = wait_for_id(run.path(), &mut child);
    assert_eq!(
        common::qemu_processes(run.path()).len(),
        1,
        "the instance runs"
    );
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    // QEMU daemonized: it outlives its broker until the next one reaps it.
    assert_eq!(common::qemu_processes(run.path()).len(), 1);

    let (broker, report) = common::start(run.path()).await;
    assert_eq!(report.reaped, std::slice::from_ref(&id));
    assert!(report.confirmed.is_empty());
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(
        common::leftovers(run.path()).is_empty(),
        "{:?}",
        common::leftovers(run.path())
    );
    let c = broker.journal().confirmation(&id).await.unwrap().unwrap();
    assert_eq!(c.outcome, InstanceState::Reaped);
    assert!(
        c.recovered && c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    assert_eq!(c.session, broker.session());
    assert_eq!(
        broker.journal().history(&id).await.unwrap().last(),
        Some(&InstanceState::Reaped)
    );
    drop(broker);

    // A second restart finds nothing more to do.
    let (_, again) = common::start(run.path()).await;
    assert!(again.reaped.is_empty() && again.confirmed.is_empty() && again.orphans.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroy_whose_reply_was_lost_is_confirmed_exactly_once() {
    common::image();
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let mut child = spawn_child("destroy", run.path());
    let id = wait_for_id(run.path(), &mut child);
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the fault hook kills the broker: {status:?}"
    );

    let (broker, report) = common::start(run.path()).await;
    assert_eq!(report.confirmed, std::slice::from_ref(&id));
    assert!(report.reaped.is_empty());
    let c = broker.journal().confirmation(&id).await.unwrap().unwrap();
    assert_eq!(c.outcome, InstanceState::Destroyed);
    assert!(
        c.recovered && c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    // Asking again (the caller retrying its lost destroy) returns that one confirmation.
    assert_eq!(broker.destroy(&id).await.unwrap(), c);
    drop(broker);
    let (broker, again) = common::start(run.path()).await;
    assert!(again.confirmed.is_empty() && again.reaped.is_empty());
    assert_eq!(broker.journal().confirmation_count(&id).await.unwrap(), 1);
    assert_eq!(
        broker.journal().history(&id).await.unwrap(),
        [
            InstanceState::Requested,
            InstanceState::Allocated,
            InstanceState::Booted,
            InstanceState::Destroying,
            InstanceState::Destroyed
        ]
    );
    assert!(common::qemu_processes(run.path()).is_empty());
    assert!(common::leftovers(run.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_directory_and_process_without_a_record_are_reaped() {
    common::image();
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, _) = common::start(run.path()).await;
    drop(broker);
    // A directory with no journal record, and a process naming the instances directory.
    let stray = run.path().join("instances/stray");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("overlay.qcow2"), b"x").unwrap();
    let mut sleeper = Command::new("qemu-system-x86_64")
        .args(["-nodefaults", "-display", "none", "-S", "-name"])
        .arg(run.path().join("instances/ghost"))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (broker, report) = common::start(run.path()).await;
    let what: Vec<&str> = report.orphans.iter().map(|o| o.what.as_str()).collect();
    assert_eq!(what, ["dir:stray", "process"]);
    assert_eq!(report.orphans[1].pid, Some(sleeper.id() as i32));
    assert_eq!(sleeper.wait().unwrap().signal(), Some(9));
    assert_eq!(broker.journal().orphans().await.unwrap(), report.orphans);
    assert!(common::leftovers(run.path()).is_empty());
}
