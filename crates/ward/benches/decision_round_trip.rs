//! EgressDecision round trip: IssueDecision (core's certificate) then RedeemDecision
//! (egress-discord's certificate) over the real port library — mTLS 1.3 on Unix sockets with
//! the authorization layer — against a ward desk on a real SQLite file (WAL, synchronous=NORMAL
//! with the restart fence; see `store.rs`) on the same disk a deployment uses.
//!
//! Prints p50/p99 of the full round trip, and of the same two desk calls without the port, so
//! store and transport costs can be told apart. Target (issue #6, SPECIFICATION.md): round
//! trip p50 at most 1 ms.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use reach_digest::Sha256Digest;
use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{AdmitScopeRequest, IssueDecisionRequest, RedeemDecisionRequest};
use reach_ward_desk::{
    DecisionRequest, Desk, GuestEvent, RateLimits, RunRef, SystemClock, TaskBudgets, WardKey,
    WardPolicy, WardService, Window,
};

const WARMUP: usize = 200;
const ROUND_TRIPS: usize = 3_000;
/// Decisions per run: a model call, its one retry, and the Discord delivery.
const DECISIONS_PER_RUN: usize = 3;
const DESTINATION: &str = "https://discord.com:443/api/v10/channels/333/messages";

fn write_identity(dir: &std::path::Path, root: &TrustRoot, p: &Principal) {
    root.provision(dir, p, Duration::from_secs(3600)).unwrap();
}

