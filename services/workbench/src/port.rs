//! The `workbench.steps` port: reach.workbench.v1.Workbench over `crates/workbench`.
//!
//! Every refusal's status message starts with its `area/reason` code. A step runs only
//! after ward redeemed its grant for exactly the digest this port recomputed from the
//! step's bytes; a refused redeem executes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reach_proto::vm::v1 as vm;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_proto::ward::v1 as ward;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::workbench::v1 as pb;
use reach_proto::workbench::v1::workbench_server::{Workbench as WorkbenchPort, WorkbenchServer};
use reach_taskpack::TrustedKeys;
use reach_taskpack::source::Snapshot;
use reach_workbench_steps::{Refusal, Snapshots, Workbench, step, verifier};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::guest::{PortGuest, guest_error};

/// One experiment's instance and the pack it runs.
#[derive(Debug)]
struct Experiment {
    instance_id: String,
    bench: Arc<Workbench>,
    instance_start: Arc<Snapshots>,
}

#[derive(Debug, Clone)]
pub struct Port {
    keys: Arc<TrustedKeys>,
    broker: VmBrokerClient<Channel>,
    ward: WardClient<Channel>,
    experiments: Arc<Mutex<HashMap<String, Arc<Experiment>>>>,
}

pub fn into_server(keys: TrustedKeys, broker: Channel, ward: Channel) -> WorkbenchServer<Port> {
    WorkbenchServer::new(Port {
        keys: Arc::new(keys),
        broker: VmBrokerClient::new(broker),
        ward: WardClient::new(ward),
        experiments: Arc::default(),
    })
}

/// The one mapping from a workbench refusal to a gRPC status.
fn status(e: Refusal) -> Status {
    let msg = e.to_string();
    match &e {
        Refusal::StepDigest { .. } | Refusal::StepMalformed { .. } => Status::invalid_argument(msg),
        Refusal::Guest(g) if g.code == "workbench/broker-unavailable" => Status::unavailable(msg),
        _ => Status::failed_precondition(msg),
    }
}

fn unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Port {
    fn experiment(&self, id: &str, instance: &str) -> Result<Arc<Experiment>, Status> {
        let e = self
            .experiments
            .lock()
            .expect("lock")
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("workbench/unknown-experiment: {id}")))?;
        if e.instance_id != instance {
            return Err(Status::failed_precondition(format!(
                "workbench/other-instance: experiment {id} runs in another instance"
            )));
        }
        Ok(e)
    }
}

#[tonic::async_trait]
impl WorkbenchPort for Port {
    async fn create_experiment(
        &self,
        req: Request<pb::CreateExperimentRequest>,
    ) -> Result<Response<pb::CreateExperimentResponse>, Status> {
        let r = req.into_inner();
        if r.network != "none" {
            return Err(Status::failed_precondition(format!(
                "environment/not-contained: the runtime network must be none, not {:?}",
                r.network
            )));
        }
        if r.experiment_id.is_empty()
            || self
                .experiments
                .lock()
                .expect("lock")
                .contains_key(&r.experiment_id)
        {
            return Err(Status::already_exists(format!(
                "workbench/experiment-exists: {:?}",
                r.experiment_id
            )));
        }
        let pack = reach_taskpack::conform(&r.pack_archive, &self.keys, None, unix_s())
            .map_err(|e| Status::failed_precondition(format!("{}: {e}", e.code())))?;
        let variant = (!r.variant.is_empty()).then_some(r.variant.as_str());
        let bench = Workbench::new(&pack, r.pack_generation, variant).ok_or_else(|| {
            Status::invalid_argument(format!(
                "environment/image-mismatch: no image variant {:?}",
                r.variant
            ))
        })?;
        let c = self
            .broker
            .clone()
            .create_instance(vm::CreateInstanceRequest {
                image_digest: r.image_digest,
                network: r.network,
                memory_mib: 0,
                cpus: 0,
                wait_ready: true,
                pack_archive: r.pack_archive,
            })
            .await
            .map_err(|s| status(Refusal::Guest(guest_error(s))))?
            .into_inner();
        let guest = PortGuest {
            client: self.broker.clone(),
            id: c.instance_id.clone(),
        };
        let snaps = match verifier::snapshot(&bench, &guest, Snapshot::InstanceStart).await {
            Ok(s) => s,
            Err(e) => {
                let _ = self
                    .broker
                    .clone()
                    .destroy(vm::DestroyRequest {
                        instance_id: c.instance_id.clone(),
                    })
                    .await;
                return Err(status(e));
            }
        };
        let n = snaps.len() as u32;
        self.experiments.lock().expect("lock").insert(
            r.experiment_id,
            Arc::new(Experiment {
                instance_id: c.instance_id.clone(),
                bench: Arc::new(bench),
                instance_start: Arc::new(snaps),
            }),
        );
        Ok(Response::new(pb::CreateExperimentResponse {
            instance_id: c.instance_id,
            accel: c.accel,
            ready_after_ms: c.ready_after_ms,
            snapshot_observations: n,
        }))
    }

