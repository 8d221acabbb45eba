//! The one error enum of the bounded-return boundary. Every variant is, for core, a dependency
//! failure: the response was closed and nothing further was parsed.

use reach_destination::DestinationError;

use crate::bounds::BoundViolation;

/// Reading a return failed or was cut.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReturnError {
    /// The return crossed a named bound.
    #[error(transparent)]
    Bound(#[from] BoundViolation),
    /// The request did not match its admitted destination and was not sent.
    #[error("request refused before sending: {0}")]
    Request(#[from] DestinationError),
    /// The peer broke HTTP, gzip, SSE or UTF-8 rules, or the connection failed.
    #[error("return protocol failure: {0}")]
    Protocol(String),
}

impl ReturnError {
    /// The stable code: `bounded/<bound>`, the destination code, or `bounded/protocol`.
    pub fn code(&self) -> String {
        match self {
            ReturnError::Bound(v) => format!("bounded/{}", v.bound),
            ReturnError::Request(e) => e.code().to_owned(),
            ReturnError::Protocol(_) => "bounded/protocol".to_owned(),
        }
    }

    /// The violation, if a bound was crossed.
    pub fn violation(&self) -> Option<&BoundViolation> {
        match self {
            ReturnError::Bound(v) => Some(v),
            _ => None,
        }
    }
}
