//! The peer itself follows the A2A 1.0 rules the Intercom tests rely on: it refuses a request
//! without `A2A-Version: 1.0` (an empty value means 0.3) with `VersionNotSupportedError`
//! -32009 and creates nothing; it answers SendMessage with `{"task": …}`, GetTask with the task,
//! an unknown task with `TaskNotFoundError` -32001 and an unknown method with -32601. Driven by
//! a raw TLS client, independent of reach-intercom.

use std::sync::Arc;

use reach_a2a_peer::{A2aPeer, PEER_HOST, Script};
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

async fn post(peer: &A2aPeer, version: Option<&str>, body: &Value) -> Value {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(peer.root_store())
        .with_no_client_auth();
    let tcp = TcpStream::connect(peer.addr()).await.unwrap();
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(PEER_HOST).unwrap(), tcp)
        .await
        .unwrap();
    let body = body.to_string();
    let version = version
        .map(|v| format!("A2A-Version: {v}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /a2a HTTP/1.1\r\nHost: {PEER_HOST}\r\nContent-Type: application/json\r\n{version}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap()
}

fn send(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": {
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"returnImmediately": true}}})
}

#[tokio::test]
async fn the_peer_speaks_a2a_1_0_and_refuses_other_versions() {
    let peer = A2aPeer::start(Script::default()).await;
    for version in [None, Some(""), Some("0.3"), Some("2.0")] {
        let r = post(&peer, version, &send("a")).await;
        assert_eq!(r["error"]["code"], -32009, "{version:?}");
    }
    assert!(peer.tasks().is_empty(), "a refused version creates nothing");

    let r = post(&peer, Some("1.0"), &send("b")).await;
    assert_eq!(r["id"], "b");
    assert_eq!(
        r["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    let id = r["result"]["task"]["id"].as_str().unwrap().to_owned();

    let get = json!({"jsonrpc": "2.0", "id": "c", "method": "GetTask", "params": {"id": id}});
    let r = post(&peer, Some("1.0"), &get).await;
    assert_eq!(r["result"]["id"], id);
    assert_eq!(r["result"]["status"]["state"], "TASK_STATE_COMPLETED");

    let missing =
        json!({"jsonrpc": "2.0", "id": "d", "method": "GetTask", "params": {"id": "nope"}});
    assert_eq!(
        post(&peer, Some("1.0"), &missing).await["error"]["code"],
        -32001
    );
    let old = json!({"jsonrpc": "2.0", "id": "e", "method": "message/send", "params": {}});
    assert_eq!(
        post(&peer, Some("1.0"), &old).await["error"]["code"],
        -32601
    );
    assert_eq!(peer.count("SendMessage"), 5);
    assert_eq!(peer.tasks().len(), 1);
}
