//! A loopback-only OpenAI-compatible model emulator: `POST /v1/chat/completions` over HTTPS
//! (a CA minted for the run), non-streaming (`chat.completion`) and streaming
//! (`text/event-stream` of `chat.completion.chunk`, then `[DONE]`), answering from a script.
//! It records every request it received, so a test asserts what left the body (and that
//! nothing did).
//!
//! **Architecture Invariant:** the emulator binds `127.0.0.1:0` only and never dials anything.
//!
//! **Architecture Invariant:** it shares no code with `reach-portal`: it reads and writes the
//! wire JSON itself, so the adapter is tested against an independent reading of the protocol.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// The name the emulator's certificate is issued for; admit it as a local road to
/// [`ModelEmulator::addr`].
pub const HOST: &str = "model.emulator.test";
/// The model the emulator answers as (it echoes the requested model unless scripted).
pub const MODEL: &str = "reach-emulated-model";
/// The API key requests must carry unless the config says otherwise.
pub const KEY: &str = "sk-emulator-key";
/// Largest request body read (a Cut payload is at most 64 KiB plus the prompt).
const MAX_BODY: usize = 256 * 1024;

/// One scripted answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Script {
    /// A grounded answer citing `[1]` (and `[2]` when two or more passages were sent).
    Good,
    /// An answer citing `[n]`, whatever was sent (a hallucinated citation when out of range).
    Cites(u32),
    /// A fluent answer without any citation.
    NoCitation,
    /// Cut short: `finish_reason: "length"`, or a stream that ends before its terminal chunk
    /// and `[DONE]`.
    Truncated,
    /// A cited answer of this many characters.
    OverLong(usize),
    /// An HTTP error status with an OpenAI-style error body.
    Status(u16),
    /// Waits this long before the response head, then answers [`Script::Good`].
    Slow(Duration),
    /// Waits this long before the response head, then answers as the inner script (a slow
    /// answer that is then quarantined, for instance).
    Late(Duration, Box<Script>),
    /// Answers as another model.
    WrongModel,
    /// A good answer whose `usage` says it spent one token more than `max_tokens` allowed (a
    /// runtime that ignored the bound).
    OverTokenBound,
    /// Exactly this text, stopped normally.
    Text(String),
}

/// A request the emulator received.
#[derive(Clone, Debug)]
pub struct ReceivedRequest {
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The `Host` header.
    pub host: Option<String>,
    /// The request body as text.
    pub body: String,
    /// The body as JSON (`Null` when it was not JSON).
    pub json: Value,
}

impl ReceivedRequest {
    /// Whether `stream: true` was asked for.
    pub fn streaming(&self) -> bool {
        self.json["stream"].as_bool().unwrap_or(false)
    }

