//! Candidates, untrusted model output (crates/plan `Candidate::parse` and `compile`),
//! structure-aware: candidates built from the test vocabulary's words (and wrong ones, and
//! fields a candidate may not carry), plus raw bytes.
//!
//! Promised: `compile` refuses exactly the candidates `Candidate::parse` refuses with
//! `plan/schema`, and serde's reading of `Candidate` agrees with both; parse → serialize →
//! parse is stable; an accepted candidate compiles to at most `max_steps` steps, the first an
//! observation, each with the class and source the pack gives it (never the candidate), HIL
//! on every mutation, and digests that verify; every refusal is a typed code.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reach_digest::Sha256Digest;
use reach_plan::testing::{terms, vocabulary};
use reach_plan::{
    Action, Candidate, EffectClass, HilMode, MAX_CANDIDATE_BYTES, PlanRefusal, compile,
};
use serde_json::{Map, Value, json};

const PROFILES: &[&str] = &[
    "show-config",
    "service-status",
    "list-dir",
    "reload-cache",
    "legacy-tool",
    "rm",
    "",
];
const ARGS: &[&str] = &["svc", "etc", "var", "/", "-rf", ""];
const TARGETS: &[&str] = &[
    "etc/app.conf",
    "etc/app.d/limits.conf",
    "etc/app.d/absent.conf",
    "/etc/app.conf",
    "../etc/app.conf",
    "etc/other.conf",
];
const LINES: &[&str] = &[
    "accept = localhost",
    "accept = localhost, example.test",
    "listen = 127.0.0.1",
    "listen = 0.0.0.0",
    "log = info",
    "max_queue = 100",
    "max_queue = 200",
    "# note",
    "accept = *",
    "a\nb",
];
/// Fields a candidate may not carry (authority smuggled in).
const FOREIGN: &[&str] = &[
    "effect_class",
    "hil_required",
    "digest",
    "command",
    "path",
    "kind",
];

#[derive(Debug, Arbitrary)]
enum Word {
    Known(u8),
    Free(String),
}