fn pct(s: &[Duration], p: f64) -> Duration {
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn policy() -> WardPolicy {
    // Loose windows: the benchmark measures decisions, not the rate limiter refusing it.
    let w = Window::sliding(1_000_000, Duration::from_secs(60));
    WardPolicy {
        rate_limits: RateLimits {
            application: w,
            guild: w,
            channel: w,
            subject: w,
        },
        budgets: TaskBudgets {
            concurrency: 8,
            ..TaskBudgets::default()
        },
        ..WardPolicy::default()
    }
}

fn event(n: usize) -> GuestEvent {
    GuestEvent {
        platform: "discord".into(),
        application: "111".into(),
        guild: "222".into(),
        channel: "333".into(),
        subject: format!("subject-{n}"),
    }
}

async fn over_port(desk: Arc<Desk>, dir: &std::path::Path) -> Vec<Duration> {
    let td = TrustDomain::new("bench.local").unwrap();
    let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
    let p = |n: &str| Principal::new(td.clone(), n).unwrap();
    for who in ["ward", "core", "egress-discord"] {
        write_identity(&dir.join(who), &root, &p(who));
    }
    let m = |who: &str| PortMaterial::load(&dir.join(who), td.clone()).unwrap();
    let sock = dir.join("ward.sock");
    let policy = PortPolicy::new("ward.authority")
        .allow(p("core"), "/reach.ward.v1.Ward/AdmitScope")
        .allow(p("core"), "/reach.ward.v1.Ward/IssueDecision")
        .allow(p("egress-discord"), "/reach.ward.v1.Ward/RedeemDecision");
    let server = PortServer::bind(&PortAddress::Unix(sock.clone()), m("ward"), policy).unwrap();
    tokio::spawn(
        server.serve(
            WardService::new(
                desk,
                Arc::new(reach_ward_desk::RoomKey::ephemeral().unwrap()),
            )
            .into_server(),
            std::future::pending(),
        ),
    );
    let connect = |who: &str| {
        let material = m(who);
        let sock = sock.clone();
        let ward = p("ward");
        async move {
            WardClient::new(
                reach_port::connect(PortAddress::Unix(sock), &material, ward)
                    .await
                    .unwrap(),
            )
        }
    };
    let (mut core, mut egress) = (connect("core").await, connect("egress-discord").await);

    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    let mut sigil = String::new();
    let mut run = String::new();
    for i in 0..WARMUP + ROUND_TRIPS {
        if i % DECISIONS_PER_RUN == 0 {
            run = format!("port-run-{i}");
            let a = core
                .admit_scope(AdmitScopeRequest {
                    platform: "discord".into(),
                    application_id: "111".into(),
                    guild_id: "222".into(),
                    channel_id: "333".into(),
                    subject_id: format!("subject-{i}"),
                    run_id: run.clone(),
                    expires_at_ms: 0,
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(a.refusal_code, "");
            sigil = a.sigil_id;
        }
        let payload = Sha256Digest::of(format!("answer {i}")).to_string();
        let t = Instant::now();
        let d = core
            .issue_decision(IssueDecisionRequest {
                sigil_id: sigil.clone(),
                run_id: run.clone(),
                attempt_id: format!("att-{i}"),
                destination: DESTINATION.into(),
                purpose: "discord-delivery".into(),
                payload_digest: payload.clone(),
                labels: vec!["public".into()],
                cut_receipt_digest: String::new(),
                policy_revision: "policy-1".into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .unwrap()
            .into_inner();
        let r = egress
            .redeem_decision(RedeemDecisionRequest {
                decision_id: d.decision_id,
                destination: DESTINATION.into(),
                payload_digest: payload,
            })
            .await
            .unwrap()
            .into_inner();
        let elapsed = t.elapsed();
        assert!(
            r.admitted,
            "refused: {} / {}",
            d.refusal_code, r.refusal_code
        );
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    samples.sort();
    samples
}

async fn in_process(desk: &Desk) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    let mut admitted = None;
    for i in 0..WARMUP + ROUND_TRIPS {
        if i % DECISIONS_PER_RUN == 0 {
            let run = RunRef {
                run_id: format!("desk-run-{i}"),
                deadline: None,
            };
            admitted = Some(desk.admit("core", event(i), run).await.unwrap());
        }
        let a = admitted.as_ref().unwrap();
        let payload = Sha256Digest::of(format!("answer {i}"));
        let t = Instant::now();
        let d = desk
            .issue(
                "core",
                DecisionRequest {
                    sigil_id: a.sigil.id.to_string(),
                    run_id: a.sigil.run_id.clone(),
                    attempt_id: format!("att-{i}"),
                    destination: DESTINATION.into(),
                    purpose: "discord-delivery".into(),
                    payload_digest: payload,
                    labels: vec!["public".into()],
                    policy_revision: "policy-1".into(),
                    cut_receipt_digest: None,
                    max_tokens: 0,
                    max_spend_micros: 0,
                },
            )
            .await
            .unwrap();
        desk.redeem("egress-discord", d.id.as_str(), DESTINATION, &payload)
            .await
            .unwrap();
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    samples
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Under /var/tmp, not a tmpfs: the store's fsyncs are part of the figure.
        let dir = tempfile::Builder::new().prefix("wb").tempdir_in("/var/tmp").unwrap();
        let key = WardKey::from_bytes(&[9; 32]).unwrap();
        let desk = Arc::new(
            Desk::open(&dir.path().join("ward.sqlite3"), key, policy(), Arc::new(SystemClock)).await.unwrap(),
        );
        let desk_s = in_process(&desk).await;
        let port_s = over_port(desk.clone(), dir.path()).await;
        println!(
            "EgressDecision round trip (IssueDecision + RedeemDecision), {ROUND_TRIPS} each after {WARMUP} warm-up, \
             SQLite WAL synchronous=NORMAL on {}",
            dir.path().display()
        );
        println!("  desk only (no port)         : p50 {:>9.1?}  p99 {:>9.1?}", pct(&desk_s, 0.5), pct(&desk_s, 0.99));
        println!("  over mTLS ports (UDS)       : p50 {:>9.1?}  p99 {:>9.1?}", pct(&port_s, 0.5), pct(&port_s, 0.99));
        let p50 = pct(&port_s, 0.5);
        println!(
            "  target p50 <= 1 ms          : {}",
            if p50 <= Duration::from_millis(1) { "met" } else { "NOT met" }
        );
    });
}
