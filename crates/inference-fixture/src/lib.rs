//! The deterministic inference class: a loopback TLS, OpenAI-compatible
//! `POST /v1/chat/completions` server that answers the passages a task pack's prompt
//! documents make, from the pack's `fixture/answers.toml`, and nothing else
//! (docs/taskpacks.md, "fixture/answers.toml").
//!
//! A request's system message decides the role: it must be, byte for byte, the system part of
//! the pack's solver or reviewer prompt document, and the user message must follow that
//! document's user template. Every fence of the user message is read and its digest
//! recomputed over the content bytes. The **Solver** answers the candidate of the first entry
//! of the active variant whose `when` holds (the exact set of evidence kinds, the verifier
//! result's failed checks, the observed lines), verbatim. The **Reviewer** reads the
//! candidate it is sent and applies the answers' rules to it ([`Fixture::read_candidate`]):
//! it looks no answer up by id, so it reads any candidate. Anything else is refused with an
//! HTTP 400 whose OpenAI-style error body carries a `fixture/<reason>` code ([`Refusal`]).
//!
//! [`Fixture`] is the pure part (a passage in, an answer or a refusal out); [`FixtureServer`]
//! serves it over HTTPS with a CA minted for the run ([`FixtureServer::ca_pem`]) and records
//! what it served ([`FixtureServer::served`]). `stream: true` is answered with a
//! `text/event-stream` of `chat.completion.chunk`s, then `[DONE]`.
//!
//! **Architecture Invariant:** the fixture binds `127.0.0.1:0` only, never dials anything,
//! and never advances on its own: it keeps no state between requests that decides an
//! answer, so every answer is a function of the request (and of the pack and variant it was
//! started with), and a passage whose evidence matches no entry is refused, not guessed.
//!
//! **Architecture Invariant:** it shares no code with the production adapter `reach-portal`:
//! it reads and writes the wire JSON and the fences itself, so the adapter and the renderer
//! are exercised against an independent reading of both.

#![forbid(unsafe_code)]

mod answer;
mod fence;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use reach_digest::Sha256Digest;
use rustls::ServerConfig;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use answer::{Answered, ConfigError, Finding, Fixture, Review, UNRELATED_FILE_NOTE};
pub use reach_taskpack::source::Role;

/// The route the fixture answers.
pub const PATH: &str = "/v1/chat/completions";
/// The largest request body read.
pub const MAX_BODY: usize = 1024 * 1024;
/// The `created` of every completion (the fixture reads no clock).
pub const CREATED: u64 = 1_764_460_800;

/// Why a request was refused: its `fixture/<reason>` code is the error body's `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Not `POST /v1/chat/completions` (HTTP 404).
    UnknownRoute,
    /// The body exceeds [`MAX_BODY`] (HTTP 413).
    RequestTooLarge,
    /// Not a chat completions request the fixture takes: not JSON, no `model`, `messages`
    /// not exactly `[system, user]` with string contents, no positive `max_tokens` (or
    /// `max_completion_tokens`), `n` other than 1, a `stream` that is not a boolean.
    BadRequest,
    /// The system message is neither prompt document's system part, or the user message
    /// does not follow the role's user template.
    UnknownPrompt,
    /// A fence is malformed or unclosed, names an unknown kind, or a kind appears twice.
    MalformedFence,
    /// A fence's content does not have the digest its header names.
    EvidenceAltered,
    /// The passage lacks its goal (or, for the Reviewer, its candidate).
    FenceMissing,
    /// An evidence input is not the JSON the Room writes for its kind.
    EvidenceMalformed,
    /// Evidence (or a candidate) the role's passage may not carry.
    EvidenceNotAdmitted,
    /// No Solver entry of the variant holds for this evidence.
    NoAnswer,
    /// The candidate under review is not a readable `reach.plan.candidate.v1`.
    CandidateMalformed,
}

