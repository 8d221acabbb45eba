//! The A2A 1.0 shapes Intercom sends and reads, over the JSON-RPC binding.
//!
//! Sources (A2A 1.0, `a2aproject/A2A`):
//! - `specification/a2a.proto` (the normative definition, spec §1.4): `SendMessageRequest`
//!   (`message`, `configuration`), `SendMessageConfiguration.return_immediately` ("If `true`,
//!   the operation returns immediately after creating the task, even if processing is still in
//!   progress"; the 0.3 name was `blocking`), `SendMessageResponse` (oneof `task` | `message`),
//!   `GetTaskRequest` (`id`, `history_length`), `Task` (`id`, `context_id`, `status`,
//!   `artifacts`, `history`), `TaskStatus.state`, `enum TaskState` (`TASK_STATE_SUBMITTED`,
//!   `_WORKING`, `_COMPLETED`, `_FAILED`, `_CANCELED`, `_INPUT_REQUIRED`, `_REJECTED`,
//!   `_AUTH_REQUIRED`), `Message` (`message_id`, `role`, `parts`), `enum Role` (`ROLE_USER`),
//!   `Part` (oneof `text` | `raw` | `url` | `data`).
//! - `docs/specification.md` §9 (JSON-RPC binding: JSON-RPC 2.0 over HTTPS, `application/json`,
//!   PascalCase method names `SendMessage` and `GetTask`, service parameters as HTTP headers),
//!   §3.6.1 ("Clients MUST send the `A2A-Version` header with each request"; an empty value
//!   means 0.3) and the error table (`TaskNotFoundError` -32001, `VersionNotSupportedError`
//!   -32009).
//!
//! JSON field names are the ProtoJSON (lowerCamelCase) names and enum values their full proto
//! names, as the 1.0 JSON-RPC binding sends them. Unknown fields in a peer's answer are ignored
//! (ProtoJSON readers do the same); an unknown task state is a protocol violation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The service parameter naming the protocol version (spec §3.6.1).
pub const A2A_VERSION_HEADER: &str = "A2A-Version";
/// The version Intercom speaks, `Major.Minor` (spec §3.6).
pub const A2A_VERSION: &str = "1.0";
/// JSON-RPC method of Send Message (spec §9).
pub const METHOD_SEND_MESSAGE: &str = "SendMessage";
/// JSON-RPC method of Get Task (spec §9).
pub const METHOD_GET_TASK: &str = "GetTask";
/// JSON-RPC method of Cancel Task (spec §9; `CancelTaskRequest` carries the task `id` and
/// the answer is the `Task`).
pub const METHOD_CANCEL_TASK: &str = "CancelTask";
/// `TaskNotFoundError`.
pub const ERROR_TASK_NOT_FOUND: i64 = -32001;
/// `VersionNotSupportedError`.
pub const ERROR_VERSION_NOT_SUPPORTED: i64 = -32009;

/// `enum TaskState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Every state, for exhaustive tests.
    pub const ALL: &'static [TaskState] = &[
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The proto name, as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

/// `enum Role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// `Part`: Intercom sends text and structured data only (no raw bytes, no URLs to fetch).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    /// A `text/plain` part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            media_type: Some("text/plain".into()),
            ..Part::default()
        }
    }
}

/// `Message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<Part>,
}

/// `SendMessageConfiguration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Always `true` from Intercom: the peer answers as soon as the task exists and Intercom
    /// polls (no push notification config is ever sent: there is no inbound route).
    pub return_immediately: bool,
}

/// `SendMessageRequest` (the JSON-RPC `params` of `SendMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    pub message: Message,
    pub configuration: SendMessageConfiguration,
}

/// `GetTaskRequest` (the JSON-RPC `params` of `GetTask`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `CancelTaskRequest` (the JSON-RPC `params` of `CancelTask`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    pub id: String,
}

/// `TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// `Task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default)]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    #[serde(default)]
    pub history: Vec<Message>,
}

/// `SendMessageResponse`: oneof `task` | `message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// A JSON-RPC 2.0 request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonRpcRequest<P> {
    pub jsonrpc: &'static str,
    pub id: String,
    pub method: &'static str,
    pub params: P,
}

