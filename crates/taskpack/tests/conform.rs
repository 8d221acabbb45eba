//! Conformance at install, one test per refusal at the boundary, and the packs that conform.

mod common;

use common::*;
use reach_plan::EffectClass;
use reach_taskpack::archive;
use reach_taskpack::{
    Facts, FactsSignature, InstallRefusal, PackFiles, Sources, build, build_files, conform,
};

fn install(archive: &[u8]) -> Result<reach_taskpack::VerifiedPack, InstallRefusal> {
    conform(archive, &trusted(), None, NOW)
}

fn refusal(archive: &[u8]) -> String {
    outcome(install(archive), |e| e.code())
}

fn built() -> Vec<u8> {
    build(&test_pack_dir(), &key()).unwrap().archive
}

#[test]
fn every_pack_conforms() {
    for dir in all_pack_dirs() {
        let b = build(&dir, &key()).unwrap();
        let p =
            install(&b.archive).unwrap_or_else(|e| panic!("{}: {}: {e}", dir.display(), e.code()));
        assert_eq!(p.archive_digest(), b.digest);
        assert_eq!(p.facts(), &b.facts);
        assert_eq!(p.facts_digest(), b.facts.digest());
        assert_eq!(p.profile_digest(), b.facts.profile_digest);
        assert_eq!(p.signer(), key().public());
        assert_eq!(p.signer_name(), "operator");
        assert_eq!(p.name(), b.facts.name);
        assert_eq!(p.version(), b.facts.version);
        assert_eq!(
            p.task_profile_text().as_bytes(),
            std::fs::read(dir.join("task-profile.toml")).unwrap()
        );
        assert_eq!(
            p.file("pack.toml").unwrap(),
            std::fs::read(dir.join("pack.toml")).unwrap()
        );
        // Every compile fixture was run, and refused with its `expect` (else no VerifiedPack).
        let compile = b
            .facts
            .refusal_fixtures
            .values()
            .filter(|f| f.kind == reach_taskpack::source::FixtureKind::Compile)
            .count();
        assert!(
            p.fixtures_checked() >= compile * b.facts.image_variants.len(),
            "{}",
            dir.display()
        );
        assert!(compile >= 4, "{}", dir.display());
        let vocab = p.vocabulary();
        assert_eq!(vocab.pack.facts_digest, p.facts_digest());
        assert_eq!(vocab.pack.profile_digest, p.profile_digest());
        // Verifier-only profiles are not the candidate's.
        for (name, f) in &b.facts.command_profiles {
            assert_eq!(
                vocab.commands.contains_key(name),
                !f.verifier_only,
                "{name}"
            );
        }
        for t in b.facts.patch_targets.keys() {
            assert!(vocab.baselines.contains_key(t), "{t}");
        }
        assert!(p.vocabulary_for(&b.facts.image_variants[0].name).is_some());
        assert_eq!(
            reach_taskpack::archive_name(&b.archive).unwrap(),
            b.facts.name
        );
    }
}

