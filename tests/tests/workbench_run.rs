//! The coordinator step on real guests (issues #29 and #37): `reach_experiment` under core's
//! certificate runs the pack's stamped repair on a fresh instance, asking the operator for
//! every mutation (each-mutation binding) — the operator is a person at `reach hil watch`,
//! answering with `reach hil approve|deny`, the real CLI on ward's port. A denial ends the
//! experiment at that step with `hil/denied` and nothing after it runs; a pause between steps
//! stops the next one even after its approval (`local-binding/paused`), and so do a revocation
//! (`package/revoked`) and a reactivation (`package/generation-stale`); after a resume a fresh
//! run passes the verifier; every instance is destroyed with the broker's confirmation. What a
//! refused step would have changed is read in the guest before destruction, with the pack's
//! own witnesses.

use std::time::Duration;

use reach_experiment::{End, Execution, Journal, Mark, Progress, Quiet};
use reach_plan::EffectClass;
use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::workbench::{Fixture, Verdict, operator, operator_ward, start, witness};

/// Reads the pack's witnesses in the guest (its verifier's snapshot observations: state
/// digests, the service's invocation) when step `at`'s HIL request is filed, before that step
/// can run, and again when the experiment ends, before its instance is destroyed.
struct Witness<'f> {
    f: &'f Fixture,
    at: usize,
    before: Option<Vec<Vec<u8>>>,
    after: Option<Vec<Vec<u8>>>,
}

impl<'f> Witness<'f> {
    fn at(f: &'f Fixture, at: usize) -> Self {
        Self {
            f,
            at,
            before: None,
            after: None,
        }
    }

    /// Whether the guest read the same at both moments.
    fn unchanged(&self) -> bool {
        let before = self.before.as_ref().expect("step's request filed");
        before == self.after.as_ref().expect("the experiment ended")
    }

    fn read(&self, instance: &str) -> Vec<Vec<u8>> {
        // The coordinator calls its progress synchronously: the step waits for this read.
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(witness(
                &self.f.body,
                instance,
                &self.f.witnesses,
            ))
        })
    }
}

impl Progress for Witness<'_> {
    fn hil_filed(&mut self, view: &ward_pb::HilRequestView) {
        if view.step_index as usize == self.at {
            self.before = Some(self.read(&view.instance_id));
        }
    }

    fn ending(&mut self, instance_id: &str, _end: &End) {
        self.after = Some(self.read(instance_id));
    }
}

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
    let first = mutations[0];
    let mut marks = Marks::default();
    let mut seen = Witness::at(&f, first);
    let x = experiment
        .run(&setup("exp-deny"), plan, &mut seen, &mut marks)
        .await;
    denier.abort();
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
    // In the guest, right before destruction: the denied patch changed nothing.
    assert!(seen.unchanged(), "the guest changed after the denial");
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
    let mut seen = Witness::at(&f, second);
    let x = experiment
        .run(&setup("exp-pause"), plan, &mut seen, &mut Marks::default())
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
    // In the guest: the restart stopped by the pause did not run.
    assert!(seen.unchanged(), "the guest changed after the pause");
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
    let mut seen = Witness::at(&f, second);
    let x = experiment
        .run(&setup("exp-repair"), plan, &mut seen, &mut marks)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    approver.abort();
    assert_eq!(x.end, End::Completed, "{x:?}\n{}", body.log("workbench"));
    assert_eq!(x.steps.len(), plan.steps.len());
    assert_eq!(marks.0, ran_in_order(plan.steps.len()));
    // The witness sees an approved restart: the same reading would have caught the pause's.
    assert!(
        !seen.unchanged(),
        "the restart left no trace in the witnesses"
    );
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

    // Revoked mid-run: the operator revokes the pack as the first change is shown, then
    // approves it; the change does not run (in the guest) and the run ends with the blocker.
    let revoker = operator(body, &f.pack, |_| Verdict::RevokeThenApprove);
    let mut seen = Witness::at(&f, first);
    let x = experiment
        .run(&setup("exp-revoke"), plan, &mut seen, &mut Marks::default())
        .await;
    revoker.abort();
    assert_eq!(
        x.end,
        End::Refused {
            index: first,
            code: "package/revoked".into()
        },
        "{x:?}"
    );
    assert_eq!(x.steps.len(), first, "{x:?}");
    assert!(seen.unchanged(), "the guest changed after the revocation");
    assert_destroyed(&x);

    // Reactivated mid-run: active again (generation 3), a repair stamped at 3 starts; at its
    // first change the operator revokes and reactivates (generation 5) and approves. The step
    // was stamped under 3: it does not run.
    let status = packs
        .activate_pack(core_pb::ActivatePackRequest {
            name: f.pack.clone(),
            version: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.generation, 3, "{status:?}");
    let plan3 = f.plan_at(3);
    let reactivator = operator(body, &f.pack, |_| Verdict::ReactivateThenApprove);
    let mut seen = Witness::at(&f, first);
    let x = experiment
        .run(
            &setup("exp-reactivate"),
            &plan3,
            &mut seen,
            &mut Marks::default(),
        )
        .await;
    reactivator.abort();
    assert_eq!(
        x.end,
        End::Refused {
            index: first,
            code: "package/generation-stale".into()
        },
        "{x:?}\n{}",
        body.log("ward")
    );
    assert_eq!(
        x.steps.len(),
        first,
        "the observations stamped at 3 ran first: {x:?}"
    );
    assert!(seen.unchanged(), "the guest changed after the reactivation");
    assert_destroyed(&x);
    f.body.stop().await;
}
