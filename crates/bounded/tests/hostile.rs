//! Hostile returns from a real local TLS server (127.0.0.1:0, admitted as an exact local road,
//! certificate from a test CA). Each scripted response is cut with the right bound named.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use http::Method;
use reach_bounded::{Bound, Bounds, ReturnError, fetch, fetch_sse};
use reach_destination::testing::{TestCa, serve_tls};
use reach_destination::{
    Admission, AdmissionPolicy, AdmittedDestination, Destination, Host, PinnedConnector,
    PinnedStream, Purpose, StaticResolver, TcpDialer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

type Tls = TlsStream<TcpStream>;

/// Read one request head; returns false if the client closed first.
async fn read_head(tls: &mut Tls) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if tls.read(&mut byte).await.unwrap_or(0) == 0 {
            return false;
        }
        head.push(byte[0]);
    }
    true
}

struct Harness {
    admitted: AdmittedDestination,
    connector: PinnedConnector<TcpDialer>,
}

impl Harness {
    async fn start<F, Fut>(handler: F) -> Harness
    where
        F: Fn(Tls) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let ca = TestCa::new();
        let (addr, _task): (SocketAddr, _) =
            serve_tls(ca.server_config(&["model.test"]), handler).await;
        let policy =
            AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr);
        let admission = Admission::new(
            policy,
            StaticResolver::new().with("model.test", [addr.ip()]),
        );
        let url = format!("https://model.test:{}/v1/chat/completions", addr.port());
        let admitted = admission
            .admit(Destination::parse(&url, Purpose::new("model-portal").unwrap()).unwrap())
            .await
            .unwrap();
        let connector = PinnedConnector::new(ca.root_store(), TcpDialer);
        Harness {
            admitted,
            connector,
        }
    }

    async fn stream(&self) -> PinnedStream {
        self.connector.connect(&self.admitted).await.unwrap()
    }

    fn request(&self) -> http::Request<Bytes> {
        self.admitted
            .request(Method::POST)
            .body(Bytes::from_static(b""))
            .unwrap()
    }

    async fn fetch(&self, bounds: &Bounds) -> Result<reach_bounded::BoundedResponse, ReturnError> {
        fetch(self.stream().await, self.request(), bounds).await
    }
}

/// A server that answers every request with `response`.
async fn fixed(response: Vec<u8>) -> Harness {
    let response = Arc::new(response);
    Harness::start(move |mut tls| {
        let response = Arc::clone(&response);
        async move {
            if read_head(&mut tls).await {
                let _ = tls.write_all(&response).await;
                let _ = tls.shutdown().await;
            }
        }
    })
    .await
}

fn bound_of(result: Result<impl std::fmt::Debug, ReturnError>) -> Bound {
    match result {
        Err(ReturnError::Bound(v)) => v.bound,
        other => panic!("expected a bound violation, got {other:?}"),
    }
}

fn head(content_type: &str, extra: &str, body_len: Option<usize>) -> Vec<u8> {
    let len = body_len
        .map(|n| format!("Content-Length: {n}\r\n"))
        .unwrap_or_default();
    format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}{len}\r\n").into_bytes()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[tokio::test]
async fn good_response_passes() {
    let body = br#"{"choices":[{"message":{"role":"assistant","content":"Reach answers [1]."}}]}"#;
    let mut response = head("application/json; charset=utf-8", "", Some(body.len()));
    response.extend_from_slice(body);
    let h = fixed(response).await;
    let ok = h.fetch(&Bounds::default()).await.unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(&ok.body[..], &body[..]);
    assert!(ok.tokens > 10);

    // The same body gzipped and chunked passes too, decoded.
    let zipped = gzip(body);
    let mut response = head(
        "application/json",
        "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        None,
    );
    for piece in zipped.chunks(7) {
        response.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        response.extend_from_slice(piece);
        response.extend_from_slice(b"\r\n");
    }
    response.extend_from_slice(b"0\r\n\r\n");
    let h = fixed(response).await;
    let ok = h.fetch(&Bounds::default()).await.unwrap();
    assert_eq!(&ok.body[..], &body[..]);
}

