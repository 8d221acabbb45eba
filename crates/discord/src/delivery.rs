//! The delivery values shared by core (which commits them in a DiscordDeliveryIntent) and
//! egress-discord (which sends them): the nonce, the exact Create Message body, and the typed
//! outcomes of an attempt and of a reconciliation. Pure: no network code, so core can use
//! them without linking an HTTP client.

use std::fmt;
use std::time::Duration;

use reach_digest::Sha256Digest;
use serde_json::{Value, json};

use crate::model::Snowflake;

/// Discord's message flag SUPPRESS_EMBEDS (1 << 2).
pub const FLAG_SUPPRESS_EMBEDS: u64 = 1 << 2;
/// Longest nonce Discord accepts (25 characters).
pub const MAX_NONCE_LEN: usize = 25;
/// Longest message content Discord accepts from a bot, in characters.
pub const MAX_CONTENT_CHARS: usize = 2_000;
/// Messages per channel-read page (Discord's maximum).
pub const RECONCILE_PAGE: u8 = 100;
/// A deterministic Create Message nonce: 1 to 25 characters of `[A-Za-z0-9_-]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nonce(String);

/// The nonce text is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("nonce must be 1 to 25 characters of [A-Za-z0-9_-]")]
pub struct InvalidNonce;

impl Nonce {
    /// Validate a nonce.
    pub fn new(text: &str) -> Result<Self, InvalidNonce> {
        let ok = !text.is_empty()
            && text.len() <= MAX_NONCE_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(Nonce(text.to_owned()))
        } else {
            Err(InvalidNonce)
        }
    }

    /// Derive the nonce of a delivery intent from its digest: the first 25 hex digits (100
    /// bits), so the same intent always sends the same nonce.
    pub fn derive(intent_digest: &Sha256Digest) -> Self {
        let hex = intent_digest.hex();
        Nonce(hex[..MAX_NONCE_LEN].to_owned())
    }

    /// The nonce text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One Create Message request, as the delivery intent fixes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateMessage {
    /// The channel or thread to post in.
    pub channel_id: Snowflake,
    /// The rendered text (at most [`MAX_CONTENT_CHARS`]).
    pub content: String,
    /// The intent's deterministic nonce.
    pub nonce: Nonce,
    /// The question message to reply to.
    pub reply_to: Option<Snowflake>,
}

impl CreateMessage {
    /// The exact JSON body sent.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "content": self.content,
            "nonce": self.nonce.as_str(),
            "enforce_nonce": true,
            "allowed_mentions": {"parse": []},
            "flags": FLAG_SUPPRESS_EMBEDS,
        });
        if let Some(reply) = self.reply_to {
            body["message_reference"] = json!({
                "message_id": reply.to_string(),
                "fail_if_not_exists": false,
            });
        }
        body
    }

    /// The body bytes (what an EgressDecision's payload digest covers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body().to_string().into_bytes()
    }

    /// The digest of [`CreateMessage::body_bytes`].
    pub fn payload_digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.body_bytes())
    }
}

/// What one Create Message attempt established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    /// Discord created the message (or, for a nonce it already saw, returned the original).
    KnownSent {
        /// The message id.
        message_id: Snowflake,
    },
    /// Discord refused the request (4xx other than 429): nothing was created.
    KnownRejected {
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code, when it sent one.
        code: Option<u64>,
    },
    /// 429: Discord did not accept the request. The caller decides whether to wait
    /// `retry_after` and send again under the same intent; that is allowed only when no
    /// earlier attempt of that intent may have been accepted (every earlier attempt ended in
    /// `NotSent` or `RateLimited`), because Discord's nonce deduplication has no stated
    /// window that could make a resend safe.
    RateLimited {
        /// How long Discord asked us to wait.
        retry_after: Duration,
        /// Whether the limit is global.
        global: bool,
    },
    /// No byte of the request left the body (admission, connect or TLS failed, or the request
    /// did not match its admitted destination). The intent may be sent again under a fresh
    /// egress decision.
    NotSent {
        /// A secret-free reason code.
        reason: String,
    },
    /// The request may have been accepted: timeout, connection drop after the request was
    /// written, 5xx, or an unreadable return. Settle UNKNOWN; never resend; reconcile.
    Unknown {
        /// A secret-free reason code.
        reason: String,
    },
}

/// What a channel read established about our nonce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconciliation {
    /// The bot's message carrying our nonce (or, when Discord omits nonces from reads, our
    /// exact content replying to our question) exists.
    Found {
        /// The message id.
        message_id: Snowflake,
    },
    /// The whole channel after the question was read and no message of ours is there.
    /// Meaningful only after `rest::RECONCILE_SETTLE` has passed since the attempt ended.
    ProvedAbsent,
    /// The read failed or could not cover the window: keep UNKNOWN.
    Inconclusive {
        /// A secret-free reason code.
        reason: String,
    },
}

/// The attempt id an EgressDecision binds for one delivery claim: an intent at one claim
/// generation. Core issues under it and egress-discord checks it on redemption.
pub fn decision_attempt_id(intent_id: &str, generation: u64) -> String {
    format!("{intent_id}#g{generation}")
}

