//! The hickory resolver against a DNS responder started here on 127.0.0.1 (never a real DNS
//! server): it asks only the configured server, returns both A and AAAA answers, and a mixed
//! answer refuses the destination.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use hickory_proto::op::Message;
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use reach_destination::{
    Admission, AdmissionPolicy, Destination, HickoryConfig, HickoryResolver, Purpose, Resolver,
};
use tokio::net::UdpSocket;

/// Answers A/AAAA for a fixed table; everything else gets an empty NOERROR answer.
async fn responder(table: Vec<(&'static str, IpAddr)>) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let Ok(request) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut response = request.clone().into_response();
            for query in &request.queries {
                let name = query.name().to_ascii().to_ascii_lowercase();
                for (entry, ip) in &table {
                    if name.trim_end_matches('.') != *entry {
                        continue;
                    }
                    let rdata = match (query.query_type(), ip) {
                        (RecordType::A, IpAddr::V4(v4)) => RData::A(A(*v4)),
                        (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(*v6)),
                        _ => continue,
                    };
                    response.add_answer(Record::from_rdata(query.name().clone(), 60, rdata));
                }
            }
            if let Ok(bytes) = response.to_vec() {
                let _ = socket.send_to(&bytes, peer).await;
            }
        }
    });
    addr
}

#[tokio::test]
async fn hickory_asks_only_the_configured_server() {
    let public = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));
    let server = responder(vec![
        ("api.example.com", public),
        ("mixed.example.com", public),
        ("mixed.example.com", IpAddr::V6(Ipv6Addr::LOCALHOST)),
        (
            "private.example.com",
            IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)),
        ),
    ])
    .await;
    let resolver = HickoryResolver::new(&HickoryConfig::new(vec![server])).unwrap();
    let answers = resolver.lookup("api.example.com").await.unwrap();
    assert_eq!(answers.addrs, vec![public]);
    assert!(answers.ttl.as_secs() <= 60);
    // A name the responder does not know resolves to nothing (no search list, no hosts file).
    let unknown = resolver.lookup("unknown.example.com").await;
    assert!(unknown.is_err() || unknown.unwrap().addrs.is_empty());
    // Hickory answers `localhost` itself (RFC 6761); admission refuses it like any loopback.
    let local = Admission::new(AdmissionPolicy::default(), resolver.clone())
        .admit(Destination::parse("https://localhost/", Purpose::new("test").unwrap()).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(
            local.code(),
            "destination/special-purpose-address" | "destination/resolution-failed"
        ),
        "{local}"
    );

    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    let purpose = Purpose::new("test").unwrap();
    let ok = admission
        .admit(Destination::parse("https://api.example.com/v1", purpose.clone()).unwrap())
        .await
        .unwrap();
    assert_eq!(ok.pinned_addr(), SocketAddr::new(public, 443));
    let err = admission
        .admit(Destination::parse("https://mixed.example.com/v1", purpose.clone()).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/mixed-resolution");
    let err = admission
        .admit(Destination::parse("https://private.example.com/v1", purpose).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
}
