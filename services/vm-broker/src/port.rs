//! The `vm-broker.instances` port: reach.vm.v1.VmBroker over the broker, converted by hand.
//!
//! Refusals map to gRPC codes in one place ([`status`]); the message starts with the seed's
//! code (`environment/image-mismatch: …`) so a caller can match it exactly.

use std::sync::Arc;

use reach_proto::vm::v1 as pb;
use reach_proto::vm::v1::vm_broker_server::{VmBroker, VmBrokerServer};
use reach_taskpack::TrustedKeys;
use reach_vm::agent::ExecOutcome;
use reach_vm::instance::{Broker, CreateRequest, NetworkRequest};
use reach_vm::profile::ProfileSet;
use reach_vm::refusal::BrokerError;
use reach_vm::settings::Settings;
use tonic::{Request, Response, Status};

#[derive(Debug, Clone)]
pub struct Port(Arc<Broker>, Arc<Settings>, Arc<TrustedKeys>);

pub fn into_server(broker: Broker, settings: Settings, keys: TrustedKeys) -> VmBrokerServer<Port> {
    VmBrokerServer::new(Port(Arc::new(broker), Arc::new(settings), Arc::new(keys)))
}

/// The command profiles of a create's pack: verified here against the broker's own trusted
/// keys, and only for the pack's own prepared system.
fn pack_profiles(
    port: &Port,
    archive: &[u8],
    image: &reach_digest::Sha256Digest,
) -> Result<Option<Arc<ProfileSet>>, Status> {
    if archive.is_empty() {
        return Ok(None);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let pack = reach_taskpack::conform(archive, &port.2, None, now)
        .map_err(|e| Status::failed_precondition(format!("{}: {e}", e.code())))?;
    let ours = pack.facts().image_variants.iter().any(|v| {
        port.1
            .find_prepared(&v.image_spec_digest, &v.prepared_spec_digest)
            .is_some_and(|f| f.prepared_digest == *image)
    });
    if !ours {
        return Err(status(BrokerError::ImageMismatch(format!(
            "{image} is not a prepared system of the pack {} the broker holds",
            pack.name()
        ))));
    }
    Ok(Some(Arc::new(pack.sources().commands.broker_profiles())))
}

/// The one mapping from broker errors to gRPC status.
fn status(e: BrokerError) -> Status {
    let msg = e.to_string();
    match e {
        BrokerError::ImageMismatch(_)
        | BrokerError::NotContained(_)
        | BrokerError::CeilingExceeded(_)
        | BrokerError::ShapeMismatch(_)
        | BrokerError::NotReady(..) => Status::failed_precondition(msg),
        BrokerError::UnknownImage(_) | BrokerError::UnknownInstance(_) => Status::not_found(msg),
        BrokerError::ProfileRefused(_) | BrokerError::PathRefused(_) => {
            Status::invalid_argument(msg)
        }
        BrokerError::BootTimeout(_) => Status::deadline_exceeded(msg),
        BrokerError::Host(_) | BrokerError::Agent(_) | BrokerError::Journal(_) => {
            Status::internal(msg)
        }
    }
}

fn exec_response(o: ExecOutcome) -> pb::ExecResponse {
    pb::ExecResponse {
        argv: o.argv,
        exited: o.exit_code.is_some(),
        exit_code: o.exit_code.unwrap_or(-1),
        signal: o.signal.unwrap_or(0),
        stdout_sha256: o.stdout_sha256.to_string(),
        stderr_sha256: o.stderr_sha256.to_string(),
        stdout: o.stdout,
        stderr: o.stderr,
        stdout_truncated: o.stdout_truncated,
        stderr_truncated: o.stderr_truncated,
        timed_out: o.timed_out,
        elapsed_ms: o.elapsed.as_millis() as u64,
    }
}

#[tonic::async_trait]
impl VmBroker for Port {
    async fn create_instance(
        &self,
        req: Request<pb::CreateInstanceRequest>,
    ) -> Result<Response<pb::CreateInstanceResponse>, Status> {
        let r = req.into_inner();
        let image = r
            .image_digest
            .parse()
            .map_err(|e| Status::invalid_argument(format!("image_digest: {e}")))?;
        let profiles = pack_profiles(self, &r.pack_archive, &image)?;
        let network = match r.network.as_str() {
            "none" | "" => NetworkRequest::None,
            other => NetworkRequest::Other(other.to_owned()),
        };
        let c = self
            .0
            .create(&CreateRequest {
                image,
                network,
                memory_mib: r.memory_mib,
                cpus: r.cpus,
                wait_ready: r.wait_ready,
                profiles,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(pb::CreateInstanceResponse {
            instance_id: c.id,
            accel: c.accel.as_str().to_owned(),
            state: c.state.as_str().to_owned(),
            booted_after_ms: c.booted_after.as_millis() as u64,
            ready_after_ms: c.ready_after.map(|d| d.as_millis() as u64).unwrap_or(0),
        }))
    }

    async fn exec(
        &self,
        req: Request<pb::ExecRequest>,
    ) -> Result<Response<pb::ExecResponse>, Status> {
        let r = req.into_inner();
        let o = self
            .0
            .exec(&r.instance_id, &r.profile, &r.args)
            .await
            .map_err(status)?;
        Ok(Response::new(exec_response(o)))
    }

    async fn stat_file(
        &self,
        req: Request<pb::ReadFileRequest>,
    ) -> Result<Response<pb::StatFileResponse>, Status> {
        let r = req.into_inner();
        let f = self
            .0
            .stat_file(&r.instance_id, &r.path)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::StatFileResponse {
            path: r.path,
            regular: f.regular,
            uid: f.uid,
            gid: f.gid,
            mode: f.mode,
            size: f.size,
        }))
    }

    async fn read_file(
        &self,
        req: Request<pb::ReadFileRequest>,
    ) -> Result<Response<pb::ReadFileResponse>, Status> {
        let r = req.into_inner();
        let f = self
            .0
            .read_file(&r.instance_id, &r.path)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ReadFileResponse {
            path: f.path,
            sha256: f.sha256.to_string(),
            content: f.bytes,
        }))
    }

    async fn write_file(
        &self,
        req: Request<pb::WriteFileRequest>,
    ) -> Result<Response<pb::WriteFileResponse>, Status> {
        let r = req.into_inner();
        let w = self
            .0
            .write_file(&r.instance_id, &r.path, &r.content, r.mode, r.uid, r.gid)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::WriteFileResponse {
            path: w.path,
            sha256: w.sha256.to_string(),
            bytes: w.bytes,
            mode: w.mode,
            uid: w.uid,
            gid: w.gid,
        }))
    }

    async fn restart_service(
        &self,
        req: Request<pb::RestartServiceRequest>,
    ) -> Result<Response<pb::ExecResponse>, Status> {
        let r = req.into_inner();
        let o = self
            .0
            .restart_service(&r.instance_id, &r.unit)
            .await
            .map_err(status)?;
        Ok(Response::new(exec_response(o)))
    }

    async fn destroy(
        &self,
        req: Request<pb::DestroyRequest>,
    ) -> Result<Response<pb::DestroyResponse>, Status> {
        let r = req.into_inner();
        let c = self.0.destroy(&r.instance_id).await.map_err(status)?;
        Ok(Response::new(pb::DestroyResponse {
            instance_id: c.instance_id,
            outcome: c.outcome.as_str().to_owned(),
            process_gone: c.process_gone,
            overlay_deleted: c.overlay_deleted,
            sockets_deleted: c.sockets_deleted,
            killed: c.killed,
            stop_ms: c.stop_ms as u64,
            total_ms: c.total_ms as u64,
            at_unix_ms: c.at.0,
            recovered: c.recovered,
        }))
    }

    async fn status(
        &self,
        req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let r = req.into_inner();
        let rec = self
            .0
            .journal()
            .get(&r.instance_id)
            .await
            .map_err(|e| match e {
                reach_vm::journal::JournalError::Unknown(_) => {
                    status(BrokerError::UnknownInstance(r.instance_id.clone()))
                }
                other => status(other.into()),
            })?;
        let network = match rec.state {
            reach_vm::journal::InstanceState::Ready => {
                self.0.network(&rec.id).await.map_err(status)?.to_owned()
            }
            _ => String::new(),
        };
        Ok(Response::new(pb::StatusResponse {
            instance_id: rec.id,
            state: rec.state.as_str().to_owned(),
            image_digest: rec.image_digest.to_string(),
            accel: self.0.accel().as_str().to_owned(),
            network,
        }))
    }

    async fn find_prepared(
        &self,
        req: Request<pb::FindPreparedRequest>,
    ) -> Result<Response<pb::FindPreparedResponse>, Status> {
        let r = req.into_inner();
        let parse = |what: &str, s: &str| {
            s.parse::<reach_digest::Sha256Digest>()
                .map_err(|e| Status::invalid_argument(format!("{what}: {e}")))
        };
        let image_spec = parse("image_spec_digest", &r.image_spec_digest)?;
        let prepared_spec = parse("prepared_spec_digest", &r.prepared_spec_digest)?;
        let settings = self.1.clone();
        // Manifest reads only, but on the filesystem: off the async workers.
        let found = tokio::task::spawn_blocking(move || {
            settings.find_prepared(&image_spec, &prepared_spec)
        })
        .await
        .map_err(|e| Status::internal(format!("lookup: {e}")))?;
        let cache = self
            .1
            .cache
            .as_ref()
            .map(|c| c.display().to_string())
            .unwrap_or_default();
        Ok(Response::new(match found {
            Some(f) => pb::FindPreparedResponse {
                found: true,
                image_digest: f.image_digest.to_string(),
                prepared_digest: f.prepared_digest.to_string(),
                pinned: f.pinned,
                cache,
            },
            None => pb::FindPreparedResponse {
                cache,
                ..Default::default()
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use reach_vm::agent::AgentError;
    use reach_vm::journal::JournalError;
    use tonic::Code;

    use super::*;

    /// Every broker error becomes the gRPC code its kind calls for, and its message starts
    /// with the stable code a caller matches on.
    #[test]
    fn each_broker_error_maps_to_its_status_and_keeps_its_code() {
        let digest = || {
            format!("sha256:{}", "ab".repeat(32))
                .parse()
                .expect("a digest")
        };
        let cases = [
            (
                BrokerError::ImageMismatch("x".into()),
                Code::FailedPrecondition,
            ),
            (
                BrokerError::NotContained("isolated".into()),
                Code::FailedPrecondition,
            ),
            (
                BrokerError::CeilingExceeded("x".into()),
                Code::FailedPrecondition,
            ),
            (
                BrokerError::ShapeMismatch("x".into()),
                Code::FailedPrecondition,
            ),
            (
                BrokerError::NotReady("i".into(), "booted"),
                Code::FailedPrecondition,
            ),
            (BrokerError::UnknownImage(digest()), Code::NotFound),
            (BrokerError::UnknownInstance("i".into()), Code::NotFound),
            (
                BrokerError::ProfileRefused("x".into()),
                Code::InvalidArgument,
            ),
            (BrokerError::PathRefused("x".into()), Code::InvalidArgument),
            (BrokerError::BootTimeout("i".into()), Code::DeadlineExceeded),
            (BrokerError::Host("x".into()), Code::Internal),
            (BrokerError::Agent(AgentError::Timeout), Code::Internal),
        ];
        for (e, want) in cases {
            let code = e.code();
            let text = e.to_string();
            let s = status(e);
            assert_eq!(s.code(), want, "{code}");
            assert_eq!(s.message(), text, "{code}");
            assert!(
                s.message().starts_with(&format!("{code}: ")),
                "{code}: {}",
                s.message()
            );
        }
    }

    /// A journal failure is internal, and its message starts with its code like every other.
    #[test]
    fn a_journal_failure_is_internal() {
        let e = BrokerError::Journal(JournalError::Unknown("i".into()));
        assert_eq!(e.code(), "broker/journal");
        let s = status(e);
        assert_eq!(s.code(), Code::Internal);
        assert!(
            s.message().starts_with("broker/journal: ")
                && s.message().ends_with("instance i has no record"),
            "{}",
            s.message()
        );
    }
}
