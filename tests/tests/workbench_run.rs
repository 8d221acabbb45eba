//! The coordinator step on real guests (issues #29 and #37): `reach_experiment` under core's
//! certificate runs the pack's stamped repair on a fresh instance, asking the operator for
//! every mutation (each-mutation binding) — the operator is a person at `reach hil watch`,
//! answering with `reach hil approve|deny`, the real CLI on ward's port. A denial ends the
//! experiment at that step with `hil/denied` and nothing after it runs; a pause between steps
//! stops the next one even after its approval (`local-binding/paused`); after a resume a fresh
//! run passes the verifier; every instance is destroyed with the broker's confirmation.

use std::time::Duration;

use reach_experiment::{End, Execution, Quiet};
use reach_plan::EffectClass;
use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::workbench::{Verdict, operator, operator_ward, start};

fn assert_destroyed(x: &Execution) {
    let d = x.destruction.as_ref().unwrap_or_else(|| panic!("{x:?}"));
    assert!(d.confirmed(), "{d:?}");
    assert_eq!(Some(&d.instance_id), x.instance_id.as_ref());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_answers_each_mutation_and_a_denial_ends_the_experiment() {
    let f = start().await;
    let body = &f.body;
    // Core states the standing to ward itself: no test stands in for it.
    let mut packs = f.install_and_bind().await;
    let plan = &f.plan;
    let mutations: Vec<usize> = plan
        .steps
        .iter()
        .filter(|s| s.effect_class == EffectClass::ContainedMutation)
        .map(|s| s.index)
        .collect();
    assert!(!mutations.is_empty());
    // Each-mutation asks exactly the mutations; the binding never changed a step's class.
    for s in &plan.steps {
        assert_eq!(
            s.hil_required,
            s.effect_class == EffectClass::ContainedMutation
        );
    }
    let mut experiment = f.coordinator();
    let setup = |id: &str| f.setup(id);

    // The operator denies the first change shown; nothing after it runs.
    let denier = operator(body, &f.pack, |_| Verdict::Deny("not on this instance"));
    let x = experiment.run(&setup("exp-deny"), plan, &mut Quiet).await;
    denier.abort();
    let first = mutations[0];
    assert_eq!(
        x.end,
        End::Refused {
            index: first,
            code: "hil/denied".into()
        },
        "{x:?}\n{}",
        body.log("workbench")
    );
    assert_eq!(
        x.steps.iter().map(|s| s.index).collect::<Vec<_>>(),
        (0..first).collect::<Vec<_>>(),
        "only the observations before the denied step ran"
    );
    assert!(
        x.steps
            .iter()
            .all(|s| s.succeeded && s.hil_request.is_none())
    );
    assert_destroyed(&x);

    // Paused between steps: the operator pauses at the second change and approves it anyway;
    // the step does not run (ward refuses its grant) and the run ends with the seed's code.
    assert!(mutations.len() >= 2, "the repair has a patch and a restart");
    let second = mutations[1];
    let pauser = operator(body, &f.pack, move |block| {
        if block.contains(&format!("step      {second} of plan")) {
            Verdict::PauseThenApprove
        } else {
            Verdict::Approve
        }
    });
    let x = experiment.run(&setup("exp-pause"), plan, &mut Quiet).await;
    pauser.abort();
    assert_eq!(
        x.end,
        End::Refused {
            index: second,
            code: "local-binding/paused".into()
        },
        "{x:?}"
    );
    assert_eq!(x.steps.len(), second, "{x:?}");
    assert_destroyed(&x);
    // Resume needs no reactivation; the next run is a fresh instance with fresh answers.
    packs
        .resume_binding(core_pb::BindingRef {
            pack: f.pack.clone(),
        })
        .await
        .unwrap();

    // Approved, one answer per mutation: the repair runs and the verifier passes.
    let approver = operator(body, &f.pack, |block| {
        assert!(block.contains("contained-mutation"), "{block}");
        Verdict::Approve
    });
    let x = experiment.run(&setup("exp-repair"), plan, &mut Quiet).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    approver.abort();
    assert_eq!(x.end, End::Completed, "{x:?}\n{}", body.log("workbench"));
    assert_eq!(x.steps.len(), plan.steps.len());
    let asked: Vec<usize> = x
        .steps
        .iter()
        .filter(|s| s.hil_request.is_some())
        .map(|s| s.index)
        .collect();
    assert_eq!(asked, mutations);
    let verdict: serde_json::Value =
        serde_json::from_slice(&x.steps.last().unwrap().record).unwrap();
    assert!(x.steps.last().unwrap().succeeded, "{verdict:#}");
    assert_destroyed(&x);
    // Ward holds exactly one request per mutation for the run, each approved.
    let all = operator_ward(body)
        .list_hil_requests(ward_pb::ListHilRequestsRequest { all: true })
        .await
        .unwrap()
        .into_inner()
        .requests;
    let repair: Vec<_> = all
        .iter()
        .filter(|h| h.experiment_id == "exp-repair")
        .collect();
    assert_eq!(repair.len(), mutations.len(), "{repair:?}");
    assert!(repair.iter().all(|h| h.state == "approved"), "{repair:?}");
    f.body.stop().await;
}
