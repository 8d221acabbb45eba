//! The Portal's own cost, apart from the model's latency: the Privacy Cut plus the quarantine
//! of a return (pure, in core), and one adapter attempt against the loopback model emulator
//! (admission of the local road, a fresh TLS 1.3 connection, the request, the bounded read and
//! the parse), whole and streamed. Prints p50/p99.
//!
//! No target is set for these in the issue; the figures sit in SPECIFICATION.md so a change that
//! makes the path slower shows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_destination::roads::{Road, Roads};
use reach_destination::{AdmissionPolicy, PinnedConnector, TcpDialer};
use reach_digest::Sha256Digest;
use reach_model_emulator::{HOST, KEY, MODEL, ModelEmulator};
use reach_portal::{
    ApiKey, CutInput, EvidenceIn, Expectation, PortalClient, PortalConfig, cut, portal_bounds,
    quarantine,
};

const PURE_ROUNDS: usize = 20_000;
const CALLS: usize = 300;

fn pct(s: &mut [Duration], p: f64) -> Duration {
    s.sort();
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn input() -> CutInput {
    // The retrieval default: five passages of about 1,200 bytes.
    CutInput {
        question: "How does a port authenticate a call?".into(),
        bundle_digest: Sha256Digest::of(b"bundle"),
        revision: "0123abc".into(),
        passages: (1..=5)
            .map(|i| {
                let text = format!("Passage {i}. ") + &"A port checks the peer leaf. ".repeat(40);
                EvidenceIn {
                    passage_id: format!("p-{i:020}"),
                    digest: Sha256Digest::of(text.as_bytes()),
                    section: "Ports".into(),
                    url: format!("https://reach.invalid/reach/blob/0123abc/ARCHITECTURE.md#L{i}"),
                    text,
                }
            })
            .collect(),
        withheld: vec!["subject_id", "sigil_id"],
    }
}

fn main() {
    let input = input();
    let ret = reach_portal::ProviderReturn {
        schema: reach_portal::openai::RETURN_SCHEMA.into(),
        id: "chatcmpl-1".into(),
        model: MODEL.into(),
        content: "A port verifies the peer leaf [1]. Then the table [3].".into(),
        finish_reason: Some("stop".into()),
        complete: true,
        streamed: false,
        usage: None,
    };
    let withheld = vec!["1100000000000000500".to_owned()];
    let mut pure = Vec::with_capacity(PURE_ROUNDS);
    for _ in 0..PURE_ROUNDS {
        let t = Instant::now();
        let c = cut(&input).unwrap();
        let _ = c.receipt.digest();
        let bytes = ret.to_bytes();
        let parsed = reach_portal::ProviderReturn::from_bytes(&bytes).unwrap();
        quarantine(
            &parsed,
            &Expectation {
                model: MODEL,
                payload: &c.payload,
                withheld: &withheld,
            },
        )
        .unwrap();
        pure.push(t.elapsed());
    }
    println!(
        "cut + receipt + quarantine (5 passages, {} payload bytes): p50 {:?}, p99 {:?}",
        cut(&input).unwrap().bytes.len(),
        pct(&mut pure, 0.5),
        pct(&mut pure, 0.99)
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let emulator = ModelEmulator::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, emulator.ca_pem()).unwrap();
        let roads = Roads {
            local_roads: vec![Road {
                host: HOST.into(),
                addr: emulator.addr(),
            }],
            ca_file: Some(ca),
            name_servers: vec![],
        };
        let payload = cut(&input).unwrap().payload;
        for streaming in [false, true] {
            let client = PortalClient::new(PortalConfig {
                endpoint: emulator.endpoint(),
                model: MODEL.into(),
                key: ApiKey::from_bytes(KEY.as_bytes()).unwrap(),
                streaming,
                constrain: reach_portal::Constrain::None,
                admission: Arc::new(roads.admission(AdmissionPolicy::default()).unwrap()),
                connector: PinnedConnector::new(roads.roots().unwrap(), TcpDialer),
                bounds: portal_bounds(),
            })
            .unwrap();
            let mut calls = Vec::with_capacity(CALLS);
            for _ in 0..CALLS {
                let t = Instant::now();
                client.complete(&payload, 512).await.unwrap();
                calls.push(t.elapsed());
            }
            println!(
                "adapter attempt against the loopback emulator ({}): p50 {:?}, p99 {:?}",
                if streaming { "SSE" } else { "whole JSON" },
                pct(&mut calls, 0.5),
                pct(&mut calls, 0.99)
            );
        }
    });
    println!(
        "load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
