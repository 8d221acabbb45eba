//! The destination table's connection cases, against a real TLS server on 127.0.0.1 whose
//! address is admitted as an explicit local road. Every case asserts, through the recording
//! dialer, that nothing dialed a refused address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use reach_destination::testing::{TestCa, serve_tls};
use reach_destination::{
    Admission, AdmissionPolicy, Destination, DestinationError, Dialer, Host, PinnedConnector,
    Purpose, RecordingDialer, RedirectPolicy, StaticResolver,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A public address that the recording dialer will record and refuse without any traffic.
const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));

fn purpose() -> Purpose {
    Purpose::new("model-portal").unwrap()
}

fn dest(url: &str) -> Destination {
    Destination::parse(url, purpose()).unwrap()
}

/// A server that answers each connection with the SNI it saw and, after the request head,
/// the scripted `response` bytes.
async fn server(ca: &TestCa, names: &[&str], response: &'static [u8]) -> SocketAddr {
    let (addr, _task) = serve_tls(ca.server_config(names), move |mut tls| async move {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
            if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let sni = tls.get_ref().1.server_name().unwrap_or("").to_owned();
        let _ = tls.write_all(format!("X-Sni: {sni}\r\n").as_bytes()).await;
        let _ = tls.write_all(response).await;
        let _ = tls.shutdown().await;
    })
    .await;
    addr
}

async fn exchange(
    connector: &PinnedConnector<RecordingDialer>,
    admitted: &reach_destination::AdmittedDestination,
) -> String {
    let mut stream = connector.connect(admitted).await.expect("connect");
    let request = admitted.request(Method::GET).body(()).unwrap();
    admitted
        .check_request(&request)
        .expect("helper-built request passes");
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        request.uri(),
        request.headers()["host"].to_str().unwrap()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn dns_rebinding_cannot_move_a_pinned_connection() {
    let ca = TestCa::new();
    let addr = server(&ca, &["model.test"], b"\r\n").await;
    // First answer the admitted road, then a private address (a rebinding attack).
    let resolver = StaticResolver::new()
        .with_ttl(Duration::ZERO)
        .with_sequence(
            "model.test",
            vec![vec![addr.ip()], vec![IpAddr::from([10, 0, 0, 7])]],
        );
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr);
    let admission = Admission::new(policy, resolver);
    let dialer = RecordingDialer::new();
    let connector = PinnedConnector::new(ca.root_store(), dialer.clone());
    let url = format!("https://model.test:{}/v1", addr.port());

    let admitted = admission
        .admit(dest(&url))
        .await
        .expect("first answer admitted");
    assert_eq!(admitted.pinned_addr(), addr);
    let reply = exchange(&connector, &admitted).await;
    assert_eq!(reply, "X-Sni: model.test\r\n\r\n");

    // The name now resolves to a private address: a new admission is refused...
    let err = admission.admit(dest(&url)).await.unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
    // ...and the pinned admission still dials only the admitted address.
    let reply = exchange(&connector, &admitted).await;
    assert_eq!(reply, "X-Sni: model.test\r\n\r\n");
    assert_eq!(dialer.dials(), vec![addr, addr]);
    assert_eq!(admission.resolver().lookups("model.test"), 2);
}

#[tokio::test]
async fn dns_rebinding_public_then_loopback() {
    let resolver = StaticResolver::new()
        .with_ttl(Duration::ZERO)
        .with_sequence(
            "api.example.com",
            vec![vec![PUBLIC], vec![IpAddr::from([127, 0, 0, 1])]],
        );
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    let dialer = RecordingDialer::new();
    let connector = PinnedConnector::new(TestCa::new().root_store(), dialer.clone());
    let admitted = admission
        .admit(dest("https://api.example.com/v1"))
        .await
        .unwrap();
    let err = admission
        .admit(dest("https://api.example.com/v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
    // The recording dialer refuses public addresses without traffic; what matters is which
    // address was attempted: only the pinned public one, never loopback.
    let err = connector.connect(&admitted).await.unwrap_err();
    assert_eq!(err.code(), "destination/dial-failed");
    assert_eq!(dialer.dials(), vec![SocketAddr::new(PUBLIC, 443)]);
}

#[tokio::test]
async fn a_name_without_addresses_is_refused_and_not_cached() {
    // The resolver answers the name with an empty set (NODATA), or does not know it at all
    // (NXDOMAIN): two codes, each naming its fault.
    let resolver = StaticResolver::new().with("empty.example.com", []);
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    for (name, code) in [
        ("empty.example.com", "destination/no-addresses"),
        ("unknown.example.com", "destination/no-such-name"),
    ] {
        for _ in 0..2 {
            let err = admission
                .admit(dest(&format!("https://{name}/v1")))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, DestinationError::NoAddresses { host }
                    | DestinationError::NoSuchName { host } if host == name),
                "{name}: {err:?}"
            );
            assert_eq!(err.code(), code, "{name}");
        }
    }
    // Asked again each time: an empty answer is never cached as an admission.
    assert_eq!(admission.resolver().lookups("empty.example.com"), 2);
}

