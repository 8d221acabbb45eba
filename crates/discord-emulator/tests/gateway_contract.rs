//! The emulator's Gateway held to Discord's documented contract with a bare WebSocket client
//! (not Reach's): null `s`/`t` on frames that are not dispatches, 4005 for a second IDENTIFY,
//! 4007 for a RESUME past the session's sequence (and the session gone after it), and a RESUME
//! at the right sequence replaying nothing it already sent.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reach_discord_emulator::{Emulator, EmulatorConfig, User};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{WebSocketStream, client_async};

type Ws = WebSocketStream<TcpStream>;

async fn connect(addr: std::net::SocketAddr) -> Ws {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = client_async(format!("ws://{addr}/?v=10&encoding=json"), tcp)
        .await
        .unwrap();
    ws
}

/// The next frame: a JSON payload, or the close code.
async fn next(ws: &mut Ws) -> Result<Value, u16> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame within 5 s");
        match m {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(Some(f)))) => return Err(f.code.into()),
            Some(Ok(_)) => continue,
            other => panic!("the connection ended without a close frame: {other:?}"),
        }
    }
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

fn identify(em: &Emulator) -> Value {
    json!({"op": 2, "d": {"token": em.config().token, "intents": 1 << 9 | 1 << 15,
        "properties": {"os": "linux", "browser": "contract", "device": "contract"}}})
}

/// Frames up to and including the first dispatch named `t`.
async fn until_dispatch(ws: &mut Ws, t: &str) -> Vec<Value> {
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

#[tokio::test]
async fn the_gateway_speaks_discords_contract() {
    let em = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let (main, resume_addr) = em.gateway_addrs();

    let mut ws = connect(main).await;
    let hello = next(&mut ws).await.unwrap();
    assert_eq!(hello["op"], 10);
    assert!(hello["s"].is_null() && hello["t"].is_null(), "{hello}");
    assert!(
        hello.as_object().unwrap().contains_key("s"),
        "s is present, null: {hello}"
    );
    send(&mut ws, identify(&em)).await;
    let ready = until_dispatch(&mut ws, "READY").await.pop().unwrap();
    assert_eq!(ready["op"], 0);
    assert_eq!(ready["s"], 1);
    let session = ready["d"]["session_id"].as_str().unwrap().to_owned();
    send(&mut ws, json!({"op": 1, "d": 1})).await;
    let ack = next(&mut ws).await.unwrap();
    assert_eq!(ack["op"], 11);
    assert!(ack["s"].is_null() && ack["t"].is_null(), "{ack}");
    let bot = em.config().bot_user_id;
    em.post_user_message(
        1_100_000_000_000_000_900,
        &User::human(42, "ada"),
        &format!("<@{bot}> hi"),
    );
    let created = until_dispatch(&mut ws, "MESSAGE_CREATE")
        .await
        .pop()
        .unwrap();
    assert_eq!(created["s"], 2);
    // One session per connection.
    send(&mut ws, identify(&em)).await;
    assert_eq!(next(&mut ws).await, Err(4005));

    // RESUME at the sequence reached replays nothing already seen and says RESUMED.
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    let resume = |seq: u64| json!({"op": 6, "d": {"token": em.config().token, "session_id": session, "seq": seq}});
    send(&mut ws, resume(2)).await;
    let frames = until_dispatch(&mut ws, "RESUMED").await;
    assert_eq!(frames.len(), 1, "nothing replayed: {frames:?}");
    drop(ws);

    // RESUME past the sequence the session reached: 4007, and the session is gone.
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    send(&mut ws, resume(99)).await;
    assert_eq!(next(&mut ws).await, Err(4007));
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    send(&mut ws, resume(2)).await;
    let invalid = next(&mut ws).await.unwrap();
    assert_eq!(invalid["op"], 9, "{invalid}");
    assert_eq!(invalid["d"], false);
    assert!(invalid["s"].is_null() && invalid["t"].is_null());
}
