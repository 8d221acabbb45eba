//! Build: the same sources give the same archive, byte for byte; any changed byte of any file
//! gives another; the facts are derived, never typed.

mod common;

use std::collections::BTreeMap;

use common::*;
use expect_test::expect;
use reach_taskpack::archive;
use reach_taskpack::{PackFiles, build, build_files};

#[test]
fn two_builds_of_every_pack_are_byte_identical() {
    let dirs = all_pack_dirs();
    assert!(
        dirs.len() >= 3,
        "the test pack and both reference packs: {dirs:?}"
    );
    for dir in dirs {
        let a =
            build(&dir, &key()).unwrap_or_else(|e| panic!("{}: {}: {e}", dir.display(), e.code()));
        let b = build(&dir, &key()).unwrap();
        assert_eq!(a.digest, b.digest, "{}", dir.display());
        assert_eq!(a.archive, b.archive, "{}", dir.display());
        assert_eq!(a.digest, archive::digest(&a.archive));
    }
}

#[test]
fn changing_any_byte_of_any_file_changes_the_digest() {
    let base = build(&test_pack_dir(), &key()).unwrap();
    let files = test_pack_files();
    assert!(files.len() > 20);
    for (path, bytes) in files.iter() {
        // The final newline becomes a space: every format still parses, only that byte changed.
        assert_eq!(bytes.last(), Some(&b'\n'), "{path} ends with a newline");
        let mut map: BTreeMap<String, Vec<u8>> = files.clone().into_map();
        *map.get_mut(path).unwrap().last_mut().unwrap() = b' ';
        let built = build_files(PackFiles::new(map).unwrap(), &key())
            .unwrap_or_else(|e| panic!("{path}: {}: {e}", e.code()));
        assert_ne!(built.digest, base.digest, "{path}");
        assert_ne!(
            built.facts.files[path].sha256, base.facts.files[path].sha256,
            "{path}"
        );
    }
}

#[test]
fn another_key_gives_another_archive_with_the_same_facts() {
    let a = build(&test_pack_dir(), &key()).unwrap();
    let b = build(&test_pack_dir(), &stranger()).unwrap();
    assert_ne!(a.digest, b.digest);
    assert_eq!(a.facts, b.facts);
}

