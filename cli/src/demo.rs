//! `reach demo`: the main job on embedded defaults, with nothing but the built binaries.
//!
//! It starts a loopback Discord emulator (Gateway v10 and REST v10), brings up the whole
//! reach.vps.public@1 constellation from the embedded manifest in a throwaway state directory —
//! eight roles as separate processes behind mTLS ports, the default corpus being the project's
//! own docs — records the genesis reconciliation of the fresh vault, posts a question as a
//! Discord user, prints the bot's reply with its citations, then the committed trail of that
//! question, and stops the body. With `--docs DIR` the default corpus is the operator's own
//! directory of Markdown or HTML instead, packed by corpus-builder at start exactly as it packs
//! the embedded docs, so an operator can judge the answers on their documentation before any
//! Discord set-up.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use reach_discord_emulator::{Emulator, EmulatorConfig, User};
use reach_launcher::{Body, LaunchOptions};
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::{GetTrailRequest, ReconcileVaultRequest, VaultStatusRequest};

/// The demo's admitted channel in the emulator.
const CHANNEL: u64 = 1_100_000_000_000_000_200;
/// How long the demo waits for a reply before it says so.
const REPLY_WAIT: Duration = Duration::from_secs(30);
pub const DEFAULT_QUESTION: &str = "How does a port authenticate a call?";

