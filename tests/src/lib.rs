//! Builders for cross-service tests.
//!
//! [`TestBody`] starts the real role binaries of a manifest as separate processes on a
//! temporary state directory, exactly as `reach up` does. [`call`] invokes any method of any
//! port by path with an empty message, so tables of (caller, port, method) can be driven
//! without per-service client code. [`raw_channel`] presents arbitrary certificates, for the
//! handshake refusals.

pub mod deployed;
pub mod local_model;
pub mod packs;
pub mod tasks;
pub mod workbench;

use std::path::Path;
use std::sync::Arc;

use reach_launcher::{Body, LaunchOptions};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_port::{PortAddress, PortMaterial};
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::{GetTrailRequest, ReconcileVaultRequest};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A running body on a temporary state directory. Dropping it kills any role still running.
#[derive(Debug)]
pub struct TestBody {
    pub manifest: Manifest,
    pub layout: StateLayout,
    pub body: Option<Body>,
    _dir: tempfile::TempDir,
}

impl TestBody {
    /// Starts the checked-in reach.vps.public@1 manifest with placeholder external credentials.
    pub async fn start() -> Self {
        Self::launch(|_, _| {}, "warn").await
    }

    /// Starts the checked-in manifest after `configure` adjusted it (role settings, files it
    /// names in the state directory), with placeholder external credentials.
    pub async fn start_configured(configure: impl FnOnce(&mut Manifest, &StateLayout)) -> Self {
        Self::launch(configure, "info").await
    }

    /// Starts the body wired to a loopback Discord emulator: ingress-edge on its Gateway,
    /// egress-discord on its REST API (an exact local road, trusting only the emulator's CA),
    /// both with the emulator's bot token. `channel` is admitted.
    pub async fn start_with_discord(channel: u64) -> (Self, reach_discord_emulator::Emulator) {
        Self::start_with_emulator(Default::default(), &[channel], |_| {}, "info").await
    }

    /// Like [`TestBody::start_with_discord`] with an emulator `config`, several admitted
    /// `channels`, and `adjust` applied to the manifest last (e.g. ward's policy settings).
    pub async fn start_with_emulator(
        config: reach_discord_emulator::EmulatorConfig,
        channels: &[u64],
        adjust: impl FnOnce(&mut Manifest),
        log_level: &str,
    ) -> (Self, reach_discord_emulator::Emulator) {
        Self::start_with_emulator_configured(config, channels, |m, _| adjust(m), log_level).await
    }

    /// Like [`TestBody::start_with_emulator`], with `configure` also given the state layout (to
    /// write files the adjusted settings name, such as another emulator's CA or a credential).
    pub async fn start_with_emulator_configured(
        config: reach_discord_emulator::EmulatorConfig,
        channels: &[u64],
        configure: impl FnOnce(&mut Manifest, &StateLayout),
        log_level: &str,
    ) -> (Self, reach_discord_emulator::Emulator) {
        let emulator = reach_discord_emulator::Emulator::start(config)
            .await
            .expect("emulator");
        for &channel in channels {
            emulator.add_channel(channel, Some(emulator.config().default_guild_id));
        }
        let endpoints = emulator_endpoints(&emulator, channels.to_vec());
        let token = emulator.config().token.clone();
        let body = Self::launch(
            |manifest, layout| {
                reach_launcher::discord::configure(manifest, layout, &endpoints, token.as_bytes())
                    .expect("configure Discord roles");
                configure(manifest, layout);
            },
            log_level,
        )
        .await;
        (body, emulator)
    }

    /// The one way a test body comes up: the checked-in manifest on a short temporary state
    /// directory (Unix socket paths are limited to 108 bytes), `configure`d, with placeholder
    /// external credentials.
    async fn launch(configure: impl FnOnce(&mut Manifest, &StateLayout), log_level: &str) -> Self {
        let mut manifest =
            reach_manifest::load(reach_manifest::VPS_PUBLIC).expect("checked-in manifest");
        let dir = tempfile::Builder::new()
            .prefix("rt")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let layout = StateLayout::new(dir.path());
        std::fs::create_dir_all(layout.root()).expect("state root");
        configure(&mut manifest, &layout);
        write_placeholder_credentials(&manifest, &layout);
        let body = Body::up(
            &manifest,
            &layout,
            LaunchOptions {
                log_level: log_level.into(),
                ..LaunchOptions::default()
            },
        )
        .await
        .expect("body comes up");
        Self {
            manifest,
            layout,
            body: Some(body),
            _dir: dir,
        }
    }