/// The entries and their headers, as a ustar reader sees them.
#[test]
fn archive_layout() {
    let built = build(&test_pack_dir(), &key()).unwrap();
    let a = &built.archive;
    let mut at = 0;
    let mut out = String::new();
    while a[at..at + 512].iter().any(|&b| b != 0) {
        let h = &a[at..at + 512];
        let name =
            String::from_utf8(h[..100].iter().take_while(|&&b| b != 0).copied().collect()).unwrap();
        let field = |r: std::ops::Range<usize>| {
            String::from_utf8_lossy(&h[r])
                .trim_end_matches('\0')
                .to_owned()
        };
        let size = usize::from_str_radix(&field(124..135), 8).unwrap();
        if at == 0 {
            out.push_str(&format!(
                "mode {} uid {} gid {} mtime {} type {} magic {:?} version {} uname {:?} gname {:?}\n",
                field(100..107),
                field(108..115),
                field(116..123),
                field(136..147),
                field(156..157),
                field(257..263),
                field(263..265),
                field(265..297),
                field(297..329),
            ));
        }
        out.push_str(&format!("{name}\n"));
        at += 512 + size.div_ceil(512) * 512;
    }
    assert_eq!(
        a.len(),
        at + 1024,
        "two zero blocks close it, nothing after"
    );
    expect![[r#"
        mode 0000644 uid 0000000 gid 0000000 mtime 00000000000 type 0 magic "ustar" version 00 uname "" gname ""
        facts.json
        facts.sig
        src/README.md
        src/command-profiles.toml
        src/fixture/answers.toml
        src/flow.toml
        src/image.toml
        src/pack.toml
        src/patch-policy.toml
        src/prepared.toml
        src/prompts/reviewer.md
        src/prompts/solver.md
        src/refusal-corpus/active-pause.toml
        src/refusal-corpus/candidate-authority.toml
        src/refusal-corpus/candidate-shell-probe.toml
        src/refusal-corpus/candidate-shell.toml
        src/refusal-corpus/containment.toml
        src/refusal-corpus/environment.toml
        src/refusal-corpus/first-step-legacy.toml
        src/refusal-corpus/first-step.toml
        src/refusal-corpus/hil.toml
        src/refusal-corpus/interruption.toml
        src/refusal-corpus/package-generation.toml
        src/refusal-corpus/patch-policy-limits.toml
        src/refusal-corpus/patch-policy.toml
        src/refusal-corpus/profile-change.toml
        src/refusal-corpus/remote-profile.toml
        src/refusal-corpus/verifier-timeout.toml
        src/refusal-corpus/verifier.toml
        src/task-profile.toml
        src/verifier.toml
    "#]]
    .assert_eq(&out);
}

/// The capabilities the facts carry, derived from the test pack's sources (file digests
/// left out: they change with every edit of the test pack).
#[test]
fn facts_of_the_test_pack() {
    let built = build(&test_pack_dir(), &key()).unwrap();
    let f = &built.facts;
    let mut out = format!(
        "{} {} v{} expires {} ({})\nthematic {} hil {:?} max_steps {} rollback {}\nservices {:?}\n",
        f.format,
        f.name,
        f.version,
        f.expires,
        f.expires_unix_s,
        f.thematic_profile,
        f.hil_minimum,
        f.max_steps,
        f.rollback,
        f.services
    );
    for (name, p) in &f.command_profiles {
        let args: Vec<_> = p.args.iter().map(|s| s.one_of.join("|")).collect();
        out.push_str(&format!(
            "profile {name}: {:?} mode {:?} args {args:?} timeout {} max_output {} verifier_only {}\n",
            p.argv, p.mode, p.timeout_s, p.max_output, p.verifier_only
        ));
    }
    out.push_str(&format!(
        "effect modes missing {:?}\nforbidden {:?}\n",
        f.effect_modes_missing, f.patch_forbidden
    ));
    for (t, p) in &f.patch_targets {
        out.push_str(&format!(
            "target {t}: {}:{} {} max {} shapes {:?}\n",
            p.uid, p.gid, p.mode, p.max_bytes, p.line_shapes
        ));
    }
    for c in &f.verifier_checks {
        out.push_str(&format!("check {}: {:?}\n", c.name, c.profiles));
    }
    for v in &f.image_variants {
        out.push_str(&format!(
            "variant {} image {} prepared {}\n",
            v.name, v.image, v.prepared
        ));
        for (t, d) in &v.baselines {
            out.push_str(&format!("  baseline {t} {d}\n"));
        }
    }
    for (path, x) in &f.refusal_fixtures {
        out.push_str(&format!(
            "fixture {path}: {:?} {:?} {} {:?} {:?}\n",
            x.case, x.kind, x.expect, x.owner, x.hil
        ));
    }
    expect![[r#"
        reach.taskpack.facts.v1 app-local v3 expires 2030-01-01T00:00:00Z (1893456000)
        thematic corpus-profile:app-administration hil EachMutation max_steps 16 rollback recreate-prepared-system
        services {"svc"}
        profile inbox-scan: ["/usr/bin/grep", "-r", "-h", "-e", "^Probe-Id:", "--", "/var/lib/app/inbox"] mode Some(Observation) args [] timeout 30 max_output 4096 verifier_only true
        profile legacy-tool: ["/usr/bin/app-legacy"] mode None args [] timeout 30 max_output 65536 verifier_only false
        profile list-dir: ["/bin/ls", "-1", "--"] mode Some(Observation) args ["/etc/app.d|/var/lib/app"] timeout 30 max_output 65536 verifier_only false
        profile listeners: ["/usr/bin/ss", "-H", "-l", "-n", "-t", "-u"] mode Some(Observation) args [] timeout 30 max_output 65536 verifier_only false
        profile net-interfaces: ["/bin/ls", "-1", "/sys/class/net"] mode Some(Observation) args [] timeout 30 max_output 65536 verifier_only false
        profile probe-local: ["/usr/bin/app-probe", "--to", "alice@example.test"] mode Some(Observation) args [] timeout 40 max_output 65536 verifier_only true
        profile probe-relay: ["/usr/bin/app-probe", "--to", "someone@elsewhere.test"] mode Some(Observation) args [] timeout 30 max_output 65536 verifier_only true
        profile reload-cache: ["/usr/bin/app-ctl", "reload-cache"] mode Some(ContainedMutation) args [] timeout 60 max_output 65536 verifier_only false
        profile service-status: ["/usr/bin/systemctl", "is-active", "--"] mode Some(Observation) args ["svc"] timeout 30 max_output 65536 verifier_only false
        profile show-config: ["/usr/bin/cat", "/etc/app.conf"] mode Some(Observation) args [] timeout 30 max_output 65536 verifier_only false
        profile state-digests: ["/usr/bin/find", "/etc/app.d", "/etc/app.conf", "-type", "f", "-exec", "/usr/bin/sha256sum", "--", "{}", "+"] mode Some(Observation) args [] timeout 30 max_output 65536 verifier_only true
        effect modes missing ["legacy-tool"]
        forbidden ["*", "0.0.0.0/0", "::/0"]
        target etc/app.conf: 0:0 0644 max 4096 shapes ["^accept = [a-z0-9., -]+$", "^listen = [a-z0-9.:]+$", "^# .*$"]
        target etc/app.d/limits.conf: 0:0 0640 max 256 shapes ["^max_[a-z]+ = [0-9]{1,6}$"]
        check service-healthy: ["service-status"]
        check local-delivery: ["probe-local", "inbox-scan"]
        check listener-scope: ["listeners"]
        check relay-refused: ["probe-relay"]
        check control-files-unchanged: ["state-digests"]
        check network-none: ["net-interfaces"]
        check verifier-no-mutation: ["state-digests"]
        variant debian-bookworm-x86_64 image image.toml prepared prepared.toml
          baseline etc/app.conf sha256:d7e6a1f318646671c1dbe53c6f3f7c7cf04f393b672ceb8efa6821e47a162f18
          baseline etc/app.d/limits.conf sha256:f4034d762ce3749f9768439151c98d9b26e46dfc9fdfb3b33ba9a9b837177ee9
        fixture refusal-corpus/active-pause.toml: ActivePause Owner local-binding/paused Some(Core) None
        fixture refusal-corpus/candidate-authority.toml: CandidateAuthority Compile plan/schema None Some(EachMutation)
        fixture refusal-corpus/candidate-shell-probe.toml: CandidateShell Compile plan/outside-profile None Some(EachStep)
        fixture refusal-corpus/candidate-shell.toml: CandidateShell Compile plan/outside-profile None Some(EachStep)
        fixture refusal-corpus/containment.toml: Containment Owner environment/not-contained Some(Core) None
        fixture refusal-corpus/environment.toml: Environment Owner environment/image-mismatch Some(Workbench) None
        fixture refusal-corpus/first-step-legacy.toml: FirstStep Compile plan/first-step-not-observation None Some(EachMutation)
        fixture refusal-corpus/first-step.toml: FirstStep Compile plan/first-step-not-observation None Some(EachMutation)
        fixture refusal-corpus/hil.toml: Hil Owner hil/denied Some(Ward) Some(EachMutation)
        fixture refusal-corpus/interruption.toml: Interruption Owner run/rollback-pending Some(Core) Some(EachMutation)
        fixture refusal-corpus/package-generation.toml: PackageGeneration Owner package/generation-stale Some(Core) None
        fixture refusal-corpus/patch-policy-limits.toml: PatchPolicy Compile workbench/patch-outside-policy None Some(EachMutation)
        fixture refusal-corpus/patch-policy.toml: PatchPolicy Compile workbench/patch-outside-policy None Some(EachMutation)
        fixture refusal-corpus/profile-change.toml: ProfileChange Owner local-binding/profile-changed Some(Core) None
        fixture refusal-corpus/remote-profile.toml: RemoteProfile Owner offer/profile-mismatch Some(Core) None
        fixture refusal-corpus/verifier-timeout.toml: Verifier Owner verifier/timeout Some(Workbench) None
        fixture refusal-corpus/verifier.toml: Verifier Owner verifier/check-missing Some(Workbench) None
    "#]].assert_eq(&out);

    // The baselines are the prepared system's content: the prepared spec's placement wins.
    let v = &f.image_variants[0];
    assert_eq!(
        v.baselines["etc/app.d/limits.conf"],
        reach_digest::Sha256Digest::of("max_clients = 10\nmax_queue = 100\n")
    );
    // The spec digests are reach-vm's, the very ones `reach image build/prepare` record.
    let dir = test_pack_dir();
    let image =
        reach_vm::spec::ImageSpec::parse(&std::fs::read_to_string(dir.join("image.toml")).unwrap())
            .unwrap();
    let prepared = reach_vm::prepared::PreparedSpec::parse(
        &std::fs::read_to_string(dir.join("prepared.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(v.image_spec_digest, image.digest());
    assert_eq!(v.prepared_spec_digest, prepared.digest());
    assert_eq!(
        f.profile_digest,
        reach_digest::Sha256Digest::of(std::fs::read(dir.join("task-profile.toml")).unwrap())
    );
    assert_eq!(
        built.facts.digest(),
        reach_digest::Sha256Digest::of(built.facts.canonical_bytes())
    );
}
