//! `reach task acceptance` as an operator runs it: the built `reach` beside the role binaries,
//! the shared image cache. It refuses to start while a required gate is missing, naming it,
//! and starts nothing; with every gate present it runs the five scenarios on real guests and
//! writes a report in which every check passed.

use std::path::Path;
use std::process::Command;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn acceptance_names_a_missing_gate_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs/postfix-local-delivery"),
        &pack,
    );
    // One variant only: the story, with no retained negative run.
    let answers = pack.join("fixture/answers.toml");
    let text = std::fs::read_to_string(&answers).unwrap();
    assert!(text.contains("\"reference\", \"missed-open-relay\""));
    std::fs::write(
        &answers,
        text.replace("\"reference\", \"missed-open-relay\"", "\"reference\"")
            .replace("[\"missed-open-relay\"]", "[\"reference\"]"),
    )
    .unwrap();
    let report = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["task", "acceptance", "--pack"])
        .arg(&pack)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("reach task acceptance runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a required gate is missing")
            && stderr.contains("retained negative")
            && stderr.contains("[\"reference\"]")
            && stderr.contains("nothing was started"),
        "{stderr}"
    );
    assert!(!report.exists(), "no report without a run");
}

#[test]
fn acceptance_runs_every_scenario_and_reports_each_check() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args([
            "task",
            "acceptance",
            "--cache",
            "/var/tmp/reach-vm-images",
            "--report",
        ])
        .arg(&report)
        .output()
        .expect("reach task acceptance runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["format"], "reach.task.acceptance.v1");
    assert_eq!(r["passed"], true, "{r:#}");
    assert_eq!(
        r["evidence_class"],
        "deterministic-inference/real-execution"
    );
    assert_eq!(r["source_commit"].as_str().unwrap().len(), 40, "{r:#}");
    let scenarios: Vec<&str> = r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        scenarios,
        [
            "story",
            "hil-denial",
            "active-pause",
            "interruption",
            "retained-negative:missed-open-relay"
        ]
    );
    for s in r["scenarios"].as_array().unwrap() {
        assert!(
            s["retained"]["run"].as_str().unwrap().starts_with("run-"),
            "{s:#}"
        );
        assert!(s["wall_s"].as_f64().unwrap() > 0.0);
    }
    // Each scenario's own checks are there, each with its evidence, and each passed.
    let checks = r["checks"].as_array().unwrap();
    for (scenario, check) in [
        ("story", "reviewer-rejection"),
        ("story", "verifier-passed"),
        ("story", "recipe-signed"),
        ("hil-denial", "denied-step-not-run"),
        ("active-pause", "paused-step-not-run"),
        ("active-pause", "resume-without-reactivation"),
        ("interruption", "unknown-never-repeated"),
        (
            "retained-negative:missed-open-relay",
            "verifier-fails-negative",
        ),
    ] {
        let c = checks
            .iter()
            .find(|c| c["scenario"] == scenario && c["check"] == check)
            .unwrap_or_else(|| panic!("no {scenario}/{check} in {r:#}"));
        assert_eq!(c["passed"], true, "{c}");
        assert!(!c["evidence"].as_str().unwrap().is_empty());
    }
    assert!(checks.iter().all(|c| c["passed"] == true));
    // The story's two guests were read after their verifiers: VM1 saw no restart, VM2 one.
    let witness = checks
        .iter()
        .find(|c| c["scenario"] == "story" && c["check"] == "restarts-once-in-guest")
        .unwrap_or_else(|| panic!("no story/restarts-once-in-guest in {r:#}"));
    assert!(
        witness["evidence"]
            .as_str()
            .unwrap()
            .starts_with("2 guests read after their verifier saw 1 restart(s)"),
        "{witness}"
    );
}