    /// The operator's client of core's trail port, after it recorded the genesis reconciliation
    /// a fresh vault needs before it serves.
    pub async fn operator_after_genesis(
        &self,
        note: &str,
    ) -> TrailClient<tonic::transport::Channel> {
        let mut operator = TrailClient::new(reach_port::connect_lazy(
            self.socket("core.trail"),
            &self.material("operator"),
            self.manifest.principal("core"),
        ));
        operator
            .reconcile_vault(ReconcileVaultRequest {
                kind: "GENESIS".into(),
                note: note.into(),
            })
            .await
            .expect("genesis reconciliation");
        operator
    }

    /// The role's log so far (JSON lines), for diagnosing a failed expectation.
    pub fn log(&self, role: &str) -> String {
        std::fs::read_to_string(self.layout.log_path(role)).unwrap_or_default()
    }

    /// The TLS material of `principal` (a role or `operator`), reloading as Scribe rotates.
    pub fn material(&self, principal: &str) -> Arc<PortMaterial> {
        PortMaterial::load(
            &self.layout.secret_dir(principal),
            self.manifest.trust_domain.clone(),
        )
        .expect("material")
    }

    pub fn socket(&self, port: &str) -> PortAddress {
        PortAddress::Unix(self.layout.socket_path(port))
    }

    pub async fn stop(mut self) -> reach_launcher::StopReport {
        self.body.take().expect("running").stop().await
    }
}

/// Writes a placeholder for every non-optional external credential, as an operator would with
/// `reach secret set`. The roles under test never send them anywhere.
pub fn write_placeholder_credentials(manifest: &Manifest, layout: &StateLayout) {
    for (role, file) in reach_scribe::identities::missing_credentials(manifest, layout) {
        let dir = layout.secret_dir(&role);
        reach_identity::files::ensure_secret_dir(&dir).unwrap();
        let path = dir.join(file);
        if !path.exists() {
            reach_identity::files::write_secret(&path, b"placeholder-credential").unwrap();
        }
    }
}

/// Calls `path` (`/pkg.Service/Method`) with an empty message; returns the status code.
pub async fn call(channel: tonic::transport::Channel, path: &str) -> tonic::Code {
    call_with(channel, path, &[]).await
}

