//! A port that refuses the client's leaf fails the dial itself, once per attempt. Under TLS 1.3
//! the client's handshake ends before the server checks the client's certificate; without the
//! dialer waiting for the server's first bytes, the refused connection reached tonic, which
//! could dial again in a loop until the caller's deadline.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::probe::error_chain;
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::health::v1::health_client::HealthClient;
use reach_proto::health::v1::health_server::{Health, HealthServer};
use reach_proto::health::v1::{CheckRequest, CheckResponse};
use tokio::net::{UnixListener, UnixStream};
use tonic::{Request, Response, Status};

#[derive(Debug)]
struct Fixed;

#[tonic::async_trait]
impl Health for Fixed {
    async fn check(&self, _r: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        Ok(Response::new(CheckResponse::default()))
    }
}

/// Forwards every connection on `front` to `back`, counting them.
fn counting_relay(front: &Path, back: &Path) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(front).unwrap();
    let (count, back) = (Arc::new(AtomicUsize::new(0)), back.to_owned());
    let counter = count.clone();
    tokio::spawn(async move {
        while let Ok((mut a, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let back = back.clone();
            tokio::spawn(async move {
                if let Ok(mut b) = UnixStream::connect(&back).await {
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                }
            });
        }
    });
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_leaf_fails_the_dial_once_per_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let td = TrustDomain::new("refusal.test").unwrap();
    let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
    let principal = |n: &str| Principal::new(td.clone(), n).unwrap();
    for n in ["server", "client", "stranger"] {
        root.provision(
            &dir.path().join(n),
            &principal(n),
            Duration::from_secs(3600),
        )
        .unwrap();
    }
    let load = |n: &str| PortMaterial::load(&dir.path().join(n), td.clone()).unwrap();
    let policy = PortPolicy::new("t").allow(principal("client"), "/reach.health.v1.Health/Check");
    let socket = dir.path().join("port.sock");
    let port =
        PortServer::bind(&PortAddress::Unix(socket.clone()), load("server"), policy).unwrap();
    tokio::spawn(port.serve(HealthServer::new(Fixed), std::future::pending()));
    let front = dir.path().join("front.sock");
    let connections = counting_relay(&front, &socket);
    let address = PortAddress::Unix(front);

    // An admitted client connects and is answered.
    let ch = reach_port::connect(address.clone(), &load("client"), principal("server"))
        .await
        .unwrap();
    HealthClient::new(ch).check(CheckRequest {}).await.unwrap();
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    // A client the port does not admit fails to connect, with the server's alert as the cause.
    let stranger = load("stranger");
    let e = reach_port::connect(address.clone(), &stranger, principal("server"))
        .await
        .unwrap_err();
    assert!(error_chain(&e).contains("alert"), "{}", error_chain(&e));
    assert_eq!(connections.load(Ordering::SeqCst), 2);

    // On a lazy channel each call fails promptly after exactly one refused handshake.
    let ch = reach_port::connect_lazy(address, &stranger, principal("server"));
    let calls = 200;
    for i in 0..calls {
        let mut client = HealthClient::new(ch.clone());
        let status = tokio::time::timeout(Duration::from_secs(10), client.check(CheckRequest {}))
            .await
            .unwrap_or_else(|_| panic!("call {i} neither succeeded nor failed"))
            .unwrap_err();
        assert!(error_chain(&status).contains("alert"), "{status:?}");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 2 + calls);
}
