//! `reach task acceptance`: Story 013's local acceptance runner (issue #30 item 6).
//!
//! It refuses to start while a required gate is missing and names each one (QEMU, what the
//! cache lacks and this host cannot build, a fixture with no retained negative variant, the
//! source commit). Then, on the same bodies `reach demo task-pack` starts (every role a
//! process, real guests, the deterministic inference fixture as the binding's runtime), it
//! runs six scenarios: the story (which holds the Reviewer's rejection in its first round),
//! the retained negative of each further fixture variant, a HIL denial, an active pause and
//! an interruption (core killed with SIGKILL mid-step and started again). Each scenario's run
//! is read back through the operator's ports only: every fact and record signature verified
//! under the node key, the run journal, ward's HIL requests, the recipe, and the host's
//! processes. The JSON report holds every check with its evidence, the evidence class, the
//! retained references (run, fact head, record and recipe digests, HIL request ids), timings
//! and the source commit; the exit status is non-zero when any check failed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_room::fact::{Decision, FactBody, RoomFact, SignedKind};
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

use crate::demo_task_pack::{self as demo, EVIDENCE_CLASS, GOAL, Lab};

/// The report's format.
pub const REPORT_FORMAT: &str = "reach.task.acceptance.v1";

/// How long a run may take after core restarts before the runner gives up on it.
const SETTLE: Duration = Duration::from_secs(900);

#[derive(clap::Args, Debug)]
pub struct AcceptanceArgs {
    /// The pack's source directory (default: the reference pack `reach demo task-pack` runs).
    #[arg(long)]
    pack: Option<PathBuf>,
    /// The image cache (default /var/tmp/reach-vm-images).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Where the JSON report is written.
    #[arg(long, default_value = "reach-acceptance.json")]
    report: PathBuf,
}

/// How the runner's operator answers, and what it does to the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Approve every request.
    Approve,
    /// Deny the first request.
    Deny,
    /// Pause the binding, then approve the first request: the step must not run.
    Pause,
    /// Approve every request; SIGKILL core once the first approved step is started, then
    /// start it again.
    Interrupt,
}

/// One check of one scenario.
#[derive(Debug)]
struct Check {
    scenario: String,
    check: &'static str,
    passed: bool,
    evidence: String,
}

impl Check {
    fn json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "check": self.check,
            "passed": self.passed,
            "evidence": self.evidence,
        })
    }
}

/// What a scenario's run retained, read back through the operator's ports.
struct Retained {
    run_id: String,
    end: String,
    facts: Vec<RoomFact>,
    /// `(kind, digest, JSON)` of each signed record, in the trail's order.
    records: Vec<(String, reach_digest::Sha256Digest, Value)>,
    journal: Value,
    hil: Vec<ward_pb::HilRequestView>,
    signatures_verified: Result<usize, String>,
}

impl Retained {
    fn executions(&self) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|(k, _, _)| k == "execution-record")
            .map(|(_, _, v)| v)
            .collect()
    }

    fn recipe(&self) -> Option<&(String, reach_digest::Sha256Digest, Value)> {
        self.records.iter().find(|(k, _, _)| k == "recipe")
    }

    fn refs(&self) -> Value {
        json!({
            "run": self.run_id,
            "facts": self.facts.len(),
            "fact_head": self.facts.last().map(|f| f.digest().to_string()),
            "records": self.records.iter().map(|(k, d, _)| json!({"kind": k, "digest": d.to_string()})).collect::<Vec<_>>(),
            "hil_requests": self.hil.iter().map(|h| json!({"id": h.id, "state": h.state})).collect::<Vec<_>>(),
        })
    }
}