/// A call that neither succeeds nor fails within this is reported as `DeadlineExceeded`,
/// which no assertion here reads as "refused": a port that hangs a caller fails its test
/// instead of hanging the suite.
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Like [`call`], with extra request metadata.
pub async fn call_with(
    channel: tonic::transport::Channel,
    path: &str,
    metadata: &[(&'static str, &str)],
) -> tonic::Code {
    let mut req = tonic::Request::new(());
    for (k, v) in metadata {
        req.metadata_mut().insert(*k, v.parse().unwrap());
    }
    let path = http::uri::PathAndQuery::try_from(path).expect("method path");
    let exchange = reach_port::probe::call_empty(channel, path, req);
    match tokio::time::timeout(CALL_DEADLINE, exchange).await {
        Ok(Ok(())) => tonic::Code::Ok,
        Ok(Err(s)) => s.code(),
        Err(_) => tonic::Code::DeadlineExceeded,
    }
}

/// A channel presenting `leaf` (PEM cert and key; `None` for no client certificate) and
/// accepting any server: it exists to test the server's refusals, never to trust a server.
pub async fn raw_channel(
    socket: &Path,
    leaf: Option<(&str, &str)>,
) -> Result<tonic::transport::Channel, tonic::transport::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)));
    let mut config = match leaf {
        Some((cert, key)) => {
            let certs: Vec<_> = rustls_pemfile::certs(&mut cert.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
            let key = rustls_pemfile::private_key(&mut key.as_bytes())
                .unwrap()
                .expect("a private key");
            builder.with_client_auth_cert(certs, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let socket = socket.to_owned();
    let dial = tower::service_fn(move |_: http::Uri| {
        let (connector, socket) = (connector.clone(), socket.clone());
        async move {
            let io = tokio::net::UnixStream::connect(socket).await?;
            let mut tls = connector
                .connect(ServerName::try_from("reach.port.invalid").unwrap(), io)
                .await?;
            // As every role's dialer does: a refused leaf fails here, not in a reconnect loop.
            reach_port::client::confirm_admitted(&mut tls).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    let endpoint = tonic::transport::Endpoint::from_static("http://reach.port");
    tokio::time::timeout(CALL_DEADLINE, endpoint.connect_with_connector(dial))
        .await
        .expect("the port neither accepted nor refused the connection in time")
}

#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Whether a call's code shows its handler ran: neither the authorization layer
/// (PERMISSION_DENIED) nor the transport (a refused handshake) stopped it. Handlers may still
/// refuse the empty test message on its merits (INVALID_ARGUMENT, FAILED_PRECONDITION…).
pub fn reached_handler(code: tonic::Code) -> bool {
    use tonic::Code::*;
    !matches!(
        code,
        PermissionDenied | Unavailable | Unknown | Cancelled | Unauthenticated | DeadlineExceeded
    )
}

pub use reach_port::probe::refused_at_handshake;

/// The emulator's endpoints, for [`reach_launcher::discord::configure`].
pub fn emulator_endpoints(
    emulator: &reach_discord_emulator::Emulator,
    channels: Vec<u64>,
) -> reach_launcher::discord::DiscordEndpoints {
    let c = emulator.config();
    reach_launcher::discord::DiscordEndpoints {
        gateway_url: emulator.gateway_url(),
        application_id: c.application_id,
        bot_user_id: c.bot_user_id,
        guild_id: c.default_guild_id,
        channels,
        rest_base_url: emulator.rest_base_url(),
        rest_road: emulator.rest_addr(),
        rest_host: reach_discord_emulator::REST_HOST.into(),
        gateway_roads: if c.gateway_tls {
            let (identify, resume) = emulator.gateway_addrs();
            vec![identify, resume]
        } else {
            Vec::new()
        },
        rest_ca_pem: emulator.ca_pem().into(),
    }
}

/// The committed chain of `key` (an event, admission or turn id) as lines
/// `Record id field=value …`, fields sorted.
pub async fn trail_text(
    operator: &mut TrailClient<tonic::transport::Channel>,
    key: &str,
) -> String {
    let edges = operator
        .get_trail(GetTrailRequest { key: key.into() })
        .await
        .expect("trail")
        .into_inner()
        .edges;
    edges
        .iter()
        .map(|e| {
            let mut f: Vec<_> = e.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            f.sort();
            format!("{} {} {}", e.record, e.id, f.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls the trail of `key` until it contains `want`; panics with the trail after `wait`.
pub async fn trail_until(
    operator: &mut TrailClient<tonic::transport::Channel>,
    key: &str,
    want: &str,
    wait: std::time::Duration,
) -> String {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let text = trail_text(operator, key).await;
        if text.contains(want) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{want} never appeared on the trail of {key}:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Polls `probe` until it yields, within `wait`; a failure names what did not happen instead of
/// hanging the test.
pub async fn eventually<T>(
    wait: std::time::Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + wait;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within {wait:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Sets one of ward's task budgets (`settings.budgets.<key>`), keeping the others.
pub fn set_ward_budget(manifest: &mut Manifest, key: &str, value: i64) {
    let ward = manifest
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == "ward")
        .expect("ward role");
    let budgets = ward
        .settings
        .entry("budgets")
        .or_insert_with(|| toml::Table::new().into());
    budgets
        .as_table_mut()
        .expect("budgets is a table")
        .insert(key.into(), value.into());
}

/// Points core and egress-provider at the model emulator: the same endpoint string in both,
/// egress-provider on an exact local road trusting only the emulator's CA, with its key file;
/// `streaming` picks the provider's SSE path.
pub fn configure_portal(
    manifest: &mut Manifest,
    layout: &StateLayout,
    model: &reach_model_emulator::ModelEmulator,
    streaming: bool,
) {
    let ca = layout.root().join("model-ca.pem");
    std::fs::write(&ca, model.ca_pem()).expect("model CA");
    for role in manifest.roles.iter_mut() {
        let mut portal = toml::Table::new();
        portal.insert("endpoint".into(), model.endpoint().into());
        portal.insert("model".into(), reach_model_emulator::MODEL.into());
        match role.name.as_str() {
            "core" => {
                // Zero data retention, no training: the declaration core admits before egress.
                let custody: toml::Table = toml::from_str(
                    "storage = \"none\"\nretention_days = 0\ntraining = false\n\
                     region = \"eu\"\nsubcontractors = []\ndeletion = \"automatic\"",
                )
                .expect("custody");
                portal.insert("custody".into(), custody.into());
            }
            "egress-provider" => {
                if streaming {
                    portal.insert("streaming".into(), true.into());
                }
                let mut road = toml::Table::new();
                road.insert("host".into(), reach_model_emulator::HOST.into());
                road.insert("addr".into(), model.addr().to_string().into());
                let mut roads = toml::Table::new();
                roads.insert("local_roads".into(), vec![toml::Value::from(road)].into());
                roads.insert("ca_file".into(), ca.display().to_string().into());
                portal.insert("roads".into(), roads.into());
                let dir = layout.secret_dir("egress-provider");
                reach_identity::files::ensure_secret_dir(&dir).expect("secret dir");
                reach_identity::files::write_secret(
                    &dir.join("provider-api-key"),
                    reach_model_emulator::KEY.as_bytes(),
                )
                .expect("provider key");
            }
            _ => continue,
        }
        role.settings.insert("portal".into(), portal.into());
    }
}

/// The citations of passages \[1\] and \[2\] in the Cut the model received last: each line
/// `[n] section (url)`, so the URL under its section's title.
pub fn cited_urls(
    model: &reach_model_emulator::ModelEmulator,
) -> Vec<reach_discord::render::Citation> {
    let sent = model
        .requests()
        .pop()
        .expect("a model request")
        .user_message();
    (1..=2)
        .map(|n| {
            let line = sent
                .lines()
                .find(|l| l.starts_with(&format!("[{n}] ")))
                .unwrap_or_else(|| panic!("passage [{n}] in the Cut:\n{sent}"));
            let (head, url) = line.rsplit_once(" (").unwrap();
            let url = url.strip_suffix(')').unwrap();
            let section = &head[format!("[{n}] ").len()..];
            reach_discord::render::Citation::new(url)
                .expect("citation")
                .titled(section)
        })
        .collect()
}

/// The `type` of every interaction callback the emulator received for `interaction`, in order
/// (4: the answer; 5: a deferred acknowledgement).
pub fn callback_types(em: &reach_discord_emulator::Emulator, interaction: u64) -> Vec<u64> {
    em.callback_requests()
        .iter()
        .filter(|c| c.interaction_id == interaction)
        .filter_map(|c| c.body["type"].as_u64())
        .collect()
}

/// A body with the model Portal on `model`, admitting `channel`, whose core acknowledges an
/// `/ask` first when its answer is not committed within `defer_ms`; the emulator takes an
/// interaction's first response within `window`. `core_settings` may set more of core's.
pub async fn start_deferring(
    channel: u64,
    model: &reach_model_emulator::ModelEmulator,
    defer_ms: i64,
    window: std::time::Duration,
    core_settings: impl FnOnce(&mut toml::Table),
) -> (TestBody, reach_discord_emulator::Emulator) {
    let (body, em) = TestBody::start_with_emulator_configured(
        Default::default(),
        &[channel],
        |manifest, layout| {
            configure_portal(manifest, layout, model, false);
            let core = manifest
                .roles
                .iter_mut()
                .find(|r| r.name.as_str() == "core")
                .expect("core");
            core.settings
                .insert("interaction_defer_ms".into(), defer_ms.into());
            core_settings(&mut core.settings);
        },
        "info",
    )
    .await;
    em.set_interaction_window(window);
    (body, em)
}

/// A `reach audit` receipt's checks as (id, outcome, detail), in the receipt's order (a check
/// without a detail has an empty one).
pub fn receipt_checks(receipt: &serde_json::Value) -> Vec<(String, String, String)> {
    receipt["checks"]
        .as_array()
        .expect("the receipt has checks")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["outcome"].as_str().unwrap().to_owned(),
                c["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
