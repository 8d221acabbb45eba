//! The REST v10 side over HTTPS: Create Message with `nonce`/`enforce_nonce` deduplication
//! and scripted faults, the channel message listing, and Get Gateway Bot with the bot's
//! session start limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::{CreateRequest, EmulatedMessage, Fault, Inner, message_json, parse_mentions};

/// Largest request body accepted (a message is at most a few KiB).
const MAX_BODY: usize = 64 * 1024;
/// Discord's content limit in characters.
pub(crate) const MAX_CONTENT_CHARS: usize = 2_000;
/// Discord's nonce limit.
const MAX_NONCE: usize = 25;

pub(crate) async fn serve(listener: TcpListener, tls: Arc<ServerConfig>, inner: Arc<Inner>) {
    let acceptor = TlsAcceptor::from(tls);
    while let Ok((tcp, _)) = listener.accept().await {
        // As Discord's edge does: without it, Nagle holds the second flight of the handshake
        // and of the response until the client's delayed ACK (tens of milliseconds per request).
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let inner = Arc::clone(&inner);
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |req| recorded(Arc::clone(&inner), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Dropping the connection: returning an error makes hyper close it without a response.
#[derive(Debug)]
pub(crate) struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted connection drop")
    }
}

impl std::error::Error for DropConnection {}

pub(crate) type Reply = Result<Response<Full<Bytes>>, DropConnection>;

pub(crate) fn respond(status: u16, body: Value) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// The reply of a scripted fault that strikes before anything is committed (`None`: go on and
/// commit; a `CommitThenDrop` drops the connection after the commit).
pub(crate) fn before_commit(fault: Option<&Fault>) -> Option<Reply> {
    Some(match fault? {
        Fault::RateLimit { retry_after } => Ok(too_many(
            Duration::from_secs_f64(retry_after.max(0.0)),
            false,
            "scripted",
            5,
            0,
        )),
        Fault::ServerError { status } => error(*status, 0, "500: Internal Server Error"),
        Fault::Reject { status, code } => error(*status, *code, "Rejected"),
        Fault::DropBeforeCommit => Err(DropConnection),
        Fault::CommitThenDrop | Fault::LandLate { .. } => return None,
    })
}

/// A response the emulator builds whole (a 429).
pub(crate) type Response429 = Response<Full<Bytes>>;

/// The bucket headers of `route` (Discord's X-RateLimit-*; the bucket id is a digest of the
/// route, as Discord's is opaque).
pub(crate) fn bucket_headers(
    route: &str,
    limit: u32,
    remaining: u32,
    reset_after: Duration,
) -> http::HeaderMap {
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        + reset_after;
    let bucket: u64 = route.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut h = http::HeaderMap::new();
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-reset", format!("{:.3}", reset.as_secs_f64())),
        (
            "x-ratelimit-reset-after",
            format!("{:.3}", reset_after.as_secs_f64()),
        ),
        ("x-ratelimit-bucket", format!("{bucket:016x}")),
    ] {
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    h
}

/// Discord's 429: its RatelimitedResponse body (an Error, so `code` and `message`), the
/// route's bucket headers, `Retry-After`, and for the global limit `X-RateLimit-Global`.
pub(crate) fn too_many(
    wait: Duration,
    global: bool,
    route: &str,
    limit: u32,
    remaining: u32,
) -> Response429 {
    let secs = wait.as_secs_f64();
    let body = json!({"message": "You are being rate limited.", "code": 0,
        "retry_after": (secs * 1000.0).ceil() / 1000.0, "global": global});
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.extend(bucket_headers(route, limit, remaining, wait));
    let scope = if global { "global" } else { "user" };
    headers.insert("x-ratelimit-scope", http::HeaderValue::from_static(scope));
    if global {
        headers.insert("x-ratelimit-global", http::HeaderValue::from_static("true"));
    }
    if let Ok(v) = http::HeaderValue::from_str(&secs.ceil().to_string()) {
        headers.insert("retry-after", v);
    }
    r
}

pub(crate) fn error(status: u16, code: u64, message: &str) -> Reply {
    respond(status, json!({"message": message, "code": code}))
}

/// Handles one request and records what was answered ([`crate::Emulator::responses`]).
async fn recorded(inner: Arc<Inner>, req: Request<Incoming>) -> Reply {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    // Interaction routes are authorized by their token and outside the bot's global limit.
    let global = crate::interaction::route(&path).is_none();
    let response = match inner.rate_limit(&format!("{method} {path}"), global) {
        Err(limited) => *limited,
        Ok(headers) => {
            let mut response = handle(Arc::clone(&inner), req).await?;
            response.headers_mut().extend(headers);
            response
        }
    };
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    inner.lock().responses.push(crate::RestResponse {
        method,
        path,
        query,
        status: parts.status.as_u16(),
        body: bytes.to_vec(),
    });
    Ok(Response::from_parts(parts, Full::new(bytes)))
}

/// Whether a request with a body says what it is: Discord reads JSON only under
/// `Content-Type: application/json` (or a form encoding), never by guessing.
fn body_typed(req: &Request<Incoming>) -> bool {
    if !matches!(*req.method(), Method::POST | Method::PATCH | Method::PUT) {
        return true;
    }
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| {
            matches!(
                t.as_str(),
                "application/json" | "application/x-www-form-urlencoded" | "multipart/form-data"
            )
        })
}

