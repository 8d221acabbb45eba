//! The workbench on the real body (issue #28): core's certificate drives an experiment
//! through `workbench.steps`, the workbench reaches the guest only through
//! `vm-broker.instances` and redeems every step's grant at `ward.authority`, all separate
//! processes behind mTLS. The pack's prepared system comes from the real
//! `reach image prepare --pack` (shared VM image cache), and core's readiness reports the
//! binding runnable from it. Grants that are forged, reused, for another step, another
//! instance or a stale generation execute nothing (asserted at the guest through the
//! broker); the repair passes the verifier; a grant outstanding when its loop stops, replayed,
//! executes nothing (a fresh experiment needs a grant of its own); another role is refused at
//! the handshake.

use reach_plan::Action;
use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client;
use reach_proto::workbench::v1 as pb;
use reach_tests::workbench::{
    Grant, code, execute, guest_digest, hil_filing, mint, operator_ward, start, try_mint, ward,
    workbench,
};
use reach_tests::{call, refused_at_handshake};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_drives_a_repair_through_workbench_ward_and_the_broker() {
    let f = start().await;
    let body = &f.body;

    // Readiness from the real `reach image prepare --pack` output: runnable.
    let mut packs = f.install_and_bind().await;
    let ready = packs
        .bind_status(core_pb::BindStatusRequest {
            pack: f.pack.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ready.readiness, "runnable", "{ready:?}");
    assert_eq!(ready.prepared_digest, f.prepared);

    let mut wb = workbench(body, "core");
    let create = |network: &str, image: &str| pb::CreateExperimentRequest {
        experiment_id: "exp-1".into(),
        pack_archive: f.archive.clone(),
        pack_generation: 1,
        variant: String::new(),
        image_digest: image.to_owned(),
        network: network.to_owned(),
    };
    let e = wb
        .create_experiment(create("isolated", &f.prepared))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "environment/not-contained", "{e:?}");
    // The pack's base image is pinned in the broker, but it is not the pack's prepared system.
    let e = wb
        .create_experiment(create("none", &f.image))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "environment/image-mismatch", "{e:?}");
    let created = wb
        .create_experiment(create("none", &f.prepared))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e:?}\n{}\n{}",
                body.log("workbench"),
                body.log("vm-broker")
            )
        })
        .into_inner();
    assert!(created.snapshot_observations > 0);
    let inst = created.instance_id.as_str();
    let plan = &f.plan;
    let patch_at = plan
        .steps
        .iter()
        .position(|s| matches!(s.action, Action::Patch { .. }))
        .unwrap();
    let Action::Patch { target, .. } = &plan.steps[patch_at].action else {
        unreachable!()
    };
    let target = format!("/{}", target.as_str());
    let baseline = guest_digest(body, inst, &target).await;
    let mut ward = ward(body);
    let mut operator = operator_ward(body);
    // Core stated the pack's standing to ward as it bound it: active at 1, each-mutation.
    let g = |step, instance, generation| Grant {
        experiment: "exp-1",
        instance,
        plan,
        step,
        generation,
    };

    // Step 0 with its own grant: executed once; the same grant again is used.
    let grant0 = mint(&mut ward, &f.pack, g(0, inst, 1)).await;
    let r = wb
        .execute_step(execute("exp-1", inst, plan, 0, grant0.clone()))
        .await
        .unwrap()
        .into_inner();
    assert!(r.succeeded && r.effect_class == "observation", "{r:?}");
    assert_eq!(r.step_digest, plan.steps[0].digest.to_string());
    let e = wb
        .execute_step(execute("exp-1", inst, plan, 0, grant0))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "grant/used", "{e:?}");

    // The patch is a mutation: no grant before the operator approves exactly that step.
    let e = try_mint(&mut ward, &f.pack, g(patch_at, inst, 1))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "hil/missing", "{e:?}");
    type Ward = ward_client::WardClient<tonic::transport::Channel>;
    let approve = async |ward: &mut Ward, operator: &mut Ward, step: usize| {
        let h = ward
            .file_hil_request(hil_filing(&g(step, inst, 1), &f.pack))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(h.state, "pending");
        operator
            .answer_hil_request(ward_pb::AnswerHilRequestRequest {
                id: h.id,
                request_digest: h.digest,
                approve: true,
                reason: String::new(),
            })
            .await
            .unwrap();
    };
    let filed = ward
        .file_hil_request(hil_filing(&g(patch_at, inst, 1), &f.pack))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(filed.rollback, "recreate-prepared-system");
    assert!(filed.diff.contains("example.test"), "{}", filed.diff);
    let e = try_mint(&mut ward, &f.pack, g(patch_at, inst, 1))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "hil/pending", "{e:?}");
    approve(&mut ward, &mut operator, patch_at).await;

    // The patch step with grants that must execute nothing.
    let good = mint(&mut ward, &f.pack, g(patch_at, inst, 1)).await;
    let mut forged = good.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    let other_step = mint(&mut ward, &f.pack, g(0, inst, 1)).await;
    // The approval names its instance: none is minted for another.
    let e = try_mint(&mut ward, &f.pack, g(patch_at, "vm-elsewhere", 1))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "hil/missing", "{e:?}");
    for (grant, want) in [(forged, "grant/forged"), (other_step, "grant/other-step")] {
        let e = wb
            .execute_step(execute("exp-1", inst, plan, patch_at, grant))
            .await
            .unwrap_err();
        assert_eq!(code(&e), want, "{e:?}");
        assert_eq!(guest_digest(body, inst, &target).await, baseline, "{want}");
    }
    let other_instance = mint(&mut ward, &f.pack, g(0, "vm-elsewhere", 1)).await;
    let e = wb
        .execute_step(execute("exp-1", inst, plan, 0, other_instance))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "grant/other-instance", "{e:?}");

    // The repair, each step with its own grant: the verifier passes all seven.
    for i in patch_at..plan.steps.len() {
        let grant = if i == patch_at {
            good.clone()
        } else {
            if plan.steps[i].hil_required {
                approve(&mut ward, &mut operator, i).await;
            }
            mint(&mut ward, &f.pack, g(i, inst, 1)).await
        };
        let r = wb
            .execute_step(execute("exp-1", inst, plan, i, grant))
            .await
            .unwrap_or_else(|e| panic!("step {i}: {e:?}\n{}", body.log("workbench")))
            .into_inner();
        let record: serde_json::Value = serde_json::from_slice(&r.record).unwrap();
        assert!(r.succeeded, "step {i}: {record:#}");
    }
    assert_ne!(guest_digest(body, inst, &target).await, baseline);

    // A stale generation: the pack was revoked and reactivated after the grant was minted.
    let stale = mint(&mut ward, &f.pack, g(0, inst, 1)).await;
    packs
        .revoke_pack(core_pb::RevokePackRequest {
            name: f.pack.clone(),
            reason: "test".into(),
        })
        .await
        .unwrap();
    let s = packs
        .activate_pack(core_pb::ActivatePackRequest {
            name: f.pack.clone(),
            version: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.generation, 3);
    let e = wb
        .execute_step(execute("exp-1", inst, plan, 0, stale))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "package/generation-stale", "{e:?}");

    // A grant still outstanding when its loop stops (minted at the current generation, never
    // redeemed) gives that loop no authority back once the instance is destroyed.
    let plan3 = f.plan_at(3);
    let g3 = |experiment, instance| Grant {
        experiment,
        instance,
        plan: &plan3,
        step: 0,
        generation: 3,
    };
    let outstanding = mint(&mut ward, &f.pack, g3("exp-1", inst)).await;

    let d = wb
        .destroy_experiment(pb::DestroyExperimentRequest {
            experiment_id: "exp-1".into(),
            instance_id: created.instance_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(d.outcome, "destroyed");
    assert!(d.process_gone && d.overlay_deleted && d.sockets_deleted);
    // A second destroy (recovery after a crash asks again) gets the broker's recorded
    // confirmation, and nothing is destroyed twice; an experiment nobody knows, with no
    // instance named, is refused.
    let again = wb
        .destroy_experiment(pb::DestroyExperimentRequest {
            experiment_id: "exp-1".into(),
            instance_id: created.instance_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (again.outcome.as_str(), again.at_unix_ms),
        ("destroyed", d.at_unix_ms)
    );
    let e = wb
        .destroy_experiment(pb::DestroyExperimentRequest {
            experiment_id: "exp-unknown".into(),
            instance_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "workbench/unknown-experiment", "{e:?}");

    // Replayed after the stop, the outstanding grant executes nothing: not on the destroyed
    // instance, and not on a fresh experiment's new instance, which needs a grant of its own.
    let e = wb
        .execute_step(execute("exp-1", inst, &plan3, 0, outstanding.clone()))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "workbench/unknown-experiment", "{e:?}");
    let fresh = wb
        .create_experiment(pb::CreateExperimentRequest {
            experiment_id: "exp-2".into(),
            pack_archive: f.archive.clone(),
            pack_generation: 3,
            variant: String::new(),
            image_digest: f.prepared.clone(),
            network: "none".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let inst2 = fresh.instance_id.as_str();
    let e = wb
        .execute_step(execute("exp-2", inst2, &plan3, 0, outstanding))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "grant/other-experiment", "{e:?}");
    let own = mint(&mut ward, &f.pack, g3("exp-2", inst2)).await;
    let r = wb
        .execute_step(execute("exp-2", inst2, &plan3, 0, own))
        .await
        .unwrap()
        .into_inner();
    assert!(r.succeeded);
    wb.destroy_experiment(pb::DestroyExperimentRequest {
        experiment_id: "exp-2".into(),
        instance_id: fresh.instance_id.clone(),
    })
    .await
    .unwrap();

    // Only core calls the workbench: another role is refused at the handshake, the operator
    // (admitted to nothing of it) too.
    for role in ["egress-provider", "vm-broker"] {
        let ch = reach_port::connect_lazy(
            body.socket("workbench.steps"),
            &body.material(role),
            body.manifest.principal("workbench"),
        );
        let c = call(ch, "/reach.workbench.v1.Workbench/ExecuteStep").await;
        assert!(refused_at_handshake(c), "{role} got {c:?}");
    }
    f.body.stop().await;
}
