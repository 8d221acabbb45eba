//! The coordinator step on real guests (issues #29 and #37): `reach_experiment` under core's
//! certificate runs the pack's stamped repair on a fresh instance, asking the operator for
//! every mutation (each-mutation binding) — the operator is a person at `reach hil watch`,
//! answering with `reach hil approve|deny`, the real CLI on ward's port. A denial ends the
//! experiment at that step with `hil/denied` and nothing after it runs; a pause between steps
//! stops the next one even after its approval (`local-binding/paused`); after a resume a fresh
//! run passes the verifier; every instance is destroyed with the broker's confirmation.

use std::time::Duration;

use reach_experiment::{End, Execution, Journal, Mark, Quiet};
use reach_plan::EffectClass;
use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::workbench::{Verdict, operator, operator_ward, start};

/// Every mark the coordinator journals, in order (what core writes to the Phylactery).
#[derive(Default)]
struct Marks(Vec<String>);

impl Journal for Marks {
    fn mark<'a>(
        &'a mut self,
        mark: Mark<'a>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send + 'a {
        self.0.push(match mark {
            Mark::Created { .. } => "created".to_owned(),
            Mark::Granted { index } => format!("granted {index}"),
            Mark::Started { index, .. } => format!("started {index}"),
            Mark::Ran {
                index, succeeded, ..
            } => format!("ran {index} {succeeded}"),
            Mark::Refused { index, code } => format!("refused {index} {code}"),
            Mark::Unknown { index, code } => format!("unknown {index} {code}"),
        });
        std::future::ready(Ok(()))
    }
}

/// A ledger that cannot make step `index`'s STARTED mark durable.
struct FailsToStart(usize, Marks);

impl Journal for FailsToStart {
    fn mark<'a>(
        &'a mut self,
        mark: Mark<'a>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send + 'a {
        let refuse = matches!(mark, Mark::Started { index, .. } if index == self.0);
        // Marks records on the call; its future is already ready.
        drop(self.1.mark(mark));
        std::future::ready(if refuse {
            Err("journal/unavailable".to_owned())
        } else {
            Ok(())
        })
    }
}

/// The marks of steps `0..n` each granted, started and run, in that order, after the
/// instance was created.
fn ran_in_order(n: usize) -> Vec<String> {
    let mut m = vec!["created".to_owned()];
    for i in 0..n {
        m.extend([
            format!("granted {i}"),
            format!("started {i}"),
            format!("ran {i} true"),
        ]);
    }
    m
}

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
    let mut marks = Marks::default();
    let x = experiment
        .run(&setup("exp-deny"), plan, &mut Quiet, &mut marks)
        .await;
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
    // Each step was journaled granted, then started, before it ran; the denied one was
    // never granted, so never started.
    assert_eq!(marks.0, ran_in_order(first));
    assert!(
        x.steps
            .iter()
            .all(|s| s.succeeded && s.hil_request.is_none())
    );
    assert_destroyed(&x);

    // A step whose STARTED mark is not durable is never sent: the experiment ends there with
    // the journal's code, and no step came back.
    let mut failing = FailsToStart(0, Marks::default());
    let x = experiment
        .run(&setup("exp-nojournal"), plan, &mut Quiet, &mut failing)
        .await;
    assert_eq!(
        x.end,
        End::Refused {
            index: 0,
            code: "journal/unavailable".into()
        },
        "{x:?}"
    );
    assert!(x.steps.is_empty(), "{x:?}");
    assert_eq!(failing.1.0, ["created", "granted 0", "started 0"]);
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
    let x = experiment
        .run(&setup("exp-pause"), plan, &mut Quiet, &mut Marks::default())
        .await;
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
    let mut marks = Marks::default();
    let x = experiment
        .run(&setup("exp-repair"), plan, &mut Quiet, &mut marks)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    approver.abort();
    assert_eq!(x.end, End::Completed, "{x:?}\n{}", body.log("workbench"));
    assert_eq!(x.steps.len(), plan.steps.len());
    assert_eq!(marks.0, ran_in_order(plan.steps.len()));
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
