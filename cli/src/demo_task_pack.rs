//! `reach demo task-pack`: Story 013's local profile end to end on embedded defaults.
//!
//! It checks first that the host can build what is missing (root for mmdebstrap, QEMU,
//! mmdebstrap itself) and says exactly what to install before it starts anything; builds or
//! reuses the pack's image and prepared system in the cache (progress bars on a terminal);
//! builds and signs the reference pack with a fresh key; starts the deterministic inference
//! fixture as the binding's model runtime and the whole body; installs, activates and binds
//! the pack from safe defaults; asks the goal and follows the run — turns, proposals,
//! reviews, the Chair's decisions, experiments on VM₁ and VM₂, steps, verifier results and
//! destruction — acting as the operator through ward's real HIL port, printing each request
//! before it answers it (`--interactive` leaves the answers to the person, with the command
//! to type). It ends with the signed recipe and a JSON report naming the evidence class.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use tokio_stream::StreamExt as _;

/// The image cache the demo and the guest tests share unless `--cache` names another.
pub const DEFAULT_CACHE: &str = "/var/tmp/reach-vm-images";
/// What the demo asks.
pub const GOAL: &str = "Mail for alice@example.test must be delivered locally to alice's \
mailbox, and the server must not be an open relay.";
/// The evidence class of this story: deterministic inference, real execution.
pub const EVIDENCE_CLASS: &str = "deterministic-inference/real-execution";
/// The evidence class of a run a real model answered.
pub const REAL_MODEL_CLASS: &str = "real-model/real-execution";

/// Who answers the demo's passages (`--model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelChoice {
    /// The deterministic inference fixture (the pack's `fixture/answers.toml`).
    Fixture,
    /// The local runtime (`reach-local-runtime`: llama-cpp-python and SmolLM2-135M), its
    /// answers constrained to each turn's schema and judged by the same boundaries.
    Local,
}

/// The binding's model runtime while a lab runs.
pub(crate) enum LabRuntime {
    Fixture(reach_inference_fixture::FixtureServer),
    Local(reach_local_runtime::LocalRuntime),
}

impl LabRuntime {
    fn url(&self) -> String {
        match self {
            Self::Fixture(f) => f.url(),
            Self::Local(l) => l.url(),
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Self::Fixture(f) => f.addr(),
            Self::Local(l) => l.addr(),
        }
    }

    fn ca_pem(&self) -> String {
        match self {
            Self::Fixture(f) => f.ca_pem(),
            Self::Local(l) => l.ca_pem(),
        }
    }

    fn model(&self) -> String {
        match self {
            Self::Fixture(_) => "reach-inference-fixture".into(),
            Self::Local(l) => l.model().to_owned(),
        }
    }
}

/// The first reference pack (in name order) beside the sources this binary was built from
/// whose image needs no operator-supplied package: one this machine can prepare as it is.
pub fn default_pack_dir() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
    if !root.is_dir() {
        anyhow::bail!(
            "no packs beside the sources ({}): give --pack DIR",
            root.display()
        );
    }
    reach_taskpack::preparable_pack(&root).ok_or_else(|| {
        anyhow::anyhow!(
            "no pack under {} prepares without an operator's package: give --pack DIR",
            root.display()
        )
    })
}

/// What the host lacks to build the pack's environment, each with how to get it; empty when
/// it lacks nothing (or nothing needs building).
pub(crate) fn missing_for_build() -> Vec<String> {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push(
            "root: mmdebstrap builds the guest image as root — run `sudo reach demo task-pack`, \
             or build once with `sudo reach image prepare --pack ARCHIVE --cache DIR` and pass \
             --cache DIR"
                .to_owned(),
        );
    }
    for (tool, package) in [
        ("mmdebstrap", "mmdebstrap"),
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("qemu-img", "qemu-utils"),
    ] {
        if !on_path(tool) {
            missing.push(format!(
                "{tool}: install it with `apt-get install {package}`"
            ));
        }
    }
    missing
}

fn on_path(tool: &str) -> bool {
    ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).is_file())
}

/// The pack built and signed with a fresh key, and its image and prepared system pinned from
/// the cache (built there first when missing).
pub(crate) struct Prepared {
    pub pack_dir: PathBuf,
    pub key: reach_taskpack::PackKey,
    pub built: reach_taskpack::BuiltPack,
    pub cache: PathBuf,
    pub pins: crate::image::PackPins,
}

