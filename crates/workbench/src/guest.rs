//! One instance as the workbench reaches it: every effect goes through a [`Guest`].
//!
//! Production reaches the vm-broker's port (`services/workbench`); [`BrokerInstance`] is the
//! same broker as a library, for this crate's tests and benchmarks.

use std::future::Future;
use std::sync::Arc;

use reach_digest::Sha256Digest;
use reach_vm::agent::{ExecOutcome, FileStat};
use reach_vm::instance::Broker;
use reach_vm::profile::confined_argv;
use reach_vm::refusal::BrokerError;

/// What the broker or the guest refused, or why it could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GuestError {
    /// The broker's `area/reason` (`environment/not-ready`, `broker/profile-refused`, …), or
    /// `workbench/broker-unavailable`.
    pub code: String,
    /// Starts with `code`.
    pub message: String,
}

impl GuestError {
    pub fn new(code: &str, detail: impl std::fmt::Display) -> Self {
        Self {
            code: code.to_owned(),
            message: format!("{code}: {detail}"),
        }
    }

    pub fn code(&self) -> &str {
        &self.code
    }
}

impl From<BrokerError> for GuestError {
    fn from(e: BrokerError) -> Self {
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
        }
    }
}

/// One command's bounded result, exactly as the broker reported it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Observation {
    pub profile: String,
    pub args: Vec<String>,
    /// What the broker ran (the confinement wrapper included).
    pub argv: Vec<String>,
    /// `None`: timed out or killed by a signal.
    pub exit_code: Option<i64>,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    pub stdout_sha256: Sha256Digest,
    pub stdout_truncated: bool,
    pub timed_out: bool,
    pub elapsed_ms: u64,
}

/// Bounded output in a record: UTF-8, lossy (the digest is of the exact bytes).
fn lossy<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

impl Observation {
    pub fn from_outcome(profile: &str, args: &[String], o: ExecOutcome) -> Self {
        Self {
            profile: profile.to_owned(),
            args: args.to_vec(),
            argv: o.argv,
            exit_code: o.exit_code,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_sha256: o.stdout_sha256,
            stdout_truncated: o.stdout_truncated,
            timed_out: o.timed_out,
            elapsed_ms: o.elapsed.as_millis() as u64,
        }
    }

    /// Stdout as lines: UTF-8 (lossy), split at `\n`, each line's final `\r` dropped (a
    /// protocol transcript echoes CRLF lines), a final empty line dropped.
    pub fn lines(&self) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.stdout);
        let mut v: Vec<String> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
            .collect();
        if v.last().is_some_and(String::is_empty) {
            v.pop();
        }
        v
    }

    /// Whether the broker ran exactly `argv` (the profile's program, its fixed arguments and
    /// the step's) inside the read-only sandbox: the argv it reports is the one
    /// [`confined_argv`] builds, nothing more or less.
    pub fn ran_confined(&self, argv: &[String], timeout: std::time::Duration) -> bool {
        self.argv == confined_argv(argv, timeout)
    }
}

/// An instance, through its broker.
pub trait Guest {
    /// Runs a command profile of the instance's pack.
    fn exec(
        &self,
        profile: &str,
        args: &[String],
    ) -> impl Future<Output = Result<Observation, GuestError>> + Send;
    /// A whole file's bytes.
    fn read_file(&self, path: &str) -> impl Future<Output = Result<Vec<u8>, GuestError>> + Send;
    fn stat_file(&self, path: &str) -> impl Future<Output = Result<FileStat, GuestError>> + Send;
    /// Writes atomically with owner and mode; the digest of the bytes read back.
    fn write_file(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> impl Future<Output = Result<Sha256Digest, GuestError>> + Send;
    /// The instance's network as the broker observes it (`none`).
    fn network(&self) -> impl Future<Output = Result<String, GuestError>> + Send;
}

/// An instance of an in-process broker.
#[derive(Debug, Clone)]
pub struct BrokerInstance {
    pub broker: Arc<Broker>,
    pub id: String,
}

impl Guest for BrokerInstance {
    async fn exec(&self, profile: &str, args: &[String]) -> Result<Observation, GuestError> {
        let o = self.broker.exec(&self.id, profile, args).await?;
        Ok(Observation::from_outcome(profile, args, o))
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, GuestError> {
        Ok(self.broker.read_file(&self.id, path).await?.bytes)
    }

    async fn stat_file(&self, path: &str) -> Result<FileStat, GuestError> {
        Ok(self.broker.stat_file(&self.id, path).await?)
    }

    async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Sha256Digest, GuestError> {
        Ok(self
            .broker
            .write_file(&self.id, path, content, mode, uid, gid)
            .await?
            .sha256)
    }

    async fn network(&self) -> Result<String, GuestError> {
        Ok(self.broker.network(&self.id).await?.to_owned())
    }
}
