//! `reach task ask|list|show|trail` and `reach recipe show`: the operator's side of a task
//! run, on core's `core.packs` port with the operator's leaf.
//!
//! `ask` follows the run live (turns, proposals, reviews, the Chair's decisions, experiments,
//! steps, HIL requests waiting with the command that answers them, verifier results,
//! destruction, the recipe); leaving does not stop the run. `trail` and `recipe show` verify
//! every signature under the node key ward states before printing anything as signed.

use std::process::ExitCode;

use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_room::fact::SignedKind;
use tokio_stream::StreamExt as _;

use crate::BodyTarget;

#[derive(clap::Subcommand, Debug)]
pub enum TaskCommand {
    /// Open a run for GOAL under PACK's binding and follow it to its end.
    Ask {
        pack: String,
        goal: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Task runs, newest first.
    List {
        #[command(flatten)]
        body: BodyTarget,
    },
    /// One run: its state and its Room's facts.
    Show {
        run: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Every signed fact and record of a run, each signature verified.
    Trail {
        run: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Story 013's local acceptance: the story, the reviewer rejection, the retained negative,
    /// a HIL denial, an active pause and an interruption on real guests, each check in a JSON
    /// report; refuses to start while a required gate is missing.
    Acceptance(crate::acceptance::AcceptanceArgs),
}

#[derive(clap::Subcommand, Debug)]
pub enum RecipeCommand {
    /// The run's signed recipe, its signature verified.
    Show {
        run: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        body: BodyTarget,
    },
}

async fn client(body: &BodyTarget) -> anyhow::Result<PacksClient<tonic::transport::Channel>> {
    let m = body.manifest()?;
    let layout = body.layout(&m)?;
    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "core.packs")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(PacksClient::new(ch).max_decoding_message_size(16 << 20))
}

fn refused(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{}", s.message())
}

pub async fn run(command: TaskCommand) -> anyhow::Result<ExitCode> {
    match command {
        TaskCommand::Acceptance(args) => crate::acceptance::run(args).await,
        TaskCommand::Ask { pack, goal, body } => {
            let mut c = client(&body).await?;
            let end = follow(&mut c, &pack, &goal, &mut |e| println!("{}", line(e))).await?;
            Ok(if end == "concluded" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        TaskCommand::List { body } => {
            let runs = client(&body)
                .await?
                .list_runs(pb::ListRunsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .runs;
            if runs.is_empty() {
                println!("no task runs");
            }
            for r in runs {
                println!("{}", summary(&r));
            }
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::Show { run, json, body } => {
            let v = client(&body)
                .await?
                .show_run(pb::RunRef { run_id: run })
                .await
                .map_err(refused)?
                .into_inner();
            if json {
                println!("{}", v.json);
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(r) = &v.run {
                println!("{}", summary(r));
            }
            let parsed: serde_json::Value = serde_json::from_str(&v.json)?;
            for f in parsed["facts"].as_array().into_iter().flatten() {
                let body = &f["body"];
                println!(
                    "  #{:<3} {:<15} {}",
                    f["seq"],
                    body["kind"].as_str().unwrap_or("?"),
                    fact_detail(body)
                );
            }
            for x in parsed["experiments"].as_array().into_iter().flatten() {
                println!(
                    "  experiment {} {} on {}{}",
                    x["n"],
                    x["state"].as_str().unwrap_or("?"),
                    x["instance_id"].as_str().unwrap_or("no instance"),
                    x["code"]
                        .as_str()
                        .map(|c| format!(" ({c})"))
                        .unwrap_or_default()
                );
                for s in x["steps"].as_array().into_iter().flatten() {
                    println!(
                        "    step {:<3} {:<8} {}{}",
                        s["index"],
                        s["kind"].as_str().unwrap_or("?"),
                        s["state"].as_str().unwrap_or("?"),
                        s["code"]
                            .as_str()
                            .map(|c| format!(" ({c})"))
                            .unwrap_or_default()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::Trail { run, body } => {
            let t = client(&body)
                .await?
                .run_trail(pb::RunRef { run_id: run })
                .await
                .map_err(refused)?
                .into_inner();
            for r in t.facts.iter().chain(&t.records) {
                let kind = verified(r, &t.public_key)?;
                let digest = reach_digest::Sha256Digest::of(&r.bytes);
                println!(
                    "{:<17} {digest} signed by {} (verified)",
                    kind.name(),
                    r.key_id
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub async fn recipe(command: RecipeCommand) -> anyhow::Result<ExitCode> {
    match command {
        RecipeCommand::Show { run, json, body } => {
            let r = client(&body)
                .await?
                .run_recipe(pb::RunRef { run_id: run })
                .await
                .map_err(refused)?
                .into_inner();
            let rec = r
                .recipe
                .ok_or_else(|| anyhow::anyhow!("core answered no recipe"))?;
            verified(&rec, &r.public_key)?;
            if json {
                println!("{}", String::from_utf8_lossy(&rec.bytes));
            } else {
                print!("{}", render_recipe(&rec.bytes, &rec.key_id)?);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Opens the run and prints its events until it ends; the end's code ("concluded" or the
/// code the run ended with).
pub async fn follow(
    c: &mut PacksClient<tonic::transport::Channel>,
    pack: &str,
    goal: &str,
    on: &mut dyn FnMut(&pb::TaskEvent),
) -> anyhow::Result<String> {
    let mut stream = c
        .ask_task(pb::AskTaskRequest {
            pack: pack.into(),
            goal: goal.into(),
        })
        .await
        .map_err(refused)?
        .into_inner();
    while let Some(e) = stream.next().await {
        let e = e.map_err(refused)?;
        on(&e);
        if e.kind == "ended" {
            return Ok(e.code);
        }
    }
    anyhow::bail!("core closed the run's stream before it ended")
}

/// One event as a line for a person.
pub fn line(e: &pb::TaskEvent) -> String {
    let tag = match e.kind.as_str() {
        "hil-waiting" => "HIL",
        "ended" => "END",
        "experiment" | "step" | "verifier" | "destroyed" => "VM ",
        _ => "   ",
    };
    format!("{tag} {}", e.text)
}

fn summary(r: &pb::RunSummary) -> String {
    format!(
        "{}  {}  {}{}",
        r.run_id,
        r.pack,
        r.state,
        if r.end_code.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.end_code)
        }
    )
}

fn fact_detail(body: &serde_json::Value) -> String {
    let s = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    match body["kind"].as_str().unwrap_or_default() {
        "turn-opened" => format!("round {} {}", body["round"], s("role")),
        "passage" => format!("round {} {} {}", body["round"], s("role"), body["outcome"]),
        "proposal" => s("candidate_digest"),
        "review" => format!("{} of {}", s("verdict"), s("candidate_digest")),
        "chair-decision" => body["decision"].to_string(),
        "experiment" => format!(
            "#{} {} verifier_passed={}",
            body["n"],
            s("end"),
            body["verifier_passed"]
        ),
        "concluded" => s("recipe_digest"),
        "ended" => s("code"),
        _ => String::new(),
    }
}

/// The record's kind, once its signature verifies under `public_key`.
fn verified(r: &pb::SignedRoomRecord, public_key: &[u8]) -> anyhow::Result<SignedKind> {
    let kind = SignedKind::from_name(&r.kind)
        .ok_or_else(|| anyhow::anyhow!("unknown record kind {:?}", r.kind))?;
    reach_room::fact::verify(kind, &r.bytes, &r.signature, public_key)
        .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    Ok(kind)
}

/// The recipe for a person: diagnosis, the exact patch, the verifier's checks, the links.
pub fn render_recipe(bytes: &[u8], key_id: &str) -> anyhow::Result<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes)?;
    let mut out = String::new();
    out.push_str(&format!(
        "Recipe for {} (pack {} generation {}), signed by {key_id} (verified)\n",
        v["room"].as_str().unwrap_or_default(),
        v["pack"].as_str().unwrap_or_default(),
        v["pack_generation"]
    ));
    out.push_str(&format!(
        "\nDiagnosis:\n  {}\n\nPatch (exactly as admitted):\n",
        v["diagnosis"].as_str().unwrap_or_default()
    ));
    for step in v["patch"]["steps"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}\n",
            step["target"].as_str().unwrap_or_default()
        ));
        for e in step["edits"].as_array().into_iter().flatten() {
            if let Some(old) = e["line"].as_str() {
                out.push_str(&format!("  - {old}\n"));
            }
            if let Some(new) = e["with"].as_str() {
                out.push_str(&format!("  + {new}\n"));
            }
        }
    }
    out.push_str("\nVerifier:\n");
    for c in v["verifier"]["checks"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {} {}\n",
            if c["passed"].as_bool() == Some(true) {
                "pass"
            } else {
                "FAIL"
            },
            c["name"].as_str().unwrap_or_default()
        ));
    }
    out.push_str(&format!(
        "\nEvidence class: {}\n",
        v["disclosure"]["evidence_class"]
            .as_str()
            .unwrap_or_default()
    ));
    Ok(out)
}