impl<P: Serialize> JsonRpcRequest<P> {
    /// A request with id `id`.
    pub fn new(id: String, method: &'static str, params: P) -> Self {
        JsonRpcRequest {
            jsonrpc: "2.0",
            id,
            method,
            params,
        }
    }

    /// The exact bytes sent (their digest is what the EgressDecision binds).
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain structs of strings, bools and JSON values cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
}

/// A JSON-RPC 2.0 response: exactly one of `result` and `error`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JsonRpcResponse<R> {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Value,
    #[serde(default = "Option::default")]
    pub result: Option<R>,
    #[serde(default)]
    pub error: Option<JsonRpcError>,
}

/// A peer answer that is not a well-formed JSON-RPC 2.0 response to our request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("a2a/malformed: the body is not the expected JSON-RPC response")]
    Malformed,
    #[error("a2a/correlation: the response id is not the request id")]
    Correlation,
}

/// What a JSON-RPC call answered.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcAnswer<R> {
    Result(R),
    Error(JsonRpcError),
}

/// Parses a JSON-RPC response to request `id`: version 2.0, same id, exactly one of result and
/// error.
pub fn parse_response<R: serde::de::DeserializeOwned>(
    body: &[u8],
    id: &str,
) -> Result<RpcAnswer<R>, WireError> {
    let response: JsonRpcResponse<R> =
        serde_json::from_slice(body).map_err(|_| WireError::Malformed)?;
    if response.jsonrpc != "2.0" {
        return Err(WireError::Malformed);
    }
    if response.id != Value::String(id.to_owned()) {
        return Err(WireError::Correlation);
    }
    match (response.result, response.error) {
        (Some(r), None) => Ok(RpcAnswer::Result(r)),
        (None, Some(e)) => Ok(RpcAnswer::Error(e)),
        _ => Err(WireError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_message_is_the_1_0_json_rpc_shape() {
        let req = JsonRpcRequest::new(
            "t1/send".into(),
            METHOD_SEND_MESSAGE,
            SendMessageRequest {
                message: Message {
                    message_id: "m1".into(),
                    context_id: None,
                    task_id: None,
                    role: Role::User,
                    parts: vec![Part::text("hi")],
                },
                configuration: SendMessageConfiguration {
                    accepted_output_modes: vec![],
                    history_length: None,
                    return_immediately: true,
                },
            },
        );
        let v: Value = serde_json::from_slice(&req.to_bytes()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "jsonrpc": "2.0", "id": "t1/send", "method": "SendMessage",
                "params": {
                    "message": {"messageId": "m1", "role": "ROLE_USER",
                        "parts": [{"text": "hi", "mediaType": "text/plain"}]},
                    "configuration": {"returnImmediately": true}
                }
            })
        );
    }

    #[test]
    fn task_states_round_trip_by_proto_name() {
        for &s in TaskState::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<TaskState>(&json).unwrap(), s);
        }
        assert!(serde_json::from_str::<TaskState>("\"completed\"").is_err());
    }

    #[test]
    fn responses_are_correlated_and_exclusive() {
        let ok = br#"{"jsonrpc":"2.0","id":"a","result":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}"#;
        assert!(matches!(
            parse_response::<Task>(ok, "a"),
            Ok(RpcAnswer::Result(_))
        ));
        assert_eq!(parse_response::<Task>(ok, "b"), Err(WireError::Correlation));
        let both = br#"{"jsonrpc":"2.0","id":"a","result":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"error":{"code":1}}"#;
        assert_eq!(parse_response::<Task>(both, "a"), Err(WireError::Malformed));
        let err =
            br#"{"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"Task not found"}}"#;
        assert!(matches!(
            parse_response::<Task>(err, "a"),
            Ok(RpcAnswer::Error(JsonRpcError { code: -32001, .. }))
        ));
        let send = br#"{"jsonrpc":"2.0","id":"a","result":{"task":{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}}}"#;
        assert!(matches!(
            parse_response::<SendMessageResponse>(send, "a"),
            Ok(RpcAnswer::Result(SendMessageResponse::Task(_)))
        ));
    }
}
