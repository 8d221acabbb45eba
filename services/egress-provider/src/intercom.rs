//! The A2A adapter of this instance (Intercom's egress side): settings, the payload check, and
//! one redeemed attempt carried with `reach_intercom::carry`.
//!
//! Core drives the task (journal, decisions issued at ward, classification); this side only
//! redeems the decision core names, at ward, for this instance's own peer URL and the digest of
//! the bytes it received, and carries exactly those bytes once. It never retries: a resend or a
//! poll is a new call under a new decision.

use std::sync::Arc;

use anyhow::Context as _;
use reach_destination::roads::{ConfiguredResolver, Roads};
use reach_destination::{AdmissionPolicy, PinnedConnector, TcpDialer};
use reach_intercom::wire::{METHOD_CANCEL_TASK, METHOD_GET_TASK, METHOD_SEND_MESSAGE};
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, PeerClient, PeerConfig,
    PeerCredential, Transmitted, a2a_bounds,
};
use reach_proto::ward::v1::ward_client::WardClient;
use serde_json::Value;
use tonic::transport::Channel;

/// `settings.intercom` of the role config.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntercomSettings {
    /// The enrolled peer's A2A JSON-RPC endpoint, canonical (`https://host[:port]/path`); core
    /// issues every decision for this exact string.
    pub peer: String,
    /// Where the bytes may go: public name servers, or an exact local road with its CA.
    #[serde(default)]
    pub roads: Roads,
}

/// Why a payload is not one Intercom would send. Nothing is transmitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadRefusal {
    /// Not a JSON-RPC 2.0 request object.
    #[error("egress/a2a-not-json-rpc")]
    NotJsonRpc,
    /// A method other than SendMessage, GetTask and CancelTask (Reach only sends, polls, and
    /// cancels a task the peer left waiting for input).
    #[error("egress/a2a-method-refused")]
    Method,
    /// A SendMessage without `configuration.returnImmediately = true` (Reach never blocks on a
    /// peer; it parks and polls).
    #[error("egress/a2a-blocking-send")]
    Blocking,
    /// A push notification config anywhere: Reach has no inbound route for a callback.
    #[error("egress/a2a-push-config")]
    PushConfig,
    /// A task Sigil id in the payload: a Sigil never reaches a peer.
    #[error("egress/sigil-presented")]
    Sigil,
}

/// Checks that `payload` is an Intercom request: a JSON-RPC 2.0 SendMessage (returning
/// immediately), GetTask or CancelTask, with no push config and no Sigil.
pub fn check_payload(payload: &[u8]) -> Result<(), PayloadRefusal> {
    let text = std::str::from_utf8(payload).map_err(|_| PayloadRefusal::NotJsonRpc)?;
    let v: Value = serde_json::from_str(text).map_err(|_| PayloadRefusal::NotJsonRpc)?;
    if v.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !v["params"].is_object() {
        return Err(PayloadRefusal::NotJsonRpc);
    }
    if reach_portal::cut::contains_sigil(text) {
        return Err(PayloadRefusal::Sigil);
    }
    if has_push_config(&v) {
        return Err(PayloadRefusal::PushConfig);
    }
    match v.get("method").and_then(Value::as_str) {
        Some(METHOD_GET_TASK | METHOD_CANCEL_TASK) => Ok(()),
        Some(METHOD_SEND_MESSAGE) => {
            match v["params"]["configuration"]["returnImmediately"].as_bool() {
                Some(true) => Ok(()),
                _ => Err(PayloadRefusal::Blocking),
            }
        }
        _ => Err(PayloadRefusal::Method),
    }
}

/// Whether any object key names a push notification config (`pushNotificationConfig`,
/// `taskPushNotificationConfig`, any case or snake form).
fn has_push_config(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, v)| {
            let k: String = k
                .chars()
                .filter(|c| *c != '_')
                .collect::<String>()
                .to_ascii_lowercase();
            k.contains("pushnotification") || has_push_config(v)
        }),
        Value::Array(a) => a.iter().any(has_push_config),
        _ => false,
    }
}

/// The configured adapter.
#[derive(Debug)]
pub struct Peer {
    client: PeerClient<ConfiguredResolver, TcpDialer>,
}

impl Peer {
    pub fn new(s: IntercomSettings, credential: Option<&[u8]>) -> anyhow::Result<Arc<Self>> {
        let credential = match credential {
            Some(bytes) => {
                let token = String::from_utf8(bytes.to_vec())
                    .map_err(|_| anyhow::anyhow!("the peer-credential file is not UTF-8"))?;
                Some(
                    PeerCredential::new(token.trim_end().to_owned())
                        .map_err(|e| anyhow::anyhow!("the peer-credential file: {e}"))?,
                )
            }
            None => None,
        };
        let admission = s
            .roads
            .admission(AdmissionPolicy::default())
            .context("settings.intercom.roads")?;
        let connector = PinnedConnector::new(
            s.roads.roots().context("settings.intercom.roads")?,
            TcpDialer,
        );
        let client = PeerClient::new(PeerConfig {
            url: s.peer,
            admission: Arc::new(admission),
            connector,
            credential,
            bounds: a2a_bounds(),
        })
        .map_err(|e| anyhow::anyhow!("settings.intercom.peer: {e}"))?;
        Ok(Arc::new(Peer { client }))
    }

