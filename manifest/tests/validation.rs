//! One test per refusal rule: each mutates the checked-in manifest and expects the typed error
//! naming the manifest path.

use expect_test::{Expect, expect};
use reach_manifest::{ManifestErrorKind as K, VPS_PUBLIC, load};

fn refused(mutated: &str, expected: Expect) -> K {
    let err = load(mutated).expect_err("mutated manifest must be refused");
    expected.assert_eq(&err.to_string());
    err.kind
}

fn replace(from: &str, to: &str) -> String {
    assert!(VPS_PUBLIC.contains(from), "fixture text `{from}` not found");
    VPS_PUBLIC.replacen(from, to, 1)
}

#[test]
fn checked_in_manifest_is_valid() {
    let m = load(VPS_PUBLIC).unwrap();
    assert_eq!(m.roles.len(), 8);
    let order: Vec<_> = m.roles.iter().map(|r| r.name.as_str()).collect();
    expect![[r#"["ward", "corpus-builder", "egress-provider", "core", "egress-discord", "ingress-edge", "workbench", "vm-broker"]"#]]
        .assert_eq(&format!("{order:?}"));
    // Every role has its health port, callable by the operator only.
    for r in &m.roles {
        let p = m.port(&format!("{}.health", r.name)).unwrap();
        assert_eq!(p.grants.len(), 1);
        assert_eq!(p.grants[0].caller, "operator");
    }
}

#[test]
fn unknown_key_names_its_path() {
    let k = refused(
        &replace(
            "limits = { memory_mib = 64, pids = 32 }",
            "limits = { memory_mib = 64, pids = 32, swap = 1 }",
        ),
        expect![
            "roles[0].limits.swap: unknown field `swap`, expected one of `memory_mib`, `pids`, `cpu_millis`"
        ],
    );
    assert!(matches!(k, K::Schema(_)));
}

#[test]
fn unknown_top_level_key() {
    refused(
        &format!("extra = 1\n{VPS_PUBLIC}"),
        expect![[
            r#"extra: unknown field `extra`, expected one of `schema`, `profile`, `trust_domain`, `habitat`, `recovery`, `destinations`, `roles`, `ports`"#
        ]],
    );
}

#[test]
fn wrong_schema_version() {
    refused(
        &replace(
            "schema = \"ApplicationDeploymentManifest@1\"",
            "schema = \"ApplicationDeploymentManifest@2\"",
        ),
        expect![[
            r#"schema: schema must be `ApplicationDeploymentManifest@1`, found `ApplicationDeploymentManifest@2`"#
        ]],
    );
}

#[test]
fn core_may_hold_no_credential() {
    let k = refused(
        &replace(
            "binary = \"reach-core\"",
            "binary = \"reach-core\"\ncredentials = [{ file = \"k\", kind = \"provider-api-key\" }]",
        ),
        expect![[
            r#"roles[3].credentials[0].kind: role `core` may not hold a provider-api-key credential: core holds no credential or badge"#
        ]],
    );
    assert!(matches!(k, K::ForbiddenCredential { .. }));
}

#[test]
fn core_may_hold_no_badge() {
    refused(
        &replace(
            "binary = \"reach-core\"",
            "binary = \"reach-core\"\ncredentials = [{ file = \"s\", kind = \"sigil\" }]",
        ),
        expect![[
            r#"roles[3].credentials[0].kind: role `core` may not hold a sigil credential: Sigils are minted per task by ward and never provisioned"#
        ]],
    );
}

#[test]
fn only_core_holds_the_database() {
    refused(
        &replace(
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }]",
            "credentials = [{ file = \"db\", kind = \"database\" }]",
        ),
        expect![[
            r#"roles[0].credentials[0].kind: role `ward` may not hold a database credential: only core holds the database"#
        ]],
    );
}

#[test]
fn only_egress_roles_hold_provider_credentials() {
    refused(
        &replace(
            "binary = \"reach-workbench\"",
            "binary = \"reach-workbench\"\ncredentials = [{ file = \"k\", kind = \"provider-api-key\" }]",
        ),
        expect![[
            r#"roles[6].credentials[0].kind: role `workbench` may not hold a provider-api-key credential: only egress-provider instances hold provider and peer credentials"#
        ]],
    );
}

#[test]
fn only_discord_roles_hold_the_bot_token() {
    refused(
        &replace(
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }]",
            "credentials = [{ file = \"t\", kind = \"discord-bot\" }]",
        ),
        expect![[
            r#"roles[0].credentials[0].kind: role `ward` may not hold a discord-bot credential: only the Discord edge roles hold the bot credential"#
        ]],
    );
}

#[test]
fn secret_file_must_be_a_plain_name() {
    refused(
        &replace("file = \"ward-key\"", "file = \"../core/ward-key\""),
        expect![[
            r#"roles[0].credentials[0].file: secret file name `../core/ward-key` must be a plain file name"#
        ]],
    );
}

#[test]
fn offline_roles_refuse_network() {
    for (role, idx) in [("core", 3), ("ward", 0), ("workbench", 6), ("vm-broker", 7)] {
        let text = replace(
            &format!("binary = \"reach-{role}\""),
            &format!("binary = \"reach-{role}\"\nnetwork = \"egress:model-provider\""),
        );
        // The inserted key duplicates `network`; put it in place of the original instead.
        let text = text.replacen("network = \"egress:model-provider\"\nimage", "image", 1);
        let text = {
            let start = text.find(&format!("binary = \"reach-{role}\"")).unwrap();
            let (head, tail) = text.split_at(start);
            format!(
                "{head}{}",
                tail.replacen(
                    "network = \"none\"",
                    "network = \"egress:model-provider\"",
                    1
                )
            )
        };
        let err = load(&text).unwrap_err();
        assert_eq!(err.path, format!("roles[{idx}].network"));
        assert_eq!(err.kind, K::NetworkNotAllowed(role.to_owned()));
    }
}

