//! `reach demo task-pack`, the README's second main command, run as a user runs it: the built
//! `reach` binary beside the role binaries, the shared image cache (which `scripts/test.sh`'s
//! guest tests fill; the demo builds what it lacks). It must run the whole story to a signed
//! recipe, print every HIL request before the demo operator answers it, end with a JSON
//! report naming the evidence class, and remove its state.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn demo_task_pack_runs_the_story_to_a_signed_recipe() {
    let out = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["demo", "task-pack", "--cache", "/var/tmp/reach-vm-images"])
        .output()
        .expect("reach demo task-pack runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    // The story as a person follows it.
    for line in [
        "Chair requests a revision",
        "verifier failed: local-delivery",
        "verifier: every check passed",
        "destroyed (confirmed)",
        "ended: concluded",
        "(verified)",
        "Evidence class: deterministic-inference/real-execution",
    ] {
        assert!(stdout.contains(line), "no {line:?} in\n{stdout}");
    }
    // Every request is printed in full before the demo operator approves it.
    let printed = stdout.matches("\nrollback ").count();
    let approved = stdout.matches("approved by the demo operator").count();
    assert!(approved > 0 && printed >= approved, "{stdout}");

    // The JSON report closes the output.
    let json = &stdout[stdout.rfind("\n{").expect("a JSON report") + 1..];
    let json = &json[..json.rfind('}').unwrap() + 1];
    let report: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(report["end"], "concluded");
    assert_eq!(
        report["evidence_class"],
        "deterministic-inference/real-execution"
    );
    assert!(
        report["recipe_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    // Its state is gone.
    let state = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("state: "))
        .expect("the demo names its state directory");
    let state = PathBuf::from(state.split(" (").next().unwrap());
    assert!(!state.exists(), "{} left behind", state.display());
}

/// `--model local` without its runtime says exactly what is missing and starts nothing.
#[test]
fn demo_task_pack_with_a_local_model_says_what_is_missing() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["demo", "task-pack", "--model", "local"])
        .env("REACH_LOCAL_MODEL_VENV", empty.path())
        .output()
        .expect("reach demo task-pack runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the local model runtime is not installed")
            && stderr.contains(&format!(
                "no virtual environment at {}",
                empty.path().display()
            ))
            && stderr.contains("scripts/local-model-setup.sh")
            && stderr.contains("nothing was started"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing started, nothing printed");
}
