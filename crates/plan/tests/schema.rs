//! The published JSON Schema and the Rust type agree: the schema accepts a candidate exactly
//! when `Candidate::parse` does, and so does serde's derived `Deserialize`.
//!
//! Duplicate keys are outside this comparison: a JSON Schema validator sees a parsed value in
//! which the last duplicate has silently won, so only `Candidate::parse` and serde can refuse
//! them (tests/refusals.rs holds that case).

use expect_test::expect;
use jsonschema::Validator;
use proptest::prelude::*;
use reach_plan::testing::TEN_STEPS;
use reach_plan::{CANDIDATE_SCHEMA, Candidate};
use serde_json::{Value, json};
use std::sync::LazyLock;

fn validator() -> Validator {
    let schema: Value = serde_json::from_str(CANDIDATE_SCHEMA).expect("the schema is JSON");
    assert!(
        jsonschema::meta::is_valid(&schema),
        "the schema is a valid JSON Schema"
    );
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

/// Whether the schema, the parser and serde accept `candidate`; panics when they disagree.
fn verdict(validator: &Validator, candidate: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(candidate).unwrap();
    let schema = validator.is_valid(candidate);
    let parsed = Candidate::parse(&bytes);
    let derived = serde_json::from_slice::<Candidate>(&bytes);
    assert_eq!(
        schema,
        parsed.is_ok(),
        "schema and parser disagree on {candidate}: {parsed:?}"
    );
    assert_eq!(
        schema,
        derived.is_ok(),
        "schema and serde disagree on {candidate}: {derived:?}"
    );
    if let (Ok(p), Ok(d)) = (&parsed, &derived) {
        assert_eq!(p, d, "parser and serde read {candidate} differently");
        let round = serde_json::to_vec(p).unwrap();
        assert_eq!(Candidate::parse(&round).as_ref(), Ok(p), "round trip");
    }
    parsed.map(drop).map_err(|e| e.to_string())
}

fn with_step(step: Value) -> Value {
    json!({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": [step]})
}

fn with_edit(edit: Value) -> Value {
    with_step(json!({"kind": "patch", "target": "etc/app.conf", "edits": [edit]}))
}

fn with_target(target: &str) -> Value {
    with_step(json!({"kind": "patch", "target": target, "edits": []}))
}

#[test]
fn examples_agree() {
    let v = validator();
    let cases: Vec<(&str, Value)> = vec![
        ("ten steps", serde_json::from_str(TEN_STEPS).unwrap()),
        (
            "run without args",
            with_step(json!({"kind": "run", "profile": "p"})),
        ),
        (
            "run with args",
            with_step(json!({"kind": "run", "profile": "p", "args": ["a", ""]})),
        ),
        (
            "run args not strings",
            with_step(json!({"kind": "run", "profile": "p", "args": [true]})),
        ),
        (
            "run args null",
            with_step(json!({"kind": "run", "profile": "p", "args": null})),
        ),
        ("run without profile", with_step(json!({"kind": "run"}))),
        (
            "run with effect_class",
            with_step(json!({"kind": "run", "profile": "p", "effect_class": "observation"})),
        ),
        (
            "restart",
            with_step(json!({"kind": "restart", "service": "s"})),
        ),
        (
            "restart without service",
            with_step(json!({"kind": "restart"})),
        ),
        (
            "restart with a profile",
            with_step(json!({"kind": "restart", "service": "s", "profile": "p"})),
        ),
        ("verify", with_step(json!({"kind": "verify"}))),
        (
            "verify with hil",
            with_step(json!({"kind": "verify", "hil": true})),
        ),
        (
            "verify with digest",
            with_step(json!({"kind": "verify", "digest": "sha256:00"})),
        ),
        ("no kind", with_step(json!({"profile": "p"}))),
        (
            "kind shell",
            with_step(json!({"kind": "shell", "command": "id"})),
        ),
        ("kind not a string", with_step(json!({"kind": 1}))),
        // serde's derive reads an integer tag as a variant's index: 3 is `verify`, 1 `append`.
        ("kind a variant index", with_step(json!({"kind": 3}))),
        (
            "op a variant index",
            with_edit(json!({"op": 1, "with": "c"})),
        ),
        ("step not an object", with_step(json!("verify"))),
        ("patch with no edits", with_target("etc/app.conf")),
        (
            "patch without edits",
            with_step(json!({"kind": "patch", "target": "a"})),
        ),
        (
            "patch with a path",
            with_step(json!({"kind": "patch", "target": "a", "edits": [], "path": "/a"})),
        ),
        (
            "replace",
            with_edit(json!({"op": "replace", "line": "a", "with": "b"})),
        ),
        (
            "replace without with",
            with_edit(json!({"op": "replace", "line": "a"})),
        ),
        ("append", with_edit(json!({"op": "append", "with": ""}))),
        (
            "append with a line",
            with_edit(json!({"op": "append", "with": "b", "line": "a"})),
        ),
        ("delete", with_edit(json!({"op": "delete", "line": "a"}))),
        (
            "delete with a number",
            with_edit(json!({"op": "delete", "line": "a", "number": 3})),
        ),
        ("edit without op", with_edit(json!({"line": "a"}))),
        (
            "edit op insert",
            with_edit(json!({"op": "insert", "with": "a"})),
        ),
        (
            "with a newline",
            with_edit(json!({"op": "append", "with": "a\nb"})),
        ),
        (
            "with a carriage return",
            with_edit(json!({"op": "append", "with": "a\rb"})),
        ),
        (
            "with a tab",
            with_edit(json!({"op": "append", "with": "a\tb"})),
        ),
        ("target nested", with_target("etc/app.d/x.conf")),
        ("target hidden", with_target(".hidden/x")),
        ("target three dots", with_target("etc/.../x")),
        ("target unicode", with_target("etc/caf\u{e9}.conf")),
        ("target absolute", with_target("/etc/app.conf")),
        ("target parent", with_target("../x")),
        ("target inner parent", with_target("etc/../x")),
        ("target trailing parent", with_target("etc/..")),
        ("target dot", with_target(".")),
        ("target inner dot", with_target("etc/./x")),
        ("target empty", with_target("")),
        ("target double slash", with_target("etc//x")),
        ("target trailing slash", with_target("etc/")),
        ("target backslash", with_target("etc\\x")),
        ("target NUL", with_target("etc/x\u{0}")),
        ("target newline", with_target("etc/x\ny")),
        ("target DEL", with_target("etc/x\u{7f}")),
        (
            "no steps",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": []}),
        ),
        (
            "steps not an array",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": {}}),
        ),
        (
            "no format",
            json!({"diagnosis": "d", "steps": [{"kind": "verify"}]}),
        ),
        (
            "another format",
            json!({"format": "reach.plan.candidate.v0", "diagnosis": "d", "steps": [{"kind": "verify"}]}),
        ),
        (
            "no diagnosis",
            json!({"format": "reach.plan.candidate.v1", "steps": [{"kind": "verify"}]}),
        ),
        (
            "diagnosis null",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": null, "steps": [{"kind": "verify"}]}),
        ),
        (
            "diagnosis 2000",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "\u{e9}".repeat(2000), "steps": [{"kind": "verify"}]}),
        ),
        (
            "diagnosis 2001",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "\u{e9}".repeat(2001), "steps": [{"kind": "verify"}]}),
        ),
        (
            "top-level hil",
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": [{"kind": "verify"}], "hil": "none"}),
        ),
        ("not an object", json!([1])),
    ];
    let mut out = String::new();
    for (name, candidate) in &cases {
        let line = match verdict(&v, candidate) {
            Ok(()) => "accepted".to_owned(),
            Err(e) => e,
        };
        out.push_str(&format!("{name}: {line}\n"));
    }
    expect![[r#"
        ten steps: accepted
        run without args: accepted
        run with args: accepted
        run args not strings: candidate refused at `steps[0].args[0]`: expected a string, found a boolean
        run args null: candidate refused at `steps[0].args`: expected an array, found null
        run without profile: candidate refused at `steps[0].profile`: missing field
        run with effect_class: candidate refused at `steps[0].effect_class`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
        restart: accepted
        restart without service: candidate refused at `steps[0].service`: missing field
        restart with a profile: candidate refused at `steps[0].profile`: unknown field of a `restart` step; expected one of `kind`, `service`
        verify: accepted
        verify with hil: candidate refused at `steps[0].hil`: unknown field of a `verify` step; expected one of `kind`
        verify with digest: candidate refused at `steps[0].digest`: unknown field of a `verify` step; expected one of `kind`
        no kind: candidate refused at `steps[0].kind`: missing field
        kind shell: candidate refused at `steps[0].kind`: unknown step kind `shell`; expected one of `run`, `patch`, `restart`, `verify`
        kind not a string: candidate refused at `steps[0].kind`: expected a string, found a number
        kind a variant index: candidate refused at `steps[0].kind`: expected a string, found a number
        op a variant index: candidate refused at `steps[0].edits[0].op`: expected a string, found a number
        step not an object: candidate refused at `steps[0]`: expected an object, found a string
        patch with no edits: accepted
        patch without edits: candidate refused at `steps[0].edits`: missing field
        patch with a path: candidate refused at `steps[0].path`: unknown field of a `patch` step; expected one of `kind`, `target`, `edits`
        replace: accepted
        replace without with: candidate refused at `steps[0].edits[0].with`: missing field
        append: accepted
        append with a line: candidate refused at `steps[0].edits[0].line`: unknown field of an `append` edit; expected one of `op`, `with`
        delete: accepted
        delete with a number: candidate refused at `steps[0].edits[0].number`: unknown field of a `delete` edit; expected one of `op`, `line`
        edit without op: candidate refused at `steps[0].edits[0].op`: missing field
        edit op insert: candidate refused at `steps[0].edits[0].op`: unknown edit op `insert`; expected one of `replace`, `append`, `delete`
        with a newline: candidate refused at `steps[0].edits[0].with`: a line must not contain a line break (`\n` or `\r`)
        with a carriage return: candidate refused at `steps[0].edits[0].with`: a line must not contain a line break (`\n` or `\r`)
        with a tab: accepted
        target nested: accepted
        target hidden: accepted
        target three dots: accepted
        target unicode: accepted
        target absolute: candidate refused at `steps[0].target`: a target must be relative, not start with `/`
        target parent: candidate refused at `steps[0].target`: a target must not have a `.` or `..` component
        target inner parent: candidate refused at `steps[0].target`: a target must not have a `.` or `..` component
        target trailing parent: candidate refused at `steps[0].target`: a target must not have a `.` or `..` component
        target dot: candidate refused at `steps[0].target`: a target must not have a `.` or `..` component
        target inner dot: candidate refused at `steps[0].target`: a target must not have a `.` or `..` component
        target empty: candidate refused at `steps[0].target`: a target must not be empty
        target double slash: candidate refused at `steps[0].target`: a target must not have an empty component
        target trailing slash: candidate refused at `steps[0].target`: a target must not have an empty component
        target backslash: candidate refused at `steps[0].target`: a target must not contain a backslash
        target NUL: candidate refused at `steps[0].target`: a target must not contain NUL or another control character
        target newline: candidate refused at `steps[0].target`: a target must not contain NUL or another control character
        target DEL: candidate refused at `steps[0].target`: a target must not contain NUL or another control character
        no steps: candidate refused at `steps`: a candidate has at least one step
        steps not an array: candidate refused at `steps`: expected an array, found an object
        no format: candidate refused at `format`: missing field
        another format: candidate refused at `format`: expected `reach.plan.candidate.v1`
        no diagnosis: candidate refused at `diagnosis`: missing field
        diagnosis null: candidate refused at `diagnosis`: expected a string, found null
        diagnosis 2000: accepted
        diagnosis 2001: candidate refused at `diagnosis`: is 2001 characters; at most 2000 are admitted
        top-level hil: candidate refused at `hil`: unknown field of a candidate; expected one of `format`, `diagnosis`, `steps`
        not an object: candidate refused at `$`: expected an object, found an array
    "#]].assert_eq(&out);
}

/// Strings and values that are interesting somewhere in a candidate.
fn atom() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("run")),
        Just(json!("patch")),
        Just(json!("restart")),
        Just(json!("verify")),
        Just(json!("replace")),
        Just(json!("append")),
        Just(json!("delete")),
        Just(json!("etc/app.conf")),
        Just(json!("/etc/app.conf")),
        Just(json!("a/../b")),
        Just(json!("a\nb")),
        Just(json!("")),
        Just(json!(1)),
        Just(json!(null)),
        Just(json!([])),
        Just(json!(["a"])),
        Just(json!([{"op": "append", "with": "x"}])),
        Just(json!({})),
    ]
}

