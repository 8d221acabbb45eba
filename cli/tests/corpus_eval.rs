//! `reach corpus eval FILE` as an operator runs it: the built binary, a question set, and either
//! a directory of their docs or the project's own docs. No body is started.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn eval(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["corpus", "eval"])
        .args(args)
        .output()
        .expect("reach corpus eval runs")
}

fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A small site: one Markdown page, one HTML page, and an excluded page that would compete.
fn docs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "guide/keys.md",
        "# Keys\n\nKeys sign every release.\n\n## Rotating the signing key\n\n\
         Run `reach key rotate` to rotate the signing key; the old key stays valid for a day.\n",
    );
    write(
        d.path(),
        "site/backups.html",
        "<html><body><nav>Home | Keys</nav><main><h1 id=\"backups\">Backups</h1>\
         <p>Nightly backups are kept for thirty days in the archive bucket.</p></main></body></html>",
    );
    write(
        d.path(),
        "old/keys.md",
        "# Rotating the signing key\n\nRotate the signing key with care.\n",
    );
    d
}

const SET: &str = r#"# A set over docs(): the header, two in-corpus questions, one out of it.
{"corpus": "operator docs", "root": "unused", "include": ["**/*.md", "**/*.html"], "exclude": ["old/keys.md"]}
{"question": "How do I rotate the signing key?", "expect": [{"path": "guide/keys.md", "anchor": "rotating-the-signing-key"}], "facts": ["reach key rotate"]}
{"question": "How long are nightly backups kept?", "expect": [{"path": "site/backups.html", "anchor": "backups"}], "facts": ["thirty days"]}
{"question": "What is the capital of Mongolia?", "out_of_corpus": true}
"#;

/// `reach corpus eval` of [`SET`] over [`docs`], with `extra` arguments.
fn eval_ops(extra: &[&str]) -> Output {
    let d = docs();
    let set = d.path().join("ops.jsonl");
    std::fs::write(&set, SET).unwrap();
    let mut args = vec![set.to_str().unwrap(), "--docs", d.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    eval(&args)
}

#[test]
fn a_set_over_an_operators_directory_prints_every_figure() {
    let out = eval_ops(&["--verbose"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    // Two pages built (the excluded one left out); nothing missed, so no MISS lines.
    assert!(lines[0].starts_with("ops: 2 files, "), "{stdout}");
    assert_eq!(lines.len(), 2, "{stdout}");
    for figure in [
        "hit@1 100.0%",
        "hit@3 100.0%",
        "key facts 100.0% (answers ",
        "out-of-corpus refused 100.0%",
        "false refusals 0.0%",
        "answer p50 ",
        "(2 in corpus, 1 out)",
    ] {
        assert!(lines[1].contains(figure), "{figure}: {stdout}");
    }
}

#[test]
fn an_embedding_table_ranks_beside_bm25_and_is_named() {
    // The table the test host's setup distils (scripts/embedding-setup.sh).
    let table = reach_corpus::embed::TEST_HOST_TABLE;
    assert!(
        Path::new(table).exists(),
        "{table}: run scripts/setup-test-host.sh"
    );
    let out = eval_ops(&["--embedding", table]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[1].starts_with("ops: ranked with static embedding "),
        "{stdout}"
    );
    assert!(lines[1].contains(": 3 passages' vectors in "), "{stdout}");
    assert!(lines[2].contains("hit@1 100.0%"), "{stdout}");
    assert!(
        lines[2].contains("out-of-corpus refused 100.0%"),
        "{stdout}"
    );
}

#[test]
fn without_docs_the_project_docs_are_the_corpus() {
    let d = tempfile::tempdir().unwrap();
    let set = d.path().join("reach.jsonl");
    std::fs::write(
        &set,
        r#"{"corpus": "Reach", "root": ".", "include": ["**/*.md"]}
{"question": "How do I add a corpus source?", "expect": [{"path": "docs/operator-guide.md", "anchor": "the-public-corpus"}], "facts": ["reach corpus"]}
{"question": "What is the best recipe for sourdough bread?", "out_of_corpus": true}
"#,
    )
    .unwrap();
    let out = eval(&[set.to_str().unwrap(), "--rounds", "2", "--verbose"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // The embedded README, ARCHITECTURE and docs pages.
    assert!(stdout.starts_with("reach: 5 files, "), "{stdout}");
    let figures = stdout.lines().last().unwrap();
    assert!(
        figures.contains("out-of-corpus refused 100.0%")
            && figures.contains("(1 in corpus, 1 out)"),
        "{stdout}"
    );
}

#[test]
fn refusals_print_once_on_stderr_with_their_code() {
    let d = docs();
    let bad = d.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"corpus\": \"c\", \"root\": \".\", \"include\": []}\nnot json\n",
    )
    .unwrap();
    let no_expect = d.path().join("no-expect.jsonl");
    std::fs::write(
        &no_expect,
        "{\"corpus\": \"c\", \"root\": \".\", \"include\": []}\n{\"question\": \"q\"}\n",
    )
    .unwrap();
    let set = d.path().join("ok.jsonl");
    std::fs::write(&set, SET).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing");
    let not_a_table = d.path().join("guide/keys.md");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![bad.to_str().unwrap()], "eval/malformed"),
        (vec![no_expect.to_str().unwrap()], "eval/no-expectation"),
        (vec![missing.to_str().unwrap()], "eval/set-unreadable"),
        (
            vec![set.to_str().unwrap(), "--docs", missing.to_str().unwrap()],
            "eval/docs-unreadable",
        ),
        (
            vec![
                set.to_str().unwrap(),
                "--docs",
                empty.path().to_str().unwrap(),
            ],
            "eval/no-documents",
        ),
        (
            vec![
                set.to_str().unwrap(),
                "--embedding",
                not_a_table.to_str().unwrap(),
            ],
            "eval/embedding-refused",
        ),
        (
            vec![
                set.to_str().unwrap(),
                "--embedding",
                missing.to_str().unwrap(),
            ],
            "eval/embedding-refused",
        ),
    ];
    for (args, code) in cases {
        let out = eval(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{code}: {stdout}");
        assert!(
            stdout.is_empty(),
            "{code}: stdout carries results only: {stdout}"
        );
        assert!(
            stderr.starts_with(&format!("refused: {code}: ")),
            "{code}: {stderr}"
        );
        assert_eq!(stderr.matches(code).count(), 1, "{stderr}");
    }
}

#[test]
fn a_closed_pipe_ends_the_report_quietly() {
    let d = docs();
    let set = d.path().join("ops.jsonl");
    std::fs::write(&set, SET).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["corpus", "eval", set.to_str().unwrap(), "--docs"])
        .arg(d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reach corpus eval starts");
    // The reader goes away before reading, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("reach corpus eval exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}
