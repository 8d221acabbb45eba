//! The observation session's protocol (the server and client programs of
//! `reach_vm::observe`) on the host, with no guest: a server in a mount namespace of its own
//! (a tmpfs over `/run`, so the session directory is the guest's path), and clients run
//! under `strace` with every `dup2` delayed on entry. That holds open the window in which a
//! client's fd 1 is the request FIFO (dash redirects it for `printf`, then restores it with
//! `dup2`), which a loaded TCG guest opens only now and then.
//!
//! Needs root (a mount namespace), `unshare`, `strace`, bash and a POSIX sh at `/bin/sh`.

use std::process::Command;
use std::time::Duration;

use reach_vm::observe::{SERVER, SESSION_DIR, client_argv};

/// Starts the server as `START` would (minus the sandbox unit), then runs the client `runs`
/// times; returns one `rc=… out=…` line per run.
fn session(runs: usize, argv: &[String]) -> String {
    let script = format!(
        r#"set -u
server=$1
shift
mount -t tmpfs tmpfs /run || exit 90
d={SESSION_DIR}
mkdir -m 700 "$d" && mkfifo -m 600 "$d/requests" "$d/idle" || exit 91
bash -c "$server" reach-observe "$d" &
s=$!
echo "$s" >"$d/pid"
for _ in $(seq {runs}); do
  out=$(timeout 20 strace -f -o /dev/null -e inject=dup2:delay_enter=300000 "$@")
  printf 'rc=%s out=%s\n' "$?" "$out"
done
kill "$s"
"#
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c"])
        .arg(script)
        .arg("observe-protocol")
        .arg(SERVER)
        .args(argv)
        .output()
        .expect("unshare runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Each observation gets its own output and status, though the server acts while the client
/// still has its fd 1 on the request FIFO: the output goes to the client's own copy of its
/// stream, never into the FIFO. Against a server that wrote to `/proc/<client>/fd/1`, the
/// first run came back `rc=0 out=` (the output went into the FIFO) and the next ones timed
/// out (the server read that output as requests and lost their framing).
#[test]
fn an_observation_keeps_its_output_while_the_client_sends_its_request() {
    let argv = client_argv(
        &["/bin/echo".to_owned(), "observed".to_owned()],
        Duration::from_secs(5),
    );
    let got = session(3, &argv);
    assert_eq!(got, "rc=0 out=observed\n".repeat(3));
}
