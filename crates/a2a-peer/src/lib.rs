//! Test support: an A2A 1.0 peer speaking the JSON-RPC binding over loopback TLS.
//!
//! It is written from the specification independently of `reach-intercom` (raw JSON, literal
//! field names), so a naming mistake on either side fails the tests instead of agreeing with
//! itself. Sources: `a2aproject/A2A` `specification/a2a.proto` (`SendMessageRequest`,
//! `SendMessageResponse` oneof `task`/`message`, `Task`, `TaskState` proto names, `Role`) and
//! `docs/specification.md` §3.6 (`A2A-Version`; empty means 0.3, unsupported answers
//! `VersionNotSupportedError` -32009), §9 (PascalCase methods) and the error table
//! (`TaskNotFoundError` -32001).
//!
//! Scripted behaviour ([`Script`]): the state a task is created in, how many GetTask polls it
//! stays WORKING, its terminal; SendMessage that commits the task and then drops the
//! connection without answering; whether a repeated message id resolves to the original task
//! (the guarantee an enrollment receipt may admit); forgetting tasks; the answer's parts;
//! holding every task WORKING until released; the status message of a FAILED, REJECTED or
//! INPUT_REQUIRED task; `CancelTask` (the task becomes CANCELED, or the peer refuses with
//! `TaskNotCancelableError` -32002). Every request is recorded
//! ([`Recorded`]), so tests assert exactly what the peer received.
//!
//! HTTP/1.1 is parsed by hand (one request per connection, `Connection: close`), so dropping a
//! connection after committing is exact.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use reach_destination::testing::{TestCa, serve_tls};
use rustls::RootCertStore;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

/// The TLS name the peer presents.
pub const PEER_HOST: &str = "a2a-peer.test";
/// The JSON-RPC endpoint path.
pub const PEER_PATH: &str = "/a2a";
/// Largest request head the peer reads.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body the peer reads.
const MAX_BODY: usize = 1024 * 1024;

/// Task states by their proto names.
pub mod state {
    pub const SUBMITTED: &str = "TASK_STATE_SUBMITTED";
    pub const WORKING: &str = "TASK_STATE_WORKING";
    pub const COMPLETED: &str = "TASK_STATE_COMPLETED";
    pub const FAILED: &str = "TASK_STATE_FAILED";
    pub const CANCELED: &str = "TASK_STATE_CANCELED";
    pub const INPUT_REQUIRED: &str = "TASK_STATE_INPUT_REQUIRED";
    pub const REJECTED: &str = "TASK_STATE_REJECTED";
    pub const AUTH_REQUIRED: &str = "TASK_STATE_AUTH_REQUIRED";
    pub const UNSPECIFIED: &str = "TASK_STATE_UNSPECIFIED";
}

/// How the peer behaves.
#[derive(Debug, Clone)]
pub struct Script {
    /// The state a new task is created in and reported in the SendMessage answer.
    pub initial: &'static str,
    /// GetTask polls answered WORKING before the terminal is reported (`u32::MAX`: never
    /// ends).
    pub working_polls: u32,
    /// The state reported after `working_polls` polls.
    pub terminal: &'static str,
    /// The first this-many SendMessage requests commit their task and then drop the
    /// connection without a response.
    pub drop_after_commit: u32,
    /// A repeated message id resolves to the original task instead of creating another.
    pub message_id_guarantee: bool,
    /// GetTask answers `TaskNotFoundError` for every task.
    pub forget_tasks: bool,
    /// The parts of a COMPLETED task's artifact (a raw JSON array), by the message id that
    /// created the task; any other task answers one text part `answer to <message id>`. How a
    /// test hands Reach an answer its quarantine must refuse.
    pub answers: Vec<(String, Value)>,
    /// Every task stays WORKING (polls not counted) until [`A2aPeer::release`].
    pub held: bool,
    /// The status message (a raw JSON array of parts, role agent) of a task reported FAILED,
    /// REJECTED or INPUT_REQUIRED.
    pub status_message: Option<Value>,
    /// `CancelTask` answers `TaskNotCancelableError` (-32002) instead of cancelling.
    pub refuse_cancel: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            initial: state::SUBMITTED,
            working_polls: 0,
            terminal: state::COMPLETED,
            drop_after_commit: 0,
            message_id_guarantee: false,
            forget_tasks: false,
            answers: Vec::new(),
            held: false,
            status_message: None,
            refuse_cancel: false,
        }
    }
}

impl Script {
    /// A task that ends in `terminal` after `working_polls` WORKING polls.
    pub fn ending(terminal: &'static str, working_polls: u32) -> Self {
        Script {
            terminal,
            working_polls,
            ..Script::default()
        }
    }
}

