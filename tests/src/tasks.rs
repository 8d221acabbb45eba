//! The task-run fixture (tests/tests/task_run.rs, benches/task_run.rs): the workbench's body
//! fixture with the deterministic inference fixture as the binding's model runtime — core's
//! `settings.tasks` and egress-provider's `settings.portal` name its endpoint, and
//! egress-provider reaches it by an exact local road trusting only its CA — plus an operator
//! at the real `reach hil watch` who answers every request with the real CLI.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::path::Path;

use reach_inference_fixture::{FixtureConfig, FixtureServer};
use reach_proto::core::v1 as core_pb;
use reach_proto::core::v1::packs_client::PacksClient;
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

use crate::workbench::{Fixture, start_with};

/// The goal every story asks.
pub const GOAL: &str = "Mail for alice@example.test must be delivered locally to alice's \
mailbox, and the server must not be an open relay.";

/// The durable steps of a task run where `tests/task_crash.rs` kills a role (and
/// `benches/task_recovery.rs` times core's recovery), each as the event that follows its
/// commit: (the role killed, event kind, its occurrence in the run from 1, what is durable
/// when it is seen).
pub const CRASH_POINTS: &[(&str, &str, usize, &str)] = &[
    ("core", "passage", 1, "the first passage committed"),
    ("core", "proposal", 1, "a proposal signed"),
    ("core", "review", 1, "the Reviewer's rejection signed"),
    ("core", "decision", 1, "the Chair's revision request"),
    (
        "core",
        "experiment",
        1,
        "VM1 about to be journaled and created",
    ),
    ("core", "step", 1, "VM1's first observation applied"),
    ("core", "destroyed", 1, "VM1 destroyed, its record signed"),
    ("core", "decision", 3, "the repair admitted"),
    ("core", "hil-waiting", 1, "the repair's first request filed"),
    ("core", "step-started", 6, "a repair step STARTED"),
    ("core", "step", 6, "a repair step applied"),
    ("core", "verifier", 2, "VM2's verifier result recorded"),
    ("core", "recipe", 1, "the recipe signed"),
    (
        "ward",
        "hil-waiting",
        1,
        "the repair's first request filed, waiting at ward",
    ),
    (
        "workbench",
        "step-started",
        6,
        "a repair step STARTED, its reply due from workbench",
    ),
    (
        "vm-broker",
        "step-started",
        6,
        "a repair step STARTED, its instance held by the broker",
    ),
];

/// The body, the inference fixture it calls (none when a real runtime answers), and the pack.
#[derive(Debug)]
pub struct Story {
    pub f: Fixture,
    pub model: Option<FixtureServer>,
}

