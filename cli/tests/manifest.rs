//! `reach manifest` as an operator pipes it (issue #34: `reach manifest | head` panicked on the
//! broken pipe).

use std::process::{Command, Stdio};

#[test]
fn reach_manifest_into_a_closed_pipe_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reach"))
        .arg("manifest")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reach manifest starts");
    // The reader goes away before reading, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("reach manifest exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn reach_manifest_lists_the_ports() {
    let out = Command::new(env!("CARGO_BIN_EXE_reach"))
        .arg("manifest")
        .output()
        .expect("reach manifest runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.lines().next().unwrap_or_default().ends_with("valid"),
        "{stdout}"
    );
    assert!(stdout.contains(" server "), "{stdout}");
}
