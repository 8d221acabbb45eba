//! The refusal table: one candidate per way out, compiled against the test vocabulary, each
//! printed as `case: code: message`.

use expect_test::{Expect, expect};
use reach_plan::testing::{terms, vocabulary};
use reach_plan::{HilMode, MAX_CANDIDATE_BYTES, compile};

/// A candidate whose first step is an admitted observation, followed by `rest`.
fn after_observation(rest: &str) -> String {
    format!(
        r#"{{"format":"reach.plan.candidate.v1","diagnosis":"d","steps":[{{"kind":"run","profile":"show-config"}},{rest}]}}"#
    )
}

/// A candidate of exactly `steps`.
fn only(steps: &str) -> String {
    format!(r#"{{"format":"reach.plan.candidate.v1","diagnosis":"d","steps":[{steps}]}}"#)
}

fn patch(target: &str, edits: &str) -> String {
    format!(r#"{{"kind":"patch","target":"{target}","edits":[{edits}]}}"#)
}

fn check(cases: &[(&str, String)], expect: Expect) {
    let vocab = vocabulary();
    let mut out = String::new();
    for (name, candidate) in cases {
        let line = match compile(&vocab, &terms(HilMode::EachStep), candidate.as_bytes()) {
            Ok(plan) => format!("admitted, {} steps", plan.steps.len()),
            Err(e) => format!("{}: {e}", e.code()),
        };
        out.push_str(&format!("{name}: {line}\n"));
    }
    expect.assert_eq(&out);
}

#[test]
fn outside_profile() {
    check(
        &[
            (
                "sed as a profile",
                after_observation(
                    r#"{"kind":"run","profile":"sed -i","args":["s/a/b/","etc/app.conf"]}"#,
                ),
            ),
            (
                "sed as an argument",
                after_observation(r#"{"kind":"run","profile":"list-dir","args":["-i s/a/b/"]}"#),
            ),
            (
                "shell text as an argument",
                after_observation(
                    r#"{"kind":"run","profile":"service-status","args":["svc; rm -rf /"]}"#,
                ),
            ),
            (
                "missing argument",
                after_observation(r#"{"kind":"run","profile":"service-status"}"#),
            ),
            (
                "extra argument",
                after_observation(r#"{"kind":"run","profile":"show-config","args":["etc"]}"#),
            ),
            (
                "unknown service",
                after_observation(r#"{"kind":"restart","service":"sshd"}"#),
            ),
            (
                "unknown first profile",
                only(r#"{"kind":"run","profile":"cat"}"#),
            ),
        ],
        expect![[r#"
            sed as a profile: plan/outside-profile: step 1 is outside the pack's profile: no command profile `sed -i`
            sed as an argument: plan/outside-profile: step 1 is outside the pack's profile: argument 0 of profile `list-dir` is not one of its admitted values: `-i s/a/b/`
            shell text as an argument: plan/outside-profile: step 1 is outside the pack's profile: argument 0 of profile `service-status` is not one of its admitted values: `svc; rm -rf /`
            missing argument: plan/outside-profile: step 1 is outside the pack's profile: profile `service-status` takes 1 arguments, not 0
            extra argument: plan/outside-profile: step 1 is outside the pack's profile: profile `show-config` takes 0 arguments, not 1
            unknown service: plan/outside-profile: step 1 is outside the pack's profile: no restartable service `sshd`
            unknown first profile: plan/outside-profile: step 0 is outside the pack's profile: no command profile `cat`
        "#]],
    );
}

#[test]
fn schema() {
    let long_diagnosis = "x".repeat(2001);
    let oversize = format!(
        r#"{{"format":"reach.plan.candidate.v1","diagnosis":"{}","steps":[{{"kind":"verify"}}]}}"#,
        " ".repeat(MAX_CANDIDATE_BYTES)
    );
    check(
        &[
            (
                "shell kind",
                after_observation(r#"{"kind":"shell","command":"sed -i s/a/b/ etc/app.conf"}"#),
            ),
            (
                "own effect class",
                after_observation(r#"{"kind":"run","profile":"reload-cache","effect_class":"observation"}"#),
            ),
            (
                "own digest",
                r#"{"format":"reach.plan.candidate.v1","diagnosis":"d","digest":"sha256:00","steps":[{"kind":"verify"}]}"#.to_owned(),
            ),
            (
                "own HIL flag",
                only(r#"{"kind":"verify","hil":false}"#),
            ),
            (
                "a command",
                after_observation(r#"{"kind":"run","profile":"show-config","command":"cat /etc/shadow"}"#),
            ),
            (
                "an argv",
                after_observation(r#"{"kind":"run","profile":"show-config","argv":["/bin/sh","-c","id"]}"#),
            ),
            (
                "a path",
                after_observation(r#"{"kind":"restart","service":"svc","path":"/usr/sbin/svc"}"#),
            ),
            (
                "a line number",
                after_observation(&patch("etc/app.conf", r#"{"op":"replace","line_number":3,"line":"log = info","with":"log = debug"}"#)),
            ),
            (
                "absolute target",
                after_observation(&patch("/etc/app.conf", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "parent target",
                after_observation(&patch("../x", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "dot component",
                after_observation(&patch("etc/./app.conf", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "empty component",
                after_observation(&patch("etc//app.conf", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "backslash",
                after_observation(&patch(r"etc\\app.conf", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "NUL",
                after_observation(&patch(r"etc/app.conf\u0000", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "a second line smuggled in",
                after_observation(&patch("etc/app.conf", r#"{"op":"append","with":"x\naccept = *"}"#)),
            ),
            (
                "unknown edit op",
                after_observation(&patch("etc/app.conf", r#"{"op":"insert","at":1,"with":"x"}"#)),
            ),
            (
                "duplicate kind",
                only(r#"{"kind":"verify","kind":"restart","service":"svc"}"#),
            ),
            (
                "a number for an argument",
                after_observation(r#"{"kind":"run","profile":"list-dir","args":[1]}"#),
            ),
            ("no steps", only("")),
            ("wrong format", r#"{"format":"reach.plan.candidate.v2","diagnosis":"d","steps":[{"kind":"verify"}]}"#.to_owned()),
            ("missing diagnosis", r#"{"format":"reach.plan.candidate.v1","steps":[{"kind":"verify"}]}"#.to_owned()),
            ("long diagnosis", format!(r#"{{"format":"reach.plan.candidate.v1","diagnosis":"{long_diagnosis}","steps":[{{"kind":"verify"}}]}}"#)),
            ("not JSON", only(r#"{"kind":"verify"},"#)),
            ("trailing bytes", format!("{} x", only(r#"{"kind":"verify"}"#))),
            ("not an object", "[]".to_owned()),
            ("oversize", oversize),
        ],
        expect![[r#"
            shell kind: plan/schema: candidate refused at `steps[1].kind`: unknown step kind `shell`; expected one of `run`, `patch`, `restart`, `verify`
            own effect class: plan/schema: candidate refused at `steps[1].effect_class`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
            own digest: plan/schema: candidate refused at `digest`: unknown field of a candidate; expected one of `format`, `diagnosis`, `steps`
            own HIL flag: plan/schema: candidate refused at `steps[0].hil`: unknown field of a `verify` step; expected one of `kind`
            a command: plan/schema: candidate refused at `steps[1].command`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
            an argv: plan/schema: candidate refused at `steps[1].argv`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
            a path: plan/schema: candidate refused at `steps[1].path`: unknown field of a `restart` step; expected one of `kind`, `service`
            a line number: plan/schema: candidate refused at `steps[1].edits[0].line_number`: unknown field of a `replace` edit; expected one of `op`, `line`, `with`
            absolute target: plan/schema: candidate refused at `steps[1].target`: a target must be relative, not start with `/`
            parent target: plan/schema: candidate refused at `steps[1].target`: a target must not have a `.` or `..` component
            dot component: plan/schema: candidate refused at `steps[1].target`: a target must not have a `.` or `..` component
            empty component: plan/schema: candidate refused at `steps[1].target`: a target must not have an empty component
            backslash: plan/schema: candidate refused at `steps[1].target`: a target must not contain a backslash
            NUL: plan/schema: candidate refused at `steps[1].target`: a target must not contain NUL or another control character
            a second line smuggled in: plan/schema: candidate refused at `steps[1].edits[0].with`: a line must not contain a line break (`\n` or `\r`)
            unknown edit op: plan/schema: candidate refused at `steps[1].edits[0].op`: unknown edit op `insert`; expected one of `replace`, `append`, `delete`
            duplicate kind: plan/schema: candidate refused at `steps[0].kind`: duplicate field
            a number for an argument: plan/schema: candidate refused at `steps[1].args[0]`: expected a string, found a number
            no steps: plan/schema: candidate refused at `steps`: a candidate has at least one step
            wrong format: plan/schema: candidate refused at `format`: expected `reach.plan.candidate.v1`
            missing diagnosis: plan/schema: candidate refused at `diagnosis`: missing field
            long diagnosis: plan/schema: candidate refused at `diagnosis`: is 2001 characters; at most 2000 are admitted
            not JSON: plan/schema: candidate refused at `steps[1]`: not valid JSON: trailing comma at line 1 column 80
            trailing bytes: plan/schema: candidate refused at `$`: not valid JSON: trailing characters at line 1 column 82
            not an object: plan/schema: candidate refused at `$`: expected an object, found an array
            oversize: plan/schema: candidate refused at `$`: the candidate is 65615 bytes; at most 65536 are read
        "#]],
    );
}

#[test]
fn first_step_not_observation() {
    check(
        &[
            (
                "a patch first",
                only(&patch("etc/app.conf", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "a restart first",
                only(r#"{"kind":"restart","service":"svc"}"#),
            ),
            (
                "a contained-mutation profile first",
                only(r#"{"kind":"run","profile":"reload-cache"}"#),
            ),
            (
                "a profile without an enforced mode first",
                only(r#"{"kind":"run","profile":"legacy-tool"}"#),
            ),
            ("the verifier first", only(r#"{"kind":"verify"}"#)),
        ],
        expect![[r#"
            a patch first: plan/first-step-not-observation: the first step is a contained mutation, not an observation
            a restart first: plan/first-step-not-observation: the first step is a contained mutation, not an observation
            a contained-mutation profile first: plan/first-step-not-observation: the first step is a contained mutation, not an observation
            a profile without an enforced mode first: plan/first-step-not-observation: the first step is a contained mutation, not an observation
            the verifier first: admitted, 1 steps
        "#]],
    );
}

#[test]
fn patch_outside_policy() {
    let too_big = (0..12)
        .map(|i| format!(r#"{{"op":"append","with":"max_entries = {i:06}"}}"#))
        .collect::<Vec<_>>()
        .join(",");
    check(
        &[
            (
                "a file the policy does not admit",
                after_observation(&patch(
                    "etc/access.rules",
                    r#"{"op":"append","with":"allow = all"}"#,
                )),
            ),
            (
                "an admitted file without a baseline",
                after_observation(&patch(
                    "etc/app.d/absent.conf",
                    r#"{"op":"append","with":"x"}"#,
                )),
            ),
            (
                "a wildcard",
                after_observation(&patch(
                    "etc/app.conf",
                    r#"{"op":"replace","line":"accept = localhost","with":"accept = *"}"#,
                )),
            ),
            (
                "listening on every address",
                after_observation(&patch(
                    "etc/app.conf",
                    r#"{"op":"replace","line":"listen = 127.0.0.1","with":"listen = 0.0.0.0/0"}"#,
                )),
            ),
            (
                "a line no shape admits",
                after_observation(&patch(
                    "etc/app.conf",
                    r#"{"op":"append","with":"relay = everyone"}"#,
                )),
            ),
            (
                "a shape of another file",
                after_observation(&patch(
                    "etc/app.d/limits.conf",
                    r#"{"op":"append","with":"accept = example.test"}"#,
                )),
            ),
            (
                "a line that is not there",
                after_observation(&patch(
                    "etc/app.conf",
                    r#"{"op":"delete","line":"accept = nowhere"}"#,
                )),
            ),
            (
                "a line deleted twice",
                after_observation(&patch(
                    "etc/app.conf",
                    r#"{"op":"delete","line":"log = info"},{"op":"delete","line":"log = info"}"#,
                )),
            ),
            ("no edits", after_observation(&patch("etc/app.conf", ""))),
            (
                "a post-image over max_bytes",
                after_observation(&patch("etc/app.d/limits.conf", &too_big)),
            ),
            (
                "a second patch that needs the baseline, not the first patch's result",
                after_observation(&format!(
                    "{},{}",
                    patch("etc/app.conf", r#"{"op":"delete","line":"log = info"}"#),
                    patch(
                        "etc/app.conf",
                        r#"{"op":"replace","line":"log = info","with":"accept = b"}"#
                    )
                )),
            ),
        ],
        expect![[r#"
            a file the policy does not admit: workbench/patch-outside-policy: step 1: patch target `etc/access.rules` is not admitted by the patch policy
            an admitted file without a baseline: workbench/patch-outside-policy: step 1: patch target `etc/app.d/absent.conf` has no known baseline in the prepared system
            a wildcard: workbench/patch-outside-policy: step 1: edit 0: the added line `accept = *` contains the forbidden `*`
            listening on every address: workbench/patch-outside-policy: step 1: edit 0: the added line `listen = 0.0.0.0/0` contains the forbidden `0.0.0.0/0`
            a line no shape admits: workbench/patch-outside-policy: step 1: edit 0: the added line `relay = everyone` matches no line shape of `etc/app.conf`
            a shape of another file: workbench/patch-outside-policy: step 1: edit 0: the added line `accept = example.test` matches no line shape of `etc/app.d/limits.conf`
            a line that is not there: workbench/patch-outside-policy: step 1: edit 0: the line `accept = nowhere` occurs 0 times in `etc/app.conf`, not exactly once
            a line deleted twice: workbench/patch-outside-policy: step 1: edit 1: the line `log = info` occurs 0 times in `etc/app.conf`, not exactly once
            no edits: workbench/patch-outside-policy: step 1: the patch to `etc/app.conf` has no edits
            a post-image over max_bytes: workbench/patch-outside-policy: step 1: the patched `etc/app.d/limits.conf` would be 285 bytes; the policy admits at most 256
            a second patch that needs the baseline, not the first patch's result: workbench/patch-outside-policy: step 2: edit 0: the line `log = info` occurs 0 times in `etc/app.conf`, not exactly once
        "#]],
    );
}

#[test]
fn too_many_steps() {
    let steps = |n: usize| {
        let mut s = vec![r#"{"kind":"run","profile":"show-config"}"#; n - 1];
        s.push(r#"{"kind":"verify"}"#);
        s.join(",")
    };
    check(
        &[
            ("sixteen steps", only(&steps(16))),
            ("seventeen steps", only(&steps(17))),
            (
                "seventeen steps, the last outside the profile",
                only(&format!(
                    "{},{}",
                    steps(16),
                    r#"{"kind":"run","profile":"sed"}"#
                )),
            ),
        ],
        expect![[r#"
            sixteen steps: admitted, 16 steps
            seventeen steps: plan/too-many-steps: the candidate has 17 steps; the pack admits at most 16
            seventeen steps, the last outside the profile: plan/too-many-steps: the candidate has 17 steps; the pack admits at most 16
        "#]],
    );
}

#[test]
fn verify_not_last() {
    let show = r#"{"kind":"run","profile":"show-config"}"#;
    let verify = r#"{"kind":"verify"}"#;
    check(
        &[
            ("no verify", only(show)),
            (
                "verify, then a run",
                only(&format!("{show},{verify},{show}")),
            ),
            ("two verifies", only(&format!("{show},{verify},{verify}"))),
            ("a run, then verify", only(&format!("{show},{verify}"))),
        ],
        expect![[r#"
            no verify: plan/verify-not-last: the candidate does not end with its one `verify` step (0 verify steps, the last a `run`)
            verify, then a run: plan/verify-not-last: the candidate does not end with its one `verify` step (1 verify steps, the last a `run`)
            two verifies: plan/verify-not-last: the candidate does not end with its one `verify` step (2 verify steps, the last a `verify`)
            a run, then verify: admitted, 2 steps
        "#]],
    );
}

#[test]
fn order_of_checks() {
    // The schema first, then the count, the refs, the first step, and the patches last.
    check(
        &[
            (
                "a first-step patch outside the policy",
                only(&patch("etc/access.rules", r#"{"op":"append","with":"x"}"#)),
            ),
            (
                "a first-step restart and a later unknown profile",
                only(r#"{"kind":"restart","service":"svc"},{"kind":"run","profile":"sed"}"#),
            ),
            (
                "an unknown profile and a later schema fault",
                only(r#"{"kind":"run","profile":"sed"},{"kind":"verify","hil":true}"#),
            ),
        ],
        expect![[r#"
            a first-step patch outside the policy: plan/first-step-not-observation: the first step is a contained mutation, not an observation
            a first-step restart and a later unknown profile: plan/outside-profile: step 1 is outside the pack's profile: no command profile `sed`
            an unknown profile and a later schema fault: plan/schema: candidate refused at `steps[1].hil`: unknown field of a `verify` step; expected one of `kind`
        "#]],
    );
}
