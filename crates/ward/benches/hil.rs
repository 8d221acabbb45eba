//! The machine part of one human approval, through the real port (mTLS on a Unix socket, the
//! manifest's ward.authority allow-list, the gRPC adapter), on a real SQLite file under
//! /var/tmp: core files a HIL request → the operator's `WatchHilRequests` stream delivers it →
//! the operator approves it by its digest → core mints the step's grant → the workbench
//! redeems it. Everything but the human's thinking time.
//!
//! Run: `cargo bench -p reach-ward-desk --bench hil`. Prints p50 and p99 of the whole chain
//! and of each leg in ms. Target (issue #29, SPECIFICATION.md): p50 ≤ 20 ms on this machine.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use reach_digest::Sha256Digest;
use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::ward::v1 as pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_ward_desk::{Desk, FenceRequest, HilMode, SystemClock, WardKey, WardPolicy, WardService};

const WARMUP: usize = 20;
const ITERATIONS: usize = 200;
const TARGET: Duration = Duration::from_millis(20);

fn pct(s: &[Duration], p: f64) -> Duration {
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::Builder::new()
            .prefix("whil")
            .tempdir_in("/var/tmp")
            .unwrap();
        let desk = Arc::new(
            Desk::open(
                &dir.path().join("ward.sqlite3"),
                WardKey::from_bytes(&[7; 32]).unwrap(),
                WardPolicy::default(),
                Arc::new(SystemClock),
            )
            .await
            .unwrap(),
        );
        let profile = Sha256Digest::of(b"task-profile.toml");
        desk.fence_pack(
            "core",
            &FenceRequest {
                pack_name: "bench-pack".into(),
                generation: 1,
                revoked: false,
                paused: false,
                bound_profile_digest: profile,
                active_profile_digest: profile,
                hil: HilMode::EachMutation,
            },
        )
        .await
        .unwrap();

        let td = TrustDomain::new("bench.test").unwrap();
        let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
        let p = |n: &str| Principal::new(td.clone(), n).unwrap();
        for who in ["ward", "core", "operator", "workbench"] {
            root.provision(&dir.path().join(who), &p(who), Duration::from_secs(3600))
                .unwrap();
        }
        let m = |who: &str| PortMaterial::load(&dir.path().join(who), td.clone()).unwrap();
        let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let port = manifest
            .ports
            .iter()
            .find(|p| p.name == "ward.authority")
            .unwrap();
        let mut policy = PortPolicy::new("ward.authority");
        for g in &port.grants {
            policy = policy.allow(p(&g.caller), format!("/reach.ward.v1.Ward/{}", g.method));
        }
        let sock = dir.path().join("ward.sock");
        let server = PortServer::bind(&PortAddress::Unix(sock.clone()), m("ward"), policy).unwrap();
        tokio::spawn(server.serve(
            WardService::new(desk.clone(), Arc::new(reach_ward_desk::RoomKey::ephemeral().unwrap())).into_server(),
            std::future::pending(),
        ));
        let connect = async |who: &str| {
            WardClient::new(
                reach_port::connect(PortAddress::Unix(sock.clone()), &m(who), p("ward"))
                    .await
                    .unwrap(),
            )
        };
        let (mut core, mut operator, mut workbench) = (
            connect("core").await,
            connect("operator").await,
            connect("workbench").await,
        );
        let mut watch = operator
            .watch_hil_requests(pb::WatchHilRequestsRequest {})
            .await
            .unwrap()
            .into_inner();

        let diff = "--- a/etc/app/app.conf\n+++ b/etc/app/app.conf\n@@ -1 +1 @@\n-mydestination = localhost\n+mydestination = localhost, example.test\n";
        let (mut whole, mut filed, mut seen, mut answered, mut granted) =
            (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..WARMUP + ITERATIONS {
            let experiment = format!("exp-{i}");
            let plan = Sha256Digest::of(format!("plan {i}")).to_string();
            let step = Sha256Digest::of(format!("step {i}")).to_string();
            let t0 = Instant::now();
            let h = core
                .file_hil_request(pb::FileHilRequestRequest {
                    experiment_id: experiment.clone(),
                    instance_id: "vm-1".into(),
                    plan_digest: plan.clone(),
                    step_index: 1,
                    step_digest: step.clone(),
                    pack_name: "bench-pack".into(),
                    pack_generation: 1,
                    effect_class: "contained-mutation".into(),
                    class_source: "patch-policy.toml".into(),
                    action: "patch".into(),
                    target: "etc/app/app.conf".into(),
                    diff: diff.into(),
                    rollback: "recreate-prepared-system".into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            let t1 = Instant::now();
            let shown = watch.message().await.unwrap().unwrap();
            assert_eq!(shown.id, h.id);
            let t2 = Instant::now();
            operator
                .answer_hil_request(pb::AnswerHilRequestRequest {
                    id: shown.id,
                    request_digest: shown.digest,
                    approve: true,
                    reason: String::new(),
                })
                .await
                .unwrap();
            let t3 = Instant::now();
            let g = core
                .mint_step_grant(pb::MintStepGrantRequest {
                    experiment_id: experiment.clone(),
                    instance_id: "vm-1".into(),
                    plan_digest: plan.clone(),
                    step_index: 1,
                    step_digest: step.clone(),
                    pack_name: "bench-pack".into(),
                    pack_generation: 1,
                    effect_class: "contained-mutation".into(),
                    ttl_ms: 0,
                    profile_digest: profile.to_string(),
                    hil_required: true,
                })
                .await
                .unwrap()
                .into_inner();
            workbench
                .redeem_step_grant(pb::RedeemStepGrantRequest {
                    grant: g.grant,
                    experiment_id: experiment,
                    instance_id: "vm-1".into(),
                    plan_digest: plan,
                    step_index: 1,
                    step_digest: step,
                    pack_name: "bench-pack".into(),
                    pack_generation: 1,
                })
                .await
                .unwrap();
            let t4 = Instant::now();
            if i >= WARMUP {
                whole.push(t4 - t0);
                filed.push(t1 - t0);
                seen.push(t2 - t1);
                answered.push(t3 - t2);
                granted.push(t4 - t3);
            }
        }
        println!(
            "HIL approval, machine part, {ITERATIONS} after {WARMUP} warm-up, over mTLS on a \
             Unix socket, SQLite WAL on {}",
            dir.path().display()
        );
        for (name, s) in [
            ("file → approve → mint → redeem", &mut whole),
            ("  FileHilRequest (core)         ", &mut filed),
            ("  seen in WatchHilRequests       ", &mut seen),
            ("  AnswerHilRequest (FULL sync)   ", &mut answered),
            ("  MintStepGrant + RedeemStepGrant", &mut granted),
        ] {
            s.sort();
            println!(
                "  {name:<33}: p50 {:>6.2} ms  p99 {:>6.2} ms",
                ms(pct(s, 0.5)),
                ms(pct(s, 0.99))
            );
        }
        let p50 = pct(&whole, 0.5);
        println!(
            "  target p50 ≤ {} ms: {:.2}× of target ({})",
            TARGET.as_millis(),
            p50.as_secs_f64() / TARGET.as_secs_f64(),
            if p50 <= TARGET { "met" } else { "NOT met" }
        );
    });
}
