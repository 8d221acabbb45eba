//! Signing round trips with a key made in the test, and the kinds kept apart.

use reach_digest::Sha256Digest;
use reach_plan::HilMode;
use reach_room::fact::{
    Budget, FactRefusal, Opened, RoomFact, RunId, SignatureRefusal, SignedFact, SignedKind,
    check_signable, signing_input, verify,
};
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};

fn key() -> Ed25519KeyPair {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()
}

fn fact() -> RoomFact {
    RoomFact::opened(
        RunId::new("run-1234abcd").unwrap(),
        5,
        Opened {
            pack: "app-local".into(),
            pack_generation: 1,
            profile_digest: Sha256Digest::of(b"p"),
            thematic_profile: "corpus-profile:app".into(),
            goal_digest: Sha256Digest::of(b"g"),
            requester: "r".into(),
            solver: "s".into(),
            reviewer: "v".into(),
            hil_mode: HilMode::EachStep,
            budget: Budget {
                max_rounds: 4,
                max_experiments: 2,
                max_wall_s: 1800,
                passages_per_turn: 1,
            },
        },
    )
}

fn signed(k: &Ed25519KeyPair, f: &RoomFact) -> SignedFact {
    let bytes = f.canonical_bytes();
    let signature = k
        .sign(&signing_input(SignedKind::Fact, &bytes))
        .as_ref()
        .to_vec();
    SignedFact {
        bytes,
        signature,
        key_id: "node-key-1".into(),
    }
}

#[test]
fn a_signed_fact_round_trips() {
    let k = key();
    let f = fact();
    let s = signed(&k, &f);
    assert_eq!(s.verify(k.public_key().as_ref()).unwrap(), f);
    // Another key refuses.
    let other = key();
    assert_eq!(
        s.verify(other.public_key().as_ref()).unwrap_err().code(),
        "room-sign/bad-signature"
    );
    // Tampered bytes refuse.
    let mut t = s.clone();
    let i = t.bytes.len() - 3;
    t.bytes[i] ^= 1;
    assert!(t.verify(k.public_key().as_ref()).is_err());
}

#[test]
fn a_fact_signature_is_no_recipe_signature() {
    let k = key();
    let s = signed(&k, &fact());
    let pk = k.public_key().as_ref();
    assert_eq!(verify(SignedKind::Fact, &s.bytes, &s.signature, pk), Ok(()));
    for kind in [SignedKind::Recipe, SignedKind::ExecutionRecord] {
        assert_eq!(
            verify(kind, &s.bytes, &s.signature, pk),
            Err(SignatureRefusal::BadSignature)
        );
        assert_eq!(
            check_signable(kind, &s.bytes).unwrap_err().code(),
            "room-sign/format"
        );
    }
    assert_eq!(check_signable(SignedKind::Fact, &s.bytes), Ok(()));
}

#[test]
fn from_bytes_is_strict() {
    let f = fact();
    let bytes = f.canonical_bytes();
    assert_eq!(RoomFact::from_bytes(&bytes).unwrap(), f);
    // Another spelling of the same fact.
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let pretty = serde_json::to_vec_pretty(&v).unwrap();
    assert_eq!(
        RoomFact::from_bytes(&pretty).unwrap_err(),
        FactRefusal::NotCanonical
    );
    // An unknown field, in the fact and in its body.
    let text = String::from_utf8(bytes.clone()).unwrap();
    for bad in [
        text.replacen("\"seq\"", "\"extra\":1,\"seq\"", 1),
        text.replacen("\"pack\"", "\"extra\":1,\"pack\"", 1),
        text.replacen("\"kind\":\"opened\"", "\"kind\":\"opening\"", 1),
        text.replacen("run-1234abcd", "run-/etc", 1),
        text.replacen("\"prev\":null", "\"prev\":\"sha256:00\"", 1),
    ] {
        assert_ne!(bad, text);
        assert_eq!(
            RoomFact::from_bytes(bad.as_bytes()).unwrap_err().code(),
            "room/fact-malformed",
            "{bad}"
        );
    }
    assert!(text.starts_with(r#"{"format":"reach.room.fact.v1","room":"run-1234abcd","seq":0,"prev":null,"at_ms":5,"body":{"kind":"opened","pack":"app-local""#), "{text}");
    assert!(text.contains(&format!(
        "\"profile_digest\":\"{}\"",
        Sha256Digest::of(b"p")
    )));
}

#[test]
fn run_ids_are_opaque() {
    for bad in [
        "",
        "run-",
        "run-XYZ",
        "job-12",
        "run-12/..",
        &format!("run-{}", "a".repeat(65)),
    ] {
        assert!(RunId::new(bad).is_err(), "{bad}");
    }
    assert!(RunId::new("run-0").is_ok());
}
