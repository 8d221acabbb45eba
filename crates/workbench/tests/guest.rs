//! The workbench against real guests (QEMU, TCG unless KVM boots) of the preparable
//! reference pack's prepared system: the verifier at the baseline and after repairs, the
//! patch policy at the owner, enforced observation, and the verifier's mutation check.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use reach_digest::Sha256Digest;
use reach_plan::{Action, Candidate, EffectClass, StampedStep, Step};
use reach_taskpack::source::{FixtureKind, RefusalCase};
use reach_vm::profile::CommandProfile;
use reach_workbench_steps::guest::Guest;
use reach_workbench_steps::{
    BrokerInstance, Refusal, StepOutcome, Workbench, patch, step, verifier,
};

use common::*;

/// Every check of the seven, by name, and whether it passed.
fn verdicts(r: &reach_workbench_steps::VerifierReport) -> BTreeMap<&str, bool> {
    r.checks
        .iter()
        .map(|c| (c.name.as_str(), c.passed))
        .collect()
}

/// Runs every step of `plan` in order and returns the verifier's report (the last step).
async fn run_plan(
    bench: &Workbench,
    g: &BrokerInstance,
    snaps: &reach_workbench_steps::Snapshots,
    plan: &reach_plan::StampedPlan,
) -> reach_workbench_steps::VerifierReport {
    let mut last = None;
    for s in &plan.steps {
        let bytes = serde_json::to_vec(s).unwrap();
        let s = step::verified_step(&bytes).unwrap();
        let rec = step::execute(bench, g, &s, snaps)
            .await
            .unwrap_or_else(|e| panic!("step {}: {e}", s.index));
        if let StepOutcome::Verified(v) = rec.outcome {
            last = Some(v);
        } else {
            assert!(rec.succeeded(), "step {}: {:?}", s.index, rec.outcome);
        }
    }
    last.expect("the plan ends with verify")
}

