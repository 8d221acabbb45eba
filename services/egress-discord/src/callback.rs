//! The reply to an `/ask` interaction: its callback (type 4), sent once.
//!
//! The intent carries the interaction token sealed to this role's key
//! (`reach_discord::seal`); it is opened here, right before the callback, and lives only in this
//! process's memory. The decision core obtained binds the token-free callback destination and
//! the digest of the exact callback body, so ward admits this one reply to this one
//! interaction. Discord accepts one callback per interaction: 10062 (expired or unknown
//! interaction) is a KNOWN_REJECTED; a lost answer or 40060 (already acknowledged) is UNKNOWN and
//! is reconciled from the interaction's original response, never by calling back again.
//!
//! A slow answer's interaction is acknowledged first ([`defer`], type 5, when core hands out an
//! `InteractionDeferral`); the answer then edits `@original` instead of calling back
//! (`DeliveryIntent.interaction_deferred`). An edit refused with 10008, or with 10015 while the
//! interaction's token is alive (what Discord reportedly answers before any callback), found no
//! original yet (the acknowledgement has not landed): Discord accepted nothing, so the same edit
//! is tried again a bounded number of times. An UNKNOWN edit is reconciled like a callback, by reading
//! `@original` and comparing its content with ours.

use std::time::Duration;

use reach_discord::Snowflake;
use reach_discord::delivery::{
    CreateOutcome, DeferredAck, FollowUp, InteractionReply, InteractionRoute, OriginalEdit,
    deferral_attempt_id, interaction_callback_url, token_placeholder,
};
use reach_discord::model::InteractionToken;
use reach_discord::rest::{CallbackOutcome, original_not_yet, unix_ms};
use reach_discord::seal::{SealBinding, SealError, SealKeyring, SealedToken};
use reach_proto::core::v1::{DeliveryIntent, DeliveryOutcome, InteractionDeferral};

use crate::deliver::{Gate, Sent, Unknown};
use crate::send::{self, MAX_UNACCEPTED_TRIES, Next, settle};