pub async fn run(
    questions: Vec<String>,
    interactive: bool,
    docs: Option<std::path::PathBuf>,
    embedding: Option<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let mut m = crate::load_manifest(None)?;
    // Checked before anything starts: a directory that is not there is the operator's typo.
    let docs =
        match docs {
            Some(d) => Some(std::fs::canonicalize(&d).map_err(|e| {
                anyhow::anyhow!("demo/docs-unreadable: --docs {}: {e}", d.display())
            })?),
            None => None,
        };
    if let Some(dir) = &docs {
        anyhow::ensure!(
            dir.is_dir(),
            "demo/docs-not-a-directory: --docs {} is not a directory",
            dir.display()
        );
        let role = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "corpus-builder")
            .ok_or_else(|| anyhow::anyhow!("the embedded manifest has no corpus-builder"))?;
        role.settings
            .insert("docs_dir".into(), dir.to_string_lossy().into_owned().into());
        // What manifest validation holds habitat.corpus to with `docs_dir`.
        m.habitat.corpus = reach_manifest::LOCAL_DOCS_CORPUS.into();
    }
    // Checked before anything starts too: core would refuse every question with it.
    let table = match &embedding {
        Some(path) => Some(
            reach_corpus::embed::StaticEmbedding::load(path)
                .map(|t| (path, t.digest()))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "demo/embedding-refused: --embedding {}: {e}",
                        path.display()
                    )
                })?,
        ),
        None => None,
    };
    let dir = tempfile::Builder::new().prefix("reach-demo-").tempdir()?;
    let layout = StateLayout::new(dir.path());
    if let Some((path, _)) = &table {
        // Where core ranks with a table: the corpus root its plan resolves (`corpus_from`).
        let root = m
            .roles
            .iter()
            .find_map(|r| {
                let settings = m.role_config(r, &layout).settings;
                settings
                    .get("corpus_root")?
                    .as_str()
                    .map(std::path::PathBuf::from)
            })
            .ok_or_else(|| anyhow::anyhow!("the embedded manifest has no corpus reader"))?;
        std::fs::create_dir_all(&root)?;
        std::fs::copy(path, root.join(reach_corpus::EMBEDDING_FILE))?;
    }
    let em = start_discord(&mut m, &layout).await?;
    let cfg = em.config().clone();

    println!("Reach demo — {} on embedded defaults", m.profile);
    println!("  state: {} (removed at exit)", dir.path().display());
    match &docs {
        Some(d) => println!("  corpus: your docs at {} (Markdown and HTML)", d.display()),
        None => println!("  corpus: the project's own docs"),
    }
    if let Some((path, digest)) = &table {
        println!(
            "  ranking: BM25 and the static embedding {} ({})",
            path.display(),
            &digest.hex()[..16]
        );
    }
    println!("  Discord: loopback emulator, gateway {}", em.gateway_url());
    let started = Instant::now();
    let body = quiet_body(&m, &layout).await?;
    println!(
        "  {} roles started as separate processes, each behind mTLS ports, in {:.2?}\n",
        body.pids().len(),
        started.elapsed()
    );
    crate::body::print_status(&m, &layout).await?;

    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "core.trail")
        .await
        .map_err(anyhow::Error::msg)?;
    let mut trail = TrailClient::new(ch);
    let vault = trail
        .vault_status(VaultStatusRequest {})
        .await?
        .into_inner();
    println!(
        "\nvault: {} ({}) — a fresh vault proves nothing about earlier effects",
        vault.status, vault.backend
    );
    trail
        .reconcile_vault(ReconcileVaultRequest {
            kind: "GENESIS".into(),
            note: "reach demo: new deployment".into(),
        })
        .await?;
    println!("vault: operator recorded GENESIS; serving\n");

    let asker = User::human(1_100_000_000_000_000_500, "demo-user");
    let mut code = ExitCode::SUCCESS;
    let mut ask = async |q: &str| -> anyhow::Result<bool> {
        let id = em.post_user_message(CHANNEL, &asker, &format!("<@{}> {q}", cfg.bot_user_id));
        println!("demo-user › {q}");
        let deadline = Instant::now() + REPLY_WAIT;
        let reply = loop {
            if let Some(r) = em
                .bot_messages(CHANNEL)
                .into_iter()
                .find(|r| r.reply_to == Some(id))
            {
                break Some(r);
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        let Some(reply) = reply else {
            println!("(no reply within {REPLY_WAIT:?})");
            return Ok(false);
        };
        println!("Reach ‹ {}\n", reply.content.replace('\n', "\n        "));
        // The reply is visible before egress-discord's settlement commits; show the settled chain.
        let settled = Instant::now() + Duration::from_secs(5);
        let edges = loop {
            let edges = trail
                .get_trail(GetTrailRequest {
                    key: id.to_string(),
                })
                .await?
                .into_inner()
                .edges;
            if edges.iter().any(|e| e.record == "ReachDelivery@1") || Instant::now() > settled {
                break edges;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        println!("reach trail {id}:");
        for e in &edges {
            let mut f: Vec<String> = e
                .fields
                .iter()
                .filter(|(k, _)| *k != "effect")
                .map(|(k, v)| format!("{k}={}", v.chars().take(48).collect::<String>()))
                .collect();
            f.sort();
            println!("  {:<25} {}\n      {}", e.record, e.id, f.join("  "));
        }
        println!();
        Ok(true)
    };
    // On the operator's own docs there is no default question: without --ask, ask at a prompt.
    let interactive = interactive || (docs.is_some() && questions.is_empty());
    let questions = if questions.is_empty() && !interactive {
        vec![DEFAULT_QUESTION.to_owned()]
    } else {
        questions
    };
    for q in &questions {
        if !ask(q).await? {
            code = ExitCode::FAILURE;
        }
    }
    if interactive {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        println!("ask a question (empty line to stop):");
        while let Some(line) = lines.next_line().await? {
            if line.trim().is_empty() {
                break;
            }
            ask(line.trim()).await?;
        }
    }
    let report = body.stop().await;
    println!(
        "stopped {} roles ({} killed); Discord saw {} bot message(s)",
        report.stopped.len(),
        report.killed.len(),
        em.bot_messages(CHANNEL).len()
    );
    Ok(code)
}

/// A loopback Discord emulator (TLS on both sides, as with Discord: wss:// gateway and
/// https:// REST on local roads) with the demo's channel admitted, and the body's Discord
/// roles configured for it.
pub async fn start_discord(
    m: &mut reach_manifest::Manifest,
    layout: &StateLayout,
) -> anyhow::Result<Emulator> {
    let em = Emulator::start(EmulatorConfig {
        gateway_tls: true,
        ..EmulatorConfig::default()
    })
    .await?;
    let cfg = em.config().clone();
    em.add_channel(CHANNEL, Some(cfg.default_guild_id));
    let endpoints = reach_launcher::discord::DiscordEndpoints {
        gateway_url: em.gateway_url(),
        application_id: cfg.application_id,
        bot_user_id: cfg.bot_user_id,
        guild_id: cfg.default_guild_id,
        channels: vec![CHANNEL],
        rest_base_url: em.rest_base_url(),
        rest_road: em.rest_addr(),
        rest_host: reach_discord_emulator::REST_HOST.into(),
        gateway_roads: {
            let (identify, resume) = em.gateway_addrs();
            vec![identify, resume]
        },
        rest_ca_pem: em.ca_pem().into(),
    };
    reach_launcher::discord::configure(m, layout, &endpoints, cfg.token.as_bytes())?;
    Ok(em)
}

/// The whole body from `m` on `layout`, its roles logging warnings only (the demo prints).
pub async fn quiet_body(
    m: &reach_manifest::Manifest,
    layout: &StateLayout,
) -> anyhow::Result<Body> {
    Ok(Body::up(
        m,
        layout,
        LaunchOptions {
            log_level: "warn".into(),
            ..LaunchOptions::default()
        },
    )
    .await?)
}
