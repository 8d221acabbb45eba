//! Interaction responses, as Discord serves them for a `/ask` command: the callback
//! (`POST /interactions/{id}/{token}/callback`, type 4 CHANNEL_MESSAGE_WITH_SOURCE) and the
//! original response behind the interaction's webhook
//! (`GET /webhooks/{application}/{token}/messages/@original`).
//!
//! Both are authorized by the interaction's token in the path, never by the bot token. An
//! interaction is answered at most once: a second callback is refused with 40060 ("Interaction
//! has already been acknowledged"), which is what makes the interaction id the deduplication key
//! of an interaction reply. Unknown ids and wrong tokens are 10062 ("Unknown interaction"), and
//! so is a first callback after the 3-second response window
//! ([`crate::INTERACTION_RESPONSE_WINDOW`], shortened by a test's script), judged when the
//! callback arrives. A read or an edit of the original before any callback is what
//! [`crate::EarlyOriginal`] says: Discord's documentation is silent, and client libraries report
//! 10015 ("Unknown Webhook") where one might expect 10008 ("Unknown Message"), so tests run both.
//!
//! A deferred acknowledgement (type 5) creates the original response as a LOADING placeholder
//! with no content; `PATCH …/messages/@original` then sets its content (and clears LOADING).

use std::collections::HashMap;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::rest::{DropConnection, MAX_CONTENT_CHARS, Reply, before_commit, error, respond};
use crate::{
    CallbackRequest, EditRequest, EmulatedMessage, Fault, INTERACTION_RESPONSE_WINDOW, Inner,
    InteractionRecord, ReadRequest, message_json,
};

/// CHANNEL_MESSAGE_WITH_SOURCE: answer the command with a message.
const CHANNEL_MESSAGE_WITH_SOURCE: u64 = 4;
/// DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: acknowledge now, edit the original later.
const DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: u64 = 5;
/// Message flag LOADING: a deferred original not yet edited.
const FLAG_LOADING: u64 = 1 << 7;

/// The two interaction routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Callback { id: String, token: String },
    Original { application: String, token: String },
    FollowUp { application: String, token: String },
}

/// Recognizes an interaction path; `None` for every other path.
pub(crate) fn route(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", "v10", "interactions", id, token, "callback"] => Some(Route::Callback {
            id: (*id).to_owned(),
            token: (*token).to_owned(),
        }),
        [
            "api",
            "v10",
            "webhooks",
            app,
            token,
            "messages",
            "@original",
        ] => Some(Route::Original {
            application: (*app).to_owned(),
            token: (*token).to_owned(),
        }),
        ["api", "v10", "webhooks", app, token] => Some(Route::FollowUp {
            application: (*app).to_owned(),
            token: (*token).to_owned(),
        }),
        _ => None,
    }
}

/// What the request brought besides its route.
pub(crate) struct Received<'a> {
    pub(crate) method: &'a Method,
    pub(crate) query: &'a str,
    pub(crate) body: &'a [u8],
    pub(crate) authorization_sent: bool,
    /// When the request arrived: a callback's response window is judged then.
    pub(crate) arrived: Instant,
}

pub(crate) fn handle(inner: &Inner, route: Route, req: Received<'_>) -> Reply {
    match (route, req.method) {
        (Route::Callback { id, token }, &Method::POST) => callback(inner, &id, &token, &req),
        (Route::Original { application, token }, &Method::GET) => {
            original(inner, &application, &token)
        }
        (Route::Original { application, token }, &Method::PATCH) => {
            edit(inner, &application, &token, &req)
        }
        (Route::FollowUp { application, token }, &Method::POST) => {
            follow_up(inner, &application, &token, &req)
        }
        _ => error(405, 0, "405: Method Not Allowed"),
    }
}

fn unknown_interaction() -> Reply {
    error(404, 10062, "Unknown interaction")
}

