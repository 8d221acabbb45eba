//! The HTTPS side of one physical attempt (feature `net`): destination admission, the pinned
//! connection, the request with `A2A-Version: 1.0`, and the bounded return.
//!
//! Opening (admission, dial, TLS handshake) is separate from transmitting, so the driver can
//! prove "nothing was written" for every failure before [`PeerClient::transmit`], and mark the
//! task SENDING only once the connection is ready.
//!
//! **Invariant:** this module never retries; one [`Redeemed`] decision carries one request.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Method, Request};
use reach_bounded::{Bounds, fetch};
use reach_destination::{
    Admission, Destination, Dialer, PinnedConnector, PinnedStream, Purpose, Resolver, TcpDialer,
};
use reach_digest::Sha256Digest;

use crate::decision::{Attempt, AttemptKind, DecisionAuthority, DecisionId, Redeemed, redeem};
use crate::refusal::IntercomRefusal;
use crate::transport::{Transmitted, Transport};
use crate::wire::{A2A_VERSION, A2A_VERSION_HEADER};

pub use crate::decision::PURPOSE;

/// A bearer credential for the peer, read from the egress role's own secret file. Its value
/// never appears in Debug output.
#[derive(Clone)]
pub struct PeerCredential(String);

impl PeerCredential {
    /// Wraps a token; refused when empty or not a visible-ASCII header value.
    pub fn new(token: String) -> Result<Self, IntercomRefusal> {
        if token.is_empty() || token.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(IntercomRefusal::InvalidSpec("peer credential"));
        }
        Ok(PeerCredential(token))
    }
}

impl std::fmt::Debug for PeerCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerCredential(<redacted>)")
    }
}

/// How to reach one enrolled peer.
#[derive(Debug)]
pub struct PeerConfig<R, D = TcpDialer> {
    /// The peer's A2A JSON-RPC endpoint, `https://host[:port]/path`.
    pub url: String,
    pub admission: Arc<Admission<R>>,
    pub connector: PinnedConnector<D>,
    pub credential: Option<PeerCredential>,
    /// Bounds of every return ([`a2a_bounds`] by default).
    pub bounds: Bounds,
}

/// Bounds of an A2A return: JSON only, status read for every code (the classification needs
/// them), a task of at most 1 MiB, answered within 20 s.
pub fn a2a_bounds() -> Bounds {
    Bounds {
        allowed_statuses: (200..600).collect(),
        allowed_content_types: vec!["application/json".into(), "application/a2a+json".into()],
        max_wire_bytes: 1024 * 1024,
        max_expanded_bytes: 1024 * 1024,
        max_head_time: Duration::from_secs(20),
        max_stream_time: Duration::from_secs(30),
        max_idle_time: Duration::from_secs(10),
        max_json_depth: 32,
        max_json_items: 50_000,
        ..Bounds::default()
    }
}

/// A client bound to one admitted peer endpoint.
#[derive(Debug)]
pub struct PeerClient<R, D = TcpDialer> {
    config: PeerConfig<R, D>,
    destination: Destination,
}

/// A ready connection and the request it will carry, nothing written yet.
#[derive(Debug)]
pub struct Prepared {
    stream: PinnedStream,
    request: Request<Bytes>,
    redeemed: Redeemed,
}

impl Prepared {
    pub fn redeemed(&self) -> &Redeemed {
        &self.redeemed
    }
}

impl<R: Resolver, D: Dialer> PeerClient<R, D> {
    /// Binds the client to `config.url`, which must be a canonical HTTPS destination.
    pub fn new(config: PeerConfig<R, D>) -> Result<Self, IntercomRefusal> {
        let purpose = Purpose::new(PURPOSE).map_err(|e| IntercomRefusal::Peer(e.to_string()))?;
        let destination = Destination::parse(&config.url, purpose)
            .map_err(|e| IntercomRefusal::Peer(e.code().to_owned()))?;
        Ok(PeerClient {
            config,
            destination,
        })
    }

