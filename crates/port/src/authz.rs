//! The authorization layer: every RPC is checked by (verified peer principal, method path)
//! against the port table before its handler runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready, ready};
use reach_identity::Principal;

use crate::server::VerifiedPeer;

/// The port table row of one port: which principal may call which full method path
/// (`/reach.core.v1.Admission/Admit`).
#[derive(Clone, Debug, Default)]
pub struct PortPolicy {
    pub port: String,
    allowed: BTreeMap<Principal, BTreeSet<String>>,
}

impl PortPolicy {
    pub fn new(port: impl Into<String>) -> Self {
        Self {
            port: port.into(),
            allowed: BTreeMap::new(),
        }
    }

    /// Allows `caller` to call `method` (a full gRPC path).
    pub fn allow(mut self, caller: Principal, method: impl Into<String>) -> Self {
        self.allowed
            .entry(caller)
            .or_default()
            .insert(method.into());
        self
    }

    pub fn allows(&self, caller: &Principal, method: &str) -> bool {
        self.allowed.get(caller).is_some_and(|m| m.contains(method))
    }

    /// Every principal that may call anything here; nobody else completes a handshake.
    pub fn admitted(&self) -> BTreeSet<Principal> {
        self.allowed.keys().cloned().collect()
    }
}

/// Tower layer applying a [`PortPolicy`].
#[derive(Clone, Debug)]
pub struct AuthorizeLayer {
    policy: Arc<PortPolicy>,
}

impl AuthorizeLayer {
    pub fn new(policy: PortPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<S> tower_layer::Layer<S> for AuthorizeLayer {
    type Service = Authorize<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Authorize {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// The service [`AuthorizeLayer`] produces.
#[derive(Clone, Debug)]
pub struct Authorize<S> {
    inner: S,
    policy: Arc<PortPolicy>,
}

impl<S, B> tower_service::Service<http::Request<B>> for Authorize<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.uri().path();
        match req.extensions().get::<VerifiedPeer>() {
            Some(peer) if self.policy.allows(peer.principal(), method) => {
                Either::Left(self.inner.call(req))
            }
            peer => {
                let principal = peer.map(|p| p.principal().to_string());
                tracing::warn!(
                    port = %self.policy.port,
                    peer = principal.as_deref().unwrap_or("<unverified>"),
                    method,
                    "refused: method not allowed for this principal"
                );
                let status = tonic::Status::permission_denied(format!(
                    "{} may not call {method}",
                    principal.as_deref().unwrap_or("an unverified peer")
                ));
                Either::Right(ready(Ok(status.into_http())))
            }
        }
    }
}