impl Word {
    fn pick(&self, from: &[&str]) -> String {
        match self {
            Word::Known(i) => from[*i as usize % from.len()].to_owned(),
            Word::Free(s) => s.clone(),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum GenEdit {
    Replace(Word, Word),
    Append(Word),
    Delete(Word),
    /// An integer tag (serde would read it as a variant index).
    Indexed(u8, Word),
}

#[derive(Debug, Arbitrary)]
enum GenStep {
    Run(Word, Vec<Word>),
    Patch(Word, Vec<GenEdit>),
    Restart(Word),
    Verify,
    IndexedKind(u8),
}

#[derive(Debug, Arbitrary)]
struct GenCandidate {
    diagnosis: String,
    long_diagnosis: bool,
    steps: Vec<GenStep>,
    /// Add a foreign field at this step (or at the top).
    foreign: Option<(u8, u8)>,
    wrong_format: bool,
}

fn edit(e: &GenEdit) -> Value {
    match e {
        GenEdit::Replace(l, w) => {
            json!({"op": "replace", "line": l.pick(LINES), "with": w.pick(LINES)})
        }
        GenEdit::Append(w) => json!({"op": "append", "with": w.pick(LINES)}),
        GenEdit::Delete(l) => json!({"op": "delete", "line": l.pick(LINES)}),
        GenEdit::Indexed(i, w) => json!({"op": i % 3, "with": w.pick(LINES)}),
    }
}

fn step(s: &GenStep) -> Value {
    match s {
        GenStep::Run(p, args) => {
            let args: Vec<String> = args.iter().take(3).map(|a| a.pick(ARGS)).collect();
            if args.is_empty() {
                json!({"kind": "run", "profile": p.pick(PROFILES)})
            } else {
                json!({"kind": "run", "profile": p.pick(PROFILES), "args": args})
            }
        }
        GenStep::Patch(t, edits) => json!({
            "kind": "patch",
            "target": t.pick(TARGETS),
            "edits": edits.iter().take(4).map(edit).collect::<Vec<_>>(),
        }),
        GenStep::Restart(s) => json!({"kind": "restart", "service": s.pick(&["svc", "other"])}),
        GenStep::Verify => json!({"kind": "verify"}),
        GenStep::IndexedKind(i) => json!({"kind": i % 4, "service": "svc"}),
    }
}

fn build(g: &GenCandidate) -> Vec<u8> {
    let mut steps: Vec<Value> = g.steps.iter().take(20).map(step).collect();
    let diagnosis = if g.long_diagnosis {
        "d".repeat(2001)
    } else {
        g.diagnosis.clone()
    };
    let mut top = Map::new();
    let format = if g.wrong_format {
        "reach.plan.candidate.v2"
    } else {
        "reach.plan.candidate.v1"
    };
    top.insert("format".into(), json!(format));
    top.insert("diagnosis".into(), json!(diagnosis));
    if let Some((at, which)) = g.foreign {
        let field = FOREIGN[which as usize % FOREIGN.len()];
        let n = steps.len() + 1;
        match steps.get_mut(at as usize % n) {
            Some(Value::Object(s)) => {
                s.insert(field.into(), json!("observation"));
            }
            _ => {
                top.insert(field.into(), json!(true));
            }
        }
    }
    top.insert("steps".into(), Value::Array(steps));
    serde_json::to_vec(&Value::Object(top)).expect("json")
}

fn check(bytes: &[u8], each_step: bool) {
    let vocab = vocabulary();
    let t = terms(if each_step {
        HilMode::EachStep
    } else {
        HilMode::EachMutation
    });
    let parsed = Candidate::parse(bytes);
    if bytes.len() <= MAX_CANDIDATE_BYTES {
        let serde = serde_json::from_slice::<Candidate>(bytes);
        assert_eq!(
            parsed.as_ref().ok(),
            serde.as_ref().ok(),
            "Candidate::parse and serde disagree: {:?} / {:?}",
            parsed.as_ref().err(),
            serde.as_ref().err()
        );
    }
    if let Ok(c) = &parsed {
        let again = serde_json::to_vec(c).expect("a candidate serializes");
        assert_eq!(
            Candidate::parse(&again).as_ref(),
            Ok(c),
            "parse → serialize → parse drifted"
        );
    }
    match compile(&vocab, &t, bytes) {
        Ok(plan) => {
            let c = parsed.expect("compiled a candidate parse refused");
            assert_eq!(plan.steps.len(), c.steps.len());
            assert!(plan.steps.len() <= vocab.max_steps);
            assert_eq!(plan.candidate_digest, Sha256Digest::of(bytes));
            assert_eq!(plan.pack, vocab.pack);
            assert!(
                plan.verify_digests().is_ok(),
                "a compiled plan's digests do not verify"
            );
            assert_eq!(
                plan.steps.first().map(|s| s.effect_class),
                Some(EffectClass::Observation)
            );
            let verifies = plan
                .steps
                .iter()
                .filter(|s| matches!(s.action, Action::Verify {}))
                .count();
            assert!(
                verifies == 1
                    && matches!(
                        plan.steps.last().map(|s| &s.action),
                        Some(Action::Verify {})
                    ),
                "a compiled plan does not end with its one verify step"
            );
            for (i, s) in plan.steps.iter().enumerate() {
                assert_eq!(s.index, i);
                let (class, source) = match &s.action {
                    Action::Run { profile, .. } => {
                        let p = vocab
                            .commands
                            .get(profile)
                            .expect("ran a profile the pack lacks");
                        (
                            p.mode.unwrap_or(EffectClass::ContainedMutation),
                            p.source.clone(),
                        )
                    }
                    Action::Patch { target, .. } => {
                        assert!(vocab.patch_policy.file(target.as_str()).is_some());
                        (EffectClass::ContainedMutation, s.source.clone())
                    }
                    Action::Restart { service } => {
                        assert!(
                            vocab.services.contains(service),
                            "restarted an unknown service"
                        );
                        (EffectClass::ContainedMutation, s.source.clone())
                    }
                    Action::Verify {} => (EffectClass::Observation, s.source.clone()),
                };
                assert_eq!(s.effect_class, class, "a class not from the pack");
                assert_eq!(s.source, source);
                assert_eq!(s.rollback, vocab.rollback);
                let wants_hil = each_step || class == EffectClass::ContainedMutation;
                assert_eq!(s.hil_required, wants_hil, "HIL not derived from the class");
            }
        }
        Err(r) => {
            let code = r.code();
            assert!(
                code.starts_with("plan/") || code.starts_with("workbench/"),
                "untyped refusal {code}"
            );
            assert_eq!(
                matches!(r, PlanRefusal::Schema { .. }),
                parsed.is_err(),
                "compile and parse disagree on the schema"
            );
        }
    }
}

// Bytes: a mode byte (bit 0: built from the rest, else the rest is the candidate; bit 1:
// the binding asks HIL for each step), then the rest.
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let each = mode & 2 != 0;
    if mode & 1 == 0 {
        check(rest, each);
    } else if let Ok(g) = <GenCandidate as arbitrary::Arbitrary>::arbitrary_take_rest(
        arbitrary::Unstructured::new(rest),
    ) {
        check(&build(&g), each);
    }
});