/// What [`prepare`] found missing before it started anything: the gate, and how to get it.
pub(crate) struct Missing {
    pub cache: PathBuf,
    pub gates: Vec<String>,
}

/// Builds the pack and pins its prepared system; `Err(Missing)` when this host can build
/// neither nor find them in the cache, before anything is started.
pub(crate) async fn prepare(
    heading: &str,
    pack_dir: Option<PathBuf>,
    cache: Option<PathBuf>,
) -> anyhow::Result<Result<Prepared, Missing>> {
    let pack_dir = match pack_dir {
        Some(d) => d,
        None => default_pack_dir()?,
    };
    anyhow::ensure!(
        pack_dir.join("task-profile.toml").is_file(),
        "{} is not a pack directory (give --pack DIR)",
        pack_dir.display()
    );
    let cache = std::path::absolute(cache.unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE)))?;
    let pkcs8 = reach_taskpack::PackKey::generate()?;
    let key = reach_taskpack::PackKey::from_pkcs8(&pkcs8)?;
    let started = Instant::now();
    let built =
        reach_taskpack::build(&pack_dir, &key).map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;

    // Before anything starts: can this host build what the cache lacks?
    let variant = built
        .facts
        .image_variants
        .first()
        .ok_or_else(|| anyhow::anyhow!("the pack names no image variant"))?;
    let cached = reach_vm::cache::find_prepared(
        reach_vm::cache::Search {
            cache: Some(&cache),
            ..Default::default()
        },
        &variant.image_spec_digest,
        &variant.prepared_spec_digest,
    );
    if cached.is_none() {
        let gates = missing_for_build();
        if !gates.is_empty() {
            return Ok(Err(Missing { cache, gates }));
        }
    }

    println!("{heading} — task pack {}", pack_dir.display());
    println!(
        "  reach pack build: {} v{} → {} ({} bytes, {:.1?}), signed by a fresh key {}",
        built.facts.name,
        built.facts.version,
        built.digest,
        built.archive.len(),
        started.elapsed(),
        key.public()
    );
    let t = Instant::now();
    let pins = crate::image::pack_pins(&built.archive, &built.facts.name, None, cache.clone())
        .await
        .context("the pack's image and prepared system")?;
    println!(
        "  image {} and prepared system {} ({} in {:.1?}; cache {})",
        pins.image.0,
        pins.prepared.0,
        if cached.is_some() { "reused" } else { "built" },
        t.elapsed(),
        cache.display()
    );
    Ok(Ok(Prepared {
        pack_dir,
        key,
        built,
        cache,
        pins,
    }))
}