/// Whether the request names its client as Discord requires of every HTTP API client:
/// `User-Agent: DiscordBot ($url, $versionNumber)`.
fn agent_named(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("DiscordBot (") && v.ends_with(')'))
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Reply {
    if !agent_named(&req) {
        return error(400, 0, "400: Bad Request");
    }
    if !body_typed(&req) {
        return error(400, 50109, "The request body contains invalid JSON.");
    }
    // Interaction callbacks and the interaction webhook are authorized by the interaction's
    // token in the path, not by the bot token, as on Discord.
    if let Some(route) = crate::interaction::route(req.uri().path()) {
        let method = req.method().clone();
        let query = req.uri().query().unwrap_or("").to_owned();
        let authorization_sent = req.headers().contains_key(http::header::AUTHORIZATION);
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return error(413, 40005, "Request entity too large"),
        };
        let arrived = Instant::now();
        // A callback scripted to land late is judged as of its arrival, committed after the
        // delay (in its own task, so a client that gives up does not stop it), then answered.
        let late = matches!(route, crate::interaction::Route::Callback { .. })
            .then(|| {
                let mut state = inner.lock();
                match state.callback_faults.front() {
                    Some(Fault::LandLate { after }) => {
                        let after = *after;
                        state.callback_faults.pop_front();
                        Some(after)
                    }
                    _ => None,
                }
            })
            .flatten();
        if let Some(after) = late {
            let inner = Arc::clone(&inner);
            let task = tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let request = crate::interaction::Received {
                    method: &method,
                    query: &query,
                    body: &body,
                    authorization_sent,
                    arrived,
                };
                crate::interaction::handle(&inner, route, request)
            });
            return task.await.unwrap_or(Err(DropConnection));
        }
        let request = crate::interaction::Received {
            method: &method,
            query: &query,
            body: &body,
            authorization_sent,
            arrived,
        };
        return crate::interaction::handle(&inner, route, request);
    }
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let token = auth.as_deref().and_then(|a| a.strip_prefix("Bot "));
    if !token.is_some_and(|t| inner.token_valid(t)) {
        return error(401, 0, "401: Unauthorized");
    }
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if segments.as_slice() == ["api", "v10", "gateway", "bot"] {
        return match method {
            Method::GET => gateway_bot(&inner),
            _ => error(405, 0, "405: Method Not Allowed"),
        };
    }
    let channel = match segments.as_slice() {
        ["api", "v10", "channels", id, "messages"] => id.parse::<u64>().ok(),
        _ => None,
    };
    let Some(channel) = channel else {
        return error(404, 0, "404: Not Found");
    };
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(413, 40005, "Request entity too large"),
    };
    match method {
        Method::POST => create(&inner, channel, &body),
        Method::GET => list(&inner, channel, &query),
        _ => error(405, 0, "405: Method Not Allowed"),
    }
}