/// Why an interaction intent cannot be sent by this gate. Nothing leaves; the lease lapses.
#[derive(Debug, thiserror::Error)]
pub enum CallbackRefusal {
    #[error("callback/no-seal-key: this gate holds no interaction-seal key")]
    NoKey,
    #[error("callback/bad-intent: the intent names no valid interaction or content")]
    BadIntent,
    #[error("callback/sealed-token: {0}")]
    Sealed(#[from] SealError),
}

/// One interaction's reply, with its opened token.
pub struct Callback {
    pub application_id: Snowflake,
    pub reply: InteractionReply,
    pub token: InteractionToken,
    /// The reply edits the deferred original (`DeliveryIntent.interaction_deferred`) instead of
    /// calling back; reconciliation judges `@original` accordingly.
    pub edit: bool,
    /// A later part: a follow-up message (`DeliveryIntent.interaction_follow_up`), reconciled
    /// from the pages of `channel_id`.
    pub follow_up: bool,
    pub channel_id: Snowflake,
}

impl Callback {
    /// Opens the intent's sealed token for exactly its interaction (the seal's AAD).
    pub fn open(
        intent: &DeliveryIntent,
        key: Option<&SealKeyring>,
    ) -> Result<Self, CallbackRefusal> {
        let content = intent
            .parts
            .first()
            .ok_or(CallbackRefusal::BadIntent)?
            .clone();
        let channel_id = match intent.channel_id.parse::<Snowflake>() {
            Ok(c) => c,
            Err(_) if !intent.interaction_follow_up => Snowflake(0),
            Err(_) => return Err(CallbackRefusal::BadIntent),
        };
        let (application_id, interaction_id, token) = open_token(
            key,
            &intent.application_id,
            &intent.interaction_id,
            &intent.sealed_interaction_token,
        )?;
        Ok(Self {
            application_id,
            reply: InteractionReply {
                interaction_id,
                content,
            },
            token,
            edit: intent.interaction_deferred,
            follow_up: intent.interaction_follow_up,
            channel_id,
        })
    }
}

/// Opens a sealed interaction token for exactly the interaction it names.
fn open_token(
    key: Option<&SealKeyring>,
    application_id: &str,
    interaction_id: &str,
    sealed: &[u8],
) -> Result<(Snowflake, Snowflake, InteractionToken), CallbackRefusal> {
    let key = key.ok_or(CallbackRefusal::NoKey)?;
    let (Ok(application_id), Ok(interaction_id)) = (
        application_id.parse::<Snowflake>(),
        interaction_id.parse::<Snowflake>(),
    ) else {
        return Err(CallbackRefusal::BadIntent);
    };
    let binding = SealBinding {
        application_id,
        interaction_id,
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let token = key.open(binding, &SealedToken::from_bytes(sealed.to_vec()), now_ms)?;
    Ok((application_id, interaction_id, token))
}

/// Edits of a deferred interaction's original tried while Discord answers that the
/// acknowledgement has not landed yet ([`original_not_yet`]), [`EDIT_RETRY`] apart: about three seconds.
const MAX_EARLY_EDITS: u32 = 10;
const EDIT_RETRY: Duration = Duration::from_millis(300);

/// Acknowledges one interaction (type 5) under the decision core issued for it: opened,
/// redeemed for exactly the token-free callback destination and the type-5 body, sent once
/// (again only after a 429 or a send that never left). Its outcome is logged, not settled: the
/// answer's edit of `@original` is what proves the acknowledgement landed.
pub async fn defer(gate: Gate<'_>, key: Option<&SealKeyring>, d: InteractionDeferral) {
    let Gate {
        ward, rest, base, ..
    } = gate;
    let (_, id, token) = match open_token(
        key,
        &d.application_id,
        &d.interaction_id,
        &d.sealed_interaction_token,
    ) {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(turn = %d.turn_id, code = %why, "interaction acknowledgement not sendable; not sent");
            return;
        }
    };
    let ack = DeferredAck { interaction_id: id };
    let destination = interaction_callback_url(base, id, &token_placeholder(id));
    let redeemed =
        reach_egress_gate::redeem(ward, &d.egress_decision_id, &destination, &ack.body_bytes())
            .await;
    match redeemed {
        Ok(r) if r.attempt_id() == deferral_attempt_id(&d.turn_id) => {}
        Ok(r) => {
            tracing::warn!(turn = %d.turn_id, attempt = %r.attempt_id(), "decision/attempt-mismatch; acknowledgement not sent");
            return;
        }
        Err(r) => {
            tracing::warn!(turn = %d.turn_id, code = %r.code(), "EgressDecision not redeemed; acknowledgement not sent");
            return;
        }
    }
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = rest.defer_interaction(&ack, &token).await;
        match outcome {
            // Waited out exactly, and only when the acknowledgement can still land inside
            // Discord's 3-second window (from the interaction's snowflake): a try Discord
            // would refuse anyway is not sent.
            CallbackOutcome::RateLimited { retry_after, .. }
                if tries < MAX_UNACCEPTED_TRIES && fits_window(ack.interaction_id, retry_after) =>
            {
                tokio::time::sleep(retry_after).await;
            }
            CallbackOutcome::NotSent { .. } if tries < MAX_UNACCEPTED_TRIES => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            CallbackOutcome::Sent { .. } | CallbackOutcome::Acknowledged => {
                tracing::info!(turn = %d.turn_id, "interaction acknowledged (deferred)");
                return;
            }
            other => {
                tracing::warn!(turn = %d.turn_id, outcome = ?other, "interaction acknowledgement not accepted; never resent");
                return;
            }
        }
    }
}

/// Whether a try of interaction `id`'s first response after `wait` still lands inside
/// Discord's response window, with [`WINDOW_MARGIN`] to spare for its time in flight.
fn fits_window(id: Snowflake, wait: Duration) -> bool {
    let deadline = id.created_at_ms() + RESPONSE_WINDOW.as_millis() as u64;
    unix_ms() + (wait + WINDOW_MARGIN).as_millis() as u64 <= deadline
}