/// One request as the peer received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub host: Option<String>,
    pub a2a_version: Option<String>,
    pub content_type: Option<String>,
    /// The JSON-RPC method, if the body parsed.
    pub rpc_method: Option<String>,
    /// `params.message.messageId` of a SendMessage.
    pub message_id: Option<String>,
    /// `params.configuration.returnImmediately` of a SendMessage.
    pub return_immediately: Option<bool>,
    /// Whether a SendMessage carried a push notification config.
    pub push_config: bool,
    /// `params.id` of a GetTask or CancelTask.
    pub task_id: Option<String>,
    pub body: Vec<u8>,
}

/// A task the peer created.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerTask {
    pub id: String,
    pub message_id: String,
    pub polls: u32,
    /// Cancelled by a `CancelTask`: every later GetTask reports CANCELED.
    pub cancelled: bool,
}

#[derive(Debug, Default)]
struct Inner {
    requests: Vec<Recorded>,
    tasks: Vec<PeerTask>,
    dropped: u32,
    /// Set from `Script::held`; cleared by `release`.
    held: bool,
}

/// A running peer; stops when dropped.
#[derive(Debug)]
pub struct A2aPeer {
    addr: SocketAddr,
    ca: TestCa,
    inner: Arc<Mutex<Inner>>,
    server: JoinHandle<()>,
}

impl Drop for A2aPeer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|e| e.into_inner())
}

impl A2aPeer {
    /// Starts a peer on `127.0.0.1:0` presenting a certificate for [`PEER_HOST`].
    pub async fn start(script: Script) -> A2aPeer {
        let ca = TestCa::new();
        let inner = Arc::new(Mutex::new(Inner {
            held: script.held,
            ..Inner::default()
        }));
        let shared = Arc::clone(&inner);
        let script = Arc::new(script);
        let (addr, server) = serve_tls(ca.server_config(&[PEER_HOST]), move |tls| {
            let inner = Arc::clone(&shared);
            let script = Arc::clone(&script);
            async move { serve(tls, inner, script).await }
        })
        .await;
        A2aPeer {
            addr,
            ca,
            inner,
            server,
        }
    }

    /// The socket address (the exact local road).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL, `https://a2a-peer.test:<port>/a2a`.
    pub fn url(&self) -> String {
        format!("https://{PEER_HOST}:{}{PEER_PATH}", self.addr.port())
    }

    /// Roots trusting only this peer's CA.
    pub fn root_store(&self) -> RootCertStore {
        self.ca.root_store()
    }