    /// The user message's text.
    pub fn user_message(&self) -> String {
        self.json["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Script>,
    requests: Vec<ReceivedRequest>,
    next_id: u64,
    /// What `GET /v1/models` lists (`None`: [`MODEL`]).
    models: Option<Vec<String>>,
    /// How many model lists were asked for.
    model_lists: u64,
}

#[derive(Debug)]
struct Inner {
    key: String,
    default: Script,
    state: Mutex<State>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running emulator. Dropping it stops the server.
#[derive(Debug)]
pub struct ModelEmulator {
    inner: Arc<Inner>,
    addr: SocketAddr,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    task: JoinHandle<()>,
}

impl Drop for ModelEmulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelEmulator {
    /// Starts on `127.0.0.1:0`, answering [`Script::Good`] when nothing is scripted.
    pub async fn start() -> io::Result<Self> {
        Self::start_with(KEY, Script::Good).await
    }

    /// Starts with an API key and the answer given when the script is empty.
    pub async fn start_with(key: &str, default: Script) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (server, ca_pem, ca_der) = mint(&[HOST, "127.0.0.1"]).map_err(io::Error::other)?;
        let inner = Arc::new(Inner {
            key: key.to_owned(),
            default,
            state: Mutex::default(),
        });
        let task = tokio::spawn(serve(listener, server, Arc::clone(&inner)));
        Ok(ModelEmulator {
            inner,
            addr,
            ca_pem,
            ca_der,
            task,
        })
    }

    /// The socket address (the local road).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The chat completions URL, canonical: `https://model.emulator.test:<port>/v1/chat/completions`.
    pub fn endpoint(&self) -> String {
        format!("https://{HOST}:{}/v1/chat/completions", self.addr.port())
    }

    /// The run's CA certificate (PEM), the only root a client should trust for it.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A root store trusting only the run's CA.
    pub fn root_store(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        // Minted at start; a well-formed DER always adds.
        let _ = roots.add(self.ca_der.clone());
        roots
    }

    /// Queues the answer to the next request.
    pub fn script(&self, s: Script) {
        self.inner.lock().script.push_back(s);
    }

    /// Every chat completions request received so far (model lists are counted apart).
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.inner.lock().requests.clone()
    }

    /// What `GET /v1/models` lists from now on (by default [`MODEL`] alone).
    pub fn serve_models(&self, models: Vec<String>) {
        self.inner.lock().models = Some(models);
    }

    /// How many times `GET /v1/models` was asked (with the right key).
    pub fn model_lists(&self) -> u64 {
        self.inner.lock().model_lists
    }
}

fn mint(names: &[&str]) -> Result<(Arc<ServerConfig>, String, CertificateDer<'static>), String> {
    let e = |e: rcgen::Error| e.to_string();
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reach model emulator CA");
    let ca_key = KeyPair::generate().map_err(e)?;
    let ca = params.self_signed(&ca_key).map_err(e)?;
    let (ca_der, ca_pem) = (ca.der().clone(), ca.pem());
    let issuer = Issuer::new(params, ca_key);
    let leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .map_err(e)?;
    let leaf_key = KeyPair::generate().map_err(e)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(e)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca_der.clone()], key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), ca_pem, ca_der))
}