    /// The canonical endpoint URL every decision binds.
    pub fn url(&self) -> String {
        self.destination.to_string()
    }

    /// The connector (tests read its dialer).
    pub fn connector(&self) -> &PinnedConnector<D> {
        &self.config.connector
    }

    /// Admits the endpoint, connects to the pinned address (TLS complete) and builds the
    /// request for `body`. Every failure here is before any request byte.
    pub async fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> Result<Prepared, IntercomRefusal> {
        let not_sent = |code: &str| IntercomRefusal::NotSent {
            code: code.to_owned(),
        };
        // The decision must bind exactly these bytes to exactly this endpoint.
        if redeemed.attempt.payload_digest != Sha256Digest::of(&body)
            || redeemed.attempt.destination != self.url()
        {
            return Err(not_sent("intercom/decision-mismatch"));
        }
        let admitted = self
            .config
            .admission
            .admit(self.destination.clone())
            .await
            .map_err(|e| not_sent(e.code()))?;
        let mut builder = admitted
            .request(Method::POST)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .header(A2A_VERSION_HEADER, A2A_VERSION);
        if let Some(c) = &self.config.credential {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", c.0))
                .map_err(|_| not_sent("intercom/credential"))?;
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        let request = builder
            .body(Bytes::from(body))
            .map_err(|_| not_sent("intercom/request-build"))?;
        admitted
            .check_request(&request)
            .map_err(|e| not_sent(e.code()))?;
        let stream = self
            .config
            .connector
            .connect(&admitted)
            .await
            .map_err(|e| not_sent(e.code()))?;
        Ok(Prepared {
            stream,
            request,
            redeemed,
        })
    }

    /// Writes the request and reads the bounded return. From the first call on, bytes may
    /// reach the peer.
    pub async fn transmit(&self, prepared: Prepared) -> Transmitted {
        match fetch(prepared.stream, prepared.request, &self.config.bounds).await {
            Ok(r) => {
                let digest = Sha256Digest::of(&r.body);
                Transmitted::Answered {
                    status: r.status.as_u16(),
                    body: r.body.to_vec(),
                    digest,
                }
            }
            Err(e) => Transmitted::Ambiguous { code: e.code() },
        }
    }
}

impl<R: Resolver, D: Dialer> Transport for PeerClient<R, D> {
    type Ready = Prepared;

    fn url(&self) -> String {
        PeerClient::url(self)
    }

    async fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> Result<Prepared, IntercomRefusal> {
        PeerClient::prepare(self, redeemed, body).await
    }

    async fn transmit(&self, ready: Prepared) -> Transmitted {
        PeerClient::transmit(self, ready).await
    }
}

/// The egress side of one attempt when core drives the task over its ports: redeem
/// `decision` (through `authority`, which redeems at ward with this endpoint and the digest of
/// `body`) and carry exactly `body` once. Returns [`Transmitted::NotSent`] for every failure
/// before the first byte (redemption refused, endpoint not admitted, connection failed).
pub async fn carry<R: Resolver, D: Dialer, A: DecisionAuthority>(
    client: &PeerClient<R, D>,
    authority: &A,
    decision: DecisionId,
    attempt_id: &str,
    body: Vec<u8>,
) -> Transmitted {
    let attempt = Attempt {
        task_id: attempt_id.to_owned(),
        kind: AttemptKind::Send,
        destination: PeerClient::url(client),
        payload_digest: Sha256Digest::of(&body),
    };
    let redeemed = match redeem(authority, decision, attempt).await {
        Ok(r) => r,
        Err(e) => {
            return Transmitted::NotSent {
                code: e.code().to_owned(),
            };
        }
    };
    match PeerClient::prepare(client, redeemed, body).await {
        Ok(ready) => PeerClient::transmit(client, ready).await,
        Err(IntercomRefusal::NotSent { code }) => Transmitted::NotSent { code },
        Err(e) => Transmitted::NotSent {
            code: e.code().to_owned(),
        },
    }
}
