//! Shared builders for the desk tests: a real store in a temporary directory, a manual clock.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_ward_desk::{
    Admission, DecisionRequest, Desk, DeskError, GuestEvent, IssuedDecision, ManualClock, Refusal,
    RunRef, UnixMillis, WardKey, WardPolicy,
};

pub const CORE: &str = "core";
pub const DISCORD: &str = "egress-discord";
pub const PROVIDER: &str = "egress-provider";
pub const DISCORD_REST: &str = "https://discord.com:443/api/v10/channels/c1/messages";
pub const START: UnixMillis = UnixMillis(1_700_000_000_000);
/// The pack every step grant and HIL test uses, and its task profile's digest.
pub const PACK: &str = "demo-pack";

pub fn profile() -> Sha256Digest {
    Sha256Digest::of(b"task-profile.toml")
}

/// A clear standing for [`PACK`] at `generation`: active, bound, not paused, one profile.
pub fn standing(generation: u64, hil: reach_ward_desk::HilMode) -> reach_ward_desk::FenceRequest {
    reach_ward_desk::FenceRequest {
        pack_name: PACK.into(),
        generation,
        revoked: false,
        paused: false,
        bound_profile_digest: profile(),
        active_profile_digest: profile(),
        hil,
    }
}

#[derive(Debug)]
pub struct Fixture {
    pub desk: Arc<Desk>,
    pub clock: ManualClock,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub async fn new() -> Self {
        Self::with_policy(WardPolicy::default()).await
    }

    pub async fn with_policy(policy: WardPolicy) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(START);
        let key = WardKey::from_bytes(&[7; 32]).unwrap();
        let desk = Desk::open(
            &dir.path().join("ward.sqlite3"),
            key,
            policy,
            Arc::new(clock.clone()),
        )
        .await
        .unwrap();
        Self {
            desk: Arc::new(desk),
            clock,
            dir,
        }
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Admits a fresh run in a scope unique to `run`.
    pub async fn admit(&self, run: &str) -> Admission {
        self.desk
            .admit(
                CORE,
                event("g1", &format!("c-{run}"), &format!("u-{run}")),
                run_ref(run),
            )
            .await
            .unwrap()
    }

    pub async fn issue(
        &self,
        a: &Admission,
        attempt: &str,
        payload: &[u8],
    ) -> Result<IssuedDecision, DeskError> {
        self.desk
            .issue(CORE, discord_request(a, attempt, payload))
            .await
    }
}

pub fn event(guild: &str, channel: &str, subject: &str) -> GuestEvent {
    GuestEvent {
        platform: "discord".into(),
        application: "app-1".into(),
        guild: guild.into(),
        channel: channel.into(),
        subject: subject.into(),
    }
}

pub fn run_ref(run: &str) -> RunRef {
    RunRef {
        run_id: run.into(),
        deadline: None,
    }
}

pub fn discord_request(a: &Admission, attempt: &str, payload: &[u8]) -> DecisionRequest {
    DecisionRequest {
        sigil_id: a.sigil.id.to_string(),
        run_id: a.sigil.run_id.clone(),
        attempt_id: attempt.into(),
        destination: DISCORD_REST.into(),
        purpose: "discord-delivery".into(),
        payload_digest: Sha256Digest::of(payload),
        labels: vec!["public".into()],
        policy_revision: "policy-1".into(),
        cut_receipt_digest: None,
        max_tokens: 0,
        max_spend_micros: 0,
    }
}

/// The refusal of `r`, panicking on success or on a non-refusal error.
pub fn refusal<T: std::fmt::Debug>(r: Result<T, DeskError>) -> Refusal {
    match r {
        Err(DeskError::Refused(x)) => x,
        other => panic!("expected a refusal, got {other:?}"),
    }
}
