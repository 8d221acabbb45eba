//! Duty Sigils: minted for one duty (a reconciliation read) on one subject (a delivery intent),
//! reused while live, budgeted in reads and time, and good for nothing but their duty.

mod common;

use std::time::Duration;

use common::*;
use reach_digest::Sha256Digest;
use reach_ward_desk::{
    Budget, DECISION_TTL, DecisionRequest, DeskError, DutyBudgets, DutyRequest, DutySigil, Refusal,
    WardPolicy,
};

const READ: &str = "discord-reconcile-read";
const INTENT: &str = "int_0001";
const READ_URL: &str = "https://discord.com:443/api/v10/channels/c1/messages?after=1&limit=100";

fn duty(subject: &str, purpose: &str) -> DutyRequest {
    DutyRequest {
        subject: subject.into(),
        purpose: purpose.into(),
    }
}

fn read_request(d: &DutySigil, attempt: &str) -> DecisionRequest {
    DecisionRequest {
        sigil_id: d.id.to_string(),
        run_id: d.subject.clone(),
        attempt_id: attempt.into(),
        destination: READ_URL.into(),
        purpose: READ.into(),
        payload_digest: Sha256Digest::of(format!("GET {READ_URL}\n")),
        labels: vec!["public".into()],
        policy_revision: "reach.reconcile-read/1".into(),
        cut_receipt_digest: None,
        max_tokens: 0,
        max_spend_micros: 0,
    }
}

fn duty_budgets(reads: u32, time: Duration) -> WardPolicy {
    WardPolicy {
        duty: DutyBudgets {
            reads,
            time_ms: time.as_millis() as u64,
            concurrency: 2,
        },
        ..WardPolicy::default()
    }
}

async fn mint(f: &Fixture) -> DutySigil {
    f.desk.mint_duty(CORE, duty(INTENT, READ)).await.unwrap()
}

#[tokio::test]
async fn a_duty_sigil_authorizes_reads_redeemed_once_by_egress_discord() {
    let f = Fixture::new().await;
    let d = mint(&f).await;
    assert!(!d.reused && d.reads_left == d.reads && d.reads == DutyBudgets::default().reads);
    let issued = f.desk.issue(CORE, read_request(&d, "r1")).await.unwrap();
    assert_eq!(issued.redeemer, DISCORD);
    let digest = Sha256Digest::of(format!("GET {READ_URL}\n"));
    let r = f
        .desk
        .redeem(DISCORD, issued.id.as_str(), READ_URL, &digest)
        .await
        .unwrap();
    assert_eq!((r.run_id(), r.purpose()), (INTENT, READ));
    let again = f
        .desk
        .redeem(DISCORD, issued.id.as_str(), READ_URL, &digest)
        .await;
    assert_eq!(refusal(again), Refusal::AlreadyRedeemed);
    let other = f
        .desk
        .redeem(PROVIDER, issued.id.as_str(), READ_URL, &digest)
        .await;
    assert_eq!(refusal(other), Refusal::WrongRedeemer);
}

#[tokio::test]
async fn a_live_duty_sigil_is_reused_with_its_budget_spent_so_far() {
    let f = Fixture::new().await;
    let d = mint(&f).await;
    f.desk.issue(CORE, read_request(&d, "r1")).await.unwrap();
    let again = mint(&f).await;
    assert_eq!(again.id, d.id);
    assert!(again.reused);
    assert_eq!(again.reads_left, d.reads - 1);
    // Another subject, or another holder, has its own.
    let other = f
        .desk
        .mint_duty(CORE, duty("int_0002", READ))
        .await
        .unwrap();
    assert_ne!(other.id, d.id);
    let stranger = f.desk.mint_duty(DISCORD, duty(INTENT, READ)).await.unwrap();
    assert_ne!(stranger.id, d.id);
}

