//! The source refusal table: one edit of the test pack per way a source is refused, built,
//! each printed as `case: code: message`.

mod common;

use std::collections::BTreeMap;

use common::*;
use expect_test::{Expect, expect};
use reach_taskpack::{PackFiles, build, build_files};

type Edit = fn(&str) -> String;

fn check(cases: &[(&str, &str, Edit)], expect: Expect) {
    let mut out = String::new();
    for (name, file, edit) in cases {
        let files = edited(file, edit);
        let line = outcome(build_files(files, &key()), |e| e.code());
        out.push_str(&format!("{name}: {line}\n"));
    }
    expect.assert_eq(&out);
}

#[test]
fn pack_and_task_profile() {
    check(
        &[
            ("unknown key", "pack.toml", |t| {
                format!("{t}signed = true\n")
            }),
            ("wrong format", "pack.toml", |t| {
                t.replace("pack.v1", "pack.v2")
            }),
            ("version zero", "pack.toml", |t| {
                t.replace("version = 3", "version = 0")
            }),
            ("expiry with an offset", "pack.toml", |t| {
                t.replace("00:00:00Z", "00:00:00+01:00")
            }),
            ("expiry as a TOML datetime", "pack.toml", |t| {
                t.replace("\"2030-01-01T00:00:00Z\"", "2030-01-01T00:00:00Z")
            }),
            ("network ceiling", "task-profile.toml", |t| {
                t.replace("ceiling = \"none\"", "ceiling = \"isolated\"")
            }),
            ("first step class", "task-profile.toml", |t| {
                t.replace(
                    "first_step_class = \"observation\"",
                    "first_step_class = \"contained-mutation\"",
                )
            }),
            ("hil minimum", "task-profile.toml", |t| {
                t.replace("\"each-mutation\"", "\"never\"")
            }),
            ("a ref to another file", "task-profile.toml", |t| {
                t.replace("verifier = \"verifier.toml\"", "verifier = \"checks.toml\"")
            }),
            ("a variant's missing image", "task-profile.toml", |t| {
                t.replace("image = \"image.toml\"", "image = \"other.toml\"")
            }),
            ("services twice", "task-profile.toml", |t| {
                t.replace("[\"svc\"]", "[\"svc\", \"svc\"]")
            }),
            ("unknown key in a variant", "task-profile.toml", |t| {
                format!("{t}arch = \"x86_64\"\n")
            }),
        ],
        expect![[r#"
            unknown key: package/schema: pack.toml: signed: unknown key
            wrong format: package/schema: pack.toml: format: expected `reach.taskpack.pack.v1`, found `reach.taskpack.pack.v2`
            version zero: package/schema: pack.toml: version: versions start at 1
            expiry with an offset: package/schema: pack.toml: expires: expected RFC 3339 UTC with seconds, e.g. `2027-12-31T00:00:00Z`
            expiry as a TOML datetime: package/schema: pack.toml: expires: invalid type: map, expected a string
            network ceiling: package/schema: task-profile.toml: runtime_network_ceiling: `isolated`: the only value a pack may name is `none`
            first step class: package/schema: task-profile.toml: first_step_class: the only value a pack may name is `observation`
            hil minimum: package/schema: task-profile.toml: hil_minimum: unknown variant `never`, expected `each-mutation` or `each-step`
            a ref to another file: package/schema: task-profile.toml: verifier: `checks.toml`: the format's name is `verifier.toml` (plans stamp it as a source)
            a variant's missing image: package/schema: task-profile.toml: image_variants[0].image: `other.toml` is not a file of the pack
            services twice: package/schema: task-profile.toml: services[1]: `svc` listed twice
            unknown key in a variant: package/schema: task-profile.toml: image_variants[0].arch: unknown key
        "#]],
    );
}

#[test]
fn commands_policy_and_specs() {
    check(
        &[
            ("relative program", "command-profiles.toml", |t| {
                t.replace("\"/usr/bin/cat\"", "\"cat\"")
            }),
            ("a profile twice", "command-profiles.toml", |t| {
                t.replace("name = \"list-dir\"", "name = \"show-config\"")
            }),
            ("unknown mode", "command-profiles.toml", |t| {
                t.replacen("mode = \"observation\"", "mode = \"read-only\"", 1)
            }),
            ("timeout over the ceiling", "command-profiles.toml", |t| {
                t.replace("timeout_s = 60", "timeout_s = 600")
            }),
            ("unknown slot key", "command-profiles.toml", |t| {
                t.replace("one_of = [\"svc\"]", "one_of = [\"svc\"], any = true")
            }),
            ("policy unknown key", "patch-policy.toml", |t| {
                t.replace("max_bytes = 256", "max_bytes = 256\nowner = \"root\"")
            }),
            (
                "policy target without a baseline",
                "patch-policy.toml",
                |t| {
                    t.replace(
                        "target = \"etc/app.d/limits.conf\"",
                        "target = \"etc/app.d/other.conf\"",
                    )
                },
            ),
            (
                "policy mode unlike the baseline's",
                "patch-policy.toml",
                |t| t.replace("mode = \"0640\"", "mode = \"0600\""),
            ),
            ("image unknown key", "image.toml", |t| {
                t.replace("rootfs_mib = 512", "rootfs_mib = 512\nkernel = \"vmlinuz\"")
            }),
            ("image invalid value", "image.toml", |t| {
                t.replace("rootfs_mib = 512", "rootfs_mib = 1")
            }),
            ("prepared unknown key", "prepared.toml", |t| {
                t.replace("cpus = 1", "cpus = 1\nnetwork = \"none\"")
            }),
        ],
        expect![[r#"
            relative program: package/schema: command-profiles.toml: profiles[0].argv: expected an absolute program first
            a profile twice: package/schema: command-profiles.toml: profiles[2].name: `show-config` defined twice
            unknown mode: package/schema: command-profiles.toml: profiles[0].mode: unknown variant `read-only`, expected `observation` or `contained-mutation`
            timeout over the ceiling: package/schema: command-profiles.toml: profiles[5].timeout_s: expected 1..=300
            unknown slot key: package/schema: command-profiles.toml: profiles[1].args[0].any: unknown key
            policy unknown key: package/schema: patch-policy.toml: files[1].owner: unknown key
            policy target without a baseline: package/schema: patch-policy.toml: files[target = "etc/app.d/other.conf"]: `etc/app.d/other.conf` has no baseline in image variant `debian-bookworm-x86_64` (image_variants[0]): neither image.toml nor prepared.toml places /etc/app.d/other.conf
            policy mode unlike the baseline's: package/schema: patch-policy.toml: files[target = "etc/app.d/limits.conf"]: `etc/app.d/limits.conf` is 0:0 mode 0640 in image variant `debian-bookworm-x86_64`, the policy requires 0:0 mode 0600
            image unknown key: package/schema: image.toml: kernel: unknown key
            image invalid value: package/schema: image.toml: spec field rootfs_mib: must be within 256..=16384
            prepared unknown key: package/schema: prepared.toml: network: unknown key
        "#]],
    );
}

#[test]
fn verifier() {
    check(
        &[
            ("a mutation profile", "verifier.toml", |t| {
                t.replace(
                    "profiles = [\"net-interfaces\"]",
                    "profiles = [\"reload-cache\"]",
                )
                .replace("profile = \"net-interfaces\"", "profile = \"reload-cache\"")
            }),
            ("a profile without a mode", "verifier.toml", |t| {
                t.replace(
                    "profiles = [\"net-interfaces\"]",
                    "profiles = [\"legacy-tool\"]",
                )
                .replace("profile = \"net-interfaces\"", "profile = \"legacy-tool\"")
            }),
            ("an unknown check", "verifier.toml", |t| {
                t.replace("name = \"network-none\"", "name = \"disk-space\"")
            }),
            ("a check twice", "verifier.toml", |t| {
                t.replace("name = \"network-none\"", "name = \"listener-scope\"")
            }),
            ("profiles unlike observe", "verifier.toml", |t| {
                t.replace(
                    "profiles = [\"listeners\"]",
                    "profiles = [\"listeners\", \"net-interfaces\"]",
                )
            }),
            ("args outside the slots", "verifier.toml", |t| {
                t.replace("args = [\"svc\"]", "args = [\"sshd\"]")
            }),
            ("a bad regex", "verifier.toml", |t| {
                t.replace("'^lo$'", "'^lo($'")
            }),
            ("has_capture before capture", "verifier.toml", |t| {
                t.replace("has_capture = \"probe\"", "has_capture = \"other\"")
            }),
            ("a broker network", "verifier.toml", |t| {
                t.replace("broker_network = \"none\"", "broker_network = \"isolated\"")
            }),
            ("unknown observe key", "verifier.toml", |t| {
                t.replace("exit = 3", "exit = 3\nstderr = []")
            }),
        ],
        expect![[r#"
            a mutation profile: verifier/mutation-not-admitted: verifier.toml: checks[5].profiles[0]: the profile `reload-cache` has mode contained-mutation, not observation
            a profile without a mode: verifier/mutation-not-admitted: verifier.toml: checks[5].profiles[0]: the profile `legacy-tool` has mode none (no enforced mode), not observation
            an unknown check: package/schema: verifier.toml: checks[5].name: `disk-space` is not one of the seven checks (service-healthy, local-delivery, listener-scope, relay-refused, control-files-unchanged, network-none, verifier-no-mutation)
            a check twice: package/schema: verifier.toml: checks[5].name: `listener-scope` defined twice
            profiles unlike observe: package/schema: verifier.toml: checks[2].profiles: `net-interfaces` is listed but no observation of the check names it
            args outside the slots: package/schema: verifier.toml: checks[0].observe[0].args: not admitted by the slots of profile `service-status`
            a bad regex: package/schema: verifier.toml: checks[5].observe[0].only_lines[0]: not a regex: regex parse error:
                ^lo($
                   ^
            error: unclosed group
            has_capture before capture: package/schema: verifier.toml: checks[1].observe[1].has_capture: no earlier observation of the check captures `other`
            a broker network: package/schema: verifier.toml: checks[5].broker_network: the only network a broker may report is `none`
            unknown observe key: package/schema: verifier.toml: checks[3].observe[0].stderr: unknown key
        "#]],
    );
}

#[test]
fn flow_prompts_corpus_and_answers() {
    check(
        &[
            ("turns out of order", "flow.toml", |t| {
                t.replacen("role = \"solver\"", "role = \"reviewer\"", 1)
            }),
            ("a missing prompt", "flow.toml", |t| {
                t.replace("prompts/solver.md", "prompts/absent.md")
            }),
            ("unknown evidence", "flow.toml", |t| {
                t.replacen("\"observations\"]", "\"observations\", \"goal\"]", 1)
            }),
            (
                "a reviewer placeholder in the solver's prompt",
                "prompts/solver.md",
                |t| t.replace("{{goal}}", "{{candidate}}"),
            ),
            ("an unknown placeholder", "prompts/reviewer.md", |t| {
                t.replace("{{goal}}", "{{secret}}")
            }),
            ("no user marker", "prompts/reviewer.md", |t| {
                t.replace("<!-- reach:user -->\n", "")
            }),
            ("text before the system marker", "prompts/solver.md", |t| {
                format!("Hello.\n{t}")
            }),
            (
                "a compile fixture without hil",
                "refusal-corpus/first-step.toml",
                |t| t.replace("hil = \"each-mutation\"\n", ""),
            ),
            (
                "an owner key in a compile fixture",
                "refusal-corpus/first-step.toml",
                |t| {
                    t.replace(
                        "hil = \"each-mutation\"\n",
                        "hil = \"each-mutation\"\nevent = \"pause\"\n",
                    )
                },
            ),
            ("an unknown case", "refusal-corpus/containment.toml", |t| {
                t.replace("case = \"containment\"", "case = \"escape\"")
            }),
            (
                "a case left without fixture",
                "refusal-corpus/containment.toml",
                |t| t.replace("case = \"containment\"", "case = \"environment\""),
            ),
            (
                "an owner fixture whose candidate does not compile",
                "refusal-corpus/hil.toml",
                |t| t.replace("\"service\": \"svc\"", "\"service\": \"sshd\""),
            ),
            ("answers: an unknown variant", "fixture/answers.toml", |t| {
                t.replacen(
                    "variants = [\"reference\"]\nwhen",
                    "variants = [\"other\"]\nwhen",
                    1,
                )
            }),
            (
                "answers: a review of no answer",
                "fixture/answers.toml",
                |t| t.replace("of = \"repair\"", "of = \"fix\""),
            ),
            ("answers: unknown rule key", "fixture/answers.toml", |t| {
                t.replace(
                    "concern = \"wildcard\"",
                    "concern = \"wildcard\"\nseverity = 3",
                )
            }),
            ("empty README", "README.md", |_| "\n".to_owned()),
        ],
        expect![[r#"
            turns out of order: package/schema: flow.toml: turns: one turn per role: `solver`, then `reviewer`
            a missing prompt: package/schema: flow.toml: turns[0].prompt: `prompts/absent.md` is not a file of the pack under prompts/
            unknown evidence: package/schema: flow.toml: turns[0].evidence[5]: unknown variant `goal`, expected one of `revision-request`, `review`, `execution-record`, `verifier-result`, `observations`
            a reviewer placeholder in the solver's prompt: package/schema: prompts/solver.md: `{{candidate}}` is not admitted in a solver prompt
            an unknown placeholder: package/schema: prompts/reviewer.md: unknown placeholder `{{secret}}`
            no user marker: package/schema: prompts/reviewer.md: no `<!-- reach:user -->` line
            text before the system marker: package/schema: prompts/solver.md: the first line must be `<!-- reach:system -->`
            a compile fixture without hil: package/schema: refusal-corpus/first-step.toml: hil: a compile fixture names the binding's HIL mode
            an owner key in a compile fixture: package/schema: refusal-corpus/first-step.toml: event: only an owner fixture carries it
            an unknown case: package/schema: refusal-corpus/containment.toml: case: unknown variant `escape`, expected one of `candidate-shell`, `candidate-authority`, `first-step`, `patch-policy`, `hil`, `containment`, `environment`, `verifier`, `interruption`, `active-pause`, `package-generation`, `profile-change`, `remote-profile`
            a case left without fixture: package/schema: refusal-corpus: no fixture for the case `containment` (a pack has at least one per seed case)
            an owner fixture whose candidate does not compile: package/conformance-failed: refusal fixture `refusal-corpus/hil.toml` (image variant `debian-bookworm-x86_64`): expected `the owner fixture's candidate to compile`, the compiler refused it with plan/outside-profile: step 2 is outside the pack's profile: no restartable service `sshd`
            answers: an unknown variant: package/schema: fixture/answers.toml: solver[0].variants: `other` is not one of `variants`
            answers: a review of no answer: package/schema: fixture/answers.toml: reviews[0].of: no solver answer `fix`
            answers: unknown rule key: package/schema: fixture/answers.toml: reviewer.rules[0].severity: unknown key
            empty README: package/schema: README.md: empty (it says what the pack expects of its environment)
        "#]],
    );
}

#[test]
fn files_of_a_pack() {
    let mut out = String::new();
    let with = |path: &str, bytes: &[u8]| {
        let mut map: BTreeMap<String, Vec<u8>> = test_pack_files().into_map();
        map.insert(path.to_owned(), bytes.to_vec());
        PackFiles::new(map).map(|_| ()).map_err(|e| e.to_string())
    };
    for (what, r) in [
        ("a dotfile", with(".hidden", b"x")),
        ("a dotted directory", with("prompts/.cache/x.md", b"x")),
        ("a parent component", with("../x", b"x")),
        ("an absolute path", with("/etc/x", b"x")),
        ("an empty component", with("prompts//x.md", b"x")),
        ("a long path", with(&"a".repeat(97), b"x")),
        ("a file under a file", with("pack.toml/x", b"x")),
        (
            "a large file",
            with(
                "debs/x.deb",
                &vec![0; reach_taskpack::source::MAX_FILE_BYTES + 1],
            ),
        ),
        ("an opaque file", with("debs/x.deb", b"!<arch>\n")),
    ] {
        out.push_str(&format!(
            "{what}: {}\n",
            r.err().unwrap_or_else(|| "ok".to_owned())
        ));
    }
    expect![[r#"
        a dotfile: .hidden: a dotfile (no pack file's name starts with `.`)
        a dotted directory: prompts/.cache/x.md: a dotfile (no pack file's name starts with `.`)
        a parent component: ../x: a `.` or `..` component
        an absolute path: /etc/x: an absolute path
        an empty component: prompts//x.md: an empty path component
        a long path: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: longer than 96 bytes
        a file under a file: pack.toml/x: `pack.toml` is a file, not a directory
        a large file: debs/x.deb: 2097153 bytes; a pack file has at most 2097152
        an opaque file: ok
    "#]].assert_eq(&out);
}

#[cfg(unix)]
#[test]
fn a_directory_with_a_symlink_or_a_dotfile_is_refused() {
    let copy = |extra: &dyn Fn(&std::path::Path)| {
        let dir = tempfile::tempdir().unwrap();
        for (path, bytes) in test_pack_files().iter() {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        extra(dir.path());
        outcome(build(dir.path(), &key()), |e| e.code())
    };
    assert_eq!(copy(&|_| {}).as_str(), "accepted");
    // An empty directory is no part of a pack.
    assert_eq!(
        copy(&|d| std::fs::create_dir(d.join("empty")).unwrap()),
        "accepted"
    );
    expect![[r#"
        package/schema: link.toml: a symlink (a pack holds regular files only)
        package/schema: prompts/.draft.md: a dotfile (no pack file's name starts with `.`)
    "#]]
    .assert_eq(&format!(
        "{}\n{}\n",
        copy(&|d| std::os::unix::fs::symlink("pack.toml", d.join("link.toml")).unwrap()),
        copy(&|d| std::fs::write(d.join("prompts/.draft.md"), "x").unwrap()),
    ));
}
