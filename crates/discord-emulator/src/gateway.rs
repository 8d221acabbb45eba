//! The Gateway v10 side: HELLO, IDENTIFY (token checked), READY with the resume URL,
//! HEARTBEAT/ACK, RESUME with replay, INVALID_SESSION, RECONNECT, and dispatches. As on Discord,
//! frames that are not dispatches carry `"s": null, "t": null`; a second IDENTIFY or RESUME on
//! one connection is closed 4005, and a RESUME past the session's sequence 4007 (the session is
//! gone: identify anew). Each IDENTIFY spends a session start ([`crate::SessionStartLimit`]);
//! one past the limit terminates the bot's sessions and resets its token, as Discord documents.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{SinkExt, StreamExt};
use rustls::ServerConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::{Ctl, INTENT_MESSAGE_CONTENT, Inner, KNOWN_INTENTS, SessionState};

static CONN_IDS: AtomicU64 = AtomicU64::new(1);

pub(crate) async fn serve(
    listener: TcpListener,
    inner: Arc<Inner>,
    resume_listener: bool,
    tls: Option<Arc<ServerConfig>>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    while let Ok((tcp, _)) = listener.accept().await {
        let inner = Arc::clone(&inner);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            {
                let mut state = inner.lock();
                if resume_listener {
                    state.counts.resume_connections += 1;
                } else {
                    state.counts.connections += 1;
                }
            }
            match acceptor {
                Some(acceptor) => {
                    if let Ok(stream) = acceptor.accept(tcp).await {
                        connection(stream, inner).await;
                    }
                }
                None => connection(tcp, inner).await,
            }
        });
    }
}

/// A frame that is not a dispatch: `s` and `t` are null, as Discord sends them.
fn control(op: u64, d: Value) -> String {
    json!({"op": op, "d": d, "s": null, "t": null}).to_string()
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: reason.to_owned().into(),
    }))
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    inner: Arc<Inner>,
) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let conn_id = CONN_IDS.fetch_add(1, Ordering::Relaxed);
    let hello = control(
        10,
        json!({"heartbeat_interval": inner.config.heartbeat_interval.as_millis() as u64}),
    );
    if ws.send(Message::text(hello)).await.is_err() {
        return;
    }
    // Reading and writing are independent, as on Discord's side: a client that is slow to read
    // dispatches still has its heartbeats read (and timed) on arrival.
    let (mut sink, mut ws) = ws.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if sink.send(m).await.is_err() {
                break;
            }
        }
    });
    let mut abrupt = false;
    let (tx, mut rx) = mpsc::unbounded_channel::<Ctl>();
    let mut session_id: Option<String> = None;
    let mut last_heartbeat: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            ctl = rx.recv() => {
                let Some(ctl) = ctl else { break };
                match ctl {
                    Ctl::Send(text) => {
                        if out.send(Message::text(text)).is_err() { break; }
                    }
                    Ctl::Reconnect => {
                        let _ = out.send(Message::text(control(7, Value::Null)));
                    }
                    Ctl::Drop => {
                        abrupt = true;
                        break;
                    }
                    Ctl::Close(code, reason) => {
                        // The session was removed by whoever sent this.
                        session_id = None;
                        let _ = out.send(close(code, reason));
                        break;
                    }
                    Ctl::Invalidate => {
                        if let Some(id) = session_id.take() {
                            let mut state = inner.lock();
                            state.sessions.remove(&id);
                            if state.current_session.as_ref() == Some(&id) {
                                state.current_session = None;
                            }
                        }
                        let _ = out.send(Message::text(control(9, Value::Bool(false))));
                    }
                }
            }
            msg = ws.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                    _ => break,
                };
                let Ok(payload) = serde_json::from_str::<Value>(text.as_str()) else {
                    let _ = out.send(close(4002, "decode error"));
                    break;
                };
                let op = payload.get("op").and_then(Value::as_u64).unwrap_or(u64::MAX);
                let d = payload.get("d").cloned().unwrap_or(Value::Null);
                match op {
                    1 => {
                        let now = std::time::Instant::now();
                        if let Some(prev) = last_heartbeat.replace(now) {
                            let late = (now - prev).saturating_sub(inner.config.heartbeat_interval);
                            let mut state = inner.lock();
                            state.counts.heartbeat_late_max = state.counts.heartbeat_late_max.max(late);
                        }
                        let ack = {
                            let mut state = inner.lock();
                            state.counts.heartbeats += 1;
                            !state.stop_acking
                        };
                        if ack && out.send(Message::text(control(11, Value::Null))).is_err() {
                            break;
                        }
                    }
                    // One session per connection: a second IDENTIFY or RESUME is 4005.
                    2 | 6 if session_id.is_some() => {
                        let _ = out.send(close(4005, "Already authenticated."));
                        break;
                    }
                    2 => {
                        if !token_ok(&inner, &d) {
                            inner.lock().counts.bad_tokens += 1;
                            let _ = out.send(close(4004, "Authentication failed."));
                            break;
                        }
                        let intents = d.get("intents").and_then(Value::as_u64);
                        let Some(intents) = intents.filter(|i| i & !KNOWN_INTENTS == 0) else {
                            let _ = out.send(close(4013, "Invalid intent(s)."));
                            break;
                        };
                        if intents & INTENT_MESSAGE_CONTENT != 0
                            && !inner.config.message_content_enabled
                        {
                            let _ = out.send(close(4014, "Disallowed intent(s)."));
                            break;
                        }
                        // An IDENTIFY that would start a session spends a session start; past
                        // the limit the token is reset and this IDENTIFY refused with the rest.
                        if inner.start_session().is_err() {
                            let _ = out.send(close(4004, "Authentication failed."));
                            break;
                        }
                        let outage = {
                            let mut state = inner.lock();
                            if state.identify_outage {
                                state.counts.identifies += 1;
                            }
                            state.identify_outage
                        };
                        if outage {
                            abrupt = true;
                            break;
                        }
                        let id = identify(&inner, &d, conn_id, &tx);
                        session_id = Some(id);
                    }
                    6 => {
                        if !token_ok(&inner, &d) {
                            inner.lock().counts.bad_tokens += 1;
                            let _ = out.send(close(4004, "Authentication failed."));
                            break;
                        }
                        match resume(&inner, &d, conn_id, &tx) {
                            Resume::Resumed(id) => session_id = Some(id),
                            Resume::Unknown => {
                                let _ = out.send(Message::text(control(9, Value::Bool(false))));
                            }
                            Resume::BadSeq => {
                                let _ = out.send(close(4007, "Invalid seq."));
                                break;
                            }
                        }
                    }
                    _ => {
                        let _ = out.send(close(4001, "Unknown opcode."));
                        break;
                    }
                }
            }
        }
    }
    // A dropped connection ends without a close frame; otherwise what was queued (a close
    // frame included) is written first.
    if abrupt {
        writer.abort();
    } else {
        drop(out);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
    }
    // Detach this connection from its session (if it is still the attached one).
    if let Some(id) = session_id {
        let mut state = inner.lock();
        if let Some(s) = state.sessions.get_mut(&id)
            && s.conn.as_ref().map(|(c, _)| *c) == Some(conn_id)
        {
            s.conn = None;
        }
    }
}

