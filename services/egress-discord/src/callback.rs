//! The reply to an `/ask` interaction: its callback (type 4), sent once.
//!
//! The intent carries the interaction token sealed to this role's key
//! (`reach_discord::seal`); it is opened here, right before the callback, and lives only in this
//! process's memory. The decision core obtained binds the token-free callback destination and
//! the digest of the exact callback body, so ward admits this one reply to this one
//! interaction. Discord accepts one callback per interaction: 10062 (expired or unknown
//! interaction) is a KNOWN_REJECTED; a lost answer or 40060 (already acknowledged) is UNKNOWN and
//! is reconciled from the interaction's original response, never by calling back again.

use std::time::Duration;

use reach_discord::Snowflake;
use reach_discord::delivery::{InteractionReply, interaction_callback_url, token_placeholder};
use reach_discord::model::InteractionToken;
use reach_discord::rest::CallbackOutcome;
use reach_discord::seal::{self, SealBinding, SealError, SealSecretKey, SealedToken};
use reach_proto::core::v1::{DeliveryIntent, DeliveryOutcome, MarkSubmittingRequest};

use crate::deliver::{
    Gate, MAX_UNACCEPTED_TRIES, Sent, Unknown, redeem_for, settle, settle_never_accepted,
};

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
}

impl Callback {
    /// Opens the intent's sealed token for exactly its interaction (the seal's AAD).
    pub fn open(
        intent: &DeliveryIntent,
        key: Option<&SealSecretKey>,
    ) -> Result<Self, CallbackRefusal> {
        let key = key.ok_or(CallbackRefusal::NoKey)?;
        let (Ok(application_id), Ok(interaction_id)) = (
            intent.application_id.parse::<Snowflake>(),
            intent.interaction_id.parse::<Snowflake>(),
        ) else {
            return Err(CallbackRefusal::BadIntent);
        };
        let content = intent
            .parts
            .first()
            .ok_or(CallbackRefusal::BadIntent)?
            .clone();
        let binding = SealBinding {
            application_id,
            interaction_id,
        };
        let blob = SealedToken::from_bytes(intent.sealed_interaction_token.clone());
        let token = seal::open(key, binding, &blob)?;
        Ok(Self {
            application_id,
            reply: InteractionReply {
                interaction_id,
                content,
            },
            token,
        })
    }
}

/// Sends one claimed interaction intent. Returns it when its outcome is UNKNOWN.
pub async fn deliver(
    gate: Gate<'_>,
    key: Option<&SealSecretKey>,
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
        Err(why) => {
            tracing::warn!(intent = %intent.intent_id, code = %why, "interaction reply not sendable; not sent");
            return None;
        }
    };
    let id = callback.reply.interaction_id;
    let destination = interaction_callback_url(base, id, &token_placeholder(id));
    if let Err(code) = redeem_for(ward, &intent, &destination, &callback.reply.body_bytes()).await {
        tracing::warn!(intent = %intent.intent_id, %code, "EgressDecision not redeemed; not sent");
        return None;
    }
    // SUBMITTING is durable before any byte leaves; from here on this callback is never resent.
    let submitting = core
        .mark_submitting(MarkSubmittingRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            egress_decision_id: intent.egress_decision_id.clone(),
        })
        .await;
    if let Err(s) = submitting {
        tracing::info!(intent = %intent.intent_id, code = ?s.code(), "lease lost before submitting; not sent");
        return None;
    }
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = rest
            .interaction_callback(&callback.reply, &callback.token)
            .await;
        match outcome {
            CallbackOutcome::Sent { message_id } => {
                let id = message_id.to_string();
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::KnownSent,
                    200,
                    String::new(),
                    id,
                )
                .await;
                return None;
            }
            CallbackOutcome::Rejected { status, code } => {
                let code = code.map(|c| c.to_string()).unwrap_or_default();
                let status = u32::from(status);
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::KnownRejected,
                    status,
                    code,
                    String::new(),
                )
                .await;
                return None;
            }
            CallbackOutcome::RateLimited { retry_after, .. } if tries < MAX_UNACCEPTED_TRIES => {
                tokio::time::sleep(retry_after.min(Duration::from_secs(5))).await;
            }
            CallbackOutcome::NotSent { .. } if tries < MAX_UNACCEPTED_TRIES => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            CallbackOutcome::RateLimited { .. } => {
                settle_never_accepted(core, &intent, None).await;
                return None;
            }
            CallbackOutcome::NotSent { reason } => {
                settle_never_accepted(core, &intent, Some(reason)).await;
                return None;
            }
            // 40060: Discord already holds a response (an earlier attempt of this intent was
            // accepted): its message id comes from the original response, like a lost answer's.
            CallbackOutcome::Acknowledged | CallbackOutcome::Unknown { .. } => {
                tracing::warn!(intent = %intent.intent_id, ?outcome, "callback outcome unknown; reconciling from the original response, never calling back again");
                let code = "unknown".to_owned();
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::Unknown,
                    0,
                    code,
                    String::new(),
                )
                .await;
                return Some(Unknown::new(intent.intent_id, Sent::Callback(callback)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: u64 = 1_100_000_000_000_000_001;
    const ID: u64 = 1_250_000_000_000_000_001;

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
        let c = Callback::open(&intent(&key, ID), Some(&key)).unwrap();
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
        let err = Callback::open(&intent(&key, ID + 1), Some(&key))
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
        let err = Callback::open(&i, Some(&key)).err().unwrap();
        assert!(
            matches!(err, CallbackRefusal::Sealed(SealError::Open)),
            "{err}"
        );
        i.sealed_interaction_token.truncate(10);
        let err = Callback::open(&i, Some(&key)).err().unwrap();
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
            Callback::open(&i, Some(&key)).err().unwrap(),
            CallbackRefusal::BadIntent
        ));
        let mut i = intent(&key, ID);
        i.interaction_id = "not-a-snowflake".into();
        assert!(matches!(
            Callback::open(&i, Some(&key)).err().unwrap(),
            CallbackRefusal::BadIntent
        ));
    }
}
