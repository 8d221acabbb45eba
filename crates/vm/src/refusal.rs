//! Typed refusals and failures of the broker, with the seed's codes.

use reach_digest::Sha256Digest;

use crate::agent::AgentError;
use crate::journal::JournalError;
use crate::manifest::ManifestError;

/// Why the broker refused or failed a request. Refusals (`environment/*`, `broker/*`) happen
/// before anything is created; failures after are reported with the instance torn down.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// the image or prepared system differs from the pinned digest
    #[error("environment/image-mismatch: {0}")]
    ImageMismatch(String),
    /// the binding asks for a network; instances are contained (network none)
    #[error(
        "environment/not-contained: the binding asks for network {0:?}; the runtime network ceiling is none"
    )]
    NotContained(String),
    /// no pinned image has this digest
    #[error("environment/unknown-image: no pinned image {0}")]
    UnknownImage(Sha256Digest),
    /// memory or CPU beyond the broker's ceiling
    #[error("environment/ceiling-exceeded: {0}")]
    CeilingExceeded(String),
    /// the request's memory or CPUs differ from the prepared system's captured shape
    #[error("environment/shape-mismatch: {0}")]
    ShapeMismatch(String),
    /// no live instance has this id
    #[error("environment/unknown-instance: {0}")]
    UnknownInstance(String),
    /// the instance is not ready for guest operations
    #[error("environment/not-ready: instance {0} is {1}")]
    NotReady(String, &'static str),
    /// the command profile is not allow-listed, or its arguments do not fit it
    #[error("broker/profile-refused: {0}")]
    ProfileRefused(String),
    /// a guest path is not absolute and normal
    #[error("broker/path-refused: {0:?}")]
    PathRefused(String),
    /// the guest did not become ready in time
    #[error("environment/boot-timeout: instance {0} did not answer its guest agent")]
    BootTimeout(String),
    /// QEMU or qemu-img failed
    #[error("environment/host-failure: {0}")]
    Host(String),
    #[error("environment/guest-agent: {0}")]
    Agent(#[from] AgentError),
    /// the broker's own journal failed (its message keeps the stable code, as every other's)
    #[error("broker/journal: {0}")]
    Journal(#[from] JournalError),
}

impl BrokerError {
    /// The stable code before the colon.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ImageMismatch(_) => "environment/image-mismatch",
            Self::NotContained(_) => "environment/not-contained",
            Self::UnknownImage(_) => "environment/unknown-image",
            Self::CeilingExceeded(_) => "environment/ceiling-exceeded",
            Self::ShapeMismatch(_) => "environment/shape-mismatch",
            Self::UnknownInstance(_) => "environment/unknown-instance",
            Self::NotReady(..) => "environment/not-ready",
            Self::ProfileRefused(_) => "broker/profile-refused",
            Self::PathRefused(_) => "broker/path-refused",
            Self::BootTimeout(_) => "environment/boot-timeout",
            Self::Host(_) => "environment/host-failure",
            Self::Agent(_) => "environment/guest-agent",
            Self::Journal(_) => "broker/journal",
        }
    }
}

impl From<ManifestError> for BrokerError {
    fn from(e: ManifestError) -> Self {
        BrokerError::ImageMismatch(e.to_string())
    }
}