/// Who answers the passages.
#[derive(Debug, Clone, Copy)]
pub enum Runtime<'a> {
    /// The deterministic inference fixture, answering as this variant of the pack's
    /// `fixture/answers.toml`.
    Fixture(&'a str),
    /// A real model (the real-model class), its answers constrained to the turn's schema.
    Local(&'a crate::local_model::LocalModel),
    /// The model emulator, streaming, answering as the test scripts it: a runtime that
    /// misbehaves on the wire.
    Emulator(&'a reach_model_emulator::ModelEmulator),
}

/// Where core keeps its Phylactery (the Room, the run journal, the records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vault {
    /// Core's default: a SQLite file in its data directory.
    Sqlite,
    /// A PostgreSQL database by its URL (core's `database` credential file).
    Postgres(String),
}

impl Vault {
    /// A fresh database of its own on the test PostgreSQL server (`REACH_TEST_DATABASE_URL`,
    /// which `scripts/test.sh` sets; a clear failure when it is missing), created with `psql`.
    pub fn fresh_postgres() -> Self {
        let url = std::env::var("REACH_TEST_DATABASE_URL")
            .expect("REACH_TEST_DATABASE_URL names the test PostgreSQL server");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("reach_core_{}_{nanos}", std::process::id());
        let out = std::process::Command::new("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url, "-c"])
            .arg(format!("CREATE DATABASE {name}"))
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "CREATE DATABASE {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (server, _) = url
            .rsplit_once('/')
            .expect("a database URL names its database");
        Self::Postgres(format!("{server}/{name}"))
    }
}

/// Starts the story's body with the inference fixture answering as `variant`, the pack's
/// sources edited by `edit` first.
pub async fn start(variant: &str, edit: impl Fn(&Path) + Clone) -> Story {
    start_on(variant, edit, Vault::Sqlite).await
}

/// [`start`] with core's Phylactery in `vault`.
pub async fn start_on(variant: &str, edit: impl Fn(&Path) + Clone, vault: Vault) -> Story {
    start_with_runtime(Runtime::Fixture(variant), edit, vault).await
}

/// The story's body with `runtime` answering its passages.
pub async fn start_with_runtime(
    runtime: Runtime<'_>,
    edit: impl Fn(&Path) + Clone,
    vault: Vault,
) -> Story {
    let (fixture, endpoint, addr, ca, model, class) = match runtime {
        Runtime::Fixture(variant) => {
            // The fixture answers from the very sources the body installs.
            let dir = tempfile::tempdir().unwrap();
            crate::packs::copy_dir(
                &reach_taskpack::preparable_pack(
                    &Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"),
                )
                .unwrap(),
                dir.path(),
            );
            edit(dir.path());
            let files = reach_taskpack::PackFiles::read_dir(dir.path()).unwrap();
            let sources = reach_taskpack::Sources::parse(&files).unwrap();
            let model = FixtureServer::start(FixtureConfig {
                sources,
                variant: variant.to_owned(),
            })
            .await
            .unwrap();
            let parts = (
                model.url(),
                model.addr(),
                model.ca_pem(),
                "reach-inference-fixture".to_owned(),
                "deterministic-inference",
            );
            (Some(model), parts.0, parts.1, parts.2, parts.3, parts.4)
        }
        Runtime::Local(m) => (
            None,
            m.url(),
            m.addr(),
            m.ca_pem(),
            m.model().to_owned(),
            "real-model",
        ),
        Runtime::Emulator(m) => (
            None,
            m.endpoint(),
            m.addr(),
            m.ca_pem().to_owned(),
            reach_model_emulator::MODEL.to_owned(),
            "real-model",
        ),
    };
    let (real, emulated) = (
        matches!(runtime, Runtime::Local(_)),
        matches!(runtime, Runtime::Emulator(_)),
    );
    let host = if emulated {
        reach_model_emulator::HOST.to_owned()
    } else {
        "127.0.0.1".to_owned()
    };
    let key: &'static [u8] = match runtime {
        Runtime::Local(_) => crate::local_model::KEY.as_bytes(),
        Runtime::Emulator(_) => reach_model_emulator::KEY.as_bytes(),
        Runtime::Fixture(_) => b"sk-inference-fixture",
    };
    let f = start_with(edit, move |m, layout| {
        let ca_file = layout.root().join("inference-fixture-ca.pem");
        std::fs::create_dir_all(layout.root()).unwrap();
        std::fs::write(&ca_file, ca).unwrap();
        for role in m.roles.iter_mut() {
            match role.name.as_str() {
                "core" => {
                    let mut t = toml::Table::new();
                    t.insert("endpoint".into(), endpoint.clone().into());
                    t.insert("model".into(), model.clone().into());
                    t.insert("class".into(), class.into());
                    role.settings.insert("tasks".into(), t.into());
                    if let Vault::Postgres(url) = &vault {
                        role.settings.insert("vault".into(), "postgres".into());
                        role.credentials.push(reach_manifest::schema::Credential {
                            file: "database".into(),
                            kind: reach_manifest::CredentialKind::Database,
                            optional: false,
                        });
                        let dir = layout.secret_dir("core");
                        reach_identity::files::ensure_secret_dir(&dir).unwrap();
                        reach_identity::files::write_secret(&dir.join("database"), url.as_bytes())
                            .unwrap();
                    }
                }
                "egress-provider" => {
                    let mut portal = toml::Table::new();
                    portal.insert("endpoint".into(), endpoint.clone().into());
                    portal.insert("model".into(), model.clone().into());
                    portal.insert("max_tokens".into(), 4096.into());
                    if real {
                        // A CPU writes a plan slowly: the turn's own wall bounds the answer.
                        portal.insert("constrain".into(), "json-object".into());
                        portal.insert("answer_within_s".into(), 180.into());
                        // A small model rambles to its bound: 512 tokens keep a passage
                        // well inside the turn's 180 s on two loaded cores.
                        portal.insert("max_tokens".into(), 512.into());
                    }
                    if emulated {
                        portal.insert("streaming".into(), true.into());
                        portal.insert("constrain".into(), "json-schema".into());
                    }
                    let mut road = toml::Table::new();
                    road.insert("host".into(), host.clone().into());
                    road.insert("addr".into(), addr.to_string().into());
                    let mut roads = toml::Table::new();
                    roads.insert("local_roads".into(), vec![toml::Value::from(road)].into());
                    roads.insert("ca_file".into(), ca_file.display().to_string().into());
                    portal.insert("roads".into(), roads.into());
                    role.settings.insert("portal".into(), portal.into());
                    let dir = layout.secret_dir("egress-provider");
                    reach_identity::files::ensure_secret_dir(&dir).unwrap();
                    reach_identity::files::write_secret(&dir.join("provider-api-key"), key)
                        .unwrap();
                }
                _ => {}
            }
        }
    })
    .await;
    Story { f, model: fixture }
}

impl Story {
    /// Installs, activates and binds the pack with `hil` ("each-step" or "each-mutation").
    pub async fn bind(&self, hil: &str) -> PacksClient<Channel> {
        let mut packs = self.f.install_and_bind().await;
        if hil != "each-mutation" {
            packs
                .bind(core_pb::BindRequest {
                    pack: self.f.pack.clone(),
                    workspace: "/tmp/reach-ws".into(),
                    vm_backend: "qemu".into(),
                    hil: hil.into(),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        packs
    }

    /// Asks for [`GOAL`] under the pack's binding: the run's live events.
    pub async fn ask_stream(
        &self,
        packs: &mut PacksClient<Channel>,
    ) -> tonic::Streaming<core_pb::TaskEvent> {
        packs
            .ask_task(core_pb::AskTaskRequest {
                pack: self.f.pack.clone(),
                goal: GOAL.into(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// Asks for `goal` and follows the run to its end: every event, in order.
    pub async fn ask(
        &self,
        packs: &mut PacksClient<Channel>,
        goal: &str,
    ) -> Vec<core_pb::TaskEvent> {
        let mut stream = packs
            .ask_task(core_pb::AskTaskRequest {
                pack: self.f.pack.clone(),
                goal: goal.into(),
            })
            .await
            .unwrap()
            .into_inner();
        let mut events = Vec::new();
        while let Some(e) = stream.next().await {
            let e = e.unwrap();
            let end = e.kind == "ended";
            events.push(e);
            if end {
                break;
            }
        }
        events
    }
}

/// `reach task show` of `run` once it has left `open` (polled every 50 ms), or `None` after
/// `within`.
pub async fn settled(
    packs: &mut PacksClient<Channel>,
    run: &str,
    within: std::time::Duration,
) -> Option<core_pb::RunView> {
    tokio::time::timeout(within, async {
        loop {
            if let Ok(v) = packs.show_run(core_pb::RunRef { run_id: run.into() }).await
                && v.get_ref().run.as_ref().is_some_and(|r| r.state != "open")
            {
                return v.into_inner();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .ok()
}

/// The trail's signed records of `kind` (`execution-record`, `recipe`...), each checked
/// against the run's key, as JSON.
pub fn records(trail: &core_pb::RunTrailResponse, kind: &str) -> Vec<serde_json::Value> {
    trail
        .records
        .iter()
        .filter(|r| r.kind == kind)
        .map(|r| {
            let k = reach_room::fact::SignedKind::from_name(&r.kind).unwrap();
            reach_room::fact::verify(k, &r.bytes, &r.signature, &trail.public_key).unwrap();
            serde_json::from_slice(&r.bytes).unwrap()
        })
        .collect()
}

/// The guest's own witness that no restart was applied twice, over signed execution records
/// as JSON (`reach_room::record::restarts_witnessed` judges them). Panics naming the record
/// that breaks it; returns how many records were witnessed and how many restarts they saw.
pub fn restarts_witnessed(records: &[serde_json::Value]) -> (usize, usize) {
    let records: Vec<reach_room::record::ExecutionRecord> = records
        .iter()
        .map(|r| serde_json::from_value(r.clone()).expect("a signed execution record"))
        .collect();
    match reach_room::record::restarts_witnessed(&records) {
        Ok(w) => (w.instances, w.restarts),
        Err(e) => panic!("{e}: {records:#?}"),
    }
}
