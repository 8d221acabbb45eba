//! Shared builders: a real A2A peer on loopback TLS (reach-a2a-peer), the client admitted to it
//! as an exact local road, and a decision authority backed by the real ward desk (its own
//! SQLite store in a temporary directory) that records every decision it issued and redeemed.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reach_a2a_peer::{A2aPeer, PEER_HOST, Script};
use reach_destination::roads::{Road, Roads};
use reach_destination::{AdmissionPolicy, PinnedConnector, RecordingDialer};
use reach_digest::Sha256Digest;
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, EnrollmentReceipt, Intercom,
    NoJournal, OutboundTask, Part, PeerClient, PeerConfig, PollBudget, TaskSpec, a2a_bounds,
};
use reach_ward_desk::{
    Desk, DeskError, GuestEvent, ManualClock, Refusal, RunRef, TaskBudgets, UnixMillis, WardKey,
    WardPolicy,
};

pub use reach_destination::roads::ConfiguredResolver;

pub const CORE: &str = "core";
pub const PROVIDER: &str = "egress-provider";
pub const START: UnixMillis = UnixMillis(1_700_000_000_000);
pub const RUN: &str = "run-a2a-1";

pub type Client = PeerClient<ConfiguredResolver, RecordingDialer>;

/// One recorded decision: the attempt it bound and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub attempt_id: String,
    pub payload_digest: Sha256Digest,
    pub decision: DecisionId,
    pub redeemed: bool,
}

/// Decisions from the real ward desk: core issues, egress-provider redeems.
#[derive(Debug)]
pub struct WardAuthority {
    pub desk: Arc<Desk>,
    pub sigil: String,
    pub granted: Mutex<Vec<Granted>>,
    /// Revoke the Sigil just before issuing decision number `n` (1-based).
    pub revoke_before: Option<usize>,
    /// Advance this clock by the step before each issue (time passes between attempts).
    pub advance: Option<(ManualClock, Duration)>,
}

fn map(e: DeskError) -> DecisionRefusal {
    match e {
        DeskError::Refused(r @ (Refusal::SigilRevoked | Refusal::DecisionRevoked)) => {
            DecisionRefusal::Revoked {
                code: r.code().to_owned(),
            }
        }
        DeskError::Refused(r) => DecisionRefusal::Refused {
            code: r.code().to_owned(),
        },
        other => DecisionRefusal::Refused {
            code: format!("ward/error: {other}"),
        },
    }
}

impl WardAuthority {
    pub fn granted(&self) -> Vec<Granted> {
        self.granted.lock().unwrap().clone()
    }
}

impl DecisionAuthority for WardAuthority {
    async fn obtain_decision(&self, attempt: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        let n = self.granted.lock().unwrap().len() + 1;
        if self.revoke_before == Some(n) {
            self.desk.revoke(CORE, &self.sigil).await.unwrap();
        }
        if let Some((clock, step)) = &self.advance {
            clock.advance(*step);
        }
        let issued = self
            .desk
            .issue(
                CORE,
                reach_ward_desk::DecisionRequest {
                    sigil_id: self.sigil.clone(),
                    run_id: RUN.into(),
                    attempt_id: attempt.attempt_id(),
                    destination: attempt.destination.clone(),
                    purpose: "a2a-task".into(),
                    payload_digest: attempt.payload_digest,
                    labels: vec!["public".into()],
                    policy_revision: "policy-1".into(),
                    cut_receipt_digest: Some(Sha256Digest::of(b"cut receipt")),
                    max_tokens: 0,
                    max_spend_micros: 0,
                },
            )
            .await
            .map_err(map)?;
        let id = DecisionId(issued.id.to_string());
        self.granted.lock().unwrap().push(Granted {
            attempt_id: attempt.attempt_id(),
            payload_digest: attempt.payload_digest,
            decision: id.clone(),
            redeemed: false,
        });
        Ok(id)
    }