    async fn execute_step(
        &self,
        req: Request<pb::ExecuteStepRequest>,
    ) -> Result<Response<pb::ExecuteStepResponse>, Status> {
        let r = req.into_inner();
        let exp = self.experiment(&r.experiment_id, &r.instance_id)?;
        let step = step::verified_step(&r.step).map_err(status)?;
        // The fence: ward redeems the grant for exactly what this port holds and computed.
        self.ward
            .clone()
            .redeem_step_grant(ward::RedeemStepGrantRequest {
                grant: r.grant,
                experiment_id: r.experiment_id.clone(),
                instance_id: r.instance_id.clone(),
                plan_digest: r.plan_digest,
                step_index: step.index as u32,
                step_digest: step.digest.to_string(),
                pack_name: exp.bench.pack().to_owned(),
                pack_generation: exp.bench.generation(),
            })
            .await?;
        let guest = PortGuest {
            client: self.broker.clone(),
            id: exp.instance_id.clone(),
        };
        let rec = step::execute(&exp.bench, &guest, &step, &exp.instance_start)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ExecuteStepResponse {
            index: rec.index as u32,
            step_digest: rec.digest.to_string(),
            effect_class: match rec.effect_class {
                reach_plan::EffectClass::Observation => "observation",
                reach_plan::EffectClass::ContainedMutation => "contained-mutation",
            }
            .to_owned(),
            succeeded: rec.succeeded(),
            record: rec.to_json(),
        }))
    }

    async fn destroy_experiment(
        &self,
        req: Request<pb::DestroyExperimentRequest>,
    ) -> Result<Response<pb::DestroyExperimentResponse>, Status> {
        let r = req.into_inner();
        // Known: its own instance (an empty id names it). Unknown (workbench restarted, or a
        // second destroy): the named instance, which the broker destroys or answers with its
        // recorded confirmation.
        let known = self
            .experiments
            .lock()
            .expect("lock")
            .get(&r.experiment_id)
            .map(|e| e.instance_id.clone());
        let instance_id = match (known, r.instance_id.is_empty()) {
            (Some(own), true) => own,
            (Some(own), false) if own == r.instance_id => own,
            (Some(_), false) => {
                return Err(Status::failed_precondition(format!(
                    "workbench/other-instance: experiment {} runs in another instance",
                    r.experiment_id
                )));
            }
            (None, true) => {
                return Err(Status::not_found(format!(
                    "workbench/unknown-experiment: {}",
                    r.experiment_id
                )));
            }
            (None, false) => r.instance_id,
        };
        let d = self
            .broker
            .clone()
            .destroy(vm::DestroyRequest { instance_id })
            .await?
            .into_inner();
        self.experiments
            .lock()
            .expect("lock")
            .remove(&r.experiment_id);
        Ok(Response::new(pb::DestroyExperimentResponse {
            instance_id: d.instance_id,
            outcome: d.outcome,
            process_gone: d.process_gone,
            overlay_deleted: d.overlay_deleted,
            sockets_deleted: d.sockets_deleted,
            at_unix_ms: d.at_unix_ms,
        }))
    }
}
