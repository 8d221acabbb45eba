//! A bare Discord client for the emulator's contract tests: a WebSocket that speaks Gateway
//! frames as JSON, and HTTPS requests written by hand, so what is checked is the emulator's
//! wire, not Reach's reading of it.

#![allow(dead_code)]

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reach_discord_emulator::{Emulator, REST_HOST};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{WebSocketStream, client_async};

pub type Ws = WebSocketStream<TcpStream>;

pub async fn connect(addr: std::net::SocketAddr) -> Ws {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = client_async(format!("ws://{addr}/?v=10&encoding=json"), tcp)
        .await
        .unwrap();
    ws
}

/// The next frame's text, or the close code.
pub async fn next_text(ws: &mut Ws) -> Result<String, u16> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame within 5 s");
        match m {
            Some(Ok(Message::Text(t))) => return Ok(t.as_str().to_owned()),
            Some(Ok(Message::Close(Some(f)))) => return Err(f.code.into()),
            Some(Ok(_)) => continue,
            other => panic!("the connection ended without a close frame: {other:?}"),
        }
    }
}

/// The next frame as JSON, or the close code.
pub async fn next(ws: &mut Ws) -> Result<Value, u16> {
    next_text(ws)
        .await
        .map(|t| serde_json::from_str(&t).unwrap())
}

pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

pub fn identify(em: &Emulator, intents: u64) -> Value {
    json!({"op": 2, "d": {"token": em.config().token, "intents": intents,
        "properties": {"os": "linux", "browser": "contract", "device": "contract"}}})
}

/// Frames up to and including the first dispatch named `t`.
pub async fn until_dispatch(ws: &mut Ws, t: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let v = next(ws).await.expect("no close");
        let done = v["t"] == t;
        seen.push(v);
        if done {
            return seen;
        }
    }
}

/// One HTTPS request to the emulator's REST server, written by hand (HTTP/1.1, the connection
/// closed after it): the status and the body.
pub async fn https(
    em: &Emulator,
    method: &str,
    path_and_query: &str,
    bot_token: bool,
    body: Option<&Value>,
) -> (u16, Vec<u8>) {
    let json = Some("application/json");
    https_typed(em, method, path_and_query, bot_token, body, json).await
}

/// As [`https`], with the body's Content-Type given (`None`: no header).
pub async fn https_typed(
    em: &Emulator,
    method: &str,
    path_and_query: &str,
    bot_token: bool,
    body: Option<&Value>,
    content_type: Option<&str>,
) -> (u16, Vec<u8>) {
    let agent = Some("DiscordBot (contract, 1)");
    let request = Request {
        method,
        path_and_query,
        bot_token,
        body,
        content_type,
        agent,
    };
    exchange(em, request).await
}

/// A bot-authorized GET with the User-Agent given (`None`: no header).
pub async fn https_agent(
    em: &Emulator,
    path_and_query: &str,
    agent: Option<&str>,
) -> (u16, Vec<u8>) {
    let request = Request {
        method: "GET",
        path_and_query,
        bot_token: true,
        body: None,
        content_type: None,
        agent,
    };
    exchange(em, request).await
}

struct Request<'a> {
    method: &'a str,
    path_and_query: &'a str,
    bot_token: bool,
    body: Option<&'a Value>,
    content_type: Option<&'a str>,
    agent: Option<&'a str>,
}

async fn exchange(em: &Emulator, r: Request<'_>) -> (u16, Vec<u8>) {
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(em.root_store())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = TcpStream::connect(em.rest_addr()).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from(REST_HOST).unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let body = r.body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {REST_HOST}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.method,
        r.path_and_query,
        body.len()
    );
    for (name, value) in [("Content-Type", r.content_type), ("User-Agent", r.agent)] {
        if let Some(v) = value {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    if r.bot_token {
        head.push_str(&format!("Authorization: Bot {}\r\n", em.config().token));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let status = std::str::from_utf8(&out[..split]).unwrap()[9..12]
        .parse()
        .unwrap();
    (status, out[split + 4..].to_vec())
}