/// Discord's window for an interaction's first response.
const RESPONSE_WINDOW: Duration = Duration::from_secs(3);
/// What a retried acknowledgement leaves for its own time in flight.
const WINDOW_MARGIN: Duration = Duration::from_millis(300);

/// Sends one claimed interaction intent. Returns it when its outcome is UNKNOWN.
pub async fn deliver(
    gate: Gate<'_>,
    key: Option<&SealKeyring>,
    intent: DeliveryIntent,
) -> Option<Unknown> {
    let Gate {
        core,
        ward,
        rest,
        base,
    } = gate;
    let callback = match Callback::open(&intent, key) {
        Ok(c) => c,
        // A gate without the key leaves the intent to one that holds it (the lease lapses).
        Err(why @ CallbackRefusal::NoKey) => {
            tracing::warn!(intent = %intent.intent_id, code = %why, "interaction reply not sendable; not sent");
            return None;
        }
        // No gate can ever open it (a retired or unknown key, a blob for another interaction):
        // settled NOT_ATTEMPTED with its typed code, never claimed or sent again.
        Err(why) => {
            tracing::warn!(intent = %intent.intent_id, code = %why, "interaction reply can never be sent; settled not attempted");
            let code = why.to_string();
            settle(
                core,
                &intent,
                DeliveryOutcome::NotAttempted,
                0,
                code,
                String::new(),
            )
            .await;
            return None;
        }
    };
    let id = callback.reply.interaction_id;
    let content = callback.reply.content.clone();
    let webhook = if callback.follow_up {
        Some(Webhook::FollowUp(FollowUp { content }))
    } else if callback.edit {
        Some(Webhook::Edit(OriginalEdit { content }))
    } else {
        None
    };
    let application_id = callback.application_id;
    let route = match &webhook {
        Some(Webhook::Edit(_)) => InteractionRoute::EditOriginal { application_id },
        Some(Webhook::FollowUp(_)) => InteractionRoute::FollowUp { application_id },
        None => InteractionRoute::Callback,
    };
    let (destination, body) = route.bound_send(base, id, &callback.reply.content);
    if !send::cleared(core, ward, &intent, &destination, &body).await {
        return None;
    }
    if let Some(webhook) = webhook {
        let gate = Gate {
            core,
            ward,
            rest,
            base,
        };
        return send_webhook(gate, intent, callback, webhook).await;
    }
    // A lost callback or 40060 is UNKNOWN: reconciled from the original response, never
    // calling back again.
    let mut unaccepted = 0;
    loop {
        let verdict = rest
            .interaction_callback(&callback.reply, &callback.token)
            .await
            .into();
        match send::conclude(core, &intent, verdict, &mut unaccepted, "callback").await {
            Next::Again => {}
            Next::Settled => return None,
            Next::Unknown => return Some(Unknown::new(intent.intent_id, Sent::Callback(callback))),
        }
    }
}

/// A reply sent through the interaction's webhook rather than its callback.
enum Webhook {
    /// The answer to a deferred interaction: an edit of its original response.
    Edit(OriginalEdit),
    /// A later part: a follow-up message.
    FollowUp(FollowUp),
}