#[tokio::test]
async fn a_spent_read_budget_refuses_until_the_duty_sigil_expires() {
    let f = Fixture::with_policy(duty_budgets(2, Duration::from_secs(300))).await;
    let d = mint(&f).await;
    f.desk.issue(CORE, read_request(&d, "r1")).await.unwrap();
    f.desk.issue(CORE, read_request(&d, "r2")).await.unwrap();
    let spent = f.desk.issue(CORE, read_request(&d, "r3")).await;
    let r = refusal(spent);
    assert_eq!(r, Refusal::OverBudget(Budget::Reads));
    assert_eq!(
        (r.code(), r.detail(), r.is_final()),
        ("decision/over-budget", "reads", true)
    );
    // Asking again returns the spent Sigil, not a fresh budget.
    let again = mint(&f).await;
    assert_eq!((again.id.clone(), again.reads_left), (d.id.clone(), 0));
    // Once it expired, its decisions are refused and a new one is minted.
    f.advance(Duration::from_secs(300));
    let expired = f.desk.issue(CORE, read_request(&d, "r4")).await;
    assert_eq!(refusal(expired), Refusal::SigilExpired);
    let fresh = mint(&f).await;
    assert!(!fresh.reused && fresh.id != d.id && fresh.reads_left == 2);
    f.desk
        .issue(CORE, read_request(&fresh, "r5"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_duty_decision_expires_with_its_sigil() {
    let f = Fixture::with_policy(duty_budgets(8, Duration::from_secs(10))).await;
    let d = mint(&f).await;
    let issued = f.desk.issue(CORE, read_request(&d, "r1")).await.unwrap();
    // The decision lives at most as long as its duty Sigil, shorter than the decision TTL.
    assert!(Duration::from_secs(10) < DECISION_TTL);
    assert_eq!(issued.expires_at, d.expires_at);
    f.advance(Duration::from_secs(10));
    let r = f
        .desk
        .redeem(
            DISCORD,
            issued.id.as_str(),
            READ_URL,
            &Sha256Digest::of(format!("GET {READ_URL}\n")),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionExpired);
}

#[tokio::test]
async fn a_duty_sigil_cannot_authorize_a_create_message() {
    let f = Fixture::new().await;
    let d = mint(&f).await;
    let create = DecisionRequest {
        purpose: "discord-delivery".into(),
        destination: DISCORD_REST.into(),
        ..read_request(&d, "g1")
    };
    let r = f.desk.issue(CORE, create).await;
    let r = refusal(r);
    assert_eq!((r.code(), r.is_final()), ("sigil/purpose-mismatch", true));
    // Nor a model call, whatever else it binds.
    let model = DecisionRequest {
        purpose: "model-completion".into(),
        cut_receipt_digest: Some(Sha256Digest::of(b"receipt")),
        ..read_request(&d, "m1")
    };
    assert_eq!(
        refusal(f.desk.issue(CORE, model).await),
        Refusal::PurposeMismatch
    );
}

#[tokio::test]
async fn a_task_sigil_cannot_ask_for_a_duty_purpose() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let req = DecisionRequest {
        purpose: READ.into(),
        ..discord_request(&a, "att-1", b"GET")
    };
    assert_eq!(
        refusal(f.desk.issue(CORE, req).await),
        Refusal::PurposeMismatch
    );
}

#[tokio::test]
async fn a_duty_sigil_binds_its_subject_and_holder() {
    let f = Fixture::new().await;
    let d = mint(&f).await;
    let other_intent = DecisionRequest {
        run_id: "int_other".into(),
        ..read_request(&d, "r1")
    };
    assert_eq!(
        refusal(f.desk.issue(CORE, other_intent).await),
        Refusal::RunMismatch
    );
    // Its `duty/…` row id is not a run it can be asked under either.
    let as_run = DecisionRequest {
        run_id: format!("duty/{}", d.id),
        ..read_request(&d, "r1")
    };
    assert_eq!(
        refusal(f.desk.issue(CORE, as_run).await),
        Refusal::RunMismatch
    );
    // Only its holder may issue on it.
    assert_eq!(
        refusal(f.desk.issue(DISCORD, read_request(&d, "r1")).await),
        Refusal::UnknownSigil
    );
}

#[tokio::test]
async fn only_duty_purposes_mint_duty_sigils() {
    let f = Fixture::new().await;
    let r = f
        .desk
        .mint_duty(CORE, duty(INTENT, "discord-delivery"))
        .await;
    assert_eq!(refusal(r), Refusal::PurposeMismatch);
    let r = f.desk.mint_duty(CORE, duty(INTENT, "exfiltrate")).await;
    assert_eq!(refusal(r), Refusal::PurposeNotAdmitted);
    let r = f.desk.mint_duty(CORE, duty("", READ)).await;
    assert!(matches!(r, Err(DeskError::Malformed("subject"))), "{r:?}");
}

#[tokio::test]
async fn a_revoked_duty_sigil_refuses_and_is_not_returned_again() {
    let f = Fixture::new().await;
    let d = mint(&f).await;
    let issued = f.desk.issue(CORE, read_request(&d, "r1")).await.unwrap();
    let rev = f.desk.revoke("operator", d.id.as_str()).await.unwrap();
    assert_eq!(rev.decisions_revoked, 1);
    assert_eq!(
        refusal(f.desk.issue(CORE, read_request(&d, "r2")).await),
        Refusal::SigilRevoked
    );
    let r = f
        .desk
        .redeem(
            DISCORD,
            issued.id.as_str(),
            READ_URL,
            &Sha256Digest::of(format!("GET {READ_URL}\n")),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionRevoked);
    assert_ne!(mint(&f).await.id, d.id);
}

#[tokio::test]
async fn a_page_walk_is_bounded_by_reads_in_flight_not_by_reads_made() {
    let f = Fixture::with_policy(duty_budgets(8, Duration::from_secs(300))).await;
    let d = mint(&f).await;
    let digest = Sha256Digest::of(format!("GET {READ_URL}\n"));
    // Five pages one after another, each redeemed before the next is asked for: concurrency 2
    // does not stop the walk.
    for page in 0..5 {
        let issued = f
            .desk
            .issue(CORE, read_request(&d, &format!("r{page}")))
            .await
            .unwrap();
        f.desk
            .redeem(DISCORD, issued.id.as_str(), READ_URL, &digest)
            .await
            .unwrap();
    }
    // Two unredeemed reads are in flight; a third waits.
    f.desk.issue(CORE, read_request(&d, "a")).await.unwrap();
    f.desk.issue(CORE, read_request(&d, "b")).await.unwrap();
    let r = refusal(f.desk.issue(CORE, read_request(&d, "c")).await);
    assert!(!r.is_final());
    assert_eq!(r, Refusal::OverBudget(Budget::Concurrency));
}