#[test]
fn self_call_needs_a_reason() {
    refused(
        &replace(
            "allow = [{ caller = \"ingress-edge\", methods = [\"Admit\"] }]",
            "allow = [{ caller = \"core\", methods = [\"Admit\"] }]",
        ),
        expect![[
            r#"ports[0].allow[0].reason: role `core` is granted a method on its own port without a `reason`"#
        ]],
    );
    let ok = replace(
        "allow = [{ caller = \"ingress-edge\", methods = [\"Admit\"] }]",
        "allow = [{ caller = \"core\", methods = [\"Admit\"], reason = \"replay drill\" }]",
    );
    load(&ok).unwrap();
}

#[test]
fn duplicate_principals() {
    refused(
        &replace("name = \"workbench\"", "name = \"ward\""),
        expect![[r#"roles[6].name: duplicate principal `spiffe://reach.local/ward`"#]],
    );
    refused(
        &replace("name = \"workbench\"", "name = \"operator\""),
        expect![[r#"roles[6].name: duplicate principal `spiffe://reach.local/operator`"#]],
    );
}

#[test]
fn dangling_references() {
    refused(
        &replace("after = [\"core\"]", "after = [\"kore\"]"),
        expect![[r#"roles[5].after[0]: dangling reference to role `kore`"#]],
    );
    refused(
        &replace("server = \"core\"", "server = \"kore\""),
        expect![[r#"ports[0].server: dangling reference to role `kore`"#]],
    );
    refused(
        &replace("caller = \"ingress-edge\"", "caller = \"ingress\""),
        expect![[r#"ports[0].allow[0].caller: dangling reference to role `ingress`"#]],
    );
    refused(
        &replace("methods = [\"Admit\"]", "methods = [\"Admitt\"]"),
        expect![[
            r#"ports[0].allow[0].methods[0]: dangling reference to method `reach.core.v1.Admission/Admitt`"#
        ]],
    );
    refused(
        &replace(
            "service = \"reach.core.v1.Admission\"",
            "service = \"reach.core.v9.Admission\"",
        ),
        expect![[r#"ports[0].service: dangling reference to service `reach.core.v9.Admission`"#]],
    );
    refused(
        &replace(
            "network = \"egress:corpus-source\"",
            "network = \"egress:elsewhere\"",
        ),
        expect![[r#"roles[1].network: dangling reference to destination `elsewhere`"#]],
    );
    refused(
        &replace("binary = \"reach-ward\"", "binary = \"reach-warden\""),
        expect![[r#"roles[0].binary: dangling reference to role binary `reach-warden`"#]],
    );
}

#[test]
fn ordering_cycle() {
    refused(
        &replace(
            "name = \"ward\"\nbinary = \"reach-ward\"",
            "name = \"ward\"\nafter = [\"core\"]\nbinary = \"reach-ward\"",
        ),
        expect![[r#"roles[0].after: ordering cycle through role `ward`"#]],
    );
}

#[test]
fn duplicate_grants_and_ports() {
    refused(
        &replace("methods = [\"Admit\"]", "methods = [\"Admit\", \"Admit\"]"),
        expect![[r#"ports[0].allow[0].methods[1]: duplicate entry `ingress-edge -> Admit`"#]],
    );
    refused(
        &replace("name = \"core.trail\"", "name = \"core.admission\""),
        expect![[r#"ports[2].name: duplicate entry `core.admission`"#]],
    );
}

#[test]
fn only_egress_discord_holds_the_interaction_seal_key() {
    let k = refused(
        &replace(
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }]",
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }, { file = \"s\", kind = \"interaction-seal-key\" }]",
        ),
        expect![
            "roles[0].credentials[1].kind: role `ward` may not hold a interaction-seal-key credential: only egress-discord opens interaction tokens"
        ],
    );
    assert!(matches!(k, K::ForbiddenCredential { .. }));
}

#[test]
fn only_ingress_edge_holds_the_interaction_seal_public_key() {
    let k = refused(
        &replace(
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }]",
            "credentials = [{ file = \"ward-key\", kind = \"ward-key\" }, { file = \"p\", kind = \"interaction-seal-public\" }]",
        ),
        expect![
            "roles[0].credentials[1].kind: role `ward` may not hold a interaction-seal-public credential: only ingress-edge seals interaction tokens"
        ],
    );
    assert!(matches!(k, K::ForbiddenCredential { .. }));
}

/// `[recovery] policy = "encrypted-backup"` is a valid manifest; whether a body may start on it
/// is the build's question, and this build keeps no backup: the typed refusal every starter
/// (the launcher, Scribe's units, the receipt) returns.
#[test]
fn encrypted_backup_is_valid_and_this_build_refuses_to_start_it() {
    use reach_manifest::schema::{BuildRefusal, RecoveryPolicy};
    let m = load(&replace(
        r#"policy = "loss-unrecoverable""#,
        r#"policy = "encrypted-backup""#,
    ))
    .unwrap();
    assert_eq!(m.recovery.policy, RecoveryPolicy::EncryptedBackup);
    let refusal = m.recovery.policy.honoured_by_this_build().unwrap_err();
    assert_eq!(refusal, BuildRefusal::EncryptedBackupNotBuilt);
    assert_eq!(refusal.code(), "recovery/encrypted-backup-not-built");
    let checked_in = load(VPS_PUBLIC).unwrap().recovery.policy;
    assert_eq!(checked_in.honoured_by_this_build(), Ok(()));
    assert_eq!(checked_in.as_str(), "loss-unrecoverable");
}