impl Refusal {
    /// The `fixture/<reason>` code.
    pub fn code(self) -> &'static str {
        match self {
            Self::UnknownRoute => "fixture/unknown-route",
            Self::RequestTooLarge => "fixture/request-too-large",
            Self::BadRequest => "fixture/bad-request",
            Self::UnknownPrompt => "fixture/unknown-prompt",
            Self::MalformedFence => "fixture/malformed-fence",
            Self::EvidenceAltered => "fixture/evidence-altered",
            Self::FenceMissing => "fixture/fence-missing",
            Self::EvidenceMalformed => "fixture/evidence-malformed",
            Self::EvidenceNotAdmitted => "fixture/evidence-not-admitted",
            Self::NoAnswer => "fixture/no-answer",
            Self::CandidateMalformed => "fixture/candidate-malformed",
        }
    }

    /// The HTTP status it is answered with.
    pub fn status(self) -> u16 {
        match self {
            Self::UnknownRoute => 404,
            Self::RequestTooLarge => 413,
            _ => 400,
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::UnknownRoute => "the fixture answers POST /v1/chat/completions only",
            Self::RequestTooLarge => "the request body is too large",
            Self::BadRequest => "not a chat completions request the fixture takes",
            Self::UnknownPrompt => "the messages are not a passage of the pack's prompt documents",
            Self::MalformedFence => "a fence in the user message is malformed",
            Self::EvidenceAltered => "a fence's content does not match its digest",
            Self::FenceMissing => "the passage lacks its goal or its candidate",
            Self::EvidenceMalformed => "an evidence input is not the JSON of its kind",
            Self::EvidenceNotAdmitted => "the passage carries evidence its role does not admit",
            Self::NoAnswer => "no answer of the variant holds for this evidence",
            Self::CandidateMalformed => "the candidate under review is not readable",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for Refusal {}

/// What the server answers from.
#[derive(Debug, Clone)]
pub struct FixtureConfig {
    /// The pack's sources: its answers, flow and prompt documents are read.
    pub sources: reach_taskpack::Sources,
    /// The fixture variant; `""` is the answers' first.
    pub variant: String,
}

/// What one request was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answered: the Solver's answer id, or `review:approve` / `review:reject`.
    Answered(String),
    /// Refused with this `fixture/<reason>` code.
    Refused(&'static str),
}

/// One request the server received and what it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The role its system message named (`None`: no role was decided).
    pub role: Option<Role>,
    pub outcome: Outcome,
    /// sha256 of the request body as received.
    pub request_digest: Sha256Digest,
}

#[derive(Debug)]
struct Inner {
    fixture: Fixture,
    served: Mutex<Vec<Served>>,
}

impl Inner {
    fn served(&self) -> MutexGuard<'_, Vec<Served>> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fixture. Dropping it stops the server.
#[derive(Debug)]
pub struct FixtureServer {
    inner: Arc<Inner>,
    addr: SocketAddr,
    ca_pem: String,
    task: JoinHandle<()>,
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FixtureServer {
    /// Starts on `127.0.0.1:0` with a CA minted for this run. An unknown variant is
    /// `InvalidInput`.
    pub async fn start(config: FixtureConfig) -> io::Result<FixtureServer> {
        let fixture = Fixture::new(&config.sources, &config.variant)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tls, ca_pem) = mint().map_err(io::Error::other)?;
        let inner = Arc::new(Inner {
            fixture,
            served: Mutex::default(),
        });
        let task = tokio::spawn(serve(listener, tls, Arc::clone(&inner)));
        Ok(FixtureServer {
            inner,
            addr,
            ca_pem,
            task,
        })
    }

    /// `https://127.0.0.1:<port>/v1/chat/completions`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}{PATH}", self.addr.port())
    }

    /// The socket address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run's CA certificate (PEM): the one root to trust for [`FixtureServer::url`]
    /// (the leaf names `127.0.0.1` and `localhost`).
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The active variant.
    pub fn variant(&self) -> &str {
        self.inner.fixture.variant()
    }

    /// Every request received so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.inner.served().clone()
    }
}

fn mint() -> Result<(Arc<ServerConfig>, String), String> {
    let e = |e: rcgen::Error| e.to_string();
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reach inference fixture CA");
    let ca_key = KeyPair::generate().map_err(e)?;
    let ca = params.self_signed(&ca_key).map_err(e)?;
    let (ca_der, ca_pem) = (ca.der().clone(), ca.pem());
    let issuer = Issuer::new(params, ca_key);
    let leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).map_err(e)?;
    let leaf_key = KeyPair::generate().map_err(e)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(e)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca_der], key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), ca_pem))
}