/// Sends an edit of the original response or a follow-up, after SUBMITTING. Returns it when
/// its outcome is UNKNOWN.
async fn send_webhook(
    gate: Gate<'_>,
    intent: DeliveryIntent,
    callback: Callback,
    webhook: Webhook,
) -> Option<Unknown> {
    let core = gate.core;
    let (mut early, mut unaccepted) = (0, 0);
    let app = callback.application_id;
    let route = match &webhook {
        Webhook::Edit(_) => "edit original",
        Webhook::FollowUp(_) => "follow-up",
    };
    loop {
        let outcome = match &webhook {
            Webhook::Edit(edit) => gate.rest.edit_original(app, edit, &callback.token).await,
            Webhook::FollowUp(f) => gate.rest.execute_follow_up(app, f, &callback.token).await,
        };
        // No original yet: the acknowledgement has not landed (10008, or 10015 while the token
        // is alive). Nothing was edited.
        if let CreateOutcome::KnownRejected { code, .. } = outcome
            && matches!(webhook, Webhook::Edit(_))
            && original_not_yet(code, callback.reply.interaction_id, unix_ms())
            && early + 1 < MAX_EARLY_EDITS
        {
            early += 1;
            tokio::time::sleep(EDIT_RETRY).await;
            continue;
        }
        match send::conclude(core, &intent, outcome.into(), &mut unaccepted, route).await {
            Next::Again => {}
            Next::Settled => return None,
            Next::Unknown => return Some(Unknown::new(intent.intent_id, Sent::Callback(callback))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: u64 = 1_100_000_000_000_000_001;
    const ID: u64 = 1_250_000_000_000_000_001;

    use reach_discord::seal::{self, SealSecretKey};

    fn ring(key: &SealSecretKey) -> SealKeyring {
        SealKeyring::single(SealSecretKey::from_bytes(&key.to_bytes()).unwrap())
    }

    fn intent(key: &SealSecretKey, sealed_for: u64) -> DeliveryIntent {
        let binding = SealBinding {
            application_id: Snowflake(APP),
            interaction_id: Snowflake(sealed_for),
        };
        let blob = seal::seal(&key.public_key(), binding, &InteractionToken("tok".into())).unwrap();
        DeliveryIntent {
            intent_id: "int_1".into(),
            interaction_id: ID.to_string(),
            application_id: APP.to_string(),
            sealed_interaction_token: blob.into_bytes(),
            parts: vec!["the answer".into()],
            ..Default::default()
        }
    }

    #[test]
    fn opens_the_token_of_its_own_interaction() {
        let key = SealSecretKey::generate().unwrap();
        let c = Callback::open(&intent(&key, ID), Some(&ring(&key))).unwrap();
        assert_eq!(c.token.0, "tok");
        assert_eq!(c.reply.interaction_id, Snowflake(ID));
        assert_eq!(c.reply.content, "the answer");
    }

    #[test]
    fn a_gate_without_the_key_sends_nothing() {
        let key = SealSecretKey::generate().unwrap();
        let err = Callback::open(&intent(&key, ID), None).err().unwrap();
        assert!(matches!(err, CallbackRefusal::NoKey), "{err}");
    }

    #[test]
    fn a_blob_sealed_for_another_interaction_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let err = Callback::open(&intent(&key, ID + 1), Some(&ring(&key)))
            .err()
            .unwrap();
        assert!(
            matches!(err, CallbackRefusal::Sealed(SealError::Open)),
            "{err}"
        );
    }

    #[test]
    fn a_tampered_or_truncated_blob_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let mut i = intent(&key, ID);
        let last = i.sealed_interaction_token.len() - 1;
        i.sealed_interaction_token[last] ^= 1;
        let err = Callback::open(&i, Some(&ring(&key))).err().unwrap();
        assert!(
            matches!(err, CallbackRefusal::Sealed(SealError::Open)),
            "{err}"
        );
        i.sealed_interaction_token.truncate(10);
        let err = Callback::open(&i, Some(&ring(&key))).err().unwrap();
        assert!(
            matches!(err, CallbackRefusal::Sealed(SealError::Truncated(10))),
            "{err}"
        );
    }

    #[test]
    fn an_intent_without_interaction_or_content_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let mut i = intent(&key, ID);
        i.parts.clear();
        assert!(matches!(
            Callback::open(&i, Some(&ring(&key))).err().unwrap(),
            CallbackRefusal::BadIntent
        ));
        let mut i = intent(&key, ID);
        i.interaction_id = "not-a-snowflake".into();
        assert!(matches!(
            Callback::open(&i, Some(&ring(&key))).err().unwrap(),
            CallbackRefusal::BadIntent
        ));
    }
}
