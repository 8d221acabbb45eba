//! Rotation on a live body: leaves rotate under the same root, then the root rotates with an
//! overlapping bundle and the previous root is retired. Established roles pick up each step by
//! reloading (no restart); no call fails at any point; after retirement an old-chain peer is
//! refused within one reload.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use reach_identity::files::{LEAF_CERT, LEAF_KEY};
use reach_port::material::RELOAD_INTERVAL;
use reach_proto::health::v1::CheckRequest;
use reach_proto::health::v1::health_client::HealthClient;
use reach_scribe::identities::{self, Rotation};
use reach_tests::{TestBody, call, raw_channel};
use tonic::Code;

const CHECK: &str = "/reach.health.v1.Health/Check";
/// A rotation step must be in force after this: one reload tick plus scheduling slack.
const ONE_RELOAD: Duration = Duration::from_millis(RELOAD_INTERVAL.as_millis() as u64 * 4);

fn file_serial(body: &TestBody, who: &str) -> String {
    let pem = std::fs::read(body.layout.secret_dir(who).join(LEAF_CERT)).unwrap();
    let der = rustls_pemfile::certs(&mut &pem[..])
        .next()
        .unwrap()
        .unwrap();
    reach_identity::inspect_leaf(&der, &body.manifest.trust_domain, SystemTime::now())
        .unwrap()
        .serial_hex
}

async fn served_serial(
    body: &TestBody,
    operator: &Arc<reach_port::PortMaterial>,
) -> Option<String> {
    let ch = reach_port::connect(
        body.socket("core.health"),
        operator,
        body.manifest.principal("core"),
    )
    .await
    .ok()?;
    HealthClient::new(ch)
        .check(CheckRequest {})
        .await
        .ok()
        .map(|r| r.into_inner().leaf_serial)
}

async fn wait_until_core_serves(
    body: &TestBody,
    operator: &Arc<reach_port::PortMaterial>,
    serial: &str,
) {
    let deadline = Instant::now() + ONE_RELOAD;
    loop {
        if served_serial(body, operator).await.as_deref() == Some(serial) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "core did not reload its leaf within one reload"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_never_fails_a_call_and_retires_the_old_chain() {
    let body = TestBody::start().await;
    let operator = body.material("operator");
    let _reload = operator.spawn_reloader();

    // Background caller: a fresh handshake per call, throughout every step.
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let bg = {
        let (stop, calls, failures) = (stop.clone(), calls.clone(), failures.clone());
        let (socket, core, operator) = (
            body.socket("core.health"),
            body.manifest.principal("core"),
            operator.clone(),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let ch = reach_port::connect_lazy(socket.clone(), &operator, core.clone());
                let code = call(ch, CHECK).await;
                calls.fetch_add(1, Ordering::Relaxed);
                if code != Code::Ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                    eprintln!("background call failed: {code:?}");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };

    // 1. Leaves only, same root.
    let before = file_serial(&body, "core");
    identities::materialize_identities(
        &body.manifest,
        &body.layout,
        Rotation::Leaves,
        SystemTime::now(),
    )
    .unwrap();
    let after = file_serial(&body, "core");
    assert_ne!(before, after);
    wait_until_core_serves(&body, &operator, &after).await;

    // 2. New root: bundles first (both roots), one reload later the leaves.
    let old_sd = body.layout.secret_dir("operator");
    let old_leaf = (
        std::fs::read_to_string(old_sd.join(LEAF_CERT)).unwrap(),
        std::fs::read_to_string(old_sd.join(LEAF_KEY)).unwrap(),
    );
    let report = identities::write_bundles(
        &body.manifest,
        &body.layout,
        Rotation::Root,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(report.bundle_roots, 2);
    tokio::time::sleep(RELOAD_INTERVAL * 2).await;
    identities::issue_leaves(
        &body.manifest,
        &body.layout,
        Rotation::Root,
        SystemTime::now(),
    )
    .unwrap();
    let new_root_serial = file_serial(&body, "core");
    wait_until_core_serves(&body, &operator, &new_root_serial).await;

    // During the overlap an old-chain leaf is still accepted.
    let socket = body.layout.socket_path("core.health");
    let old = Some((old_leaf.0.as_str(), old_leaf.1.as_str()));
    let ch = raw_channel(&socket, old)
        .await
        .expect("old chain accepted during overlap");
    assert_eq!(call(ch, CHECK).await, Code::Ok);

    // 3. Retire the previous root: within one reload, the old chain is refused.
    let report = identities::write_bundles(
        &body.manifest,
        &body.layout,
        Rotation::RetirePreviousRoot,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(report.bundle_roots, 1);
    let deadline = Instant::now() + ONE_RELOAD;
    loop {
        let code = match raw_channel(&socket, old).await {
            Ok(ch) => call(ch, CHECK).await,
            Err(_) => Code::Unavailable,
        };
        if code != Code::Ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "old-chain peer still accepted after one reload"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The new chain still works.
    assert_eq!(
        served_serial(&body, &operator).await.as_deref(),
        Some(new_root_serial.as_str())
    );

    stop.store(true, Ordering::Relaxed);
    bg.await.unwrap();
    let (n, failed) = (
        calls.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    println!(
        "rotation: {n} background calls across leaf, root and retirement steps, {failed} failed"
    );
    assert!(n > 20, "the background caller must have run throughout");
    assert_eq!(failed, 0);
    body.stop().await;
}