fn create(inner: &Inner, channel: u64, body: &[u8]) -> Reply {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return error(400, 50109, "The request body contains invalid JSON.");
    };
    let mut state = inner.lock();
    state.creates.push(CreateRequest {
        channel_id: channel,
        body: body.clone(),
        received_at: Instant::now(),
    });
    if !state.known_channels.contains(&channel) {
        return error(404, 10003, "Unknown Channel");
    }
    let fault = state.faults.pop_front();
    if let Some(reply) = before_commit(fault.as_ref()) {
        return reply;
    }
    let content = body.get("content").and_then(Value::as_str).unwrap_or("");
    if content.is_empty() {
        return error(400, 50006, "Cannot send an empty message");
    }
    if content.chars().count() > MAX_CONTENT_CHARS {
        return error(400, 50035, "Invalid Form Body");
    }
    let nonce = match body.get("nonce") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= MAX_NONCE => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return error(400, 50035, "Invalid Form Body"),
    };
    let enforce = body.get("enforce_nonce").and_then(Value::as_bool) == Some(true);
    let now = Instant::now();
    if enforce
        && let Some(n) = &nonce
        && let Some((id, at)) = state.nonces.get(n)
        && now.duration_since(*at) <= inner.config.nonce_window
        && let Some(original) = state.messages.get(id)
    {
        // Same nonce inside the window: the original message, nothing new.
        let json = message_json(original, "reach", true);
        drop(state);
        return match fault {
            Some(Fault::CommitThenDrop) => Err(DropConnection),
            _ => respond(200, json),
        };
    }
    let reply_to = body
        .get("message_reference")
        .and_then(|r| r.get("message_id"))
        .and_then(|v| {
            v.as_str()
                .map(str::to_owned)
                .or_else(|| v.as_u64().map(|n| n.to_string()))
        })
        .and_then(|s| s.parse::<u64>().ok());
    // A reply to a message that is gone (deleted, or never in this channel): refused unless
    // `fail_if_not_exists` is false, and then Discord sends a normal message with no reference.
    let reply_to = match reply_to {
        Some(r)
            if state
                .messages
                .get(&r)
                .is_none_or(|m| m.channel_id != channel) =>
        {
            let fail = body
                .pointer("/message_reference/fail_if_not_exists")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            if fail {
                return error(400, 50035, "Invalid Form Body");
            }
            None
        }
        r => r,
    };
    // Discord pings nobody when allowed_mentions parses nothing; mentions are still listed.
    let id = inner.snowflake();
    let guild_id = state
        .channel_guilds
        .get(&channel)
        .copied()
        .unwrap_or(Some(inner.config.default_guild_id));
    let message = EmulatedMessage {
        id,
        channel_id: channel,
        guild_id,
        author_id: inner.config.bot_user_id,
        author_bot: true,
        content: content.to_owned(),
        mentions: parse_mentions(content),
        nonce: nonce.clone(),
        reply_to,
        flags: body.get("flags").and_then(Value::as_u64).unwrap_or(0),
        interaction_id: None,
        interaction_user: None,
        webhook_id: None,
    };
    let json = message_json(&message, "reach", true);
    state.messages.insert(id, message);
    if enforce && let Some(n) = nonce {
        state.nonces.insert(n, (id, now));
    }
    inner.dispatch(&mut state, "MESSAGE_CREATE", json.clone());
    drop(state);
    match fault {
        Some(Fault::CommitThenDrop) => Err(DropConnection),
        _ => respond(200, json),
    }
}

fn list(inner: &Inner, channel: u64, query: &str) -> Reply {
    let mut state = inner.lock();
    state.reads.push(crate::ReadRequest {
        channel_id: channel,
        query: query.to_owned(),
    });
    let unavailable = state.reads_unavailable;
    let known = state.known_channels.contains(&channel);
    drop(state);
    if unavailable {
        return error(503, 0, "503: Service Unavailable");
    }
    if !known {
        return error(404, 10003, "Unknown Channel");
    }
    let mut after = 0u64;
    let mut limit = 50usize;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("after", v)) => after = v.parse().unwrap_or(0),
            Some(("limit", v)) => limit = v.parse::<usize>().unwrap_or(50).clamp(1, 100),
            _ => {}
        }
    }
    let state = inner.lock();
    // The oldest `limit` messages after `after`, returned newest first, as Discord does.
    let mut page: Vec<Value> = state
        .messages
        .range(after.saturating_add(1)..)
        .filter(|(_, m)| m.channel_id == channel)
        .take(limit)
        .map(|(_, m)| {
            let name = if m.author_bot { "reach" } else { "user" };
            message_json(m, name, inner.config.nonce_in_reads)
        })
        .collect();
    page.reverse();
    respond(200, Value::Array(page))
}

/// Get Gateway Bot: the gateway URL, one shard, and the bot's session start limit as Discord
/// documents it (`reset_after` in milliseconds, rounded up so a client that waits it out is never
/// early), or a scripted answer.
fn gateway_bot(inner: &Inner) -> Reply {
    if let Some(fault) = inner.lock().gateway_bot_faults.pop_front() {
        return match fault {
            crate::GatewayBotFault::Reject { status, code } => error(status, code, "Rejected"),
            crate::GatewayBotFault::Body(body) => {
                let mut r = Response::new(Full::new(Bytes::from(body)));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                Ok(r)
            }
        };
    }
    let limit = inner.config.session_start_limit;
    let (remaining, reset_after) = inner.session_starts_left();
    let url = inner
        .config
        .gateway_bot_url
        .clone()
        .unwrap_or_else(|| inner.gateway_url.clone());
    respond(
        200,
        json!({
            "url": url,
            "shards": 1,
            "session_start_limit": {
                "total": limit.total,
                "remaining": remaining,
                "reset_after": reset_after.as_micros().div_ceil(1000) as u64,
                "max_concurrency": limit.max_concurrency,
            },
        }),
    )
}
