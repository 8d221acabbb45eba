//! Custody of the interaction-seal pair: Scribe mints the private key into egress-discord's
//! secret dir only, writes its public half into ingress-edge's, keeps both in step across
//! runs, and refuses a corrupt key or a sealing role with no opener.

use std::os::unix::fs::PermissionsExt;
use std::time::SystemTime;

use reach_discord::Snowflake;
use reach_discord::model::InteractionToken;
use reach_discord::seal::{self, SealBinding, SealPublicKey, SealSecretKey};
use reach_manifest::plan::StateLayout;
use reach_manifest::{VPS_PUBLIC, load};
use reach_scribe::{Rotation, ScribeError, materialize_identities};

fn mint(manifest: &reach_manifest::Manifest, layout: &StateLayout) -> Result<(), ScribeError> {
    materialize_identities(manifest, layout, Rotation::IfNeeded, SystemTime::now()).map(|_| ())
}

#[test]
fn the_pair_opens_what_ingress_edge_seals_and_survives_a_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path());
    let manifest = load(VPS_PUBLIC).unwrap();
    mint(&manifest, &layout).unwrap();
    let private = layout
        .secret_dir("egress-discord")
        .join("interaction-seal-key");
    let public = layout
        .secret_dir("ingress-edge")
        .join("interaction-seal-public");
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, reach_identity::files::SECRET_FILE_MODE);
    for role in ["core", "ward", "ingress-edge"] {
        assert!(
            !layout
                .secret_dir(role)
                .join("interaction-seal-key")
                .exists(),
            "{role} must not hold the private key"
        );
    }
    let key = SealSecretKey::from_bytes(&std::fs::read(&private).unwrap()).unwrap();
    let sealer = SealPublicKey::from_bytes(&std::fs::read(&public).unwrap()).unwrap();
    let binding = SealBinding {
        application_id: Snowflake(1),
        interaction_id: Snowflake(2),
    };
    let token = InteractionToken("t0ken".into());
    let blob = seal::seal(&sealer, binding, &token).unwrap();
    assert_eq!(seal::open(&key, binding, &blob).unwrap().0, "t0ken");

    // A rerun keeps the key; a public half that drifted is rewritten from it.
    std::fs::write(&public, [7u8; 32]).unwrap();
    mint(&manifest, &layout).unwrap();
    assert_eq!(std::fs::read(&private).unwrap(), key.to_bytes());
    assert_eq!(std::fs::read(&public).unwrap(), sealer.as_bytes());
}

#[test]
fn a_corrupt_private_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path());
    let manifest = load(VPS_PUBLIC).unwrap();
    mint(&manifest, &layout).unwrap();
    let private = layout
        .secret_dir("egress-discord")
        .join("interaction-seal-key");
    std::fs::write(&private, b"short").unwrap();
    let err = mint(&manifest, &layout).unwrap_err();
    assert!(matches!(err, ScribeError::SealKey { .. }), "{err}");
    assert!(err.to_string().contains("seal/bad-ring"), "{err}");
}

#[test]
fn a_sealer_without_an_opener_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path());
    let text = VPS_PUBLIC.replacen(
        "    { file = \"interaction-seal-key\", kind = \"interaction-seal-key\" },\n",
        "",
        1,
    );
    assert_ne!(text, VPS_PUBLIC, "fixture text not found");
    let manifest = load(&text).unwrap();
    let err = mint(&manifest, &layout).unwrap_err();
    assert!(matches!(err, ScribeError::NoSealKeyHolder(_)), "{err}");
}

/// Rotation: a new current key for ingress-edge to seal to, the old private key kept as the
/// previous one, so a token sealed before the rotation still opens (within the grace window);
/// a second rotation forgets the first key.
#[test]
fn a_rotation_keeps_the_previous_key_for_its_grace_window() {
    use reach_discord::seal::{PREVIOUS_KEY_GRACE, SealError, SealKeyring};
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path());
    let manifest = load(VPS_PUBLIC).unwrap();
    mint(&manifest, &layout).unwrap();
    let private = layout
        .secret_dir("egress-discord")
        .join("interaction-seal-key");
    let public = layout
        .secret_dir("ingress-edge")
        .join("interaction-seal-public");
    let old = SealPublicKey::from_bytes(&std::fs::read(&public).unwrap()).unwrap();
    let binding = SealBinding {
        application_id: Snowflake(1),
        interaction_id: Snowflake(2),
    };
    let before = seal::seal(&old, binding, &InteractionToken("t0ken".into())).unwrap();

    let now = SystemTime::now();
    let written =
        reach_scribe::identities::rotate_interaction_seal(&manifest, &layout, now).unwrap();
    assert_eq!(written, vec![private.clone(), public.clone()]);
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, reach_identity::files::SECRET_FILE_MODE);
    let ring = SealKeyring::from_bytes(&std::fs::read(&private).unwrap()).unwrap();
    let new = SealPublicKey::from_bytes(&std::fs::read(&public).unwrap()).unwrap();
    assert_ne!(new, old);
    assert_eq!(ring.current_public(), new);
    let now_ms = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(ring.previous(), Some((old.id(), now_ms)));
    assert_eq!(ring.open(binding, &before, now_ms).unwrap().0, "t0ken");
    let after_grace = now_ms + PREVIOUS_KEY_GRACE.as_millis() as u64;
    assert_eq!(
        ring.open(binding, &before, after_grace),
        Err(SealError::RetiredKey(old.id()))
    );
    // A plain rerun keeps the ring as it is.
    mint(&manifest, &layout).unwrap();
    assert_eq!(std::fs::read(&private).unwrap(), ring.to_bytes());

    reach_scribe::identities::rotate_interaction_seal(&manifest, &layout, now).unwrap();
    let ring = SealKeyring::from_bytes(&std::fs::read(&private).unwrap()).unwrap();
    assert_eq!(
        ring.open(binding, &before, now_ms),
        Err(SealError::UnknownKey(old.id()))
    );
}