/// A dialer that connects somewhere other than the address it is asked for, as a transparent
/// proxy or a NAT rule on the path would. Records what it was asked.
#[derive(Clone)]
struct Misdirecting {
    to: SocketAddr,
    asked: Arc<Mutex<Vec<SocketAddr>>>,
}

impl Dialer for Misdirecting {
    async fn dial(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        self.asked.lock().unwrap().push(addr);
        TcpStream::connect(self.to).await
    }
}

#[tokio::test]
async fn a_connection_that_reaches_another_peer_is_refused_before_tls() {
    let ca = TestCa::new();
    let pinned = server(&ca, &["model.test"], b"\r\n").await;
    // Another listener on loopback, which is where the connection really lands.
    let elsewhere = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let found = elsewhere.local_addr().unwrap();
    let policy =
        AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), pinned);
    let admission = Admission::new(
        policy,
        StaticResolver::new().with("model.test", [pinned.ip()]),
    );
    let admitted = admission
        .admit(dest(&format!("https://model.test:{}/v1", pinned.port())))
        .await
        .unwrap();
    let dialer = Misdirecting {
        to: found,
        asked: Arc::default(),
    };
    let connector = PinnedConnector::new(ca.root_store(), dialer.clone());

    let err = connector.connect(&admitted).await.unwrap_err();
    assert!(
        matches!(err, DestinationError::PeerMismatch { pinned: p, found: f } if p == pinned && f == found),
        "{err:?}"
    );
    assert_eq!(err.code(), "destination/peer-mismatch");
    assert_eq!(*dialer.asked.lock().unwrap(), vec![pinned]);
    // The wrong peer got a connection but not one byte: no ClientHello, no SNI.
    let (mut stray, _) = elsewhere.accept().await.unwrap();
    let mut seen = Vec::new();
    stray.read_to_end(&mut seen).await.unwrap();
    assert!(
        seen.is_empty(),
        "{} bytes reached the wrong peer",
        seen.len()
    );
}