/// The Create Message URL a delivery's EgressDecision binds, under the gate's REST base.
pub fn create_message_url(base: &str, channel_id: &str) -> String {
    format!("{base}/channels/{channel_id}/messages")
}

/// The exact GET URL of one reconciliation page: up to [`RECONCILE_PAGE`] messages of the
/// channel after `after`, under the gate's REST base. Core binds a read's EgressDecision to it
/// and the gate reads exactly it, so both build it here.
pub fn channel_read_url(base: &str, channel_id: &str, after: Snowflake) -> String {
    format!(
        "{}?after={after}&limit={RECONCILE_PAGE}",
        create_message_url(base, channel_id)
    )
}

/// The bytes a channel read's EgressDecision digest covers: the exact request, method and URL
/// (a GET has no body), so a decision for one page admits no other request.
pub fn channel_read_request(url: &str) -> Vec<u8> {
    format!("GET {url}\n").into_bytes()
}

/// CHANNEL_MESSAGE_WITH_SOURCE: answer an application command with a message.
pub const INTERACTION_CHANNEL_MESSAGE: u64 = 4;

/// The reply to one `/ask` interaction, as an interaction callback (type 4). Discord accepts at
/// most one callback per interaction, so the interaction id is the reply's deduplication key
/// (a second callback is refused with 40060) and no nonce is needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractionReply {
    /// The interaction answered.
    pub interaction_id: Snowflake,
    /// The rendered text (at most [`MAX_CONTENT_CHARS`]).
    pub content: String,
}

impl InteractionReply {
    /// The exact JSON body sent: the same fixed mention and embed policy as a Create Message.
    pub fn body(&self) -> Value {
        json!({
            "type": INTERACTION_CHANNEL_MESSAGE,
            "data": {
                "content": self.content,
                "allowed_mentions": {"parse": []},
                "flags": FLAG_SUPPRESS_EMBEDS,
            },
        })
    }

    /// The body bytes (what an EgressDecision's payload digest covers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body().to_string().into_bytes()
    }
}

/// The path segment standing for interaction `id`'s token in the destinations a decision
/// binds. The token is a credential: core and ward never see it, so a decision names the
/// interaction (which has exactly one token) instead, and the egress role, which alone opens
/// the token, dials the real URL.
pub fn token_placeholder(interaction_id: Snowflake) -> String {
    format!("{{token:{interaction_id}}}")
}

/// The interaction callback URL with `token` in place (`?with_response=true`, so Discord
/// answers with the message it created). Pass [`token_placeholder`] for the destination a
/// decision binds.
pub fn interaction_callback_url(base: &str, interaction_id: Snowflake, token: &str) -> String {
    format!("{base}/interactions/{interaction_id}/{token}/callback?with_response=true")
}

/// The URL of an interaction's original response (the read that reconciles an UNKNOWN
/// callback). Pass [`token_placeholder`] for the destination a decision binds.
pub fn original_response_url(base: &str, application_id: Snowflake, token: &str) -> String {
    format!("{base}/webhooks/{application_id}/{token}/messages/@original")
}

/// DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: acknowledge the command now, answer later by editing
/// the interaction's original response (Discord shows "… is thinking" until then).
pub const INTERACTION_DEFERRED_CHANNEL_MESSAGE: u64 = 5;
/// Discord's message flag LOADING (1 << 7): the original response of a deferred interaction
/// that no edit has answered yet.
pub const FLAG_LOADING: u64 = 1 << 7;

/// The deferred acknowledgement of one `/ask` interaction (type 5): sent when the answer has not
/// been committed within core's budget, so Discord's 3-second window never expires under a slow
/// answer. It carries no content; the answer then edits `@original` ([`OriginalEdit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferredAck {
    /// The interaction acknowledged.
    pub interaction_id: Snowflake,
}

impl DeferredAck {
    /// The exact JSON body sent.
    pub fn body(&self) -> Value {
        json!({ "type": INTERACTION_DEFERRED_CHANNEL_MESSAGE })
    }

    /// The body bytes (what the acknowledgement's EgressDecision digest covers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body().to_string().into_bytes()
    }
}

/// The answer to a deferred interaction: an edit of its original response
/// (`PATCH /webhooks/{application}/{token}/messages/@original`), with the same fixed mention and
/// embed policy as a callback. An edit sets the content, so sending it twice shows the user the
/// same message; it is still sent once and an UNKNOWN edit is reconciled by reading `@original`
/// and comparing the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginalEdit {
    /// The rendered text (at most [`MAX_CONTENT_CHARS`]).
    pub content: String,
}

impl OriginalEdit {
    /// The exact JSON body sent.
    pub fn body(&self) -> Value {
        webhook_body(&self.content)
    }

    /// The body bytes (what an EgressDecision's payload digest covers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body().to_string().into_bytes()
    }
}