async fn serve(listener: TcpListener, tls: Arc<ServerConfig>, inner: Arc<Inner>) {
    let acceptor = TlsAcceptor::from(tls);
    while let Ok((tcp, _)) = listener.accept().await {
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let inner = Arc::clone(&inner);
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |req| handle(Arc::clone(&inner), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Reply = Result<Response<Full<Bytes>>, std::convert::Infallible>;

fn respond(status: u16, content_type: &str, body: String) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    Ok(r)
}

fn refuse(r: Refusal) -> Reply {
    let body = json!({"error": {"message": r.message(), "type": "invalid_request_error",
        "code": r.code()}});
    respond(r.status(), "application/json", body.to_string())
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Reply {
    let route_ok = req.method() == http::Method::POST && req.uri().path() == PATH;
    let (body, too_large) = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => (b.to_bytes(), false),
        Err(_) => (Bytes::new(), true),
    };
    let digest = Sha256Digest::of(&body);
    let (role, result) = if !route_ok {
        (None, Err(Refusal::UnknownRoute))
    } else if too_large {
        (None, Err(Refusal::RequestTooLarge))
    } else {
        match read_request(&body) {
            Err(r) => (None, Err(r)),
            Ok(chat) => (
                inner.fixture.role_of(&chat.system),
                inner
                    .fixture
                    .answer(&chat.system, &chat.user)
                    .map(|a| (a, chat)),
            ),
        }
    };
    let outcome = match &result {
        Ok((a, _)) => Outcome::Answered(a.id.clone()),
        Err(r) => Outcome::Refused(r.code()),
    };
    inner.served().push(Served {
        role,
        outcome,
        request_digest: digest,
    });
    match result {
        Err(r) => refuse(r),
        Ok((answer, chat)) => {
            let id = format!("chatcmpl-fixture-{}", &digest.hex()[..24]);
            let prompt_tokens = tokens(chat.system.len() + chat.user.len());
            let completion_tokens = tokens(answer.content.len());
            if chat.stream {
                let body = stream_body(&id, &chat.model, &answer.content);
                respond(200, "text/event-stream", body)
            } else {
                let body = json!({
                    "id": id, "object": "chat.completion", "created": CREATED,
                    "model": chat.model,
                    "choices": [{"index": 0, "message": {"role": "assistant",
                        "content": answer.content, "refusal": null}, "logprobs": null,
                        "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens},
                });
                respond(200, "application/json", body.to_string())
            }
        }
    }
}

/// A token estimate: ceil(bytes / 4).
fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The parts of a chat completions request the fixture reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRequest {
    pub model: String,
    /// The first message's content: it must be a `system` message.
    pub system: String,
    /// The second and last message's content: it must be a `user` message.
    pub user: String,
    pub stream: bool,
}

/// Reads a request body as the server does: `fixture/bad-request` unless it is a chat
/// completions request the fixture takes (see [`Refusal::BadRequest`]).
pub fn read_request(body: &[u8]) -> Result<ChatRequest, Refusal> {
    let bad = || Refusal::BadRequest;
    let v: Value = serde_json::from_slice(body).map_err(|_| bad())?;
    let model = v["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or_else(bad)?;
    let max = v
        .get("max_tokens")
        .or_else(|| v.get("max_completion_tokens"));
    if max.and_then(Value::as_u64).is_none_or(|m| m == 0) {
        return Err(bad());
    }
    if v.get("n").is_some_and(|n| n.as_u64() != Some(1)) {
        return Err(bad());
    }
    if v.get("temperature").is_some_and(|t| !t.is_number()) {
        return Err(bad());
    }
    let stream = match v.get("stream") {
        None | Some(Value::Null) => false,
        Some(s) => s.as_bool().ok_or_else(bad)?,
    };
    let messages = v["messages"].as_array().ok_or_else(bad)?;
    let content = |i: usize, role: &str| {
        let m = messages.get(i).ok_or_else(bad)?;
        if m["role"] != role {
            return Err(bad());
        }
        m["content"].as_str().map(str::to_owned).ok_or_else(bad)
    };
    if messages.len() != 2 {
        return Err(bad());
    }
    Ok(ChatRequest {
        model: model.to_owned(),
        system: content(0, "system")?,
        user: content(1, "user")?,
        stream,
    })
}

/// The SSE body: a role chunk, the content in pieces of at most 256 bytes (at character
/// boundaries), the terminal chunk with `finish_reason: "stop"`, then `[DONE]`.
fn stream_body(id: &str, model: &str, content: &str) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": CREATED,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), None);
    let mut rest = content;
    while !rest.is_empty() {
        let mut end = rest.len().min(256);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&chunk(json!({"content": &rest[..end]}), None));
        rest = &rest[end..];
    }
    out.push_str(&chunk(json!({}), Some("stop")));
    out.push_str("data: [DONE]\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_strictly() {
        let ok = json!({"model": "m", "messages": [{"role": "system", "content": "s"},
            {"role": "user", "content": "u"}], "max_tokens": 10, "temperature": 0, "n": 1,
            "stream": false});
        let chat = read_request(ok.to_string().as_bytes()).ok().unwrap();
        assert_eq!((chat.system.as_str(), chat.user.as_str()), ("s", "u"));
        let refused = |f: &dyn Fn(&mut Value)| {
            let mut v = ok.clone();
            f(&mut v);
            read_request(v.to_string().as_bytes()).err()
        };
        assert_eq!(refused(&|_| {}), None);
        assert_eq!(
            refused(&|v| {
                v.as_object_mut().unwrap().remove("max_tokens");
                v["max_completion_tokens"] = 5.into();
            }),
            None
        );
        for f in [
            &(|v: &mut Value| v["n"] = 2.into()) as &dyn Fn(&mut Value),
            &|v| v["max_tokens"] = 0.into(),
            &|v| drop(v.as_object_mut().unwrap().remove("max_tokens")),
            &|v| drop(v.as_object_mut().unwrap().remove("model")),
            &|v| v["stream"] = "yes".into(),
            &|v| v["messages"][0]["role"] = "user".into(),
            &|v| v["messages"][1]["content"] = json!([{"type": "text", "text": "u"}]),
            &|v| {
                let extra = v["messages"][1].clone();
                v["messages"].as_array_mut().unwrap().push(extra)
            },
        ] {
            assert_eq!(refused(f), Some(Refusal::BadRequest));
        }
        assert_eq!(read_request(b"{").err(), Some(Refusal::BadRequest));
    }

    #[test]
    fn a_stream_reassembles_to_the_content() {
        let content = "é".repeat(300) + "tail";
        let body = stream_body("id", "m", &content);
        assert!(body.ends_with("data: [DONE]\n\n"));
        let mut text = String::new();
        for data in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            if data == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(data).unwrap();
            text.push_str(v["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
        }
        assert_eq!(text, content);
    }
}