pub async fn run(
    pack_dir: Option<PathBuf>,
    cache: Option<PathBuf>,
    interactive: bool,
    model: ModelChoice,
) -> anyhow::Result<ExitCode> {
    // The real-model class needs its runtime before anything is built or started.
    let local = if model == ModelChoice::Local {
        if let Err(missing) = reach_local_runtime::installed() {
            eprintln!("reach demo task-pack --model local: {missing}");
            eprintln!("nothing was started.");
            return Ok(ExitCode::from(2));
        }
        Some(())
    } else {
        None
    };
    let Prepared {
        key,
        built,
        cache,
        pins,
        ..
    } = match prepare("Reach demo", pack_dir, cache).await? {
        Ok(p) => p,
        Err(missing) => {
            eprintln!(
                "reach demo task-pack: the pack's prepared system is not in {} and this host \
                 cannot build it yet:",
                missing.cache.display()
            );
            for m in &missing.gates {
                eprintln!("  - {m}");
            }
            eprintln!("nothing was started.");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = match local {
        None => None,
        Some(()) => {
            println!("  starting the local model runtime (SmolLM2-135M on this CPU)…");
            let r = tokio::task::spawn_blocking(reach_local_runtime::LocalRuntime::start)
                .await?
                .map_err(|e| anyhow::anyhow!("the local model runtime: {e}"))?;
            Some(LabRuntime::Local(r))
        }
    };
    let lab = Lab::start_with(&built, &key, &cache, &pins, "", runtime).await?;
    let Lab {
        dir,
        body,
        mut packs,
        ward: ward_ch,
        runtime,
        _discord,
    } = lab;
    let state = dir.path().to_owned();
    let result = async {
        let name = setup(&mut packs, &built, dir.path()).await?;
        let operator = tokio::spawn(operate(WardClient::new(ward_ch), interactive, state));
        let run_started = Instant::now();
        let mut run_id = String::new();
        let end = crate::task::follow(&mut packs, &name, GOAL, &mut |e| {
            run_id.clone_from(&e.run_id);
            println!("{}", crate::task::line(e));
        })
        .await?;
        operator.abort();
        let wall = run_started.elapsed();
        let recipe = if end == "concluded" {
            let r = packs
                .run_recipe(pb::RunRef {
                    run_id: run_id.clone(),
                })
                .await
                .map_err(|s| anyhow::anyhow!("{}", s.message()))?
                .into_inner();
            let rec = r.recipe.context("no recipe")?;
            reach_room::fact::verify(
                reach_room::fact::SignedKind::Recipe,
                &rec.bytes,
                &rec.signature,
                &r.public_key,
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
            println!("\n{}", crate::task::render_recipe(&rec.bytes, &rec.key_id)?);
            Some(reach_digest::Sha256Digest::of(&rec.bytes))
        } else {
            None
        };
        // The run's own report: its failure class and what each passage cost.
        let shown: serde_json::Value = serde_json::from_str(
            &packs
                .show_run(pb::RunRef {
                    run_id: run_id.clone(),
                })
                .await
                .map_err(|s| anyhow::anyhow!("{}", s.message()))?
                .into_inner()
                .json,
        )?;
        let report = serde_json::json!({
            "format": "reach.demo.task-pack.v1",
            "evidence_class": match runtime {
                LabRuntime::Fixture(_) => EVIDENCE_CLASS,
                LabRuntime::Local(_) => REAL_MODEL_CLASS,
            },
            "model": runtime.model(),
            "pack": name,
            "run": run_id,
            "end": end,
            "failure": shown["failure"],
            "usage": shown["usage"],
            "recipe_digest": recipe.map(|d| d.to_string()),
            "wall_s": wall.as_secs_f64(),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        anyhow::Ok(end)
    }
    .await;
    let report = body.stop().await;
    println!("stopped {} roles", report.stopped.len());
    let end = result.context("task-pack demo")?;
    Ok(if end == "concluded" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A whole body on embedded defaults, in a fresh state directory (removed when dropped), with
/// the deterministic inference fixture answering the pack's fixture under one variant as the
/// binding's model runtime.
pub(crate) struct Lab {
    pub dir: tempfile::TempDir,
    pub body: reach_launcher::Body,
    pub packs: PacksClient<tonic::transport::Channel>,
    /// The operator's channel to `ward.authority`.
    pub ward: tonic::transport::Channel,
    pub runtime: LabRuntime,
    pub _discord: reach_discord_emulator::Emulator,
}

impl Lab {
    /// Starts the fixture under `variant` (`""`: the answers' first) and the body, trusting
    /// `key` and pinning `pins`.
    pub async fn start(
        built: &reach_taskpack::BuiltPack,
        key: &reach_taskpack::PackKey,
        cache: &Path,
        pins: &crate::image::PackPins,
        variant: &str,
    ) -> anyhow::Result<Lab> {
        Self::start_with(built, key, cache, pins, variant, None).await
    }

    /// [`Lab::start`] with `runtime` as the binding's model runtime (`None`: the fixture
    /// answering `variant`).
    pub async fn start_with(
        built: &reach_taskpack::BuiltPack,
        key: &reach_taskpack::PackKey,
        cache: &Path,
        pins: &crate::image::PackPins,
        variant: &str,
        runtime: Option<LabRuntime>,
    ) -> anyhow::Result<Lab> {
        let dir = tempfile::Builder::new()
            .prefix("reach-demo-pack-")
            .tempdir()?;
        let layout = StateLayout::new(dir.path());
        std::fs::create_dir_all(layout.root())?;
        println!("  state: {} (removed at exit)", dir.path().display());

        // The binding's model runtime: the deterministic inference fixture, answering from the
        // pack's own fixture/answers.toml, reached by an exact local road trusting only its CA.
        let mut trusted = reach_taskpack::TrustedKeys::new();
        trusted.insert("demo-operator", key.public());
        let verified = reach_taskpack::conform(&built.archive, &trusted, None, 0)
            .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
        let runtime = match runtime {
            Some(r) => r,
            None => LabRuntime::Fixture(
                reach_inference_fixture::FixtureServer::start(
                    reach_inference_fixture::FixtureConfig {
                        sources: verified.sources().clone(),
                        variant: variant.to_owned(),
                    },
                )
                .await?,
            ),
        };
        match &runtime {
            LabRuntime::Fixture(f) => {
                println!("  model runtime: the inference fixture at {}", f.url())
            }
            LabRuntime::Local(l) => println!(
                "  model runtime: {} at {} (llama-cpp-python, this CPU)",
                l.model(),
                l.url()
            ),
        }

        let mut m = crate::load_manifest(None)?;
        // The whole body, Discord roles included, on a loopback Discord as `reach demo` runs it.
        let discord = crate::demo::start_discord(&mut m, &layout).await?;
        configure(&mut m, &layout, key, cache, pins, &runtime)?;
        let body = crate::demo::quiet_body(&m, &layout).await?;
        println!(
            "  {} roles up behind mTLS ports; core trusts the demo key\n",
            body.pids().len()
        );
        let material = reach_launcher::operator_material(&m, &layout)?;
        let packs_ch = reach_launcher::operator_channel(&m, &layout, &material, "core.packs")
            .await
            .map_err(anyhow::Error::msg)?;
        let ward = reach_launcher::operator_channel(&m, &layout, &material, "ward.authority")
            .await
            .map_err(anyhow::Error::msg)?;
        Ok(Lab {
            dir,
            body,
            packs: PacksClient::new(packs_ch).max_decoding_message_size(16 << 20),
            ward,
            runtime,
            _discord: discord,
        })
    }
}

/// Core trusts the demo key and knows the task model runtime; vm-broker searches the cache;
/// egress-provider reaches the fixture by an exact local road with its CA and a key file.
fn configure(
    m: &mut reach_manifest::Manifest,
    layout: &StateLayout,
    key: &reach_taskpack::PackKey,
    cache: &Path,
    pins: &crate::image::PackPins,
    runtime: &LabRuntime,
) -> anyhow::Result<()> {
    let ca_file = layout.root().join("model-runtime-ca.pem");
    std::fs::write(&ca_file, runtime.ca_pem())?;
    let local = matches!(runtime, LabRuntime::Local(_));
    let mut k = toml::Table::new();
    k.insert("name".into(), "demo-operator".into());
    k.insert("key".into(), key.public().to_string().into());
    let keys = toml::Value::Array(vec![k.into()]);
    for role in &mut m.roles {
        match role.name.as_str() {
            "core" => {
                role.settings.insert("pack_keys".into(), keys.clone());
                let mut t = toml::Table::new();
                t.insert("endpoint".into(), runtime.url().into());
                t.insert("model".into(), runtime.model().into());
                if local {
                    t.insert("class".into(), "real-model".into());
                }
                role.settings.insert("tasks".into(), t.into());
            }
            "workbench" => {
                role.settings.insert("pack_keys".into(), keys.clone());
            }
            "vm-broker" => {
                // The broker creates instances only from what it pins: the image and the
                // prepared system just built or reused.
                let pin = |(digest, dir): &(reach_digest::Sha256Digest, PathBuf)| {
                    let mut t = toml::Table::new();
                    t.insert("digest".into(), digest.to_string().into());
                    t.insert("dir".into(), dir.display().to_string().into());
                    toml::Value::Array(vec![t.into()])
                };
                role.settings
                    .insert("cache".into(), cache.display().to_string().into());
                role.settings.insert("images".into(), pin(&pins.image));
                role.settings.insert("prepared".into(), pin(&pins.prepared));
                role.settings.insert("pack_keys".into(), keys.clone());
            }
            "egress-provider" => {
                let mut portal = toml::Table::new();
                portal.insert("endpoint".into(), runtime.url().into());
                portal.insert("model".into(), runtime.model().into());
                portal.insert("max_tokens".into(), 4096.into());
                if local {
                    // Decoding constrained to the turn's schema, at a CPU's pace.
                    portal.insert("constrain".into(), "json-object".into());
                    portal.insert("answer_within_s".into(), 180.into());
                    // A small model rambles to its bound: 512 tokens keep a passage well
                    // inside the turn's 180 s on a laptop's CPU.
                    portal.insert("max_tokens".into(), 512.into());
                }
                let mut road = toml::Table::new();
                road.insert("host".into(), "127.0.0.1".into());
                road.insert("addr".into(), runtime.addr().to_string().into());
                let mut roads = toml::Table::new();
                roads.insert("local_roads".into(), vec![toml::Value::from(road)].into());
                roads.insert("ca_file".into(), ca_file.display().to_string().into());
                portal.insert("roads".into(), roads.into());
                role.settings.insert("portal".into(), portal.into());
                let dir = layout.secret_dir("egress-provider");
                reach_identity::files::ensure_secret_dir(&dir)?;
                // The fixture takes any bearer; the local runtime demands its own key.
                let key: &[u8] = if local {
                    reach_local_runtime::KEY.as_bytes()
                } else {
                    b"sk-inference-fixture"
                };
                reach_identity::files::write_secret(&dir.join("provider-api-key"), key)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `reach pack install`, `activate` and `bind` from safe defaults; the pack's name.
pub(crate) async fn setup(
    packs: &mut PacksClient<tonic::transport::Channel>,
    built: &reach_taskpack::BuiltPack,
    dir: &Path,
) -> anyhow::Result<String> {
    let refused = |s: tonic::Status| anyhow::anyhow!("{}", s.message());
    let name = built.facts.name.clone();
    let r = packs
        .install_pack(pb::InstallPackRequest {
            archive: built.archive.clone(),
        })
        .await
        .map_err(refused)?
        .into_inner();
    println!(
        "reach pack install: {} v{} stored inertly ({}); {} refusal fixtures refused as expected",
        r.name, r.version, r.state, r.fixtures_checked
    );
    let s = packs
        .activate_pack(pb::ActivatePackRequest {
            name: name.clone(),
            version: 0,
        })
        .await
        .map_err(refused)?
        .into_inner();
    println!(
        "reach pack activate: {} v{}, generation {}",
        s.transition, s.active_version, s.generation
    );
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let b = packs
        .bind(pb::BindRequest {
            pack: name.clone(),
            workspace: workspace.display().to_string(),
            vm_backend: "qemu".into(),
            ..Default::default()
        })
        .await
        .map_err(refused)?
        .into_inner();
    println!(
        "reach bind: network {}, HIL {}, {} concurrent run, publication {}",
        b.network,
        b.hil,
        b.max_concurrent_runs,
        if b.publication { "on" } else { "off" }
    );
    let st = packs
        .bind_status(pb::BindStatusRequest { pack: name.clone() })
        .await
        .map_err(refused)?
        .into_inner();
    anyhow::ensure!(
        st.readiness == "runnable",
        "reach bind status: {}: {} (next: {})",
        st.readiness,
        st.reason,
        st.next
    );
    println!(
        "reach bind status: runnable (image {}, prepared system {})\n\nreach task ask {name} {GOAL:?}",
        st.image_digest, st.prepared_digest
    );
    Ok(name)
}

/// The operator: every pending HIL request printed in full, then approved by its digest —
/// or, `interactive`, left to the person with the command to type.
async fn operate(
    mut ward: WardClient<tonic::transport::Channel>,
    interactive: bool,
    state: PathBuf,
) -> anyhow::Result<()> {
    let mut stream = ward
        .watch_hil_requests(ward_pb::WatchHilRequestsRequest {})
        .await?
        .into_inner();
    while let Some(h) = stream.next().await {
        let h = h?;
        if h.state != "pending" {
            continue;
        }
        print!("{}", crate::hil::render(&h, now_ms(), false));
        if interactive {
            println!(
                "answer: reach hil approve {id} --state {s}   or   reach hil deny {id} --reason … --state {s}",
                id = h.id,
                s = state.display()
            );
            continue;
        }
        let answered = ward
            .answer_hil_request(ward_pb::AnswerHilRequestRequest {
                id: h.id.clone(),
                request_digest: h.digest.clone(),
                approve: true,
                reason: String::new(),
            })
            .await?
            .into_inner();
        println!(
            "HIL {} {} by the demo operator",
            answered.id, answered.state
        );
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