    /// Redeems `decision` at ward for `attempt_id` and carries `payload` once.
    pub async fn attempt(
        &self,
        ward: WardClient<Channel>,
        decision: String,
        attempt_id: &str,
        payload: Vec<u8>,
    ) -> Transmitted {
        let redeemer = WardRedeemer {
            ward,
            payload: payload.clone(),
        };
        reach_intercom::carry(
            &self.client,
            &redeemer,
            DecisionId(decision),
            attempt_id,
            payload,
        )
        .await
    }
}

/// Redemption at ward through `reach-egress-gate` (the one implementation), as this role, for
/// the exact bytes about to be carried. It issues nothing: core obtains every decision.
struct WardRedeemer {
    ward: WardClient<Channel>,
    payload: Vec<u8>,
}

impl DecisionAuthority for WardRedeemer {
    async fn obtain_decision(&self, _attempt: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        Err(DecisionRefusal::Refused {
            code: "egress/issues-nothing".into(),
        })
    }

    async fn redeem(
        &self,
        decision: &DecisionId,
        attempt: &Attempt,
    ) -> Result<(), DecisionRefusal> {
        let refused = |code: String| DecisionRefusal::Refused { code };
        let mut ward = self.ward.clone();
        let redeemed =
            reach_egress_gate::redeem(&mut ward, &decision.0, &attempt.destination, &self.payload)
                .await
                .map_err(|e| refused(e.code()))?;
        // `carry` names the call's attempt id as the attempt's task id; the decision must have
        // been issued for exactly that attempt.
        if redeemed.attempt_id() != attempt.task_id {
            return Err(refused("decision/attempt-mismatch".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(config: Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "id": "t/send", "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "hi"}]}, "configuration": config}
        }))
        .unwrap()
    }

    #[test]
    fn settings_refuse_a_peer_that_is_not_canonical_https_and_a_bad_credential() {
        let settings = |peer: &str| IntercomSettings {
            peer: peer.into(),
            roads: Roads::default(),
        };
        let refused = |r: anyhow::Result<Arc<Peer>>| format!("{:#}", r.unwrap_err());
        let e = refused(Peer::new(settings("http://peer.test/a2a"), None));
        assert!(e.starts_with("settings.intercom.peer"), "{e}");
        let e = refused(Peer::new(
            settings("https://peer.test/a2a"),
            Some(&[0xff, 0xfe]),
        ));
        assert!(e.contains("not UTF-8"), "{e}");
        let e = refused(Peer::new(
            settings("https://peer.test/a2a"),
            Some(b"two words"),
        ));
        assert!(e.contains("peer-credential"), "{e}");
        assert!(Peer::new(settings("https://peer.test/a2a"), Some(b"tok\n")).is_ok());
    }

    #[test]
    fn only_intercom_requests_pass() {
        let get = br#"{"jsonrpc":"2.0","id":"t/poll-1","method":"GetTask","params":{"id":"p-1"}}"#;
        let sigil = format!(
            r#"{{"jsonrpc":"2.0","id":"t","method":"GetTask","params":{{"id":"sigil_{}"}}}}"#,
            "0a".repeat(16)
        );
        let cases: Vec<(Vec<u8>, Result<(), PayloadRefusal>)> = vec![
            (send(serde_json::json!({"returnImmediately": true})), Ok(())),
            (get.to_vec(), Ok(())),
            (b"not json".to_vec(), Err(PayloadRefusal::NotJsonRpc)),
            (
                br#"{"jsonrpc":"1.0","method":"GetTask","params":{}}"#.to_vec(),
                Err(PayloadRefusal::NotJsonRpc),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"t/cancel","method":"CancelTask","params":{"id":"p"}}"#
                    .to_vec(),
                Ok(()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"t","method":"ListTasks","params":{}}"#.to_vec(),
                Err(PayloadRefusal::Method),
            ),
            (
                send(serde_json::json!({"returnImmediately": false})),
                Err(PayloadRefusal::Blocking),
            ),
            (send(serde_json::json!({})), Err(PayloadRefusal::Blocking)),
            (
                send(serde_json::json!({"returnImmediately": true,
                    "pushNotificationConfig": {"url": "https://x.test/cb"}})),
                Err(PayloadRefusal::PushConfig),
            ),
            (sigil.into_bytes(), Err(PayloadRefusal::Sigil)),
        ];
        for (payload, want) in cases {
            assert_eq!(
                check_payload(&payload),
                want,
                "{}",
                String::from_utf8_lossy(&payload)
            );
        }
    }
}