fn callback(inner: &Inner, id: &str, token: &str, req: &Received<'_>) -> Reply {
    let Ok(id) = id.parse::<u64>() else {
        return unknown_interaction();
    };
    let Ok(body) = serde_json::from_slice::<Value>(req.body) else {
        return error(400, 50109, "The request body contains invalid JSON.");
    };
    let mut state = inner.lock();
    let record = state.interactions.get(&id).cloned();
    let token_matched = record.as_ref().is_some_and(|r| r.token == token);
    state.callbacks.push(CallbackRequest {
        interaction_id: id,
        token_matched,
        authorization_sent: req.authorization_sent,
        body: body.clone(),
    });
    let Some(record) = record.filter(|_| token_matched) else {
        return unknown_interaction();
    };
    let fault = state.callback_faults.pop_front();
    if let Some(reply) = before_commit(fault.as_ref()) {
        return reply;
    }
    if record.original.is_some() {
        return error(400, 40060, "Interaction has already been acknowledged.");
    }
    let window = state
        .interaction_window
        .unwrap_or(INTERACTION_RESPONSE_WINDOW);
    if req.arrived.saturating_duration_since(record.created) > window {
        return unknown_interaction();
    }
    let kind = body.get("type").and_then(Value::as_u64);
    let data = body.get("data").cloned().unwrap_or(Value::Null);
    let (content, flags) = match kind {
        Some(CHANNEL_MESSAGE_WITH_SOURCE) => {
            let content = data.get("content").and_then(Value::as_str).unwrap_or("");
            if content.is_empty() {
                return error(400, 50006, "Cannot send an empty message");
            }
            if content.chars().count() > MAX_CONTENT_CHARS {
                return error(400, 50035, "Invalid Form Body");
            }
            let flags = data.get("flags").and_then(Value::as_u64).unwrap_or(0);
            (content.to_owned(), flags)
        }
        Some(DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE) => (String::new(), FLAG_LOADING),
        _ => return error(400, 50035, "Invalid Form Body"),
    };
    let message_id = inner.snowflake();
    let guild_id = state
        .channel_guilds
        .get(&record.channel_id)
        .copied()
        .unwrap_or(Some(inner.config.default_guild_id));
    let message = EmulatedMessage {
        id: message_id,
        channel_id: record.channel_id,
        guild_id,
        author_id: inner.config.bot_user_id,
        author_bot: true,
        mentions: crate::parse_mentions(&content),
        content,
        nonce: None,
        reply_to: None,
        flags,
        interaction_id: Some(id),
        interaction_user: Some(record.user_id),
        webhook_id: Some(inner.config.application_id),
    };
    let json = message_json(&message, "reach", false);
    state.messages.insert(message_id, message);
    if let Some(r) = state.interactions.get_mut(&id) {
        r.original = Some(message_id);
    }
    inner.dispatch(&mut state, "MESSAGE_CREATE", json.clone());
    drop(state);
    if fault == Some(Fault::CommitThenDrop) {
        return Err(DropConnection);
    }
    if req.query.split('&').any(|p| p == "with_response=true") {
        // A resource (the message) only for a type 4: a deferral names its loading message
        // and carries none, as Discord documents.
        let deferred = kind == Some(DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE);
        let mut body = json!({
            "interaction": {"id": id.to_string(), "type": 2,
                "response_message_id": message_id.to_string(),
                "response_message_loading": deferred, "response_message_ephemeral": false},
        });
        if !deferred {
            body["resource"] = json!({"type": kind, "message": json});
        }
        return respond(200, body);
    }
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
}

/// A webhook message's text; `None` where Discord refuses it (empty or over the limit).
fn webhook_content(body: &Value) -> Option<&str> {
    let content = body.get("content").and_then(Value::as_str).unwrap_or("");
    (!content.is_empty() && content.chars().count() <= MAX_CONTENT_CHARS).then_some(content)
}

/// The interaction a webhook token belongs to, with its id.
fn by_token(
    interactions: &HashMap<u64, InteractionRecord>,
    token: &str,
) -> Option<(u64, InteractionRecord)> {
    interactions
        .iter()
        .find(|(_, r)| r.token == token)
        .map(|(id, r)| (*id, r.clone()))
}

fn original(inner: &Inner, application: &str, token: &str) -> Reply {
    let mut state = inner.lock();
    let found = by_token(&state.interactions, token);
    state.reads.push(ReadRequest {
        channel_id: found.as_ref().map_or(0, |(_, r)| r.channel_id),
        query: "@original".into(),
    });
    if state.reads_unavailable {
        return error(503, 0, "503: Service Unavailable");
    }
    if application != inner.config.application_id.to_string() {
        return error(404, 10015, "Unknown Webhook");
    }
    let Some((_, record)) = found.filter(|(_, r)| token_alive(&state, r)) else {
        return invalid_token();
    };
    match record.original.and_then(|m| state.messages.get(&m)) {
        Some(m) => respond(200, message_json(m, "reach", false)),
        None => state.early_original.error(),
    }
}

