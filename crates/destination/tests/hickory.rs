//! The hickory resolver against a DNS responder started here on 127.0.0.1 (never a real DNS
//! server): it asks only the configured server, returns both A and AAAA answers, a mixed
//! answer refuses the destination, and a name that does not exist (NXDOMAIN), a name without
//! address records (NODATA) and no answer at all each get their own code.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use reach_destination::{
    Admission, AdmissionPolicy, Destination, DestinationError, HickoryConfig, HickoryResolver,
    Purpose, Resolver,
};
use tokio::net::UdpSocket;

/// Answers A/AAAA for a fixed table; a name in the table without a record of the asked type
/// gets an empty NOERROR answer (NODATA), as does every name under `nodata.example.com`; names
/// under `servfail.example.com` get SERVFAIL; every other name gets NXDOMAIN.
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
                let name = name.trim_end_matches('.');
                let exists = name.ends_with("nodata.example.com")
                    || table.iter().any(|(entry, _)| *entry == name);
                if name.ends_with("servfail.example.com") {
                    response.metadata.response_code = ResponseCode::ServFail;
                } else if !exists {
                    response.metadata.response_code = ResponseCode::NXDomain;
                }
                for (entry, ip) in &table {
                    if name != *entry {
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
    // A name the responder does not know (NXDOMAIN) does not exist: no search list or hosts
    // file turns it into an address.
    match resolver.lookup("unknown.example.com").await {
        Err(DestinationError::NoSuchName { host }) => assert_eq!(host, "unknown.example.com"),
        other => panic!("expected destination/no-such-name, got {other:?}"),
    }
    // Hickory answers `localhost` itself (RFC 6761) with 127.0.0.1 and ::1, asking no server;
    // admission refuses it like any loopback.
    let local = Admission::new(AdmissionPolicy::default(), resolver.clone())
        .admit(Destination::parse("https://localhost/", Purpose::new("test").unwrap()).unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        local.code(),
        "destination/special-purpose-address",
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

#[tokio::test]
async fn nxdomain_nodata_and_no_answer_each_refuse_with_their_own_code() {
    let purpose = Purpose::new("test").unwrap();
    let dest = |url: &str| Destination::parse(url, purpose.clone()).unwrap();

    // The configured server answers: NXDOMAIN for a name it does not know, an empty NOERROR
    // answer for a name that exists without addresses (and for an IPv4-only name asked AAAA,
    // which still admits on its A record), SERVFAIL for a zone it cannot serve.
    let public = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));
    let server = responder(vec![("v4only.example.com", public)]).await;
    let admission = Admission::new(
        AdmissionPolicy::default(),
        HickoryResolver::new(&HickoryConfig::new(vec![server])).unwrap(),
    );
    let mut out = String::new();
    for name in [
        "unknown.example.com",
        "www.nodata.example.com",
        "www.servfail.example.com",
        "v4only.example.com",
    ] {
        let line = match admission.admit(dest(&format!("https://{name}/v1"))).await {
            Ok(admitted) => format!("{name} ok {}\n", admitted.pinned_addr()),
            Err(e) => format!("{name} {} — {e}\n", e.code()),
        };
        out.push_str(&line);
    }
    expect_test::expect![[r#"
        unknown.example.com destination/no-such-name — destination unknown.example.com does not exist
        www.nodata.example.com destination/no-addresses — destination www.nodata.example.com resolved to no address
        www.servfail.example.com destination/resolution-failed — destination www.servfail.example.com could not be resolved: DNS error: error response: Server Failure
        v4only.example.com ok 93.184.216.34:443
    "#]]
    .assert_eq(&out);

    // The configured server is a loopback UDP port held open here that nothing reads: the
    // query fails once its timeout is spent.
    let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut config = HickoryConfig::new(vec![silent.local_addr().unwrap()]);
    config.timeout = Duration::from_millis(200);
    config.attempts = 1;
    let admission = Admission::new(
        AdmissionPolicy::default(),
        HickoryResolver::new(&config).unwrap(),
    );
    let err = admission
        .admit(dest("https://api.example.com/v1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DestinationError::Resolution { host, .. } if host == "api.example.com"),
        "{err:?}"
    );
    assert_eq!(err.code(), "destination/resolution-failed");
    drop(silent);
}
