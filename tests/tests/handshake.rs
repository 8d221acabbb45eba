//! Handshake refusals on a real role's port: only a leaf that chains to the trust root, obeys
//! the SPIFFE rules and names an admitted principal gets through, and nothing a caller says
//! about itself in metadata changes who it is.

use std::time::{Duration, SystemTime};

use rcgen::{BasicConstraints, IsCa, SanType};
use reach_identity::files::{LEAF_CERT, LEAF_KEY};
use reach_identity::{Principal, TrustRoot};
use reach_tests::{TestBody, call, call_with, raw_channel, reached_handler, refused_at_handshake};
use tonic::Code;

const ADMIT: &str = "/reach.core.v1.Admission/Admit";

fn scribe_root(body: &TestBody) -> TrustRoot {
    let dir = body.layout.scribe_dir();
    let read = |n: &str| String::from_utf8(std::fs::read(dir.join(n)).unwrap()).unwrap();
    TrustRoot::from_pem(read("root.crt"), read("root.key")).unwrap()
}

async fn code_with_leaf(
    body: &TestBody,
    port: &str,
    path: &str,
    leaf: Option<(&str, &str)>,
) -> Code {
    match raw_channel(&body.layout.socket_path(port), leaf).await {
        Ok(ch) => call(ch, path).await,
        Err(_) => Code::Unavailable,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_refusals() {
    let body = TestBody::start().await;
    let root = scribe_root(&body);
    let edge = Principal::new(body.manifest.trust_domain.clone(), "ingress-edge").unwrap();
    let now = SystemTime::now();
    let day = Duration::from_secs(86400);

    // The genuine leaf reaches the handler (which refuses the empty message on its merits).
    let sd = body.layout.secret_dir("ingress-edge");
    let cert = std::fs::read_to_string(sd.join(LEAF_CERT)).unwrap();
    let key = std::fs::read_to_string(sd.join(LEAF_KEY)).unwrap();
    let c = code_with_leaf(&body, "core.admission", ADMIT, Some((&cert, &key))).await;
    assert!(reached_handler(c), "genuine leaf got {c:?}");

    let refused = refused_at_handshake;

    // No client certificate.
    assert!(
        refused(code_with_leaf(&body, "core.admission", ADMIT, None).await),
        "no client certificate"
    );

    // Expired leaf.
    let expired = root.issue_leaf(&edge, now - 3 * day, day).unwrap();
    let c = code_with_leaf(
        &body,
        "core.admission",
        ADMIT,
        Some((&expired.cert_pem, &expired.key_pem)),
    )
    .await;
    assert!(refused(c), "expired leaf got {c:?}");

    // Leaf from another trust root.
    let other = TrustRoot::generate(&body.manifest.trust_domain, now).unwrap();
    let foreign = other.issue_leaf(&edge, now, day).unwrap();
    let c = code_with_leaf(
        &body,
        "core.admission",
        ADMIT,
        Some((&foreign.cert_pem, &foreign.key_pem)),
    )
    .await;
    assert!(refused(c), "foreign-root leaf got {c:?}");

    // Leaf with two URI SANs.
    let two = root
        .issue_with(&edge, now, day, |p| {
            p.subject_alt_names.push(SanType::URI(
                "spiffe://reach.local/core".try_into().unwrap(),
            ))
        })
        .unwrap();
    let c = code_with_leaf(
        &body,
        "core.admission",
        ADMIT,
        Some((&two.cert_pem, &two.key_pem)),
    )
    .await;
    assert!(refused(c), "two-SAN leaf got {c:?}");

    // A CA certificate presented as a leaf.
    let ca = root
        .issue_with(&edge, now, day, |p| {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained)
        })
        .unwrap();
    let c = code_with_leaf(
        &body,
        "core.admission",
        ADMIT,
        Some((&ca.cert_pem, &ca.key_pem)),
    )
    .await;
    assert!(refused(c), "CA-as-leaf got {c:?}");

    // A valid leaf of egress-discord claiming to be core in metadata: still egress-discord,
    // which ward admits for RedeemDecision only.
    let discord = body.material("egress-discord");
    let ward = Principal::new(body.manifest.trust_domain.clone(), "ward").unwrap();
    let ch = reach_port::connect_lazy(body.socket("ward.authority"), &discord, ward);
    let claims = [
        ("x-reach-principal", "spiffe://reach.local/core"),
        ("x-forwarded-client-cert", "URI=spiffe://reach.local/core"),
    ];
    assert_eq!(
        call_with(ch.clone(), "/reach.ward.v1.Ward/AdmitScope", &claims).await,
        Code::PermissionDenied
    );
    assert!(reached_handler(
        call_with(ch, "/reach.ward.v1.Ward/RedeemDecision", &claims).await
    ));

    // A client must refuse a server that is not the port's manifest principal: dial core's
    // socket expecting ward.
    let operator = body.material("operator");
    let wrong = Principal::new(body.manifest.trust_domain.clone(), "ward").unwrap();
    let ch = reach_port::connect_lazy(body.socket("core.health"), &operator, wrong);
    let c = call(ch, "/reach.health.v1.Health/Check").await;
    assert!(refused_at_handshake(c), "wrong server got {c:?}");

    body.stop().await;
}
