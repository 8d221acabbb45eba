//! OTLP trace export: a real OTLP/gRPC collector (`TraceService/Export`, opentelemetry-proto's
//! generated tonic server) on loopback receives the role's spans with `service.name` and the
//! fields they record, and nothing they do not; non-loopback collectors are refused at start.

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use reach_manifest::plan::LogConfig;
use reach_runtime::config::{self, OtlpEndpointError, check_otlp_endpoint};
use reach_runtime::{ConfigError, TelemetryError, init_telemetry};

/// Text a role handles but must never put in telemetry.
const PROMPT: &str = "please summarise the sealed passage about the vault";

#[derive(Clone, Default)]
struct Collector {
    received: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.received
            .lock()
            .expect("collector lock")
            .push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn string_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref() {
            Some(AnyValue {
                value: Some(any_value::Value::StringValue(s)),
            }) => Some(s.as_str()),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_a_loopback_collector_with_ids_and_codes_only() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind collector");
    let port = listener.local_addr().expect("collector address").port();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    let log = LogConfig {
        level: "info".to_owned(),
        otlp_endpoint: Some(format!("http://127.0.0.1:{port}")),
    };
    let telemetry = init_telemetry("core", &log).expect("telemetry starts");
    assert!(telemetry.exports());

    // What a role does: the prompt is in hand, but only the id and the code go on the span.
    let prompt = PROMPT.to_owned();
    {
        let span = tracing::info_span!(
            "settle",
            turn_id = "turn-7f3a",
            code = tracing::field::Empty,
            content = tracing::field::Empty,
        );
        let _entered = span.enter();
        assert!(!prompt.is_empty());
        tracing::info!(intent_id = "intent-19", "claimed");
        span.record("code", "OK");
    }

    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .expect("shutdown task")
        .expect("spans flushed to the collector");

    let received = collector.received.lock().expect("collector lock").clone();
    let resource_spans: Vec<_> = received.iter().flat_map(|r| &r.resource_spans).collect();
    assert!(
        !resource_spans.is_empty(),
        "the collector received no spans"
    );
    for rs in &resource_spans {
        let resource = rs.resource.as_ref().expect("resource");
        assert_eq!(
            string_attr(&resource.attributes, "service.name"),
            Some("reach-core")
        );
    }
    let spans: Vec<&Span> = resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .collect();
    let settle = spans
        .iter()
        .find(|s| s.name == "settle")
        .expect("the settle span was exported");
    assert_eq!(
        string_attr(&settle.attributes, "turn_id"),
        Some("turn-7f3a")
    );
    assert_eq!(string_attr(&settle.attributes, "code"), Some("OK"));
    let claimed = settle
        .events
        .iter()
        .find(|e| e.name == "claimed")
        .expect("the event inside the span was exported");
    assert_eq!(
        string_attr(&claimed.attributes, "intent_id"),
        Some("intent-19")
    );

    // The field marked as content was never recorded, so it is not exported, and the prompt
    // appears nowhere in what the collector received.
    assert!(
        settle.attributes.iter().all(|kv| kv.key != "content"),
        "an unrecorded content field was exported: {:?}",
        settle.attributes
    );
    let everything = format!("{received:?}");
    assert!(!everything.contains(PROMPT));
    assert!(!everything.contains("sealed passage"));

    server.abort();
}

#[test]
fn only_loopback_collectors_are_accepted() {
    for ok in [
        "http://127.0.0.1:4317",
        "http://127.0.0.1:4317/",
        "http://[::1]:4317",
        "http://[::1]:1",
    ] {
        assert_eq!(check_otlp_endpoint(ok), Ok(()), "{ok}");
    }
    for (refused, why) in [
        ("http://10.0.0.5:4317", OtlpEndpointError::NotLoopback),
        (
            "http://collector.example:4317",
            OtlpEndpointError::NotLoopback,
        ),
        ("http://localhost:4317", OtlpEndpointError::NotLoopback),
        ("http://127.0.0.2:4317", OtlpEndpointError::NotLoopback),
        ("http://0.0.0.0:4317", OtlpEndpointError::NotLoopback),
        (
            "http://[::ffff:127.0.0.1]:4317",
            OtlpEndpointError::NotLoopback,
        ),
        ("https://127.0.0.1:4317", OtlpEndpointError::Scheme),
        ("127.0.0.1:4317", OtlpEndpointError::Scheme),
        ("/run/otel.sock", OtlpEndpointError::Scheme),
        ("http://user:pw@127.0.0.1:4317", OtlpEndpointError::UserInfo),
        ("http://127.0.0.1", OtlpEndpointError::Port),
        ("http://127.0.0.1:0", OtlpEndpointError::Port),
        ("http://127.0.0.1:4317/v1/traces", OtlpEndpointError::Path),
        ("http://127.0.0.1:4317/?x=1", OtlpEndpointError::Path),
        ("http://127.0.0.1:99999", OtlpEndpointError::Port),
        ("", OtlpEndpointError::Malformed),
    ] {
        assert_eq!(check_otlp_endpoint(refused), Err(why), "{refused:?}");
    }
}

#[test]
fn a_non_loopback_collector_stops_the_role_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let role_config = |log: &str| {
        format!(
            "role = \"core\"\ntrust_domain = \"reach.test\"\nhabitat = \"test\"\n\
             secret_dir = \"/nonexistent/secrets\"\ndata_dir = \"/nonexistent/data\"\n{log}"
        )
    };

    let absent = dir.path().join("absent.toml");
    std::fs::write(&absent, role_config("")).expect("write config");
    let config = config::load(absent).expect("a config without a collector loads");
    assert_eq!(config.log, LogConfig::default());
    assert_eq!(config.log.otlp_endpoint, None);

    let remote = dir.path().join("remote.toml");
    std::fs::write(
        &remote,
        role_config("[log]\nlevel = \"info\"\notlp_endpoint = \"http://192.0.2.10:4317\"\n"),
    )
    .expect("write config");
    let args = [
        "reach-core".into(),
        "--config".into(),
        remote.into_os_string(),
    ];
    match config::from_args(args) {
        Err(ConfigError::OtlpEndpoint(OtlpEndpointError::NotLoopback)) => {}
        other => panic!("expected a typed refusal, got {other:?}"),
    }

    // init_telemetry refuses it too, before installing anything.
    let log = LogConfig {
        level: "info".to_owned(),
        otlp_endpoint: Some("http://192.0.2.10:4317".to_owned()),
    };
    assert!(matches!(
        init_telemetry("core", &log),
        Err(TelemetryError::Endpoint(OtlpEndpointError::NotLoopback))
    ));
}
