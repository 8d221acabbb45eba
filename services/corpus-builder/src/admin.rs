//! The admin port: status and admission of an exact revision.

use std::sync::Arc;

use reach_corpus::{CorpusStore, Freshness, NoProgress, Policy};
use reach_proto::corpus::v1 as pb;
use reach_proto::corpus::v1::corpus_admin_server::{CorpusAdmin, CorpusAdminServer};
use tonic::{Request, Response, Status};

use crate::embedded::Source;

#[derive(Debug, Clone)]
pub struct Builder {
    store: Arc<CorpusStore>,
    source: Arc<Source>,
}

impl Builder {
    pub fn new(store: CorpusStore, source: Source) -> Self {
        Self {
            store: Arc::new(store),
            source: Arc::new(source),
        }
    }

    pub fn into_server(self) -> CorpusAdminServer<Self> {
        CorpusAdminServer::new(self)
    }

    /// Builds and activates the embedded docs unless that exact revision is active and fresh.
    pub async fn ensure_embedded_active(&self) -> anyhow::Result<()> {
        let status = self.store.status();
        let current = status
            .active
            .as_ref()
            .and_then(|s| s.revision.archive_digest);
        if current == Some(self.source.digest) && matches!(status.freshness, Freshness::Fresh) {
            return Ok(());
        }
        self.build()
            .await
            .map_err(|e| anyhow::anyhow!("default corpus did not build: {e}"))?;
        Ok(())
    }

    async fn build(&self) -> Result<String, String> {
        let (store, source) = (self.store.clone(), self.source.clone());
        tokio::task::spawn_blocking(move || {
            store
                .refresh_archive(&source.spec, &source.bytes, &Policy::default(), &mut NoProgress)
                .map(|s| {
                    tracing::info!(snapshot = %s.snapshot_id, files = s.files_accepted, "corpus snapshot activated");
                    s.snapshot_id
                })
                .map_err(|e| format!("{}: {e}", e.code()))
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

#[tonic::async_trait]
impl CorpusAdmin for Builder {
    async fn status(
        &self,
        _r: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let s = self.store.status();
        let (admitted, active, fresh_until) = match &s.active {
            Some(a) => (
                a.revision.citation_rev.clone(),
                a.snapshot_id.clone(),
                (a.fresh_until.unix_timestamp_nanos() / 1_000_000).max(0) as u64,
            ),
            None => Default::default(),
        };
        let last_failure = match (&s.freshness, &s.last_failure) {
            (Freshness::Degraded { reason }, _) => format!("degraded: {reason}"),
            (Freshness::Expired, _) => "expired: past fresh_until".into(),
            (_, Some(f)) => format!("{}: {}", f.code, f.reason),
            _ => String::new(),
        };
        Ok(Response::new(pb::StatusResponse {
            sources: vec![pb::SourceStatus {
                source: self.source.spec.name.clone(),
                admitted_revision: admitted,
                candidate_revision: s.candidate.map(|c| c.commit).unwrap_or_default(),
                active_snapshot_id: active,
                fresh_until_ms: fresh_until,
                last_failure,
            }],
        }))
    }

    async fn admit(
        &self,
        r: Request<pb::AdmitRequest>,
    ) -> Result<Response<pb::AdmitResponse>, Status> {
        let r = r.into_inner();
        if r.source != self.source.spec.name {
            return Ok(Response::new(pb::AdmitResponse {
                refusal_code: "corpus/unknown-source".into(),
                ..Default::default()
            }));
        }
        // The embedded archive is immutable: the only admissible revision is its own digest.
        if r.revision != self.source.digest.hex() && r.revision != self.source.digest.to_string() {
            return Ok(Response::new(pb::AdmitResponse {
                refusal_code: "corpus/revision-not-published".into(),
                ..Default::default()
            }));
        }
        match self.build().await {
            Ok(snapshot_id) => Ok(Response::new(pb::AdmitResponse {
                snapshot_id,
                refusal_code: String::new(),
            })),
            Err(code) => Ok(Response::new(pb::AdmitResponse {
                snapshot_id: String::new(),
                refusal_code: code,
            })),
        }
    }
}