pub async fn run(args: AcceptanceArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let started_ms = now_ms();
    // The gates that cost nothing to read, then what the cache lacks.
    let mut gates = Vec::new();
    for (tool, package) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("qemu-img", "qemu-utils"),
    ] {
        if which(tool).is_none() {
            gates.push(format!(
                "{tool}: guests run under QEMU — install it with `apt-get install {package}`"
            ));
        }
    }
    let source = source_commit();
    if let Err(why) = &source {
        gates.push(format!("source commit: {why}"));
    }
    let pack_dir = match args.pack.clone() {
        Some(d) => d,
        None => demo::default_pack_dir()?,
    };
    let variants = match fixture_variants(&pack_dir) {
        Ok(v) if v.len() >= 2 => v,
        Ok(v) => {
            gates.push(format!(
                "retained negative: the pack's fixture/answers.toml has the variants {v:?}; the \
                 first is the story, and at least one more (the retained negative run) is needed"
            ));
            v
        }
        Err(e) => {
            gates.push(format!("pack sources: {e:#}"));
            Vec::new()
        }
    };
    if !gates.is_empty() {
        return Ok(refuse(&gates));
    }
    let prepared =
        match demo::prepare("Reach acceptance", Some(pack_dir), args.cache.clone()).await? {
            Ok(p) => p,
            Err(missing) => {
                let gates: Vec<String> = missing
                    .gates
                    .iter()
                    .map(|g| format!("prepared system not in {}: {g}", missing.cache.display()))
                    .collect();
                return Ok(refuse(&gates));
            }
        };
    let source = source.expect("checked above");

    let mut checks = Vec::new();
    let mut scenarios = Vec::new();
    // The story's variant: the story, a denial, a pause and an interruption, one after another
    // on one body.
    {
        let mut lab = Lab::start(
            &prepared.built,
            &prepared.key,
            &prepared.cache,
            &prepared.pins,
            &variants[0],
        )
        .await?;
        let result = async {
            let name = demo::setup(&mut lab.packs, &prepared.built, lab.dir.path()).await?;
            for (scenario, act) in [
                ("story", Act::Approve),
                ("hil-denial", Act::Deny),
                ("active-pause", Act::Pause),
                ("interruption", Act::Interrupt),
            ] {
                let t = Instant::now();
                let r = scenario_run(&mut lab, &name, act).await?;
                let wall = t.elapsed().as_secs_f64();
                judge(scenario, act, &r, &mut checks);
                if act == Act::Pause {
                    resumed(&mut lab.packs, &name, &mut checks).await;
                }
                scenarios.push(json!({
                    "name": scenario, "variant": variants[0], "end": r.end,
                    "wall_s": wall, "retained": r.refs(),
                }));
            }
            anyhow::Ok(())
        }
        .await;
        lab.body.stop().await;
        result?;
    }
    // Each retained negative on a body of its own (the fixture answers one variant).
    for variant in &variants[1..] {
        let mut lab = Lab::start(
            &prepared.built,
            &prepared.key,
            &prepared.cache,
            &prepared.pins,
            variant,
        )
        .await?;
        let result = async {
            let name = demo::setup(&mut lab.packs, &prepared.built, lab.dir.path()).await?;
            let t = Instant::now();
            let r = scenario_run(&mut lab, &name, Act::Approve).await?;
            let wall = t.elapsed().as_secs_f64();
            let scenario = format!("retained-negative:{variant}");
            judge(&scenario, Act::Approve, &r, &mut checks);
            scenarios.push(json!({
                "name": scenario, "variant": variant, "end": r.end,
                "wall_s": wall, "retained": r.refs(),
            }));
            anyhow::Ok(())
        }
        .await;
        lab.body.stop().await;
        result?;
    }

    let passed = checks.iter().all(|c| c.passed);
    let report = json!({
        "format": REPORT_FORMAT,
        "source_commit": source.0,
        "source_dirty": source.1,
        "evidence_class": EVIDENCE_CLASS,
        "acceleration": if Path::new("/dev/kvm").exists() { "kvm (when the broker's probe boots)" } else { "tcg" },
        "pack": {
            "name": prepared.built.facts.name,
            "version": prepared.built.facts.version,
            "archive_digest": prepared.built.digest.to_string(),
            "dir": prepared.pack_dir.display().to_string(),
        },
        "started_at_unix_ms": started_ms,
        "wall_s": started.elapsed().as_secs_f64(),
        "scenarios": scenarios,
        "checks": checks.iter().map(Check::json).collect::<Vec<_>>(),
        "passed": passed,
    });
    std::fs::write(&args.report, serde_json::to_vec_pretty(&report)?)?;
    println!();
    for c in &checks {
        println!(
            "{} {:<34} {:<24} {}",
            if c.passed { "ok  " } else { "FAIL" },
            c.scenario,
            c.check,
            c.evidence
        );
    }
    println!(
        "\n{} of {} checks passed in {:.0} s; report {}",
        checks.iter().filter(|c| c.passed).count(),
        checks.len(),
        started.elapsed().as_secs_f64(),
        args.report.display()
    );
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Names every missing gate; nothing was started.
fn refuse(gates: &[String]) -> ExitCode {
    eprintln!("reach task acceptance: a required gate is missing:");
    for g in gates {
        eprintln!("  - {g}");
    }
    eprintln!("nothing was started.");
    ExitCode::from(2)
}