/// The digests of every file the patch policy admits, as the guest holds them.
async fn policy_digests(bench: &Workbench, g: &BrokerInstance) -> Vec<(String, Sha256Digest)> {
    let mut v = Vec::new();
    for t in bench.vocabulary().patch_policy.targets() {
        let path = patch::guest_path(t);
        v.push((
            path.clone(),
            Sha256Digest::of(g.read_file(&path).await.unwrap()),
        ));
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_fails_exactly_delivery_and_the_repair_passes_all_seven() {
    let run = tempfile::tempdir().unwrap();
    let broker = common::broker(run.path()).await;
    let bench = bench();

    let (g, snaps) = instance(&broker, &bench).await;
    let base = verifier::run(&bench, &g, &snaps).await.unwrap();
    assert_eq!(
        base.failed(),
        ["local-delivery"],
        "{:#?}",
        base.checks
            .iter()
            .map(|c| (&c.name, &c.reason))
            .collect::<Vec<_>>()
    );
    assert_eq!(verdicts(&base).len(), 7);
    broker.destroy(&g.id).await.unwrap();

    let (g, snaps) = instance(&broker, &bench).await;
    let repaired = run_plan(&bench, &g, &snaps, &plan("repair")).await;
    assert!(
        repaired.passed(),
        "{:#?}",
        repaired
            .checks
            .iter()
            .map(|c| (&c.name, &c.reason))
            .collect::<Vec<_>>()
    );
    assert_eq!(verdicts(&repaired).values().filter(|p| **p).count(), 7);

    // The guest's witness of restarts, read after each verifier: the baseline shows the
    // prepared system's own starts, the repair (one restart) exactly one more, and a restart
    // applied a second time would show as a second.
    let starts = |r: &reach_workbench_steps::VerifierReport| -> Vec<String> {
        let o = r.unit_starts.as_ref().expect("the pack has service-starts");
        assert_eq!(o.exit_code, Some(0), "{o:?}");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let (before, after) = (starts(&base), starts(&repaired));
    assert!(!before.is_empty());
    assert_eq!(after.len(), before.len() + 1, "{before:?} → {after:?}");
    assert!(after.starts_with(&before), "{before:?} → {after:?}");
    let restart = plan("repair")
        .steps
        .into_iter()
        .find(|s| matches!(s.action, Action::Restart { .. }))
        .unwrap();
    let again = step::execute(&bench, &g, &restart, &snaps).await.unwrap();
    assert!(again.succeeded(), "{:?}", again.outcome);
    let twice = reach_workbench_steps::restart::starts(&bench, &g)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&twice.stdout).lines().count(),
        before.len() + 2
    );
    broker.destroy(&g.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_relay_repairs_pass_delivery_and_fail_relay_refused() {
    let run = tempfile::tempdir().unwrap();
    let broker = common::broker(run.path()).await;
    let bench = bench();
    // The fixture's two open relays that also make the domain local (a wider mynetworks,
    // and permit_inet_interfaces): both admitted by the patch policy byte for byte.
    for plan in [plan("open-relay"), plan("repair-open-relay")] {
        let (g, snaps) = instance(&broker, &bench).await;
        let r = run_plan(&bench, &g, &snaps, &plan).await;
        let v = verdicts(&r);
        assert!(v["local-delivery"], "{:#?}", r.check("local-delivery"));
        assert_eq!(
            r.failed(),
            ["relay-refused"],
            "{:#?}",
            r.checks
                .iter()
                .map(|c| (&c.name, &c.reason))
                .collect::<Vec<_>>()
        );
        broker.destroy(&g.id).await.unwrap();
    }
}

/// A patch step as a compiler that skipped the policy would stamp it: the baseline's digest
/// as the pre-image, its own digest recomputed so it verifies.
fn forged_patch(
    target: reach_plan::RelativeTarget,
    edits: Vec<reach_plan::Edit>,
    pre: Sha256Digest,
) -> StampedStep {
    let mut s = StampedStep {
        index: 1,
        action: Action::Patch {
            target,
            pre_digest: pre,
            post_digest: pre,
            diff: String::new(),
            edits,
        },
        effect_class: EffectClass::ContainedMutation,
        source: "test".into(),
        hil_required: true,
        rollback: "recreate-prepared-system".into(),
        digest: Sha256Digest::of(b""),
    };
    s.digest = s.recompute_digest();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_policy_and_drifted_patches_are_refused_at_the_owner_and_write_nothing() {
    let run = tempfile::tempdir().unwrap();
    let broker = common::broker(run.path()).await;
    let bench = bench();
    let (g, snaps) = instance(&broker, &bench).await;
    let before = policy_digests(&bench, &g).await;

    // Every patch of the pack's patch-policy refusal fixtures that is representable at
    // ingress (an absolute target is not: the candidate parser refuses it).
    let mut reached = 0;
    for (file, f) in &pack().sources().fixtures {
        if f.case != RefusalCase::PatchPolicy || f.kind != FixtureKind::Compile {
            continue;
        }
        let Ok(c) = Candidate::parse(f.candidate.as_ref().unwrap().as_bytes()) else {
            continue;
        };
        for s in c.steps {
            let Step::Patch { target, edits } = s else {
                continue;
            };
            let path = patch::guest_path(&target);
            let pre = match g.read_file(&path).await {
                Ok(b) => Sha256Digest::of(b),
                Err(_) => Sha256Digest::of(b""),
            };
            let forged = forged_patch(target, edits, pre);
            let e = step::execute(&bench, &g, &forged, &snaps)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "workbench/patch-outside-policy", "{file}: {e}");
            reached += 1;
        }
    }
    assert!(reached >= 4, "{reached} outside-policy patches");
    assert_eq!(policy_digests(&bench, &g).await, before);

    // The repair's own patch, against a pre-image that drifted in the guest.
    let repair = plan("repair");
    let patch_step = repair
        .steps
        .iter()
        .find(|s| matches!(s.action, Action::Patch { .. }))
        .unwrap();
    let Action::Patch { target, .. } = &patch_step.action else {
        unreachable!()
    };
    let path = patch::guest_path(target);
    let mut drifted = g.read_file(&path).await.unwrap();
    drifted.extend_from_slice(b"# drifted\n");
    let st = g.stat_file(&path).await.unwrap();
    let drifted_digest = g
        .write_file(&path, &drifted, st.mode, st.uid, st.gid)
        .await
        .unwrap();
    let e = step::execute(&bench, &g, patch_step, &snaps)
        .await
        .unwrap_err();
    assert!(matches!(e, Refusal::PreImageDrifted { .. }), "{e}");
    assert_eq!(e.code(), "workbench/pre-image-drifted");
    assert_eq!(
        Sha256Digest::of(g.read_file(&path).await.unwrap()),
        drifted_digest
    );

    // A step whose bytes do not match its digest executes nothing.
    let mut tampered = repair.steps[1].clone();
    tampered.index = 0;
    let e = step::execute(&bench, &g, &tampered, &snaps)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "workbench/step-digest-mismatch");
    broker.destroy(&g.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observation_cannot_write_and_a_mislabelled_verifier_profile_is_caught() {
    let run = tempfile::tempdir().unwrap();
    let broker = common::broker(run.path()).await;
    let bench = bench();

    // The pack's profiles plus two of the test's: the same write, as an observation
    // (confined) and as a contained mutation (bare).
    let mut profiles = bench.broker_profiles();
    let write = ["/usr/bin/touch", "/etc/reach-observation-write"];
    profiles.insert(CommandProfile::new("write-observed", &write, 0).read_only());
    profiles.insert(CommandProfile::new("write-mutation", &write, 0));
    let (g, _) = instance_with(&broker, &bench, profiles).await;
    let o = g.exec("write-observed", &[]).await.unwrap();
    assert_ne!(o.exit_code, Some(0), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(g.stat_file("/etc/reach-observation-write").await.is_err());
    // The same program unconfined writes: the refusal above is the sandbox's.
    let o = g.exec("write-mutation", &[]).await.unwrap();
    assert_eq!(o.exit_code, Some(0), "{o:?}");
    assert!(
        g.stat_file("/etc/reach-observation-write")
            .await
            .unwrap()
            .regular
    );
    broker.destroy(&g.id).await.unwrap();

    // A verifier profile labelled `observation` that asks the service manager to restart
    // the pack's service (the pack's own restart argv): the sandbox cannot stop a request
    // over the manager's socket, and the verifier's no-mutation check catches it.
    let mut sources = pack().sources().clone();
    let restart = sources.commands.get("service-restart").unwrap().clone();
    let mut mislabelled = restart.clone();
    mislabelled.name = "mislabelled-probe".into();
    mislabelled.mode = Some(EffectClass::Observation);
    mislabelled.verifier_only = true;
    sources.commands.profiles.push(mislabelled);
    let arg = restart.args[0].one_of[0].clone();
    let check = sources
        .verifier
        .checks
        .iter_mut()
        .find(|c| c.name == "relay-refused")
        .unwrap();
    check.profiles.push("mislabelled-probe".into());
    let mut probe = check.observe[0].clone();
    probe.profile = "mislabelled-probe".into();
    probe.args = vec![arg];
    probe.exit = 0;
    probe.only_lines.clear();
    probe.lines.clear();
    check.observe.insert(0, probe);
    let bad = Workbench::from_sources("mislabelled", 1, &sources, pack().vocabulary());
    let (g, snaps) = instance(&broker, &bad).await;
    let e = verifier::run(&bad, &g, &snaps).await.unwrap_err();
    assert_eq!(e.code(), "verifier/mutation-not-admitted", "{e}");

    // A verifier without one of the seven checks runs nothing.
    let mut sources = pack().sources().clone();
    sources.verifier.checks.retain(|c| c.name != "network-none");
    let lacking = Workbench::from_sources("lacking", 1, &sources, pack().vocabulary());
    let e = verifier::run(&lacking, &g, &snaps).await.unwrap_err();
    assert_eq!(e.code(), "verifier/check-missing", "{e}");

    // A check whose every attempt overruns its bound (zero: no attempt can meet it, on any
    // accelerator): retried once, then verifier/timeout.
    let mut sources = pack().sources().clone();
    sources.verifier.checks[0].timeout_s = 0;
    sources.verifier.checks[0].retries = Some(1);
    let hasty = Workbench::from_sources("hasty", 1, &sources, pack().vocabulary());
    let e = verifier::run(&hasty, &g, &snaps).await.unwrap_err();
    assert!(
        matches!(&e, Refusal::VerifierTimeout { attempts: 2, .. }),
        "{e}"
    );
    assert_eq!(e.code(), "verifier/timeout");
    broker.destroy(&g.id).await.unwrap();
    drop(Arc::clone(&broker));
}