#[tokio::test]
async fn cached_answer_is_reused_until_ttl() {
    let resolver = StaticResolver::new().with_sequence(
        "api.example.com",
        vec![vec![PUBLIC], vec![IpAddr::from([10, 0, 0, 1])]],
    );
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    for _ in 0..3 {
        let admitted = admission
            .admit(dest("https://api.example.com/v1"))
            .await
            .unwrap();
        assert_eq!(admitted.pinned_addr(), SocketAddr::new(PUBLIC, 443));
    }
    assert_eq!(admission.resolver().lookups("api.example.com"), 1);
    admission.clear_cache();
    let err = admission
        .admit(dest("https://api.example.com/v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
}

#[tokio::test]
async fn mixed_answers_refuse_the_whole_destination() {
    for refused in [
        "10.0.0.1",
        "::1",
        "169.254.169.254",
        "::ffff:127.0.0.1",
        "2002:a00:1::1",
    ] {
        let resolver =
            StaticResolver::new().with("api.example.com", [PUBLIC, refused.parse().unwrap()]);
        let admission = Admission::new(AdmissionPolicy::default(), resolver);
        let err = admission
            .admit(dest("https://api.example.com/v1"))
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            "destination/mixed-resolution",
            "{refused}: {err}"
        );
    }
}

#[tokio::test]
async fn ipv4_mapped_ipv6_is_not_the_road() {
    let ca = TestCa::new();
    let addr = server(&ca, &["model.test"], b"\r\n").await;
    let mapped: IpAddr = format!("::ffff:{}", addr.ip()).parse().unwrap();
    let resolver = StaticResolver::new().with("model.test", [mapped]);
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr);
    let admission = Admission::new(policy, resolver);
    let err = admission
        .admit(dest(&format!("https://model.test:{}/v1", addr.port())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
    let err = Admission::new(AdmissionPolicy::default(), StaticResolver::new())
        .admit(dest("https://[::ffff:808:808]/"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
    assert!(err.to_string().contains("embeds 8.8.8.8"), "{err}");
}

#[tokio::test]
async fn redirect_to_a_private_address_is_refused_on_readmission() {
    let ca = TestCa::new();
    let addr = server(
        &ca,
        &["model.test"],
        b"HTTP/1.1 302 Found\r\nLocation: https://internal.example.com/admin\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    let resolver = StaticResolver::new()
        .with("model.test", [addr.ip()])
        .with("internal.example.com", [IpAddr::from([192, 168, 1, 10])]);
    let mut policy =
        AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr);
    let dialer = RecordingDialer::new();
    let connector = PinnedConnector::new(ca.root_store(), dialer.clone());

    // Redirects off (the default): the Location is refused outright.
    let admission = Admission::new(
        policy.clone(),
        StaticResolver::new().with("model.test", [addr.ip()]),
    );
    let admitted = admission
        .admit(dest(&format!("https://model.test:{}/v1", addr.port())))
        .await
        .unwrap();
    let reply = exchange(&connector, &admitted).await;
    let location = reply
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .expect("location header")
        .to_owned();
    let err = admitted
        .redirect(&location, admission.policy())
        .unwrap_err();
    assert_eq!(err.code(), "destination/redirect-not-admitted");

    // Redirects admitted: the target is a brand-new destination and fails admission.
    policy.redirects = RedirectPolicy::Readmit { max_hops: 2 };
    let admission = Admission::new(policy, resolver);
    let admitted = admission
        .admit(dest(&format!("https://model.test:{}/v1", addr.port())))
        .await
        .unwrap();
    let next = admitted.redirect(&location, admission.policy()).unwrap();
    assert_eq!(next.to_string(), "https://internal.example.com/admin");
    assert_eq!(next.redirect_hops(), 1);
    let err = admission.admit(next).await.unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
    // A relative redirect stays on the origin but is still a new admission.
    let same = admitted.redirect("/v2", admission.policy()).unwrap();
    let again = admission.admit(same).await.unwrap();
    assert_eq!(again.pinned_addr(), addr);
    // Hop limit.
    let hop2 = again.redirect("/v3", admission.policy()).unwrap();
    let hop2 = admission.admit(hop2).await.unwrap();
    assert_eq!(
        hop2.redirect("/v4", admission.policy()).unwrap_err().code(),
        "destination/redirect-not-admitted"
    );

    assert_eq!(dialer.dials(), vec![addr]);
}

#[tokio::test]
async fn host_must_equal_the_admitted_name() {
    let resolver = StaticResolver::new().with("api.example.com", [PUBLIC]);
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    let admitted = admission
        .admit(dest("https://api.example.com/v1"))
        .await
        .unwrap();
    let good = admitted.request(Method::POST).body(()).unwrap();
    assert_eq!(good.headers()["host"], "api.example.com");
    assert_eq!(good.uri(), "/v1");
    admitted.check_request(&good).unwrap();

    let cases: Vec<(&str, http::Request<()>)> = vec![
        (
            "other Host",
            http::Request::builder()
                .uri("/v1")
                .header("host", "evil.example.com")
                .body(())
                .unwrap(),
        ),
        (
            "no Host",
            http::Request::builder().uri("/v1").body(()).unwrap(),
        ),
        (
            "two Hosts",
            http::Request::builder()
                .uri("/v1")
                .header("host", "api.example.com")
                .header("host", "evil.example.com")
                .body(())
                .unwrap(),
        ),
        (
            "absolute URI to another authority",
            http::Request::builder()
                .uri("https://evil.example.com/v1")
                .header("host", "api.example.com")
                .body(())
                .unwrap(),
        ),
        (
            "path outside",
            http::Request::builder()
                .uri("/v10")
                .header("host", "api.example.com")
                .body(())
                .unwrap(),
        ),
    ];
    let out: Vec<String> = cases
        .iter()
        .map(|(name, req)| {
            format!(
                "{name}: {}",
                admitted.check_request(req).unwrap_err().code()
            )
        })
        .collect();
    assert_eq!(
        out,
        [
            "other Host: destination/host-mismatch",
            "no Host: destination/host-mismatch",
            "two Hosts: destination/host-mismatch",
            "absolute URI to another authority: destination/host-mismatch",
            "path outside: destination/path-not-admitted",
        ]
    );
    let below = http::Request::builder()
        .uri("/v1/chat")
        .header("host", "api.example.com")
        .body(())
        .unwrap();
    admitted.check_request(&below).unwrap();
}

#[tokio::test]
async fn certificate_for_another_name_is_refused() {
    let ca = TestCa::new();
    let addr = server(&ca, &["other.test"], b"\r\n").await;
    let resolver = StaticResolver::new().with("model.test", [addr.ip()]);
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr);
    let admission = Admission::new(policy, resolver);
    let dialer = RecordingDialer::new();
    let connector = PinnedConnector::new(ca.root_store(), dialer.clone());
    let admitted = admission
        .admit(dest(&format!("https://model.test:{}/v1", addr.port())))
        .await
        .unwrap();
    let err = connector.connect(&admitted).await.unwrap_err();
    assert_eq!(err.code(), "destination/tls");
    assert!(format!("{:?}", err).contains("NotValidForName"), "{err:?}");

    // A certificate from an untrusted CA for the right name is refused too.
    let rogue = TestCa::new();
    let addr2 = server(&rogue, &["model.test"], b"\r\n").await;
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), addr2);
    let admission = Admission::new(
        policy,
        StaticResolver::new().with("model.test", [addr2.ip()]),
    );
    let admitted = admission
        .admit(dest(&format!("https://model.test:{}/v1", addr2.port())))
        .await
        .unwrap();
    let err = connector.connect(&admitted).await.unwrap_err();
    assert_eq!(err.code(), "destination/tls");
    assert_eq!(dialer.dials(), vec![addr, addr2]);
}

#[tokio::test]
async fn userinfo_and_unadmitted_port_are_refused_before_resolution() {
    let resolver = StaticResolver::new().with("api.example.com", [PUBLIC]);
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    let err = Destination::parse("https://key:secret@api.example.com/v1", purpose()).unwrap_err();
    assert_eq!(err.code(), "destination/userinfo");
    let err = admission
        .admit(dest("https://api.example.com:8443/v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/port-not-admitted");
    assert_eq!(admission.resolver().lookups("api.example.com"), 0);

    // A port admitted only for a road does not open that port for other names.
    let road: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), road);
    let admission = Admission::new(policy, StaticResolver::new().with("model.test", [PUBLIC]));
    let err = admission
        .admit(dest("https://model.test:8443/v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/port-not-admitted");
}

#[tokio::test]
async fn admitted_policy_port() {
    let mut policy = AdmissionPolicy::default();
    policy.ports.insert(8443);
    let admission = Admission::new(
        policy,
        StaticResolver::new().with("api.example.com", [PUBLIC]),
    );
    let admitted = admission
        .admit(dest("https://api.example.com:8443/v1"))
        .await
        .unwrap();
    assert_eq!(admitted.pinned_addr(), SocketAddr::new(PUBLIC, 8443));
    assert_eq!(admitted.host_header(), "api.example.com:8443");
    let _ = Arc::new(admitted);
}

#[tokio::test]
async fn a_road_named_without_its_port_says_the_port_must_match() {
    // Issue #34: an operator's mirror on a local road, its URL written without the road's port
    // (so port 443), was refused as a special-purpose loopback address, saying nothing of ports.
    let road: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("mirror.test".into()), road);
    let admission = Admission::new(
        policy,
        StaticResolver::new()
            .with("mirror.test", [road.ip()])
            .with("other.test", [road.ip()]),
    );
    let err = admission
        .admit(dest("https://mirror.test/docs.tar.gz"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/road-port-mismatch");
    assert_eq!(
        err.to_string(),
        "destination mirror.test is a local road only at 127.0.0.1:8443: the URL must name port \
         8443, not 443"
    );
    // With the road's port it is admitted; another name at the same address is still refused.
    assert!(
        admission
            .admit(dest("https://mirror.test:8443/docs.tar.gz"))
            .await
            .is_ok()
    );
    let err = admission
        .admit(dest("https://other.test/docs.tar.gz"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/special-purpose-address");
}