async fn serve(listener: TcpListener, tls: Arc<ServerConfig>, inner: Arc<Inner>) {
    let acceptor = TlsAcceptor::from(tls);
    while let Ok((tcp, _)) = listener.accept().await {
        // As a provider's edge does: Nagle would hold the handshake's and the response's
        // second flight until the client's delayed ACK.
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

fn error(status: u16, kind: &str, message: &str) -> Reply {
    let body = json!({"error": {"message": message, "type": kind, "code": null}});
    respond(status, "application/json", body.to_string())
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Reply {
    let header = |name| {
        req.headers()
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let (authorization, host) = (
        header(http::header::AUTHORIZATION),
        header(http::header::HOST),
    );
    // The model list (a runtime's readiness probe): an OpenAI-style list, with the key.
    if req.method() == http::Method::GET && req.uri().path() == "/v1/models" {
        if authorization.as_deref() != Some(&format!("Bearer {}", inner.key)) {
            return error(401, "invalid_api_key", "Incorrect API key provided");
        }
        let mut state = inner.lock();
        state.model_lists += 1;
        let models = state
            .models
            .clone()
            .unwrap_or_else(|| vec![MODEL.to_owned()]);
        let data: Vec<Value> = models
            .iter()
            .map(|id| json!({"id": id, "object": "model", "owned_by": "emulator"}))
            .collect();
        return respond(
            200,
            "application/json",
            json!({"object": "list", "data": data}).to_string(),
        );
    }
    let path_ok = req.method() == http::Method::POST && req.uri().path() == "/v1/chat/completions";
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => return error(413, "invalid_request_error", "request too large"),
    };
    let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let received = ReceivedRequest {
        authorization: authorization.clone(),
        host,
        body,
        json: json.clone(),
    };
    let (script, id) = {
        let mut state = inner.lock();
        state.requests.push(received.clone());
        state.next_id += 1;
        let script = state
            .script
            .pop_front()
            .unwrap_or_else(|| inner.default.clone());
        (script, format!("chatcmpl-emu{}", state.next_id))
    };
    if !path_ok {
        return error(404, "invalid_request_error", "unknown route");
    }
    if authorization.as_deref() != Some(&format!("Bearer {}", inner.key)) {
        return error(401, "invalid_api_key", "Incorrect API key provided");
    }
    let Some(model) = json["model"].as_str().map(str::to_owned) else {
        return error(400, "invalid_request_error", "model is required");
    };
    let passages = received.user_message().matches("\n<<<\n").count() as u32;
    let mut script = script;
    while let Script::Late(wait, then) = script {
        tokio::time::sleep(wait).await;
        script = *then;
    }
    let answer = match script {
        Script::Late(..) => unreachable!("unwrapped above"),
        Script::Status(code) => return error(code, "server_error", "scripted failure"),
        Script::Slow(wait) => {
            tokio::time::sleep(wait).await;
            Answer::stop(good(passages))
        }
        Script::Good => Answer::stop(good(passages)),
        Script::Cites(n) => Answer::stop(format!(
            "The ledger settles an unknown delivery from independent evidence [{n}]."
        )),
        Script::NoCitation => {
            Answer::stop("The ledger settles an unknown delivery from independent evidence.".into())
        }
        Script::Truncated => Answer {
            text: "The ledger settles an unknown delivery from".into(),
            finish: Some("length"),
            model: None,
            completion_tokens: None,
        },
        Script::OverLong(chars) => {
            let mut text = "Evidence settles it [1]. ".repeat(chars / 25 + 1);
            text.truncate(chars);
            Answer::stop(text)
        }
        Script::WrongModel => Answer {
            model: Some("another-model".into()),
            ..Answer::stop(good(passages))
        },
        Script::OverTokenBound => Answer {
            completion_tokens: Some(json["max_tokens"].as_u64().unwrap_or(0) + 1),
            ..Answer::stop(good(passages))
        },
        Script::Text(t) => Answer::stop(t),
    };
    let model = answer.model.clone().unwrap_or(model);
    let usage = json!({"prompt_tokens": 100,
        "completion_tokens": answer.completion_tokens.unwrap_or(20),
        "total_tokens": 100 + answer.completion_tokens.unwrap_or(20)});
    if received.streaming() {
        let usage = (json["stream_options"]["include_usage"] == true).then_some(usage);
        respond(
            200,
            "text/event-stream",
            stream_body(&id, &model, &answer, usage),
        )
    } else {
        let body = json!({
            "id": id, "object": "chat.completion", "created": 1_764_460_800u64, "model": model,
            "system_fingerprint": "fp_emulator",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text,
                "refusal": null}, "logprobs": null, "finish_reason": answer.finish}],
            "usage": usage,
        });
        respond(200, "application/json", body.to_string())
    }
}

struct Answer {
    text: String,
    finish: Option<&'static str>,
    model: Option<String>,
    /// `usage.completion_tokens` when not the default 20.
    completion_tokens: Option<u64>,
}

impl Answer {
    fn stop(text: String) -> Self {
        Answer {
            text,
            finish: Some("stop"),
            model: None,
            completion_tokens: None,
        }
    }
}

fn good(passages: u32) -> String {
    if passages >= 2 {
        "An unknown delivery is never resent [1]. It is reconciled from independent evidence, \
         such as a message carrying the nonce [2]."
            .into()
    } else {
        "An unknown delivery is never resent; it is reconciled from independent evidence [1]."
            .into()
    }
}

/// The SSE body: a role chunk, one chunk per word, the terminal chunk, a usage chunk when asked
/// (`stream_options.include_usage`) and `[DONE]`. A truncated stream ends after the words, with
/// none of them.
fn stream_body(id: &str, model: &str, answer: &Answer, usage: Option<Value>) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1_764_460_800u64,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut out = String::from(": emulator stream\n\n");
    out.push_str(&chunk(json!({"role": "assistant", "content": ""}), None));
    for (i, word) in answer.text.split(' ').enumerate() {
        let piece = if i == 0 {
            word.to_owned()
        } else {
            format!(" {word}")
        };
        out.push_str(&chunk(json!({"content": piece}), None));
    }
    if answer.finish == Some("length") {
        return out;
    }
    out.push_str(&chunk(json!({}), answer.finish));
    if let Some(usage) = usage {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1_764_460_800u64,
            "model": model, "choices": [], "usage": usage});
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}