#[test]
fn the_test_pack_vocabulary() {
    let p = install(&built()).unwrap();
    let v = p.vocabulary();
    let commands: Vec<_> = v
        .commands
        .iter()
        .map(|(n, c)| format!("{n} {:?} {}", c.mode, c.source))
        .collect();
    expect_test::expect![[r#"
        [
            "legacy-tool None command-profiles.toml#legacy-tool",
            "list-dir Some(Observation) command-profiles.toml#list-dir",
            "listeners Some(Observation) command-profiles.toml#listeners",
            "net-interfaces Some(Observation) command-profiles.toml#net-interfaces",
            "reload-cache Some(ContainedMutation) command-profiles.toml#reload-cache",
            "service-status Some(Observation) command-profiles.toml#service-status",
            "show-config Some(Observation) command-profiles.toml#show-config",
        ]
    "#]]
    .assert_debug_eq(&commands);
    assert_eq!(
        v.baselines["etc/app.conf"],
        "# app configuration\nlisten = 127.0.0.1\naccept = localhost\nlog = info\n"
    );
    assert_eq!(v.services.iter().collect::<Vec<_>>(), ["svc"]);
    assert_eq!(v.max_steps, 16);
    assert_eq!(v.rollback, "recreate-prepared-system");
    assert_eq!(p.facts().effect_modes_missing, ["legacy-tool"]);
}

#[test]
fn a_tampered_source_byte_is_a_facts_mismatch() {
    let mut a = built();
    // A byte of README.md's data (its content is free prose: the sources still parse).
    let at = a.windows(6).position(|w| w == b"# app-").unwrap() + 2;
    a[at] = b'A';
    expect_test::expect!["package/facts-mismatch: facts.json differs from the facts derived from the archive's sources at `files.README.md.sha256`"].assert_eq(&refusal(&a));
}

#[test]
fn a_tampered_toml_byte_is_refused_before_it_is_parsed() {
    let mut a = built();
    // The `=` of a TOML key: parsed, the file would be `package/schema`; the signed digest
    // refuses it before it is read.
    let at = a.windows(9).position(|w| w == b"version =").unwrap() + 8;
    a[at] = b' ';
    expect_test::expect!["package/facts-mismatch: facts.json differs from the facts derived from the archive's sources at `files.pack.toml.sha256`"].assert_eq(&refusal(&a));
}

#[test]
fn a_tampered_header_byte_is_archive_malformed() {
    let mut a = built();
    let facts_len = usize::from_str_radix(std::str::from_utf8(&a[124..135]).unwrap(), 8).unwrap();
    let sig_header = 512 + facts_len.div_ceil(512) * 512;
    a[sig_header + 101] = b'7'; // facts.sig's mode: 0000644 becomes 0700644
    expect_test::expect!["package/archive-malformed: not a reach.taskpack.v1 archive: archive entry `facts.sig`: its `mode` field differs from the canonical header (ustar, regular file, mode 0644, uid/gid 0, mtime 0, no names)"].assert_eq(&refusal(&a));
}

/// Found by the `taskpack_archive` fuzz target: a header block whose name is empty was
/// refused naming the entry `` (nothing); it is named by its offset instead.
#[test]
fn an_entry_without_a_name_is_named_by_its_place() {
    let mut a = built();
    a[..100].fill(0); // facts.json's name field
    expect_test::expect!["package/archive-malformed: not a reach.taskpack.v1 archive: archive entry `<entry at byte 0>`: an entry without a name"].assert_eq(&refusal(&a));
}

#[test]
fn a_tampered_facts_byte_is_a_bad_signature() {
    // A byte of a value (the pack name's first letter): facts.json stays well-formed.
    let mut b = built();
    let name = br#""name":"app-local""#;
    let at = b.windows(name.len()).position(|w| w == name).unwrap() + 8;
    b[at] = b'b';
    assert_eq!(install(&b).unwrap_err().code(), "package/bad-signature");
}

/// Whatever single byte changes, the archive is refused.
#[test]
fn no_single_byte_change_is_accepted() {
    let a = built();
    for at in (0..a.len()).step_by(89) {
        let mut b = a.clone();
        b[at] = b[at].wrapping_add(1);
        assert!(install(&b).is_err(), "byte {at} of {}", a.len());
    }
    let mut longer = a.clone();
    longer.extend_from_slice(&[0; 512]);
    assert_eq!(
        install(&longer).unwrap_err().code(),
        "package/archive-malformed"
    );
    assert_eq!(
        install(&a[..a.len() - 512]).unwrap_err().code(),
        "package/archive-malformed"
    );
}

#[test]
fn edited_and_resigned_facts_are_a_facts_mismatch() {
    let files = test_pack_files();
    let mut facts = Facts::derive(&files, &Sources::parse(&files).unwrap());
    // A signer claims the mode-less profile is an observation.
    facts.command_profiles.get_mut("legacy-tool").unwrap().mode = Some(EffectClass::Observation);
    facts.effect_modes_missing.clear();
    let a = craft(&files, &facts.canonical_bytes(), &key());
    expect_test::expect!["package/facts-mismatch: facts.json differs from the facts derived from the archive's sources at `command_profiles.legacy-tool.mode`"].assert_eq(&refusal(&a));
}

#[test]
fn an_unknown_signer_is_refused() {
    let a = build(&test_pack_dir(), &stranger()).unwrap().archive;
    let r = refusal(&a);
    assert!(r.starts_with("package/unknown-signer: "), "{r}");
    assert!(r.contains(&stranger().public().to_string()), "{r}");
}

#[test]
fn a_bad_signature_is_refused() {
    let files = test_pack_files();
    let facts = build_files(files.clone(), &key())
        .unwrap()
        .facts
        .canonical_bytes();
    // The trusted key named, the stranger's signature.
    let sig = FactsSignature {
        key: key().public(),
        sig: stranger().sign(&facts).sig,
    };
    let a = archive::write(&facts, &sig.to_json(), &files);
    let r = refusal(&a);
    assert!(r.starts_with("package/bad-signature: "), "{r}");
    assert!(r.contains("`operator`"), "{r}");
}

#[test]
fn a_version_not_newer_than_the_installed_is_a_rollback() {
    let a = built();
    for installed in [3, 4] {
        let r = outcome(conform(&a, &trusted(), Some(installed), NOW), |e| e.code());
        assert_eq!(
            r,
            format!(
                "package/rollback: app-local version 3 is not newer than the installed version {installed}"
            )
        );
    }
    assert!(conform(&a, &trusted(), Some(2), NOW).is_ok());
}

#[test]
fn an_expired_pack_is_refused() {
    let a = built();
    let expires = 1_893_456_000; // 2030-01-01T00:00:00Z
    assert!(conform(&a, &trusted(), None, expires - 1).is_ok());
    expect_test::expect!["package/expired: app-local version 3 expired at 2030-01-01T00:00:00Z"]
        .assert_eq(&outcome(conform(&a, &trusted(), None, expires), |e| {
            e.code()
        }));
}

/// The unedited test pack's facts with `files`' digests: what a signer who signed edited
/// sources without deriving their facts again would sign.
fn signed_over(files: &PackFiles) -> Vec<u8> {
    let mut facts = build_files(test_pack_files(), &key()).unwrap().facts;
    facts.files = Facts::files_of(files);
    facts.canonical_bytes()
}

#[test]
fn an_unknown_key_in_a_source_is_a_schema_refusal_naming_its_path() {
    let files = edited("command-profiles.toml", |t| {
        t.replace(
            "args = [{ one_of = [\"/etc/app.d\"",
            "shell = \"/bin/sh\"\nargs = [{ one_of = [\"/etc/app.d\"",
        )
    });
    // A trusted signer signed the edited files' digests (with the unedited pack's other
    // facts), so the sources are read: they are refused before the facts compare.
    let a = craft(&files, &signed_over(&files), &key());
    expect_test::expect!["package/schema: command-profiles.toml: profiles[2].shell: unknown key"]
        .assert_eq(&refusal(&a));
}

#[test]
fn a_refusal_fixture_the_compiler_accepts_fails_conformance() {
    // first-step.toml's candidate now observes first: the compiler admits it.
    let files = edited("refusal-corpus/first-step.toml", |t| {
        t.replace(
            "\"steps\": [\n",
            "\"steps\": [\n    {\"kind\": \"run\", \"profile\": \"show-config\", \"args\": []},\n",
        )
    });
    let facts = Facts::derive(&files, &Sources::parse(&files).unwrap());
    let a = craft(&files, &facts.canonical_bytes(), &key());
    expect_test::expect!["package/conformance-failed: refusal fixture `refusal-corpus/first-step.toml` (image variant `debian-bookworm-x86_64`): expected `plan/first-step-not-observation`, the compiler accepted the candidate"].assert_eq(&refusal(&a));
    // Build runs the same corpus.
    let e = build_files(files, &key()).unwrap_err();
    assert_eq!(e.code(), "package/conformance-failed");
}

#[test]
fn a_refusal_fixture_refused_with_another_code_fails_conformance() {
    let files = edited("refusal-corpus/candidate-shell.toml", |t| {
        t.replace("plan/outside-profile", "plan/schema")
    });
    let facts = Facts::derive(&files, &Sources::parse(&files).unwrap());
    let a = craft(&files, &facts.canonical_bytes(), &key());
    expect_test::expect!["package/conformance-failed: refusal fixture `refusal-corpus/candidate-shell.toml` (image variant `debian-bookworm-x86_64`): expected `plan/schema`, the compiler refused it with plan/outside-profile: step 1 is outside the pack's profile: no command profile `sed`"].assert_eq(&refusal(&a));
}

#[test]
fn a_verifier_missing_a_check_is_refused() {
    let files = edited("verifier.toml", |t| {
        let start = t.find("[[checks]]\nname = \"relay-refused\"").unwrap();
        let end = start
            + t[start..]
                .find("[[checks]]\nname = \"control-files-unchanged\"")
                .unwrap();
        format!("{}{}", &t[..start], &t[end..])
    });
    let a = craft(&files, &signed_over(&files), &key());
    expect_test::expect!["verifier/check-missing: verifier.toml: the check `relay-refused` is missing (a verifier has all seven: service-healthy, local-delivery, listener-scope, relay-refused, control-files-unchanged, network-none, verifier-no-mutation)"].assert_eq(&refusal(&a));
    let e = build_files(files, &key()).unwrap_err();
    assert_eq!(e.code(), "verifier/check-missing");
}
