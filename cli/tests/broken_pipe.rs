//! Every `reach` verb that prints survives a reader that goes away (`reach … | head`): before,
//! `println!` panicked on the broken pipe (Rust ignores SIGPIPE). `reach manifest` and
//! `reach corpus eval` write through their own writers and have their own tests; this one runs
//! a verb that prints with `println!`, through the process-wide hook (`src/quiet_pipe.rs`).

use std::process::{Command, Stdio};

#[test]
fn a_println_verb_into_a_closed_pipe_does_its_work_and_ends_quietly() {
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["scribe", "identities", "--state"])
        .arg(state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reach scribe identities starts");
    // The reader goes away before reading, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("reach exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The identities were minted before the summary line was lost.
    let again = Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["scribe", "identities", "--state"])
        .arg(state.path())
        .output()
        .expect("reach scribe identities runs");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(!stdout.contains("root created"), "{stdout}");
}
