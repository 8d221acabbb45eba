//! The driver across Reach's port split: core runs the task (decisions issued at ward, the
//! journal) over a transport that hands each attempt's exact body and decision id to the egress
//! side, which redeems at ward and carries the bytes with `reach_intercom::carry`. The
//! transport here calls `carry` directly where core would call `ProviderCall/Call`.

mod common;

use common::*;
use reach_a2a_peer::{Script, state};
use reach_digest::Sha256Digest;
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, Intercom, IntercomRefusal, NoJournal,
    Phase, Redeemed, Transmitted, Transport, carry,
};
use reach_ward_desk::{DeskError, Refusal};

/// Core's side: issues at ward; redemption is the egress role's, at byte time.
struct CoreSide<'a> {
    f: &'a Fixture,
    /// Revoke the Sigil right after issuing decision number `n` (1-based).
    revoke_after: Option<usize>,
    issued: std::sync::Mutex<usize>,
}

impl DecisionAuthority for CoreSide<'_> {
    async fn obtain_decision(&self, attempt: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        let id = self.f.authority.obtain_decision(attempt).await?;
        let n = {
            let mut issued = self.issued.lock().unwrap();
            *issued += 1;
            *issued
        };
        if self.revoke_after == Some(n) {
            self.f
                .authority
                .desk
                .revoke(CORE, &self.f.authority.sigil)
                .await
                .unwrap();
        }
        Ok(id)
    }

    async fn redeem(&self, _d: &DecisionId, _a: &Attempt) -> Result<(), DecisionRefusal> {
        Ok(())
    }
}

/// The egress side: redeems at ward as egress-provider.
struct EgressSide<'a>(&'a Fixture);

impl DecisionAuthority for EgressSide<'_> {
    async fn obtain_decision(&self, _a: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        Err(DecisionRefusal::Refused {
            code: "egress/issues-nothing".into(),
        })
    }

    async fn redeem(&self, d: &DecisionId, a: &Attempt) -> Result<(), DecisionRefusal> {
        self.0
            .authority
            .desk
            .redeem(PROVIDER, &d.0, &a.destination, &a.payload_digest)
            .await
            .map(|_| ())
            .map_err(|e| DecisionRefusal::Refused {
                code: match e {
                    DeskError::Refused(r) => r.code().to_owned(),
                    other => other.to_string(),
                },
            })
    }
}

/// Stands in for the `ProviderCall/Call` port: core hands over decision id, attempt id, body.
struct Port<'a>(&'a Fixture);

impl Transport for Port<'_> {
    type Ready = (DecisionId, String, Vec<u8>);

    fn url(&self) -> String {
        self.0.client.url()
    }

    async fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> Result<Self::Ready, IntercomRefusal> {
        Ok((
            redeemed.decision().clone(),
            redeemed.attempt().attempt_id(),
            body,
        ))
    }

    async fn transmit(&self, (decision, attempt, body): Self::Ready) -> Transmitted {
        carry(
            &self.0.client,
            &EgressSide(self.0),
            decision,
            &attempt,
            body,
        )
        .await
    }
}

fn core<'a>(
    f: &'a Fixture,
    side: &'a CoreSide<'a>,
    port: &'a Port<'a>,
) -> Intercom<'a, Port<'a>, CoreSide<'a>> {
    Intercom {
        client: port,
        authority: side,
        receipt: &f.receipt,
        journal: &NoJournal,
        clock: std::sync::Arc::new(f.clock.clone()),
    }
}

#[tokio::test]
async fn core_drives_and_the_egress_side_redeems_each_attempt_once() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 1)).await;
    let side = CoreSide {
        f: &f,
        revoke_after: None,
        issued: Default::default(),
    };
    let port = Port(&f);
    let mut task = f.task("t-split", 10);
    assert_eq!(
        core(&f, &side, &port).run(&mut task).await.unwrap(),
        Phase::Succeeded
    );
    let granted = f.authority.granted();
    let requests = f.peer.requests();
    assert_eq!(granted.len(), 3, "send and two polls");
    assert_eq!(requests.len(), 3);
    for (g, r) in granted.iter().zip(&requests) {
        assert_eq!(g.payload_digest, Sha256Digest::of(&r.body));
        // The egress side redeemed it; nobody can again.
        let again = f
            .authority
            .desk
            .redeem(PROVIDER, &g.decision.0, &f.client.url(), &g.payload_digest)
            .await;
        assert!(matches!(
            again,
            Err(DeskError::Refused(Refusal::AlreadyRedeemed))
        ));
    }
}

#[tokio::test]
async fn a_send_the_egress_side_refuses_to_carry_fails_without_a_byte() {
    let f = Fixture::new(Script::default()).await;
    // Revoked between issue and redemption: ward refuses the egress side's redemption.
    let side = CoreSide {
        f: &f,
        revoke_after: Some(1),
        issued: Default::default(),
    };
    let port = Port(&f);
    let mut task = f.task("t-split-refused", 10);
    assert_eq!(
        core(&f, &side, &port).run(&mut task).await.unwrap(),
        Phase::Failed
    );
    assert_eq!(
        task.trail().last().unwrap().code,
        "intercom/not-transmitted: decision/revoked"
    );
    assert!(f.peer.requests().is_empty());
    assert_eq!(f.dials(), 0);
}

#[tokio::test]
async fn a_resend_the_egress_side_refuses_to_carry_leaves_the_task_uncertain() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 1,
        message_id_guarantee: true,
        ..Script::default()
    })
    .await;
    f.receipt = reach_intercom::EnrollmentReceipt::with_resend(f.peer.url(), 1);
    // The send's decision is carried; the Sigil is revoked right after the resend's is issued.
    let side = CoreSide {
        f: &f,
        revoke_after: Some(2),
        issued: Default::default(),
    };
    let port = Port(&f);
    let mut task = f.task("t-split-resend", 10);
    let ic = core(&f, &side, &port);
    assert_eq!(ic.send(&mut task).await.unwrap(), Phase::Uncertain);
    assert_eq!(ic.reconcile(&mut task).await.unwrap(), Phase::Uncertain);
    assert_eq!(
        task.trail().last().unwrap().code,
        "intercom/not-transmitted: decision/revoked"
    );
    assert_eq!(f.peer.count("SendMessage"), 1);
}