fn token_ok(inner: &Inner, d: &Value) -> bool {
    d.get("token")
        .and_then(Value::as_str)
        .is_some_and(|t| inner.token_valid(t))
}

fn identify(inner: &Inner, d: &Value, conn_id: u64, tx: &mpsc::UnboundedSender<Ctl>) -> String {
    let id = format!("session-{:016x}", inner.snowflake());
    let mut state = inner.lock();
    state.counts.identifies += 1;
    let intents = d.get("intents").and_then(Value::as_u64).unwrap_or(0);
    state.counts.last_intents = intents;
    state.sessions.insert(
        id.clone(),
        SessionState {
            seq: 0,
            log: Default::default(),
            conn: Some((conn_id, tx.clone())),
            intents,
        },
    );
    state.current_session = Some(id.clone());
    let ready = json!({
        "v": 10,
        "user": {
            "id": inner.config.bot_user_id.to_string(), "username": "reach", "discriminator": "0",
            "global_name": null, "avatar": null, "bot": true, "mfa_enabled": false,
            "verified": true, "flags": 0,
        },
        "guilds": [],
        "session_id": id,
        "resume_gateway_url": inner.resume_url,
        "application": {"id": inner.config.application_id.to_string(), "flags": 0},
    });
    inner.dispatch(&mut state, "READY", ready);
    id
}

/// What a RESUME found.
enum Resume {
    Resumed(String),
    /// No such session: INVALID_SESSION (op 9, not resumable).
    Unknown,
    /// A sequence the session never reached: close 4007, and the session is gone.
    BadSeq,
}

fn resume(inner: &Inner, d: &Value, conn_id: u64, tx: &mpsc::UnboundedSender<Ctl>) -> Resume {
    let Some(id) = d
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Resume::Unknown;
    };
    let seq = d.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let mut state = inner.lock();
    let Some(reached) = state.sessions.get(&id).map(|s| s.seq) else {
        return Resume::Unknown;
    };
    if seq > reached {
        state.sessions.remove(&id);
        if state.current_session.as_ref() == Some(&id) {
            state.current_session = None;
        }
        return Resume::BadSeq;
    }
    let redeliver = std::mem::take(&mut state.redeliver_on_resume);
    let Some(session) = state.sessions.get_mut(&id) else {
        return Resume::Unknown;
    };
    let from = seq.saturating_sub(redeliver);
    for (s, text) in &session.log {
        if *s > from {
            let _ = tx.send(Ctl::Send(text.clone()));
        }
    }
    session.conn = Some((conn_id, tx.clone()));
    state.counts.resumes += 1;
    state.current_session = Some(id.clone());
    inner.dispatch(&mut state, "RESUMED", json!({}));
    Resume::Resumed(id)
}
