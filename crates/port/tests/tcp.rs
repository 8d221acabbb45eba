//! The optional loopback-TCP transport: the same mTLS and authorization as Unix sockets, and
//! only loopback addresses can be bound.

use std::time::{Duration, SystemTime};

use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::health::v1::health_client::HealthClient;
use reach_proto::health::v1::health_server::{Health, HealthServer};
use reach_proto::health::v1::{CheckRequest, CheckResponse};
use tonic::{Request, Response, Status};

#[derive(Debug)]
struct Fixed;

#[tonic::async_trait]
impl Health for Fixed {
    async fn check(&self, _r: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        Ok(Response::new(CheckResponse {
            role: "server".into(),
            ..Default::default()
        }))
    }
}

fn identity(dir: &std::path::Path, root: &TrustRoot, p: &Principal) {
    root.provision(dir, p, Duration::from_secs(3600)).unwrap();
}

#[tokio::test]
async fn loopback_tcp_port_authenticates_and_authorizes_like_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let td = TrustDomain::new("tcp.test").unwrap();
    let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
    let names = ["server", "client", "stranger"];
    for n in names {
        identity(
            &dir.path().join(n),
            &root,
            &Principal::new(td.clone(), n).unwrap(),
        );
    }
    let load = |n: &str| PortMaterial::load(&dir.path().join(n), td.clone()).unwrap();
    let (server, client, stranger) = (load("server"), load("client"), load("stranger"));
    let server_p = Principal::new(td.clone(), "server").unwrap();
    let client_p = Principal::new(td.clone(), "client").unwrap();

    // Non-loopback addresses are refused.
    let wild = PortAddress::Tcp("0.0.0.0:0".parse().unwrap());
    let err = PortServer::bind(&wild, server.clone(), PortPolicy::new("t")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);

    let policy = PortPolicy::new("t").allow(client_p, "/reach.health.v1.Health/Check");
    let port = PortServer::bind(
        &PortAddress::Tcp("127.0.0.1:0".parse().unwrap()),
        server,
        policy,
    )
    .unwrap();
    let addr = PortAddress::Tcp(port.tcp_addr().unwrap());
    tokio::spawn(port.serve(HealthServer::new(Fixed), std::future::pending()));

    let ch = reach_port::connect(addr.clone(), &client, server_p.clone())
        .await
        .unwrap();
    let r = HealthClient::new(ch).check(CheckRequest {}).await.unwrap();
    assert_eq!(r.get_ref().role, "server");

    // A valid leaf the port does not admit fails the handshake.
    let ch = reach_port::connect_lazy(addr, &stranger, server_p);
    assert!(HealthClient::new(ch).check(CheckRequest {}).await.is_err());
}
