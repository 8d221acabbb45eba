//! [`Guest`] over the vm-broker's port: the only way the workbench reaches an instance.

use reach_digest::Sha256Digest;
use reach_proto::vm::v1 as pb;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_vm::agent::FileStat;
use reach_workbench_steps::{Guest, GuestError, Observation};
use tonic::transport::Channel;

#[derive(Debug, Clone)]
pub struct PortGuest {
    pub client: VmBrokerClient<Channel>,
    pub id: String,
}

/// A broker status: its message starts with the `area/reason` code.
pub fn guest_error(s: tonic::Status) -> GuestError {
    let msg = s.message();
    match msg.split_once(':') {
        Some((code, _)) if code.contains('/') && !code.contains(' ') => GuestError {
            code: code.to_owned(),
            message: msg.to_owned(),
        },
        _ => GuestError::new(
            "workbench/broker-unavailable",
            format!("{:?}: {msg}", s.code()),
        ),
    }
}

fn digest(s: &str) -> Result<Sha256Digest, GuestError> {
    s.parse()
        .map_err(|e| GuestError::new("workbench/broker-unavailable", format!("digest {s:?}: {e}")))
}

impl Guest for PortGuest {
    async fn exec(&self, profile: &str, args: &[String]) -> Result<Observation, GuestError> {
        let r = self
            .client
            .clone()
            .exec(pb::ExecRequest {
                instance_id: self.id.clone(),
                profile: profile.to_owned(),
                args: args.to_vec(),
            })
            .await
            .map_err(guest_error)?
            .into_inner();
        let stdout_sha256 = digest(&r.stdout_sha256)?;
        if stdout_sha256 != Sha256Digest::of(&r.stdout) {
            return Err(GuestError::new(
                "workbench/broker-unavailable",
                "the broker's stdout digest does not match its bytes",
            ));
        }
        Ok(Observation {
            profile: profile.to_owned(),
            args: args.to_vec(),
            argv: r.argv,
            exit_code: r.exited.then_some(r.exit_code),
            stdout: r.stdout,
            stderr: r.stderr,
            stdout_sha256,
            stdout_truncated: r.stdout_truncated,
            timed_out: r.timed_out,
            elapsed_ms: r.elapsed_ms,
        })
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, GuestError> {
        let r = self
            .client
            .clone()
            .read_file(pb::ReadFileRequest {
                instance_id: self.id.clone(),
                path: path.to_owned(),
            })
            .await
            .map_err(guest_error)?
            .into_inner();
        Ok(r.content)
    }

    async fn stat_file(&self, path: &str) -> Result<FileStat, GuestError> {
        let r = self
            .client
            .clone()
            .stat_file(pb::ReadFileRequest {
                instance_id: self.id.clone(),
                path: path.to_owned(),
            })
            .await
            .map_err(guest_error)?
            .into_inner();
        Ok(FileStat {
            regular: r.regular,
            uid: r.uid,
            gid: r.gid,
            mode: r.mode,
            size: r.size,
        })
    }

    async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Sha256Digest, GuestError> {
        let r = self
            .client
            .clone()
            .write_file(pb::WriteFileRequest {
                instance_id: self.id.clone(),
                path: path.to_owned(),
                content: content.to_vec(),
                mode,
                uid,
                gid,
            })
            .await
            .map_err(guest_error)?
            .into_inner();
        digest(&r.sha256)
    }

    async fn network(&self) -> Result<String, GuestError> {
        let r = self
            .client
            .clone()
            .status(pb::StatusRequest {
                instance_id: self.id.clone(),
            })
            .await
            .map_err(guest_error)?
            .into_inner();
        Ok(r.network)
    }
}