#[tokio::test]
async fn gzip_bomb() {
    let bomb = gzip(&vec![b' '; 16 * 1024 * 1024]);
    let mut response = head(
        "application/json",
        "Content-Encoding: gzip\r\n",
        Some(bomb.len()),
    );
    response.extend_from_slice(&bomb);
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::CompressionRatio
    );
    // With the ratio bound lifted, the expanded-bytes bound still stops it.
    let bounds = Bounds {
        max_compression_ratio: u64::MAX,
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::ExpandedBytes);
}

#[tokio::test]
async fn endless_chunked_stream() {
    let (closed_tx, mut closed_rx) = mpsc::unbounded_channel();
    let h = Harness::start(move |mut tls| {
        let closed_tx = closed_tx.clone();
        async move {
            if !read_head(&mut tls).await {
                return;
            }
            let _ = tls
                .write_all(&head(
                    "application/json",
                    "Transfer-Encoding: chunked\r\n",
                    None,
                ))
                .await;
            // Bounded loop: it ends when the client closes, or after 10 million chunks.
            for _ in 0..10_000_000u64 {
                if tls.write_all(b"1\r\n \r\n").await.is_err() {
                    let _ = closed_tx.send(());
                    return;
                }
            }
        }
    })
    .await;
    let bounds = Bounds {
        max_chunk_count: 1000,
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::ChunkCount);
    // The client closed the connection: the server's writes failed.
    closed_rx.recv().await.expect("server saw the close");
}

