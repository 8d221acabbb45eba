//! `reach demo`, the README's main command, run as a user runs it: the built `reach` binary
//! beside the role binaries (`scripts/test.sh` builds them all first), no configuration.
//!
//! It must bring the whole body up, get one cited reply to each question through the loopback
//! Discord, print the committed trail of each, stop every role, and remove its state.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn demo(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reach"))
        .arg("demo")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reach demo starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("reach demo exits")
}

/// The state directory the demo announced; it must be gone after exit.
fn state_dir(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("state: "))
        .expect("the demo names its state directory");
    PathBuf::from(line.split(" (").next().expect("path"))
}

/// The replies the demo printed, one per question, each with its trail's records.
fn answers(stdout: &str) -> Vec<(String, Vec<String>)> {
    enum At {
        Elsewhere,
        Reply,
        Trail,
    }
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut at = At::Elsewhere;
    for line in stdout.lines() {
        if let Some(reply) = line.strip_prefix("Reach ‹ ") {
            out.push((reply.to_owned(), Vec::new()));
            at = At::Reply;
        } else if line.starts_with("reach trail ") {
            at = At::Trail;
        } else if line.is_empty() {
            at = At::Elsewhere;
        } else if let (At::Reply, Some((reply, _))) = (&at, out.last_mut()) {
            // The demo indents a reply's later lines under its first.
            reply.push('\n');
            reply.push_str(line.trim_start());
        } else if let (At::Trail, Some((_, trail))) = (&at, out.last_mut())
            && !line.starts_with("      ")
        {
            // A record's line; its fields follow, indented deeper.
            let record = line.split_whitespace().next().unwrap_or_default();
            trail.push(record.to_owned());
        }
    }
    out
}

fn assert_answered(stdout: &str, n: usize) {
    let answers = answers(stdout);
    assert_eq!(answers.len(), n, "one reply per question:\n{stdout}");
    for (reply, trail) in &answers {
        // The reply cites at least one commit-pinned source in angle brackets (no embeds).
        assert!(
            reply.contains("<https://"),
            "the reply carries its citations: {reply:?}"
        );
        for record in [
            "DiscordEventAdmission@1",
            "ReachTurn@1",
            "DiscordDeliveryIntent@1",
            "ReachDelivery@1",
        ] {
            assert!(
                trail.iter().any(|r| r == record),
                "the trail of {reply:?} shows {record}: {trail:?}\n{stdout}"
            );
        }
    }
    assert!(
        stdout.contains("KNOWN_SENT"),
        "each delivery settled: {stdout}"
    );
}

#[test]
fn demo_answers_the_default_question_with_citations_and_its_trail() {
    let out = demo(&[], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reach demo failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("8 roles started as separate processes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("vault: operator recorded GENESIS"),
        "{stdout}"
    );
    assert_answered(&stdout, 1);
    assert!(
        stdout.contains("Discord saw 1 bot message(s)"),
        "exactly one reply reached Discord:\n{stdout}"
    );
    assert!(
        !state_dir(&stdout).exists(),
        "the throwaway state is removed at exit"
    );
}

#[test]
fn demo_asks_given_and_interactive_questions() {
    let out = demo(
        &["--ask", "How do I rotate the trust root?", "--interactive"],
        "What happens when a vault is lost?\n\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reach demo failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("demo-user › How do I rotate the trust root?")
            && stdout.contains("demo-user › What happens when a vault is lost?"),
        "{stdout}"
    );
    assert_answered(&stdout, 2);
    assert!(
        stdout.contains("Discord saw 2 bot message(s)"),
        "one reply per question reached Discord:\n{stdout}"
    );
}