fn edit(inner: &Inner, application: &str, token: &str, req: &Received<'_>) -> Reply {
    let Ok(body) = serde_json::from_slice::<Value>(req.body) else {
        return error(400, 50109, "The request body contains invalid JSON.");
    };
    let mut state = inner.lock();
    let found = by_token(&state.interactions, token);
    state.edits.push(EditRequest {
        interaction_id: found.as_ref().map(|(id, _)| *id),
        authorization_sent: req.authorization_sent,
        body: body.clone(),
    });
    if application != inner.config.application_id.to_string() {
        return error(404, 10015, "Unknown Webhook");
    }
    let Some((_, record)) = found.filter(|(_, r)| token_alive(&state, r)) else {
        return invalid_token();
    };
    let fault = state.edit_faults.pop_front();
    if let Some(reply) = before_commit(fault.as_ref()) {
        return reply;
    }
    let Some(message_id) = record.original else {
        return state.early_original.error();
    };
    let Some(content) = webhook_content(&body) else {
        return error(400, 50035, "Invalid Form Body");
    };
    let flags = body.get("flags").and_then(Value::as_u64).unwrap_or(0);
    let Some(message) = state.messages.get_mut(&message_id) else {
        return error(404, 10008, "Unknown Message");
    };
    message.content = content.to_owned();
    message.mentions = crate::parse_mentions(content);
    message.flags = flags & !FLAG_LOADING;
    let json = message_json(message, "reach", false);
    inner.dispatch(&mut state, "MESSAGE_UPDATE", json.clone());
    drop(state);
    if fault == Some(Fault::CommitThenDrop) {
        return Err(DropConnection);
    }
    respond(200, json)
}

/// A follow-up message (`POST /webhooks/{application}/{token}`): a new message in the
/// interaction's channel, answering the interaction, allowed once the interaction has a
/// response. No nonce, no deduplication: every accepted request is a message.
fn follow_up(inner: &Inner, application: &str, token: &str, req: &Received<'_>) -> Reply {
    let Ok(body) = serde_json::from_slice::<Value>(req.body) else {
        return error(400, 50109, "The request body contains invalid JSON.");
    };
    let mut state = inner.lock();
    let found = by_token(&state.interactions, token);
    state.follow_ups.push(EditRequest {
        interaction_id: found.as_ref().map(|(id, _)| *id),
        authorization_sent: req.authorization_sent,
        body: body.clone(),
    });
    if application != inner.config.application_id.to_string() {
        return error(404, 10015, "Unknown Webhook");
    }
    let Some((id, record)) = found.filter(|(_, r)| token_alive(&state, r)) else {
        return invalid_token();
    };
    if record.original.is_none() {
        return state.early_original.error();
    }
    let fault = state.follow_up_faults.pop_front();
    if let Some(reply) = before_commit(fault.as_ref()) {
        return reply;
    }
    let Some(content) = webhook_content(&body) else {
        return error(400, 50035, "Invalid Form Body");
    };
    let message_id = inner.snowflake();
    let guild_id = state
        .channel_guilds
        .get(&record.channel_id)
        .copied()
        .unwrap_or(Some(inner.config.default_guild_id));
    let message = EmulatedMessage {
        id: message_id,
        channel_id: record.channel_id,
        guild_id,
        author_id: inner.config.bot_user_id,
        author_bot: true,
        content: content.to_owned(),
        mentions: crate::parse_mentions(content),
        nonce: None,
        reply_to: None,
        flags: body.get("flags").and_then(Value::as_u64).unwrap_or(0),
        interaction_id: Some(id),
        interaction_user: Some(record.user_id),
        webhook_id: Some(inner.config.application_id),
    };
    let json = message_json(&message, "reach", false);
    state.messages.insert(message_id, message);
    inner.dispatch(&mut state, "MESSAGE_CREATE", json.clone());
    drop(state);
    if fault == Some(Fault::CommitThenDrop) {
        return Err(DropConnection);
    }
    // An interaction's follow-up always waits: the created message, `wait` or not.
    respond(200, json)
}

/// A token that names no interaction, or one past its lifetime: 401 50027.
fn invalid_token() -> Reply {
    error(401, 50027, "Invalid Webhook Token")
}

/// Whether an interaction's token still authorizes its webhook ([`crate::TOKEN_LIFETIME`],
/// shortened by a test's script).
fn token_alive(state: &crate::State, record: &InteractionRecord) -> bool {
    record.created.elapsed() < state.token_lifetime.unwrap_or(crate::TOKEN_LIFETIME)
}
