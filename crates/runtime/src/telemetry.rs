//! JSON-lines logs on stderr and, when the role's config names a collector, OTLP trace export.
//!
//! Spans and events carry ids, principals, methods and codes only: never payload text, prompts,
//! passages, credentials or key material. The OTLP layer exports exactly the fields a span or
//! event records and adds nothing but `service.name` and source locations, so that rule holds for
//! the collector as it holds for the logs.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use reach_manifest::plan::LogConfig;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::{OtlpEndpointError, check_otlp_endpoint};

/// How long one export to the collector may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The crates the exporter itself runs on. Their spans are not exported, so an export never
/// produces spans that need exporting.
const TRANSPORT_TARGETS: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
];

/// Why telemetry could not be set up, or did not flush.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// the configured collector endpoint is not allowed in this profile
    #[error(transparent)]
    Endpoint(#[from] OtlpEndpointError),
    /// the OTLP exporter needs a Tokio runtime to run its connection on
    #[error("OTLP export needs a Tokio runtime: call init_telemetry inside one")]
    NoRuntime,
    /// the OTLP exporter could not be built
    #[error("OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// buffered spans could not be flushed to the collector
    #[error("OTLP export did not flush: {0}")]
    Flush(#[from] opentelemetry_sdk::error::OTelSdkError),
}

/// The installed telemetry. Hold it for the life of the role and [`Telemetry::shutdown`] it
/// after draining, so buffered spans reach the collector.
#[derive(Debug)]
#[must_use = "shut telemetry down after draining, or buffered spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported to a collector.
    pub fn exports(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports every finished span now. Blocks: call it outside async code (or in
    /// `spawn_blocking`) while the Tokio runtime that [`init_telemetry`] ran in is alive.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        match &self.provider {
            Some(p) => Ok(p.force_flush()?),
            None => Ok(()),
        }
    }

    /// Flushes and stops the exporter. Blocks, like [`Telemetry::flush`].
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        match self.provider {
            Some(p) => Ok(p.shutdown()?),
            None => Ok(()),
        }
    }
}

/// Installs the global subscriber: JSON lines on stderr at `log.level`, plus, when
/// `log.otlp_endpoint` is set, a batch OTLP/gRPC span exporter with `service.name` =
/// `reach-<role>`. With an endpoint this must run inside a Tokio runtime (the exporter's
/// connection lives there). If a subscriber is already installed, the existing one is kept.
pub fn init_telemetry(role: &str, log: &LogConfig) -> Result<Telemetry, TelemetryError> {
    let provider = match &log.otlp_endpoint {
        None => None,
        Some(endpoint) => Some(otlp_provider(role, endpoint)?),
    };
    let otel = provider.as_ref().map(|p| {
        let mut transport = Targets::new().with_default(LevelFilter::TRACE);
        for target in TRANSPORT_TARGETS {
            transport = transport.with_target(*target, LevelFilter::OFF);
        }
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("reach-runtime"))
            .with_threads(false)
            .with_filter(transport)
    });
    let filter = tracing_subscriber::EnvFilter::try_new(&log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = tracing_subscriber::fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_current_span(false);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(json)
        .with(otel)
        .try_init();
    Ok(Telemetry { provider })
}

fn otlp_provider(role: &str, endpoint: &str) -> Result<SdkTracerProvider, TelemetryError> {
    check_otlp_endpoint(endpoint)?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(TelemetryError::NoRuntime);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    // An empty resource: no host, process or environment detectors, only the service name.
    let resource = Resource::builder_empty()
        .with_service_name(format!("reach-{role}"))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build())
}
