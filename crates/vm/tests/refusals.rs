//! Broker refusals and failures that need a guest, or one that never gets to answer: a guest
//! agent that does not answer in time, guest operations on an instance that is not ready, and
//! a request the guest agent refuses. Each asserts the typed variant and its code, that the
//! refusal journaled nothing it should not have, and that no QEMU, overlay or socket is left.
//! (Host-tool and journal failures need no guest: `instance.rs`'s own tests.)

mod common;

use std::time::Duration;

use reach_vm::agent::AgentError;
use reach_vm::instance::Broker;
use reach_vm::journal::InstanceState::{self, *};
use reach_vm::refusal::BrokerError;

/// Far below any boot of the test image (tens of seconds under TCG, seconds under KVM), so the
/// guest agent cannot have answered when it runs out.
const TINY_READY_TIMEOUT: Duration = Duration::from_millis(100);

async fn start_impatient(run: &std::path::Path) -> Broker {
    let mut cfg = common::config(run);
    cfg.ready_timeout = TINY_READY_TIMEOUT;
    Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
        .await
        .unwrap()
        .0
}

async fn state(b: &Broker, id: &str) -> InstanceState {
    b.journal().get(id).await.unwrap().state
}

fn nothing_left(run: &std::path::Path) {
    assert!(common::qemu_processes(run).is_empty());
    assert!(
        common::leftovers(run).is_empty(),
        "{:?}",
        common::leftovers(run)
    );
}

/// `err` is a boot timeout, and the failed create destroyed what it made: nothing left, no
/// live instance, one confirmation. Returns the instance's id.
async fn boot_timeout_torn_down(b: &Broker, run: &std::path::Path, err: BrokerError) -> String {
    assert_eq!(err.code(), "environment/boot-timeout", "{err}");
    let BrokerError::BootTimeout(id) = err else {
        panic!("{err:?}")
    };
    nothing_left(run);
    assert!(b.journal().live().await.unwrap().is_empty());
    let c = b.journal().confirmation(&id).await.unwrap().unwrap();
    assert!(
        c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_does_not_answer_in_time_is_a_boot_timeout_and_is_torn_down() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let broker = start_impatient(run.path()).await;

    let err = broker.create(&common::request(true)).await.unwrap_err();
    let id = boot_timeout_torn_down(&broker, run.path(), err).await;
    assert_eq!(
        broker.journal().history(&id).await.unwrap(),
        [Requested, Allocated, Booted, Destroying, Destroyed]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_operations_before_ready_or_once_destroying_are_not_ready() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let broker = start_impatient(run.path()).await;

    let created = broker.create(&common::request(false)).await.unwrap();
    assert_eq!(created.state, Booted);
    let id = created.id.as_str();

    // Booted, no agent yet: every guest operation is refused, naming the state.
    let refusals = [
        broker
            .exec(id, "show-file", &[common::placed_file().0])
            .await
            .unwrap_err(),
        broker
            .read_file(id, &common::placed_file().0)
            .await
            .unwrap_err(),
        broker
            .write_file(id, "/tmp/x", b"x", 0o600, 0, 0)
            .await
            .unwrap_err(),
    ];
    for err in refusals {
        assert_eq!(err.code(), "environment/not-ready", "{err}");
        assert!(
            matches!(&err, BrokerError::NotReady(i, "booted") if i == id),
            "{err:?}"
        );
    }
    // Waiting runs out long before the guest answers; the instance stays booted and usable.
    let err = broker.wait_ready(id).await.unwrap_err();
    assert!(
        matches!(&err, BrokerError::BootTimeout(i) if i == id),
        "{err:?}"
    );
    assert_eq!(state(&broker, id).await, Booted);
    assert_eq!(common::qemu_processes(run.path()), [created.pid]);

    // A destroy in flight (journaled `destroying`, its teardown not yet done): waiting for the
    // guest and guest operations are refused, and journal nothing.
    broker
        .journal()
        .transition(id, broker.session(), Booted, Destroying, None)
        .await
        .unwrap();
    for err in [
        broker.wait_ready(id).await.unwrap_err(),
        broker
            .exec(id, "show-file", &[common::placed_file().0])
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.code(), "environment/not-ready", "{err}");
        assert!(
            matches!(&err, BrokerError::NotReady(i, "destroying") if i == id),
            "{err:?}"
        );
    }
    let history = [Requested, Allocated, Booted, Destroying];
    assert_eq!(broker.journal().history(id).await.unwrap(), history);

    // The destroy completes from there.
    let c = broker.destroy(id).await.unwrap();
    assert!(
        c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    assert_eq!(
        broker.journal().history(id).await.unwrap(),
        [Requested, Allocated, Booted, Destroying, Destroyed]
    );
    nothing_left(run.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_guest_agent_refuses_is_a_guest_agent_failure_and_the_instance_stays_ready() {
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let (broker, _) = common::start_with_prepared(run.path()).await;
    let created = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap();
    let id = created.id.as_str();

    let err = broker
        .read_file(id, "/etc/reach-no-such-file")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "environment/guest-agent", "{err}");
    assert!(
        matches!(&err, BrokerError::Agent(AgentError::Guest(m)) if m.contains("/etc/reach-no-such-file")),
        "{err:?}"
    );
    // The refusal changed nothing: still ready, and the agent still answers.
    assert_eq!(state(&broker, id).await, Ready);
    let (placed, content) = common::placed_file();
    let file = broker.read_file(id, &placed).await.unwrap();
    assert_eq!(file.bytes, content.as_bytes());

    let c = broker.destroy(id).await.unwrap();
    assert!(
        c.process_gone && c.overlay_deleted && c.sockets_deleted,
        "{c:?}"
    );
    assert_eq!(
        broker.journal().history(id).await.unwrap(),
        [Requested, Allocated, Booted, Ready, Destroying, Destroyed]
    );
    nothing_left(run.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_that_runs_out_of_its_ready_deadline_is_a_boot_timeout_and_is_torn_down() {
    // The restored guest's QEMU is still loading its state (or greeting QMP) when the deadline
    // passes: that is the guest not being ready in time, not a host failure.
    let run = tempfile::tempdir().unwrap();
    let _reaper = common::Reaper(run.path().to_owned());
    let mut cfg = common::config_with_prepared(run.path());
    cfg.ready_timeout = Duration::from_millis(1);
    let broker = Broker::start(cfg, std::sync::Arc::new(reach_clock::SystemClock))
        .await
        .unwrap()
        .0;

    let err = broker
        .create(&common::prepared_request(true))
        .await
        .unwrap_err();
    boot_timeout_torn_down(&broker, run.path(), err).await;
}
