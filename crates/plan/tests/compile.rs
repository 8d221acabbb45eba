//! What the compiler stamps: classes, sources, HIL marking, chained patches, digests.

use expect_test::{Expect, expect};
use reach_digest::Sha256Digest;
use reach_plan::testing::{APP_CONF, TEN_STEPS, terms, vocabulary};
use reach_plan::{
    Action, DigestMismatch, EffectClass, HilMode, RelativeTarget, StampedPlan, StampedStep,
    Vocabulary, compile,
};
use serde_json::Value;

fn summary(plan: &StampedPlan) -> String {
    let mut out = format!("hil {:?}, generation {}\n", plan.hil, plan.generation);
    for s in &plan.steps {
        let what = match &s.action {
            Action::Run { profile, args } => format!("run {profile} {args:?}"),
            Action::Patch { target, .. } => format!("patch {target}"),
            Action::Restart { service } => format!("restart {service}"),
            Action::Verify {} => "verify".to_owned(),
        };
        let hil = if s.hil_required { "HIL" } else { "-" };
        out.push_str(&format!(
            "{} {what}: {:?} from {} [{hil}] rollback {}\n",
            s.index, s.effect_class, s.source, s.rollback
        ));
    }
    out
}

fn check(vocab: &Vocabulary, hil: HilMode, candidate: &str, expect: Expect) {
    let plan = compile(vocab, &terms(hil), candidate.as_bytes()).expect("admitted");
    expect.assert_eq(&summary(&plan));
}