/// The body of a webhook message (the `@original` edit or a follow-up): the text with the fixed
/// mention and embed policy.
fn webhook_body(content: &str) -> Value {
    json!({
        "content": content,
        "allowed_mentions": {"parse": []},
        "flags": FLAG_SUPPRESS_EMBEDS,
    })
}

/// A later part of an `/ask` answer: a follow-up message of the interaction
/// (`POST /webhooks/{application}/{token}?wait=true`), with the same fixed mention and embed
/// policy. Discord has no nonce for it; an UNKNOWN follow-up is reconciled from a channel read
/// that finds a message of the bot answering this interaction (`interaction_metadata.id`) with
/// exactly this content, or proves there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowUp {
    /// The rendered text (at most [`MAX_CONTENT_CHARS`]).
    pub content: String,
}

impl FollowUp {
    /// The exact JSON body sent.
    pub fn body(&self) -> Value {
        webhook_body(&self.content)
    }

    /// The body bytes (what an EgressDecision's payload digest covers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body().to_string().into_bytes()
    }
}

/// The follow-up URL of an interaction (`?wait=true`, so Discord answers with the message).
/// Pass [`token_placeholder`] for the destination a decision binds.
pub fn follow_up_url(base: &str, application_id: Snowflake, token: &str) -> String {
    format!("{base}/webhooks/{application_id}/{token}?wait=true")
}

/// Which route carries the reply to an interaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InteractionRoute {
    /// The interaction callback (a type-4 response).
    Callback,
    /// An edit of the acknowledged (deferred) original response.
    EditOriginal { application_id: Snowflake },
    /// A follow-up message: a later part of the answer.
    FollowUp { application_id: Snowflake },
}

impl InteractionRoute {
    /// The token-free destination and the exact body bytes of `content` sent to interaction
    /// `interaction_id` this way: what core's decision binds and what the gate redeems and
    /// sends, computed once for both.
    pub fn bound_send(
        self,
        base: &str,
        interaction_id: Snowflake,
        content: &str,
    ) -> (String, Vec<u8>) {
        let token = token_placeholder(interaction_id);
        let content = content.to_owned();
        match self {
            InteractionRoute::Callback => (
                interaction_callback_url(base, interaction_id, &token),
                InteractionReply {
                    interaction_id,
                    content,
                }
                .body_bytes(),
            ),
            InteractionRoute::EditOriginal { application_id } => (
                original_response_url(base, application_id, &token),
                OriginalEdit { content }.body_bytes(),
            ),
            InteractionRoute::FollowUp { application_id } => (
                follow_up_url(base, application_id, &token),
                FollowUp { content }.body_bytes(),
            ),
        }
    }
}

/// The attempt id of interaction acknowledgement decisions: one per turn, never a second.
pub fn deferral_attempt_id(turn_id: &str) -> String {
    format!("{turn_id}#defer")
}

#[cfg(test)]
mod interaction_tests {
    use super::*;

    #[test]
    fn a_deferred_ack_is_type_5_without_content() {
        let ack = DeferredAck {
            interaction_id: Snowflake(7),
        };
        assert_eq!(ack.body_bytes(), br#"{"type":5}"#.to_vec());
    }

    #[test]
    fn an_edit_pings_nobody_and_embeds_nothing() {
        let edit = OriginalEdit {
            content: "the answer".into(),
        };
        let body = edit.body();
        assert_eq!(body["content"], "the answer");
        assert_eq!(body["allowed_mentions"]["parse"], json!([]));
        assert_eq!(body["flags"], FLAG_SUPPRESS_EMBEDS);
        assert!(body.get("type").is_none());
    }

    #[test]
    fn each_route_binds_its_token_free_url_and_exact_body() {
        let (id, app) = (Snowflake(7), Snowflake(9));
        let base = "https://discord.test/api/v10";
        let (url, body) = InteractionRoute::Callback.bound_send(base, id, "hi");
        assert_eq!(url, interaction_callback_url(base, id, "{token:7}"));
        let reply = InteractionReply {
            interaction_id: id,
            content: "hi".into(),
        };
        assert_eq!(body, reply.body_bytes());
        let (url, body) = InteractionRoute::EditOriginal {
            application_id: app,
        }
        .bound_send(base, id, "hi");
        assert_eq!(
            url,
            format!("{base}/webhooks/9/{{token:7}}/messages/@original")
        );
        assert_eq!(
            body,
            OriginalEdit {
                content: "hi".into()
            }
            .body_bytes()
        );
        let (url, body) = InteractionRoute::FollowUp {
            application_id: app,
        }
        .bound_send(base, id, "hi");
        assert_eq!(url, format!("{base}/webhooks/9/{{token:7}}?wait=true"));
        assert_eq!(
            body,
            FollowUp {
                content: "hi".into()
            }
            .body_bytes()
        );
    }

    #[test]
    fn deferral_attempts_are_named_by_their_turn() {
        assert_eq!(deferral_attempt_id("turn_1"), "turn_1#defer");
        assert_ne!(
            deferral_attempt_id("turn_1"),
            decision_attempt_id("turn_1", 0)
        );
    }
}
