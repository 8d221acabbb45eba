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
    assert_eq!(mode, 0o600);
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
    assert!(err.to_string().contains("seal/bad-key"), "{err}");
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
