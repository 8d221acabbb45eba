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

#[test]
fn demo_answers_from_the_operators_own_docs_and_refuses_what_they_do_not_cover() {
    let docs = tempfile::tempdir().expect("docs dir");
    std::fs::create_dir_all(docs.path().join("book")).unwrap();
    std::fs::write(
        docs.path().join("guide.md"),
        "# Widgets\n\n## Calibrating a widget\n\nRun `widgetctl calibrate --level 3` to calibrate \
         a widget.<!-- internal note --> Calibration takes about ten seconds.\n",
    )
    .unwrap();
    std::fs::write(
        docs.path().join("book/frobnicator.html"),
        "<html><body><nav>Chapters</nav><main>\n<h1 id=\"frobnicator\">The frobnicator</h1>\n\
         <p>The frobnicator rotates sprockets every <code>interval</code> seconds.</p>\n\
         </main></body></html>\n",
    )
    .unwrap();
    let dir = docs.path().to_str().unwrap();
    let out = demo(
        &[
            "--docs",
            dir,
            "--ask",
            "How do I calibrate a widget?",
            "--ask",
            "What does the frobnicator rotate?",
            "--ask",
            "Who won the football World Cup in 2018?",
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reach demo --docs failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("corpus: your docs at"), "{stdout}");
    let replies = answers(&stdout);
    assert_eq!(replies.len(), 3, "one reply per question:\n{stdout}");
    // Markdown: answered and cited to the file's lines, markup stripped.
    assert!(
        replies[0].0.contains("widgetctl calibrate --level 3")
            && replies[0].0.contains("guide.md#L"),
        "{:?}",
        replies[0].0
    );
    assert!(
        !replies[0].0.contains("internal note"),
        "{:?}",
        replies[0].0
    );
    // Static HTML: the main content, cited to the page.
    assert!(
        replies[1].0.contains("rotates sprockets")
            && replies[1].0.contains("book/frobnicator.html#L"),
        "{:?}",
        replies[1].0
    );
    assert!(!replies[1].0.contains("Chapters"), "{:?}", replies[1].0);
    // Out of corpus: refused before any model call, the gate's figures on the trail.
    assert!(replies[2].0.contains("won't guess"), "{:?}", replies[2].0);
    assert!(
        stdout.contains("reason=corpus/not-in-docs coverage="),
        "{stdout}"
    );
}

#[test]
fn demo_refuses_a_docs_directory_that_is_not_there() {
    let out = demo(&["--docs", "/nonexistent/reach-docs", "--ask", "x"], "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("demo/docs-unreadable"), "{stderr}");
}

#[test]
fn demo_ranks_with_an_embedding_table_core_reads_from_its_corpus_root() {
    // The table the test host's setup distils (scripts/embedding-setup.sh). Core refuses every
    // question as unavailable when the table it finds does not parse, so a cited answer here
    // is core ranking with it.
    let table = reach_corpus::embed::TEST_HOST_TABLE;
    assert!(
        std::path::Path::new(table).exists(),
        "{table}: run scripts/setup-test-host.sh"
    );
    let docs = tempfile::tempdir().expect("docs dir");
    std::fs::write(
        docs.path().join("guide.md"),
        "# Widgets\n\n## Calibrating a widget\n\nRun `widgetctl calibrate --level 3` to calibrate \
         a widget. Calibration takes about ten seconds.\n\n## Cleaning a widget\n\nWipe the \
         widget with a dry cloth.\n",
    )
    .unwrap();
    let dir = docs.path().to_str().unwrap();
    let out = demo(
        &[
            "--docs",
            dir,
            "--embedding",
            table,
            "--ask",
            "How do I calibrate a widget?",
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reach demo --embedding failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ranking: BM25 and the static embedding "),
        "{stdout}"
    );
    let replies = answers(&stdout);
    assert_eq!(replies.len(), 1, "{stdout}");
    assert!(
        replies[0].0.contains("widgetctl calibrate --level 3")
            && replies[0].0.contains("guide.md#L"),
        "{:?}",
        replies[0].0
    );

    // A file that is not a table is refused before anything starts.
    let out = demo(&["--embedding", dir, "--ask", "x"], "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("demo/embedding-refused"), "{stderr}");
}