#[tokio::test]
async fn idle_stream_slowloris() {
    let h = Harness::start(|mut tls| async move {
        if read_head(&mut tls).await {
            let _ = tls
                .write_all(&head("application/json", "", Some(100)))
                .await;
            let _ = tls.write_all(b"{\"a\":").await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let bounds = Bounds {
        max_idle_time: Duration::from_millis(200),
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::IdleTime);
}

#[tokio::test]
async fn drip_fed_stream_hits_stream_time() {
    let h = Harness::start(|mut tls| async move {
        if read_head(&mut tls).await {
            let _ = tls
                .write_all(&head(
                    "application/json",
                    "Transfer-Encoding: chunked\r\n",
                    None,
                ))
                .await;
            for _ in 0..1000 {
                if tls.write_all(b"1\r\n \r\n").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
    let bounds = Bounds {
        max_idle_time: Duration::from_secs(5),
        max_stream_time: Duration::from_millis(300),
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::StreamTime);
}

#[tokio::test]
async fn deep_json() {
    let body = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let mut response = head("application/json", "", Some(body.len()));
    response.extend_from_slice(body.as_bytes());
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::JsonDepth
    );
}

#[tokio::test]
async fn too_many_json_items() {
    let body = format!("[{}0]", "0,".repeat(200_000));
    let mut response = head("application/json", "", Some(body.len()));
    response.extend_from_slice(body.as_bytes());
    let h = fixed(response).await;
    // Every comma is also a token; lift the token bound to reach the item bound.
    let bounds = Bounds {
        max_tokens: u64::MAX,
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::JsonItems);
}

#[tokio::test]
async fn hundred_thousand_headers() {
    let mut response = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n".to_vec();
    for i in 0..100_000 {
        response.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    response.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::HeaderCount
    );
    // Few but huge headers cross the header-bytes bound instead.
    let mut response = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n".to_vec();
    response.extend_from_slice(format!("X-Big: {}\r\n", "v".repeat(100_000)).as_bytes());
    response.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::HeaderBytes
    );
}

#[tokio::test]
async fn wrong_content_type_and_status() {
    let mut response = head("text/html", "", Some(13));
    response.extend_from_slice(b"<html></html>");
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::ContentType
    );

    let h = fixed(
        b"HTTP/1.1 302 Found\r\nLocation: https://internal.example.com/\r\nContent-Length: 0\r\n\r\n"
            .to_vec(),
    )
    .await;
    assert_eq!(bound_of(h.fetch(&Bounds::default()).await), Bound::Status);

    let mut response = head("application/json", "Content-Encoding: br\r\n", Some(2));
    response.extend_from_slice(b"{}");
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::ContentEncoding
    );
}

#[tokio::test]
async fn oversized_single_token() {
    let body = format!("{{\"content\":\"{}\"}}", "A".repeat(100_000));
    let mut response = head("application/json", "", Some(body.len()));
    response.extend_from_slice(body.as_bytes());
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::TokenBytes
    );
}

#[tokio::test]
async fn wire_bytes_and_token_count() {
    let body = "a ".repeat(600_000);
    let mut response = head("application/json", "", Some(body.len()));
    response.extend_from_slice(body.as_bytes());
    let h = fixed(response).await;
    assert_eq!(bound_of(h.fetch(&Bounds::default()).await), Bound::Tokens);
    let bounds = Bounds {
        max_wire_bytes: 64 * 1024,
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::WireBytes);
}

#[tokio::test]
async fn oversized_chunk() {
    let mut response = head("application/json", "Transfer-Encoding: chunked\r\n", None);
    response.extend_from_slice(b"200000\r\n");
    response.extend_from_slice(&vec![b' '; 0x200000]);
    response.extend_from_slice(b"\r\n0\r\n\r\n");
    let h = fixed(response).await;
    assert_eq!(
        bound_of(h.fetch(&Bounds::default()).await),
        Bound::ChunkBytes
    );
}

#[tokio::test]
async fn mismatched_host_is_never_sent() {
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&requests);
    let h = Harness::start(move |mut tls| {
        let seen = Arc::clone(&seen);
        async move {
            if read_head(&mut tls).await {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
    .await;
    let request = http::Request::builder()
        .method(Method::POST)
        .uri("/v1/chat/completions")
        .header("host", "evil.example.com")
        .body(Bytes::new())
        .unwrap();
    let err = fetch(h.stream().await, request, &Bounds::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/host-mismatch");
    // The stream was dropped unsent; a fresh connection proves the server is reachable and
    // that it counted no request.
    drop(h.stream().await);
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn sse_good_stream() {
    let events = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                  : keep-alive comment\n\n\
                  event: message\r\nid: 2\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n\
                  data: [DONE]\n\n";
    let mut response = head("text/event-stream", "", Some(events.len()));
    response.extend_from_slice(events.as_bytes());
    let h = fixed(response).await;
    let mut stream = fetch_sse(h.stream().await, h.request(), &Bounds::default())
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(event) = stream.next_event().await.unwrap() {
        got.push(format!("{:?} {:?} {}", event.event, event.id, event.data));
    }
    assert_eq!(
        got,
        [
            "None None {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}",
            "Some(\"message\") Some(\"2\") {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}",
            "None None [DONE]",
        ]
    );
}

#[tokio::test]
async fn sse_hostile_streams() {
    // A deeply nested event.
    let events = format!("data: {}{}\n\n", "[".repeat(10_000), "]".repeat(10_000));
    let mut response = head("text/event-stream", "", Some(events.len()));
    response.extend_from_slice(events.as_bytes());
    let h = fixed(response).await;
    let mut stream = fetch_sse(h.stream().await, h.request(), &Bounds::default())
        .await
        .unwrap();
    assert_eq!(bound_of(stream.next_event().await), Bound::JsonDepth);

    // An endless stream of events.
    let h = Harness::start(|mut tls| async move {
        if read_head(&mut tls).await {
            let _ = tls
                .write_all(&head(
                    "text/event-stream",
                    "Transfer-Encoding: chunked\r\n",
                    None,
                ))
                .await;
            for _ in 0..1_000_000u64 {
                if tls.write_all(b"9\r\ndata: x\n\n\r\n").await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    let bounds = Bounds {
        max_sse_events: 100,
        ..Bounds::default()
    };
    let mut stream = fetch_sse(h.stream().await, h.request(), &bounds)
        .await
        .unwrap();
    let result = loop {
        match stream.next_event().await {
            Ok(Some(_)) => continue,
            other => break other,
        }
    };
    assert_eq!(bound_of(result), Bound::SseEvents);

    // An endless line.
    let h = Harness::start(|mut tls| async move {
        if read_head(&mut tls).await {
            let _ = tls
                .write_all(&head(
                    "text/event-stream",
                    "Transfer-Encoding: chunked\r\n",
                    None,
                ))
                .await;
            let _ = tls.write_all(b"6\r\ndata: \r\n").await;
            for _ in 0..1_000_000u64 {
                if tls.write_all(b"400\r\n").await.is_err()
                    || tls.write_all(&[b'x'; 0x400]).await.is_err()
                    || tls.write_all(b"\r\n").await.is_err()
                {
                    return;
                }
            }
        }
    })
    .await;
    let bounds = Bounds {
        max_token_bytes: u64::MAX,
        ..Bounds::default()
    };
    let mut stream = fetch_sse(h.stream().await, h.request(), &bounds)
        .await
        .unwrap();
    assert_eq!(bound_of(stream.next_event().await), Bound::SseLineBytes);
}

#[tokio::test]
async fn silent_server_hits_head_time() {
    let h = Harness::start(|mut tls| async move {
        if read_head(&mut tls).await {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let bounds = Bounds {
        max_head_time: Duration::from_millis(200),
        ..Bounds::default()
    };
    assert_eq!(bound_of(h.fetch(&bounds).await), Bound::HeadTime);
}

/// The failure of a return that breaks a protocol rule rather than a bound: `bounded/protocol`.
fn protocol_of(result: Result<impl std::fmt::Debug, ReturnError>) -> String {
    match result {
        Err(e @ ReturnError::Protocol(_)) => {
            assert_eq!(e.code(), "bounded/protocol");
            e.to_string()
        }
        other => panic!("expected a protocol failure, got {other:?}"),
    }
}

#[tokio::test]
async fn protocol_breaks_are_refused_as_such() {
    // Not HTTP at all.
    let h = fixed(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec()).await;
    let why = protocol_of(h.fetch(&Bounds::default()).await);
    assert!(why.starts_with("return protocol failure: "), "{why}");

    // A body that claims gzip and is not.
    let body = b"{\"choices\":[]} not compressed at all";
    let mut response = head(
        "application/json",
        "Content-Encoding: gzip\r\n",
        Some(body.len()),
    );
    response.extend_from_slice(body);
    let h = fixed(response).await;
    let why = protocol_of(h.fetch(&Bounds::default()).await);
    assert!(why.contains("gzip: "), "{why}");

    // A gzip stream cut short: the body ends where its length says, the stream does not.
    let whole = gzip(br#"{"choices":[{"message":{"content":"cut"}}]}"#);
    let cut = &whole[..whole.len() / 2];
    let mut response = head(
        "application/json",
        "Content-Encoding: gzip\r\n",
        Some(cut.len()),
    );
    response.extend_from_slice(cut);
    let h = fixed(response).await;
    let why = protocol_of(h.fetch(&Bounds::default()).await);
    assert!(why.contains("gzip: "), "{why}");

    // A body shorter than its Content-Length: the peer closed mid-body.
    let mut response = head("application/json", "", Some(100));
    response.extend_from_slice(b"{\"choices\":");
    let h = fixed(response).await;
    protocol_of(h.fetch(&Bounds::default()).await);

    // An event-stream line that is not UTF-8.
    let events = b"data: caf\xe9\n\n";
    let mut response = head("text/event-stream", "", Some(events.len()));
    response.extend_from_slice(events);
    let h = fixed(response).await;
    let mut stream = fetch_sse(h.stream().await, h.request(), &Bounds::default())
        .await
        .unwrap();
    let why = protocol_of(stream.next_event().await);
    assert!(why.contains("not UTF-8"), "{why}");
}