const KEYS: &[&str] = &[
    "kind",
    "profile",
    "args",
    "target",
    "edits",
    "service",
    "op",
    "line",
    "with",
    "effect_class",
];

fn valid_step() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"kind": "run", "profile": "p"})),
        Just(json!({"kind": "run", "profile": "p", "args": ["a"]})),
        Just(json!({"kind": "restart", "service": "s"})),
        Just(json!({"kind": "verify"})),
        Just(json!({"kind": "patch", "target": "etc/app.conf", "edits": [
            {"op": "replace", "line": "a", "with": "b"},
            {"op": "append", "with": "c"},
            {"op": "delete", "line": "d"},
        ]})),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    None,
    Insert(&'static str, Value),
    Remove(prop::sample::Index),
    Replace(prop::sample::Index, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::None),
        (prop::sample::select(KEYS), atom()).prop_map(|(k, v)| Mutation::Insert(k, v)),
        any::<prop::sample::Index>().prop_map(Mutation::Remove),
        (any::<prop::sample::Index>(), atom()).prop_map(|(i, v)| Mutation::Replace(i, v)),
    ]
}

fn mutate(object: &mut Value, m: &Mutation) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    match m {
        Mutation::None => {}
        Mutation::Insert(k, v) => {
            map.insert((*k).to_owned(), v.clone());
        }
        Mutation::Remove(i) => {
            map.remove(&keys[i.index(keys.len())]);
        }
        Mutation::Replace(i, v) => {
            map.insert(keys[i.index(keys.len())].clone(), v.clone());
        }
    }
}

/// A valid step with at most one change to it and one to one of its edits.
fn near_step() -> impl Strategy<Value = Value> {
    (
        valid_step(),
        mutation(),
        mutation(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut step, on_step, on_edit, which)| {
            if let Some(edits) = step.get_mut("edits").and_then(Value::as_array_mut) {
                let n = edits.len();
                mutate(&mut edits[which.index(n)], &on_edit);
            }
            mutate(&mut step, &on_step);
            step
        })
}

static VALIDATOR: LazyLock<Validator> = LazyLock::new(validator);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_near_candidates_agree(
        steps in prop::collection::vec(near_step(), 0..4),
        top in mutation(),
    ) {
        let mut candidate =
            json!({"format": "reach.plan.candidate.v1", "diagnosis": "", "steps": steps});
        mutate(&mut candidate, &top);
        let _ = verdict(&VALIDATOR, &candidate);
    }
}