    async fn redeem(
        &self,
        decision: &DecisionId,
        attempt: &Attempt,
    ) -> Result<(), DecisionRefusal> {
        self.desk
            .redeem(
                PROVIDER,
                &decision.0,
                &attempt.destination,
                &attempt.payload_digest,
            )
            .await
            .map_err(map)?;
        let mut g = self.granted.lock().unwrap();
        let entry = g.iter_mut().find(|x| &x.decision == decision).unwrap();
        assert!(
            !entry.redeemed,
            "a decision redeemed twice reached the library"
        );
        entry.redeemed = true;
        Ok(())
    }
}

/// A peer, a client admitted to it, ward, and a manual clock.
#[derive(Debug)]
pub struct Fixture {
    pub peer: A2aPeer,
    pub client: Client,
    pub authority: WardAuthority,
    pub clock: ManualClock,
    pub receipt: EnrollmentReceipt,
    pub dir: tempfile::TempDir,
}

pub fn ward_policy(retries: u32) -> WardPolicy {
    WardPolicy {
        budgets: TaskBudgets {
            concurrency: 1_000,
            retries,
            ..TaskBudgets::default()
        },
        ..WardPolicy::default()
    }
}

pub fn client_for(peer: &A2aPeer, url: &str) -> Client {
    let roads = Roads {
        local_roads: vec![Road {
            host: PEER_HOST.into(),
            addr: peer.addr(),
        }],
        ..Roads::default()
    };
    let admission = roads.admission(AdmissionPolicy::default()).unwrap();
    PeerClient::new(PeerConfig {
        url: url.to_owned(),
        admission: Arc::new(admission),
        connector: PinnedConnector::new(peer.root_store(), RecordingDialer::new()),
        credential: None,
        bounds: a2a_bounds(),
    })
    .unwrap()
}

impl Fixture {
    pub async fn new(script: Script) -> Self {
        Self::with(script, ward_policy(1_000)).await
    }

    pub async fn with(script: Script, policy: WardPolicy) -> Self {
        let peer = A2aPeer::start(script).await;
        let client = client_for(&peer, &peer.url());
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(START);
        let desk = Desk::open(
            &dir.path().join("ward.sqlite3"),
            WardKey::from_bytes(&[9; 32]).unwrap(),
            policy,
            Arc::new(clock.clone()),
        )
        .await
        .unwrap();
        let admission = desk
            .admit(
                CORE,
                GuestEvent {
                    platform: "discord".into(),
                    application: "app-1".into(),
                    guild: "g1".into(),
                    channel: "c1".into(),
                    subject: "u1".into(),
                },
                RunRef {
                    run_id: RUN.into(),
                    deadline: None,
                },
            )
            .await
            .unwrap();
        let authority = WardAuthority {
            desk: Arc::new(desk),
            sigil: admission.sigil.id.to_string(),
            granted: Mutex::new(Vec::new()),
            revoke_before: None,
            advance: None,
        };
        let receipt = EnrollmentReceipt::without_resend(peer.url());
        Fixture {
            peer,
            client,
            authority,
            clock,
            receipt,
            dir,
        }
    }

    pub fn intercom(&self) -> Intercom<'_, Client, WardAuthority> {
        Intercom {
            client: &self.client,
            authority: &self.authority,
            receipt: &self.receipt,
            journal: &NoJournal,
            clock: Arc::new(self.clock.clone()),
        }
    }

    /// A task for `task_id` with `max_polls` polls, 2 ms apart, and a deadline an hour away.
    pub fn task(&self, task_id: &str, max_polls: u32) -> OutboundTask {
        OutboundTask::new(TaskSpec {
            task_id: task_id.into(),
            message_id: format!("msg-{task_id}"),
            context_id: None,
            parts: vec![Part::text("What does the corpus say about leases?")],
            deadline: START.plus(Duration::from_secs(3600)),
            polls: PollBudget {
                max_polls,
                interval: Duration::from_millis(2),
            },
        })
        .unwrap()
    }

    /// Physical connections the client opened.
    pub fn dials(&self) -> usize {
        self.client.connector().dialer().dials().len()
    }
}