#[test]
fn each_mutation_marks_mutations_only() {
    check(
        &vocabulary(),
        HilMode::EachMutation,
        TEN_STEPS,
        expect![[r#"
            hil EachMutation, generation 7
            0 run show-config []: Observation from command-profiles.toml#show-config [-] rollback recreate-prepared-system
            1 run service-status ["svc"]: Observation from command-profiles.toml#service-status [-] rollback recreate-prepared-system
            2 patch etc/app.conf: ContainedMutation from patch-policy.toml#etc/app.conf [HIL] rollback recreate-prepared-system
            3 patch etc/app.conf: ContainedMutation from patch-policy.toml#etc/app.conf [HIL] rollback recreate-prepared-system
            4 patch etc/app.d/limits.conf: ContainedMutation from patch-policy.toml#etc/app.d/limits.conf [HIL] rollback recreate-prepared-system
            5 run reload-cache []: ContainedMutation from command-profiles.toml#reload-cache [HIL] rollback recreate-prepared-system
            6 restart svc: ContainedMutation from task-profile.toml#services [HIL] rollback recreate-prepared-system
            7 run list-dir ["etc"]: Observation from command-profiles.toml#list-dir [-] rollback recreate-prepared-system
            8 run service-status ["svc"]: Observation from command-profiles.toml#service-status [-] rollback recreate-prepared-system
            9 verify: Observation from verifier.toml [-] rollback recreate-prepared-system
        "#]],
    );
}

#[test]
fn each_step_marks_every_step_and_changes_no_class() {
    let vocab = vocabulary();
    let each_step = compile(&vocab, &terms(HilMode::EachStep), TEN_STEPS.as_bytes()).unwrap();
    let each_mutation =
        compile(&vocab, &terms(HilMode::EachMutation), TEN_STEPS.as_bytes()).unwrap();
    assert_eq!(each_step.hil, HilMode::EachStep);
    assert!(each_step.steps.iter().all(|s| s.hil_required));
    let classes = |p: &StampedPlan| p.steps.iter().map(|s| s.effect_class).collect::<Vec<_>>();
    assert_eq!(classes(&each_step), classes(&each_mutation));
    assert_ne!(each_step.digest, each_mutation.digest);
}

#[test]
fn the_stricter_of_binding_and_pack_minimum_wins() {
    let mut vocab = vocabulary();
    vocab.hil_minimum = HilMode::EachStep;
    let plan = compile(&vocab, &terms(HilMode::EachMutation), TEN_STEPS.as_bytes()).unwrap();
    assert_eq!(plan.hil, HilMode::EachStep);
    assert!(plan.steps.iter().all(|s| s.hil_required));
}

#[test]
fn a_profile_without_an_enforced_mode_is_a_mutation() {
    check(
        &vocabulary(),
        HilMode::EachMutation,
        r#"{"format":"reach.plan.candidate.v1","diagnosis":"","steps":[
            {"kind":"run","profile":"list-dir","args":["var"]},
            {"kind":"run","profile":"legacy-tool"},
            {"kind":"verify"}]}"#,
        expect![[r#"
            hil EachMutation, generation 7
            0 run list-dir ["var"]: Observation from command-profiles.toml#list-dir [-] rollback recreate-prepared-system
            1 run legacy-tool []: ContainedMutation from command-profiles.toml#legacy-tool [HIL] rollback recreate-prepared-system
            2 verify: Observation from verifier.toml [-] rollback recreate-prepared-system
        "#]],
    );
}

#[test]
fn successive_patches_to_one_target_chain() {
    let vocab = vocabulary();
    let plan = compile(&vocab, &terms(HilMode::EachStep), TEN_STEPS.as_bytes()).unwrap();
    let patch = |i: usize| match &plan.steps[i].action {
        Action::Patch {
            pre_digest,
            post_digest,
            diff,
            edits,
            target,
        } => (
            *pre_digest,
            *post_digest,
            diff.clone(),
            edits.clone(),
            target.clone(),
        ),
        other => panic!("step {i} is {other:?}"),
    };
    let (pre2, post2, _, edits2, target) = patch(2);
    let (pre3, post3, diff3, edits3, _) = patch(3);
    assert_eq!(pre2, Sha256Digest::of(APP_CONF));
    assert_eq!(
        pre3, post2,
        "the second patch applies to the first one's post-image"
    );

    // The same function the workbench runs gives the same digests, step by step.
    let first = vocab
        .patch_policy
        .apply(&target, APP_CONF, &edits2)
        .unwrap();
    let second = vocab
        .patch_policy
        .apply(&target, &first.post_image, &edits3)
        .unwrap();
    assert_eq!(first.post_digest, post2);
    assert_eq!(second.post_digest, post3);
    expect![[r#"
        # app configuration
        listen = 127.0.0.1
        accept = localhost, example.test
        # accept example.test locally
    "#]]
    .assert_eq(&second.post_image);
    expect![[r#"
        --- a/etc/app.conf
        +++ b/etc/app.conf
        @@ -1,4 +1,4 @@
         # app configuration
         listen = 127.0.0.1
         accept = localhost, example.test
        -log = info
        +# accept example.test locally
    "#]]
    .assert_eq(&diff3);
}

#[test]
fn the_stamped_form() {
    let vocab = vocabulary();
    let candidate = r#"{"format":"reach.plan.candidate.v1","diagnosis":"add the local domain","steps":[
        {"kind":"run","profile":"show-config"},
        {"kind":"patch","target":"etc/app.conf","edits":[{"op":"replace","line":"accept = localhost","with":"accept = localhost, example.test"}]},
        {"kind":"verify"}]}"#;
    let plan = compile(&vocab, &terms(HilMode::EachMutation), candidate.as_bytes()).unwrap();
    let pretty = serde_json::to_string_pretty(&plan).unwrap();
    expect![[r#"
        {
          "format": "reach.plan.stamped.v1",
          "pack": {
            "name": "app-local",
            "version": 3,
            "facts_digest": "sha256:a9348e226cf41349605d87b4b01ce7a7edff5663960efae7ef94bf8e2229dbcd",
            "profile_digest": "sha256:2d96bd20fe695a91190b7beffe8f9dc93a217c7f6a947718f41a1511aa67b939"
          },
          "generation": 7,
          "hil": "each-mutation",
          "candidate_digest": "sha256:ab8d1a19331d0e9866d0dc9de46db7eae7a9efa4a511f8aef8359b55ccba26ab",
          "diagnosis": "add the local domain",
          "steps": [
            {
              "index": 0,
              "action": {
                "kind": "run",
                "profile": "show-config",
                "args": []
              },
              "effect_class": "observation",
              "source": "command-profiles.toml#show-config",
              "hil_required": false,
              "rollback": "recreate-prepared-system",
              "digest": "sha256:1198def39a3c9390b1dee2e74b8d618036d7fe5f488db833ad317ed38ffbdd00"
            },
            {
              "index": 1,
              "action": {
                "kind": "patch",
                "target": "etc/app.conf",
                "pre_digest": "sha256:d7e6a1f318646671c1dbe53c6f3f7c7cf04f393b672ceb8efa6821e47a162f18",
                "post_digest": "sha256:e0f074579e7d8930ffb2e741f72a5631672d156e3ad50bff10c790141f804f94",
                "diff": "--- a/etc/app.conf\n+++ b/etc/app.conf\n@@ -1,4 +1,4 @@\n # app configuration\n listen = 127.0.0.1\n-accept = localhost\n+accept = localhost, example.test\n log = info\n",
                "edits": [
                  {
                    "op": "replace",
                    "line": "accept = localhost",
                    "with": "accept = localhost, example.test"
                  }
                ]
              },
              "effect_class": "contained-mutation",
              "source": "patch-policy.toml#etc/app.conf",
              "hil_required": true,
              "rollback": "recreate-prepared-system",
              "digest": "sha256:1f03859e50efaf9b5471c6e9706ce8900a5e7713014c42213949523766520e5f"
            },
            {
              "index": 2,
              "action": {
                "kind": "verify"
              },
              "effect_class": "observation",
              "source": "verifier.toml",
              "hil_required": false,
              "rollback": "recreate-prepared-system",
              "digest": "sha256:6e746abc03351f51457067eb9a102e8b6268f24ed941362bacda4fa4af290107"
            }
          ],
          "digest": "sha256:54e162d850c8bbae8489f0101f0f9a69d49449c8db08acfc1cfd0fd35ede70cd"
        }"#]]
    .assert_eq(&pretty);
}

#[test]
fn digests_bind_every_field() {
    let vocab = vocabulary();
    let plan = compile(&vocab, &terms(HilMode::EachMutation), TEN_STEPS.as_bytes()).unwrap();
    assert_eq!(plan.verify_digests(), Ok(()));
    assert_eq!(plan.candidate_digest, Sha256Digest::of(TEN_STEPS));

    // A received plan round-trips and still verifies.
    let bytes = serde_json::to_vec(&plan).unwrap();
    let received: StampedPlan = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(received, plan);
    assert_eq!(received.verify_digests(), Ok(()));

    let mut tampered = plan.clone();
    tampered.steps[2].hil_required = false;
    assert_eq!(
        tampered.verify_digests(),
        Err(DigestMismatch::Step { index: 2 })
    );

    let mut tampered = plan.clone();
    tampered.steps[0].effect_class = EffectClass::ContainedMutation;
    tampered.steps[0].digest = tampered.steps[0].recompute_digest();
    assert_eq!(tampered.verify_digests(), Err(DigestMismatch::Plan));

    let mut tampered = plan.clone();
    tampered.diagnosis.push('!');
    assert_eq!(tampered.verify_digests(), Err(DigestMismatch::Plan));

    let mut tampered = plan;
    if let Action::Patch { target, .. } = &mut tampered.steps[4].action {
        *target = RelativeTarget::new("etc/app.conf").unwrap();
    }
    assert_eq!(
        tampered.verify_digests(),
        Err(DigestMismatch::Step { index: 4 })
    );
}

fn without_digest(v: &impl serde::Serialize) -> Value {
    let mut v = serde_json::to_value(v).unwrap();
    v.as_object_mut().unwrap().remove("digest").unwrap();
    v
}

#[test]
fn canonical_bytes_are_the_struct_without_its_digest() {
    let vocab = vocabulary();
    let plan = compile(&vocab, &terms(HilMode::EachStep), TEN_STEPS.as_bytes()).unwrap();
    for step in &plan.steps {
        let canonical: Value = serde_json::from_slice(&step.canonical_bytes()).unwrap();
        assert_eq!(canonical, without_digest(step));
        assert_eq!(step.digest, Sha256Digest::of(step.canonical_bytes()));
    }
    let canonical: Value = serde_json::from_slice(&plan.canonical_bytes()).unwrap();
    assert_eq!(canonical, without_digest(&plan));
    // Declaration order, byte for byte: the struct's own bytes are the canonical bytes with the
    // digest appended as the last field.
    let own = serde_json::to_vec(&plan).unwrap();
    let canonical = plan.canonical_bytes();
    assert_eq!(
        &own[..canonical.len() - 1],
        &canonical[..canonical.len() - 1]
    );
}

#[test]
fn compiling_is_deterministic() {
    let a = compile(
        &vocabulary(),
        &terms(HilMode::EachStep),
        TEN_STEPS.as_bytes(),
    )
    .unwrap();
    let b = compile(
        &vocabulary(),
        &terms(HilMode::EachStep),
        TEN_STEPS.as_bytes(),
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.canonical_bytes(), b.canonical_bytes());

    let mut other = terms(HilMode::EachStep);
    other.generation += 1;
    let c = compile(&vocabulary(), &other, TEN_STEPS.as_bytes()).unwrap();
    assert_ne!(a.digest, c.digest, "the generation is bound");
    assert_eq!(a.steps, c.steps);
}

#[test]
fn a_stamped_plan_with_an_unknown_field_is_refused() {
    let plan = compile(
        &vocabulary(),
        &terms(HilMode::EachStep),
        TEN_STEPS.as_bytes(),
    )
    .unwrap();
    let mut v = serde_json::to_value(&plan).unwrap();
    v["steps"][0]["approved"] = Value::Bool(true);
    let e = serde_json::from_value::<StampedPlan>(v).unwrap_err();
    assert!(e.to_string().contains("unknown field `approved`"), "{e}");
}

#[test]
fn a_stamped_step_tagged_by_a_variant_index_is_refused() {
    let plan = compile(
        &vocabulary(),
        &terms(HilMode::EachStep),
        TEN_STEPS.as_bytes(),
    )
    .unwrap();
    let at = |kind: &str| {
        plan.steps
            .iter()
            .position(|s| serde_json::to_value(s).unwrap()["action"]["kind"] == kind)
            .unwrap_or_else(|| panic!("TEN_STEPS has a {kind} step"))
    };
    let read = |v: Value| serde_json::from_slice::<StampedStep>(&serde_json::to_vec(&v).unwrap());

    // The untouched step reads back, so the refusals below are the tags' doing.
    let verify = serde_json::to_value(&plan.steps[at("verify")]).unwrap();
    assert_eq!(read(verify.clone()).unwrap(), plan.steps[at("verify")]);

    // serde's derive would read `3` as `Action`'s fourth variant, `verify`.
    let mut v = verify;
    v["action"]["kind"] = Value::from(3);
    let e = read(v).unwrap_err();
    assert!(e.to_string().contains("`kind` must be a string"), "{e}");

    // And `1` as `Edit`'s second, `append`.
    let mut v = plan
        .steps
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .find(|s| {
            s["action"]["edits"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["op"] == "append"))
        })
        .expect("TEN_STEPS appends a line");
    let edits = v["action"]["edits"].as_array_mut().unwrap();
    let append = edits.iter_mut().find(|e| e["op"] == "append").unwrap();
    append["op"] = Value::from(1);
    let e = read(v).unwrap_err();
    assert!(e.to_string().contains("`op` must be a string"), "{e}");
}
