//! Ward signs Room records with the node's ed25519 key on the real body (issue #37): core's
//! leaf has each kind signed and the signature verifies with `reach_room::fact::verify` under
//! the key `RoomKey` gives, never as another kind; no other caller may sign; a record that is
//! not signable is refused with its code; the key is created once in ward's data directory and
//! is the same after ward restarts; a key file open to others stops ward from starting.

use std::os::unix::fs::PermissionsExt as _;

use reach_digest::Sha256Digest;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_room::fact::{MAX_SIGNED_BYTES, SignatureRefusal, SignedKind, verify};
use reach_tests::TestBody;
use reach_tests::workbench::code;
use tonic::transport::Channel;

fn ward_as(body: &TestBody, principal: &str) -> WardClient<Channel> {
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material(principal),
        body.manifest.principal("ward"),
    ))
}

/// A signable record of `kind`; `marker` must never reach a log.
fn record(kind: SignedKind, marker: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "format": kind.format(), "note": marker })).unwrap()
}

fn sign_request(kind: &str, record: Vec<u8>) -> ward_pb::SignRoomRecordRequest {
    ward_pb::SignRoomRecordRequest {
        kind: kind.into(),
        record,
    }
}

async fn room_key(ward: &mut WardClient<Channel>) -> ward_pb::RoomKeyResponse {
    ward.room_key(ward_pb::RoomKeyRequest {})
        .await
        .unwrap()
        .into_inner()
}

async fn refused(
    ward: &mut WardClient<Channel>,
    req: ward_pb::SignRoomRecordRequest,
) -> tonic::Status {
    ward.sign_room_record(req).await.unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ward_signs_room_records_for_core_alone_with_one_lasting_key() {
    let mut body = TestBody::start_configured(|_, _| {}).await;
    let mut core = ward_as(&body, "core");
    let mut operator = ward_as(&body, "operator");
    let mut workbench = ward_as(&body, "workbench");

    // The key: created in ward's data directory, owner-only; core and the operator read the
    // same public key, and its id names it.
    let key_file = body
        .layout
        .data_dir("ward")
        .join(reach_ward_desk::ROOM_KEY_FILE);
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", key_file.display());
    let key_bytes = std::fs::read(&key_file).unwrap();
    let key = room_key(&mut core).await;
    assert_eq!(key.public_key.len(), 32);
    assert_eq!(key.key_id, format!("ed25519:{}", hex_of(&key.public_key)));
    assert_eq!(room_key(&mut operator).await, key);

    // Each kind signs, verifies under that key as its own kind, and never as another.
    let mut signed = Vec::new();
    for kind in SignedKind::ALL {
        let bytes = record(kind, &format!("never-logged-{}", kind.name()));
        let r = core
            .sign_room_record(sign_request(kind.name(), bytes.clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.signature.len(), 64);
        assert_eq!(r.key_id, key.key_id);
        verify(kind, &bytes, &r.signature, &key.public_key).unwrap();
        for other in SignedKind::ALL.into_iter().filter(|o| *o != kind) {
            assert_eq!(
                verify(other, &bytes, &r.signature, &key.public_key),
                Err(SignatureRefusal::BadSignature),
                "{} signature verified as {}",
                kind.name(),
                other.name()
            );
        }
        let mut changed = bytes.clone();
        changed.push(b' ');
        assert_eq!(
            verify(kind, &changed, &r.signature, &key.public_key),
            Err(SignatureRefusal::BadSignature)
        );
        signed.push((kind, bytes, r.signature));
    }

    // Only core signs: the operator and another role are refused by ward's port.
    let fact = record(SignedKind::Fact, "x");
    for (who, client) in [("operator", &mut operator), ("workbench", &mut workbench)] {
        let e = refused(client, sign_request("fact", fact.clone())).await;
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{who}: {e:?}");
    }
    let e = workbench
        .room_key(ward_pb::RoomKeyRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");

    // What is not signable is refused INVALID_ARGUMENT with its code.
    let oversized = {
        let mut v = record(SignedKind::Fact, "");
        v.resize(MAX_SIGNED_BYTES + 1, b' ');
        v
    };
    for (req, want) in [
        (sign_request("facts", fact.clone()), "room-sign/kind"),
        (sign_request("", fact.clone()), "room-sign/kind"),
        (sign_request("Fact", fact.clone()), "room-sign/kind"),
        (sign_request("recipe", fact.clone()), "room-sign/format"),
        (
            sign_request("execution-record", fact.clone()),
            "room-sign/format",
        ),
        (
            sign_request("fact", b"not json".to_vec()),
            "room-sign/format",
        ),
        (sign_request("fact", b"[1,2]".to_vec()), "room-sign/format"),
        (
            sign_request("fact", br#"{"format":1}"#.to_vec()),
            "room-sign/format",
        ),
        (sign_request("fact", Vec::new()), "room-sign/format"),
        (sign_request("fact", oversized), "room-sign/too-large"),
    ] {
        let e = refused(&mut core, req).await;
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert_eq!(code(&e), want, "{e:?}");
    }

    // Ward logs what it signed by kind and digest, never the bytes.
    let log = body.log("ward");
    for (kind, bytes, _) in &signed {
        let digest = Sha256Digest::of(bytes).to_string();
        assert!(
            log.lines()
                .any(|l| l.contains("room record signed") && l.contains(&digest)),
            "no signing line for {} in\n{log}",
            kind.name()
        );
    }
    assert!(!log.contains("never-logged"), "{log}");

    // Ward restarted: the same key, from the same file; what it signed still verifies.
    let launcher = body.body.as_mut().unwrap();
    launcher.kill_role("ward").await.unwrap();
    launcher.start_role("ward").await.unwrap();
    assert_eq!(room_key(&mut core).await, key);
    assert_eq!(std::fs::read(&key_file).unwrap(), key_bytes);
    for (kind, bytes, signature) in &signed {
        verify(*kind, bytes, signature, &key.public_key).unwrap();
    }
    let again = core
        .sign_room_record(sign_request("recipe", record(SignedKind::Recipe, "again")))
        .await
        .unwrap()
        .into_inner();
    verify(
        SignedKind::Recipe,
        &record(SignedKind::Recipe, "again"),
        &again.signature,
        &key.public_key,
    )
    .unwrap();

    // A key file others may read: ward refuses to start, says why, and leaves the file alone.
    let launcher = body.body.as_mut().unwrap();
    launcher.kill_role("ward").await.unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = launcher.start_role("ward").await.unwrap_err();
    assert!(e.to_string().contains("must be 0600"), "{e}");
    assert_eq!(std::fs::read(&key_file).unwrap(), key_bytes);
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    launcher.start_role("ward").await.unwrap();
    assert_eq!(room_key(&mut core).await, key);
    body.stop().await;
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
