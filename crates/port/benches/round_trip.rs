//! Unary empty-RPC round trip over the port library (mTLS 1.3 over a Unix socket, with the
//! authorization layer) against plaintext tonic over a Unix socket, in the same run.
//!
//! Prints p50/p99 of each and the p50 ratio. Targets (SPECIFICATION.md): mTLS p50 at most
//! 1.5x plaintext, and under 150 µs on the reference machine.

use std::time::{Duration, Instant, SystemTime};

use hyper_util::rt::TokioIo;
use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::health::v1::health_client::HealthClient;
use reach_proto::health::v1::health_server::{Health, HealthServer};
use reach_proto::health::v1::{CheckRequest, CheckResponse};
use tonic::{Request, Response, Status};

const WARMUP: usize = 500;
const CALLS: usize = 5_000;

#[derive(Debug, Default)]
struct Empty;

#[tonic::async_trait]
impl Health for Empty {
    async fn check(&self, _r: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        Ok(Response::new(CheckResponse::default()))
    }
}

fn write_identity(dir: &std::path::Path, root: &TrustRoot, p: &Principal) {
    root.provision(dir, p, Duration::from_secs(3600)).unwrap();
}

async fn measure(mut client: HealthClient<tonic::transport::Channel>) -> Vec<Duration> {
    for _ in 0..WARMUP {
        client.check(CheckRequest {}).await.unwrap();
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        client.check(CheckRequest {}).await.unwrap();
        samples.push(t.elapsed());
    }
    samples.sort();
    samples
}

fn pct(s: &[Duration], p: f64) -> Duration {
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let td = TrustDomain::new("bench.local").unwrap();
        let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
        let (server_p, client_p) = (
            Principal::new(td.clone(), "server").unwrap(),
            Principal::new(td.clone(), "client").unwrap(),
        );
        write_identity(&dir.path().join("server"), &root, &server_p);
        write_identity(&dir.path().join("client"), &root, &client_p);
        let server_m = PortMaterial::load(&dir.path().join("server"), td.clone()).unwrap();
        let client_m = PortMaterial::load(&dir.path().join("client"), td.clone()).unwrap();

        // mTLS port.
        let tls_sock = dir.path().join("tls.sock");
        let policy =
            PortPolicy::new("bench").allow(client_p.clone(), "/reach.health.v1.Health/Check");
        let port =
            PortServer::bind(&PortAddress::Unix(tls_sock.clone()), server_m, policy).unwrap();
        tokio::spawn(port.serve(HealthServer::new(Empty), std::future::pending()));
        let tls = reach_port::connect(PortAddress::Unix(tls_sock), &client_m, server_p)
            .await
            .unwrap();

        // Plaintext tonic over a Unix socket.
        let plain_sock = dir.path().join("plain.sock");
        let listener = tokio::net::UnixListener::bind(&plain_sock).unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(HealthServer::new(Empty))
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
        );
        let plain = tonic::transport::Endpoint::from_static("http://plain")
            .connect_with_connector(tower::service_fn(move |_: http::Uri| {
                let p = plain_sock.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?))
                }
            }))
            .await
            .unwrap();

        let plain_s = measure(HealthClient::new(plain)).await;
        let tls_s = measure(HealthClient::new(tls)).await;
        let (p50p, p99p) = (pct(&plain_s, 0.5), pct(&plain_s, 0.99));
        let (p50t, p99t) = (pct(&tls_s, 0.5), pct(&tls_s, 0.99));
        println!("port round trip, {CALLS} unary empty RPCs each, one connection");
        println!(
            "  plaintext tonic over UDS : p50 {:>8.1?}  p99 {:>8.1?}",
            p50p, p99p
        );
        println!(
            "  mTLS port over UDS       : p50 {:>8.1?}  p99 {:>8.1?}",
            p50t, p99t
        );
        println!(
            "  ratio mTLS/plaintext p50 : {:.2}x  (target <= 1.50x; p50 target < 150 µs)",
            p50t.as_secs_f64() / p50p.as_secs_f64()
        );
    });
}