/// The commit the runner's sources are at, and whether the tree differs from it.
fn source_commit() -> Result<(String, bool), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .map_err(|e| format!("git: {e} (install git, or run from a checkout)"))
    };
    let head = git(&["rev-parse", "--verify", "HEAD"])?;
    if !head.status.success() {
        return Err(format!(
            "{} is not a git checkout with a commit",
            root.display()
        ));
    }
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])?;
    Ok((
        String::from_utf8_lossy(&head.stdout).trim().to_owned(),
        !dirty.stdout.is_empty(),
    ))
}

/// The pack's fixture variants, the story's first.
fn fixture_variants(pack_dir: &Path) -> anyhow::Result<Vec<String>> {
    let files = reach_taskpack::PackFiles::read_dir(pack_dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", pack_dir.display()))?;
    let sources =
        reach_taskpack::Sources::parse(&files).map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    Ok(sources.answers.variants)
}

fn which(tool: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// Runs the goal under `act` and reads back what the run retained.
async fn scenario_run(lab: &mut Lab, pack: &str, act: Act) -> anyhow::Result<Retained> {
    let operator = tokio::spawn(operate(
        WardClient::new(lab.ward.clone()),
        lab.packs.clone(),
        pack.to_owned(),
        act,
    ));
    let mut stream = lab
        .packs
        .ask_task(pb::AskTaskRequest {
            pack: pack.into(),
            goal: GOAL.into(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    let (mut run_id, mut end, mut asked) = (String::new(), None, false);
    while let Some(e) = stream.next().await {
        let e = e.map_err(|s| anyhow::anyhow!("{}", s.message()))?;
        run_id.clone_from(&e.run_id);
        println!("{}", crate::task::line(&e));
        asked |= e.kind == "hil-waiting";
        if e.kind == "ended" {
            end = Some(e.code.clone());
            break;
        }
        if act == Act::Interrupt && asked && e.kind == "step-started" {
            println!("    acceptance: SIGKILL core mid-step, then start it again");
            drop(stream);
            lab.body.kill_role("core").await;
            lab.body.start_role("core").await?;
            break;
        }
    }
    let end = match end {
        Some(end) => end,
        None => settled(&mut lab.packs, &run_id).await?,
    };
    operator.abort();
    read_back(lab, run_id, end).await
}

/// Waits for the run to leave `open` (after core restarted); its end code.
async fn settled(packs: &mut PacksClient<Channel>, run: &str) -> anyhow::Result<String> {
    let t = Instant::now();
    while t.elapsed() < SETTLE {
        if let Ok(v) = packs.show_run(pb::RunRef { run_id: run.into() }).await
            && let Some(s) = v.into_inner().run
            && s.state != "open"
        {
            return Ok(if s.state == "concluded" {
                "concluded".into()
            } else {
                s.end_code
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    anyhow::bail!(
        "run {run} still open {} s after core restarted",
        SETTLE.as_secs()
    )
}

/// The operator at ward's HIL port, answering as `act` says.
async fn operate(
    mut ward: WardClient<Channel>,
    mut packs: PacksClient<Channel>,
    pack: String,
    act: Act,
) -> anyhow::Result<()> {
    let mut stream = ward
        .watch_hil_requests(ward_pb::WatchHilRequestsRequest {})
        .await?
        .into_inner();
    let mut first = true;
    while let Some(h) = stream.next().await {
        let h = h?;
        if h.state != "pending" {
            continue;
        }
        let approve = !(first && act == Act::Deny);
        if first && act == Act::Pause {
            packs
                .pause_binding(pb::BindingRef { pack: pack.clone() })
                .await?;
            println!("    acceptance: binding paused before approving {}", h.id);
        }
        first = false;
        ward.answer_hil_request(ward_pb::AnswerHilRequestRequest {
            id: h.id.clone(),
            request_digest: h.digest.clone(),
            approve,
            reason: if approve {
                String::new()
            } else {
                "acceptance: the operator denies".into()
            },
        })
        .await?;
        println!(
            "    acceptance: HIL {} {}",
            h.id,
            if approve { "approved" } else { "denied" }
        );
    }
    Ok(())
}

/// The run's trail (each signature verified), journal, HIL requests and recipe.
async fn read_back(lab: &mut Lab, run_id: String, end: String) -> anyhow::Result<Retained> {
    let status = |s: tonic::Status| anyhow::anyhow!("{}", s.message());
    let trail = lab
        .packs
        .run_trail(pb::RunRef {
            run_id: run_id.clone(),
        })
        .await
        .map_err(status)?
        .into_inner();
    let mut verified = Ok(0);
    let mut facts = Vec::new();
    for f in &trail.facts {
        match reach_room::fact::verify(SignedKind::Fact, &f.bytes, &f.signature, &trail.public_key)
        {
            Ok(_) => verified = verified.map(|n| n + 1),
            Err(e) => verified = Err(format!("fact {}: {}", facts.len(), e.code())),
        }
        facts.push(RoomFact::from_bytes(&f.bytes).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    let mut records = Vec::new();
    for r in &trail.records {
        let ok = SignedKind::from_name(&r.kind).and_then(|k| {
            reach_room::fact::verify(k, &r.bytes, &r.signature, &trail.public_key).ok()
        });
        match ok {
            Some(_) => verified = verified.map(|n| n + 1),
            None => verified = Err(format!("{} record does not verify", r.kind)),
        }
        records.push((
            r.kind.clone(),
            reach_digest::Sha256Digest::of(&r.bytes),
            serde_json::from_slice(&r.bytes)?,
        ));
    }
    let shown = lab
        .packs
        .show_run(pb::RunRef {
            run_id: run_id.clone(),
        })
        .await
        .map_err(status)?
        .into_inner();
    let hil = WardClient::new(lab.ward.clone())
        .list_hil_requests(ward_pb::ListHilRequestsRequest { all: true })
        .await
        .map_err(status)?
        .into_inner()
        .requests
        .into_iter()
        .filter(|h| h.experiment_id.starts_with(&format!("{run_id}-")))
        .collect();
    Ok(Retained {
        run_id,
        end,
        facts,
        records,
        journal: serde_json::from_str(&shown.json)?,
        hil,
        signatures_verified: verified,
    })
}

/// After the pause: resuming the binding needs no reactivation, and the pack is runnable.
async fn resumed(packs: &mut PacksClient<Channel>, pack: &str, checks: &mut Vec<Check>) {
    let r = async {
        packs
            .resume_binding(pb::BindingRef { pack: pack.into() })
            .await?;
        Ok::<_, tonic::Status>(
            packs
                .bind_status(pb::BindStatusRequest { pack: pack.into() })
                .await?
                .into_inner(),
        )
    }
    .await;
    let (passed, evidence) = match r {
        Ok(s) => (
            s.readiness == "runnable",
            format!("after resume: {} {}", s.readiness, s.reason),
        ),
        Err(e) => (false, e.message().to_owned()),
    };
    checks.push(Check {
        scenario: "active-pause".into(),
        check: "resume-without-reactivation",
        passed,
        evidence,
    });
}

/// Every check of a scenario, from what its run retained.
fn judge(scenario: &str, act: Act, r: &Retained, checks: &mut Vec<Check>) {
    let mut check = |check: &'static str, passed: bool, evidence: String| {
        checks.push(Check {
            scenario: scenario.to_owned(),
            check,
            passed,
            evidence,
        })
    };
    let executions = r.executions();
    // Every scenario: signatures, one end, instances gone, each request filed once, no
    // restart twice in a guest.
    check(
        "signatures-verify",
        r.signatures_verified.is_ok(),
        match &r.signatures_verified {
            Ok(n) => format!("{n} facts and records verify under the node key"),
            Err(e) => e.clone(),
        },
    );
    let kinds: Vec<&str> = r.facts.iter().map(|f| f.body.kind()).collect();
    let finals = kinds
        .iter()
        .filter(|k| matches!(**k, "ended" | "concluded"))
        .count();
    check(
        "one-end",
        finals == 1 && matches!(kinds.last(), Some(&("ended" | "concluded"))),
        format!(
            "{} facts, last {:?}, end {}",
            kinds.len(),
            kinds.last(),
            r.end
        ),
    );
    let experiments = r.journal["experiments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let all_destroyed =
        executions.iter().all(|x| x["destroyed"] == true) && experiments.len() == executions.len();
    let instances: Vec<String> = experiments
        .iter()
        .filter_map(|x| x["instance_id"].as_str().map(str::to_owned))
        .collect();
    let left: Vec<&String> = instances.iter().filter(|i| qemu_left(i)).collect();
    check(
        "instances-destroyed",
        all_destroyed && left.is_empty(),
        format!(
            "{} experiments, {} signed records all destroyed: {all_destroyed}; QEMU left: {left:?}",
            experiments.len(),
            executions.len()
        ),
    );
    let mut filed: Vec<(String, u32)> = r
        .hil
        .iter()
        .map(|h| (h.experiment_id.clone(), h.step_index))
        .collect();
    let n = filed.len();
    filed.sort();
    filed.dedup();
    check(
        "hil-filed-once",
        filed.len() == n,
        format!("{n} requests, {} distinct steps", filed.len()),
    );
    // The guests' own witness: each verified instance saw its prepared system's unit starts
    // and one more per restart step recorded `ok`, so no restart reached a guest twice.
    let parsed: Vec<reach_room::record::ExecutionRecord> = executions
        .iter()
        .filter_map(|x| serde_json::from_value((*x).clone()).ok())
        .collect();
    let witness = if parsed.len() == executions.len() {
        reach_room::record::restarts_witnessed(&parsed)
    } else {
        Err(format!(
            "{} of {} records are not execution records",
            executions.len() - parsed.len(),
            executions.len()
        ))
    };
    check(
        "restarts-once-in-guest",
        witness.is_ok(),
        match witness {
            Ok(w) => format!(
                "{} guests read after their verifier saw {} restart(s) beyond their prepared \
                 system's, one per restart step recorded ok",
                w.instances, w.restarts
            ),
            Err(e) => e,
        },
    );
    let recipe = r.recipe();
    let failed_checks = |x: &Value| -> Vec<String> {
        x["verifier"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["passed"] != true)
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let outcomes = |x: &Value| -> Vec<String> {
        x["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s["outcome"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    match (scenario, act) {
        ("story", _) => {
            check("concluded", r.end == "concluded", r.end.clone());
            let first_decision = r.facts.iter().position(
                |f| matches!(&f.body, FactBody::ChairDecision(d) if !matches!(d.decision, Decision::Admit { .. })),
            );
            let first_experiment = r
                .facts
                .iter()
                .position(|f| matches!(f.body, FactBody::Experiment(_)));
            check(
                "reviewer-rejection",
                matches!((first_decision, first_experiment), (Some(d), Some(x)) if d < x),
                format!(
                    "first decision that does not admit at fact {first_decision:?}, first experiment at {first_experiment:?}"
                ),
            );
            let last = executions.last();
            check(
                "verifier-passed",
                last.is_some_and(|x| {
                    x["verifier"]["passed"] == true && failed_checks(x).is_empty()
                }),
                format!(
                    "last record: verifier {}",
                    last.map(|x| x["verifier"]["passed"].to_string())
                        .unwrap_or_default()
                ),
            );
            let links_all = recipe.is_some_and(|(_, _, v)| {
                r.records
                    .iter()
                    .filter(|(k, _, _)| k == "execution-record")
                    .all(|(_, d, _)| {
                        v["links"]["execution_records"]
                            .as_array()
                            .is_some_and(|a| a.iter().any(|l| l == &json!(d.to_string())))
                    })
            });
            check(
                "recipe-signed",
                links_all,
                format!(
                    "recipe {} links every execution record",
                    recipe
                        .map(|(_, d, _)| d.to_string())
                        .unwrap_or("missing".into())
                ),
            );
            let approved = r.hil.iter().all(|h| h.state == "approved");
            check(
                "hil-answered",
                approved && !r.hil.is_empty(),
                format!("{} requests, all approved: {approved}", r.hil.len()),
            );
        }
        ("hil-denial", _) => {
            check("ended-denied", r.end == "hil/denied", r.end.clone());
            let denied = executions
                .last()
                .is_some_and(|x| outcomes(x).iter().any(|o| o == "denied"));
            check(
                "denied-step-not-run",
                denied && recipe.is_none(),
                format!(
                    "last record's steps: {:?}; recipe: {}",
                    executions.last().map(|x| outcomes(x)),
                    recipe.is_some()
                ),
            );
        }
        ("active-pause", _) => {
            let paused = executions.iter().any(|x| {
                outcomes(x)
                    .iter()
                    .any(|o| o == "refused:local-binding/paused")
            });
            check(
                "paused-step-not-run",
                paused && recipe.is_none(),
                format!(
                    "records' steps: {:?}; end {}",
                    executions.iter().map(|x| outcomes(x)).collect::<Vec<_>>(),
                    r.end
                ),
            );
        }
        ("interruption", _) => {
            check(
                "ended-unknown",
                r.end == "room/experiment-unknown",
                r.end.clone(),
            );
            let x = experiments.last();
            let steps: Vec<String> = x
                .and_then(|x| x["steps"].as_array())
                .into_iter()
                .flatten()
                .map(|s| s["state"].as_str().unwrap_or("?").to_owned())
                .collect();
            let unknown = steps.iter().position(|s| s == "UNKNOWN");
            let never_after =
                unknown.is_some_and(|u| steps[u + 1..].iter().all(|s| s == "PENDING"));
            check(
                "unknown-never-repeated",
                never_after && x.is_some_and(|x| x["state"] == "DESTROYED") && recipe.is_none(),
                format!(
                    "journal steps {steps:?}, experiment {}",
                    x.map(|x| x["state"].to_string()).unwrap_or_default()
                ),
            );
        }
        (_, _) => {
            // A retained negative: the verifier, not prose, fails it.
            let last = executions.last();
            let failed = last.map(|x| failed_checks(x)).unwrap_or_default();
            check(
                "verifier-fails-negative",
                r.end != "concluded" && !failed.is_empty() && recipe.is_none(),
                format!("end {}, failed checks {failed:?}", r.end),
            );
        }
    }
}

/// Whether a QEMU process still names `instance`.
fn qemu_left(instance: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", instance])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