    /// This peer's CA as PEM (a role's `roads.ca_file`).
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// Every request received, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.inner).requests.clone()
    }

    /// Requests whose JSON-RPC method is `method`.
    pub fn count(&self, method: &str) -> usize {
        lock(&self.inner)
            .requests
            .iter()
            .filter(|r| r.rpc_method.as_deref() == Some(method))
            .count()
    }

    /// Tasks created (a duplicate task from a blind resend shows here).
    pub fn tasks(&self) -> Vec<PeerTask> {
        lock(&self.inner).tasks.clone()
    }

    /// Ends a hold: polls count again from here (`Script::held`).
    pub fn release(&self) {
        lock(&self.inner).held = false;
    }

    /// Connections dropped after committing a task.
    pub fn dropped(&self) -> u32 {
        lock(&self.inner).dropped
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

async fn read_request<S: AsyncReadExt + Unpin>(s: &mut S) -> Option<Request> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return None;
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

async fn serve<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    mut tls: S,
    inner: Arc<Mutex<Inner>>,
    script: Arc<Script>,
) {
    let Some(req) = read_request(&mut tls).await else {
        return;
    };
    let Some((status, body)) = handle(&req, &inner, &script) else {
        // Committed, then the connection drops without a response.
        return;
    };
    let reason = if status == 200 { "OK" } else { "Error" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tls.write_all(head.as_bytes()).await;
    let _ = tls.write_all(&body).await;
    let _ = tls.shutdown().await;
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}

fn rpc_result(id: &Value, result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into_bytes()
}

fn task_json(task: &PeerTask, state: &str, script: &Script) -> Value {
    let mut t = json!({
        "id": task.id,
        "contextId": format!("ctx-{}", task.id),
        "status": {"state": state, "timestamp": "2026-01-01T00:00:00.000Z"},
    });
    if state == state::COMPLETED {
        let parts = script
            .answers
            .iter()
            .find(|(m, _)| *m == task.message_id)
            .map(|(_, parts)| parts.clone())
            .unwrap_or_else(|| json!([{"text": format!("answer to {}", task.message_id)}]));
        t["artifacts"] = json!([{"artifactId": "answer", "parts": parts}]);
    }
    if let (Some(parts), state::FAILED | state::REJECTED | state::INPUT_REQUIRED) =
        (&script.status_message, state)
    {
        t["status"]["message"] = json!({
            "messageId": format!("status-{}", task.id),
            "role": "ROLE_AGENT",
            "parts": parts,
        });
    }
    t
}

/// Handles one request; `None` drops the connection without answering.
fn handle(req: &Request, inner: &Mutex<Inner>, script: &Script) -> Option<(u16, Vec<u8>)> {
    let parsed: Option<Value> = serde_json::from_slice(&req.body).ok();
    let params = parsed.as_ref().map(|v| &v["params"]);
    let rpc_method = parsed
        .as_ref()
        .and_then(|v| v["method"].as_str())
        .map(str::to_owned);
    let recorded = Recorded {
        method: req.method.clone(),
        path: req.path.clone(),
        host: req.header("host"),
        a2a_version: req.header("a2a-version"),
        content_type: req.header("content-type"),
        rpc_method: rpc_method.clone(),
        message_id: params
            .and_then(|p| p["message"]["messageId"].as_str())
            .map(str::to_owned),
        return_immediately: params.and_then(|p| p["configuration"]["returnImmediately"].as_bool()),
        push_config: params
            .is_some_and(|p| !p["configuration"]["taskPushNotificationConfig"].is_null()),
        task_id: params.and_then(|p| p["id"].as_str()).map(str::to_owned),
        body: req.body.clone(),
    };
    let mut inner = lock(inner);
    inner.requests.push(recorded.clone());
    if req.method != "POST" || req.path != PEER_PATH {
        return Some((404, b"{}".to_vec()));
    }
    let Some(body) = parsed else {
        return Some((200, rpc_error(&Value::Null, -32700, "Invalid JSON payload")));
    };
    let id = body["id"].clone();
    if body["jsonrpc"] != "2.0" {
        return Some((200, rpc_error(&id, -32600, "Invalid Request")));
    }
    // Major.Minor decides; a patch number is not considered (spec §3.6).
    let version = recorded.a2a_version.as_deref().unwrap_or("");
    if version != "1.0" && !version.starts_with("1.0.") {
        return Some((200, rpc_error(&id, -32009, "Version not supported")));
    }
    match rpc_method.as_deref() {
        Some("SendMessage") => {
            let message = &body["params"]["message"];
            let Some(message_id) = message["messageId"].as_str().filter(|m| !m.is_empty()) else {
                return Some((200, rpc_error(&id, -32602, "Invalid parameters")));
            };
            if message["role"] != "ROLE_USER"
                || message["parts"].as_array().is_none_or(|p| p.is_empty())
            {
                return Some((200, rpc_error(&id, -32602, "Invalid parameters")));
            }
            let existing = inner
                .tasks
                .iter()
                .find(|t| script.message_id_guarantee && t.message_id == message_id)
                .cloned();
            let task = match existing {
                Some(t) => t,
                None => {
                    let t = PeerTask {
                        id: format!("peer-task-{}", inner.tasks.len() + 1),
                        message_id: message_id.to_owned(),
                        polls: 0,
                        cancelled: false,
                    };
                    inner.tasks.push(t.clone());
                    t
                }
            };
            if inner.dropped < script.drop_after_commit {
                inner.dropped += 1;
                return None;
            }
            Some((
                200,
                rpc_result(
                    &id,
                    json!({"task": task_json(&task, script.initial, script)}),
                ),
            ))
        }
        Some("GetTask") => {
            let wanted = body["params"]["id"].as_str().unwrap_or_default();
            let held = inner.held;
            let found = inner.tasks.iter_mut().find(|t| t.id == wanted);
            match found {
                Some(t) if !script.forget_tasks => {
                    if !held {
                        t.polls += 1;
                    }
                    let state = if t.cancelled {
                        state::CANCELED
                    } else if held || t.polls <= script.working_polls {
                        state::WORKING
                    } else {
                        script.terminal
                    };
                    Some((200, rpc_result(&id, task_json(t, state, script))))
                }
                _ => Some((200, rpc_error(&id, -32001, "Task not found"))),
            }
        }
        Some("CancelTask") => {
            let wanted = body["params"]["id"].as_str().unwrap_or_default();
            let found = inner.tasks.iter_mut().find(|t| t.id == wanted);
            match found {
                Some(_) if script.refuse_cancel => {
                    Some((200, rpc_error(&id, -32002, "Task cannot be canceled")))
                }
                Some(t) => {
                    t.cancelled = true;
                    Some((200, rpc_result(&id, task_json(t, state::CANCELED, script))))
                }
                None => Some((200, rpc_error(&id, -32001, "Task not found"))),
            }
        }
        _ => Some((200, rpc_error(&id, -32601, "Method not found"))),
    }
}
