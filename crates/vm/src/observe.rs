//! The observation session: one read-only sandbox per instance, in which every observation
//! runs as a child process.
//!
//! An observation must run with a kernel-enforced read-only view of the filesystem and IP
//! only to the guest's loopback. systemd builds that sandbox for a unit (mount namespace,
//! cgroup IP filter, no new privileges); building it costs about 0.4 s under TCG, and creating
//! and following a transient unit another 0.45 s, so a sandbox per observation made a
//! seven-check verifier take 17 s. Here the sandbox is built once: the broker starts one
//! transient service per instance, [`SESSION_UNIT_PREFIX`]`*.service`, with exactly
//! [`READ_ONLY_PROPERTIES`], whose main process ([`SERVER`], a fixed bash program) reads
//! requests from a FIFO and runs each as its own child. A child inherits everything the
//! sandbox is: the mount namespace, the unit's cgroup (and so its IP filter), the bounding
//! set and `no_new_privs`; it cannot leave them.
//!
//! Each observation is one guest-agent command, [`CLIENT`]: it makes a reply FIFO, sends its
//! own pid, the deadline and the argv, and waits for the exit status. The server's child
//! writes straight into the client's standard output and error (through the client's copies
//! of them, `/proc/<client>/fd/7` and `8`, of the pipes the guest agent captures), so the
//! agent reports the observation's own bytes and exit status exactly as if it had run it.
//! Not fd 1: while the client writes its request, its fd 1 *is* the request FIFO, and a
//! server quick enough to open `/proc/<client>/fd/1` then wrote the command's output into
//! the FIFO, so the observation came back empty with exit 0 and the server read the output
//! as requests (`tests/observe_protocol.rs` holds that window open).
//!
//! A client that finds no live session exits [`NO_SESSION_EXIT`] with [`NO_SESSION`] on
//! stderr and runs nothing; the broker then starts one ([`start_argv`]) and asks again, once.
//!
//! **Architecture Invariant:** nothing an observation names runs outside the session's unit:
//! the client only relays, and the server only runs what a request carries, inside itself.
//! The broker runs one command per instance at a time (its agent slot), so requests never
//! interleave in the FIFO. A new session makes a fresh request FIFO, so a stale server (its
//! pid file lost) never takes a request.

use std::time::Duration;

/// systemd's transient-unit runner, present in every image (`systemd-sysv` is mandatory).
pub const SYSTEMD_RUN: &str = "/usr/bin/systemd-run";

/// The session's directory in the guest (a tmpfs): the request FIFO, the server's pid, and
/// one reply FIFO per observation in flight. Root-only.
pub const SESSION_DIR: &str = "/run/reach-observe";

/// Each session's unit is this prefix, a per-start suffix, and `.service`.
pub const SESSION_UNIT_PREFIX: &str = "reach-observe-";

/// How long one session may live; a client that finds it gone gets a new one.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(6 * 3600);

/// What a client prints on stderr when no session is alive: it ran nothing.
pub const NO_SESSION: &str = "reach-observe: no session";
/// The client's exit status then (and only then, with [`NO_SESSION`] on stderr).
pub const NO_SESSION_EXIT: i64 = 125;

/// How much longer the server lets a command run than the broker waits for it: the broker's
/// deadline always fires first and reports the command timed out; the server then kills it.
pub const SERVER_GRACE_S: u64 = 2;

/// The sandbox properties of the session's unit. `ProtectSystem=strict` and `ReadOnlyPaths=/`
/// make every mount read-only (API filesystems included); `IPAddressDeny` with
/// `IPAddressAllow=localhost` lets IP reach only the guest's loopback (a guest with network
/// `none` has nothing else; this holds even where it would). Unix sockets stay usable: reading
/// a service's state asks its manager over one, and what a manager does on request is what
/// the verifier's no-mutation check catches.
pub const READ_ONLY_PROPERTIES: [&str; 12] = [
    "ProtectSystem=strict",
    "ProtectHome=read-only",
    "ReadOnlyPaths=/",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "NoNewPrivileges=yes",
    "IPAddressDeny=any",
    "IPAddressAllow=localhost",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
];

/// The session's server, `bash -c SERVER reach-observe DIR`, the unit's main process.
/// Requests are NUL-separated fields: the client's pid, the deadline in seconds, the number
/// of arguments, then the arguments; fields that are not numbers end the request unread (no
/// shell arithmetic on them). Each request runs in a background child: the command in a
/// process group of its own, its streams the client's (`/proc/<client>/fd/7` and `8`), a
/// watchdog that kills the whole group at the deadline (a `read -t` on a FIFO nobody writes:
/// no process is started to wait), and the exit status written to the client's reply pipe
/// (`/proc/<client>/fd/4`). Forks only: under TCG each program started costs 40–130 ms.
/// The text has no `${`: systemd expands `${NAME}` in a unit's command line (to nothing when
/// unset) before bash sees it.
pub const SERVER: &str = r#"set -u
d=$1
n='^[0-9]+$'
exec 3<>"$d/requests" 9<>"$d/idle" || exit 1
while IFS= read -r -d '' c <&3 && IFS= read -r -d '' t <&3 && IFS= read -r -d '' k <&3; do
  [[ $c =~ $n && $t =~ $n && $k =~ $n ]] || continue
  set --
  while [ "$#" -lt "$k" ] && IFS= read -r -d '' x <&3; do set -- "$@" "$x"; done
  (
    set -m
    "$@" </dev/null >>"/proc/$c/fd/7" 2>>"/proc/$c/fd/8" &
    p=$!
    { read -r -t "$t" -u 9 _; kill -KILL -- "-$p"; } &
    w=$!
    wait "$p"
    r=$?
    kill "$w"
    echo "$r" 1<>"/proc/$c/fd/4"
  ) 2>/dev/null &
done
"#;

/// An observation, `sh -c CLIENT reach-observe SECONDS ARGV…`, run by the guest agent (POSIX
/// sh, which starts in a third of bash's time under TCG). It first copies its standard
/// output and error to fds 7 and 8, which no redirection below moves: the server writes the
/// command's streams there (fd 1 is the request FIFO while `printf` runs). Its reply pipe
/// is a here-document (a pipe in dash, quoted so nothing forks) that it holds open for
/// writing too, so the read waits for the server's line. Exits with the command's status;
/// [`NO_SESSION_EXIT`] with [`NO_SESSION`] when no session is alive (nothing ran).
pub const CLIENT: &str = r#"exec 7>&1 8>&2
d=/run/reach-observe
t=$1
shift
p=
read -r p 2>/dev/null <"$d/pid"
if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null || [ ! -p "$d/requests" ]; then
  echo "reach-observe: no session" >&2
  exit 125
fi
exec 4<<'REPLY'
REPLY
exec 5>"/proc/$$/fd/4"
printf '%s\0' "$$" "$t" "$#" "$@" 1<>"$d/requests"
read -r rc <&4
exit "$rc"
"#;

/// Starts a session: `bash -c START reach-observe-start UNIT SERVER PROPERTIES…`, unconfined.
/// A fresh request FIFO (a stale server keeps the old one, unlinked) and the idle FIFO the
/// watchdogs wait on, the unit with the sandbox, then its main pid, written last: a client
/// finds a session only once it can run.
pub const START: &str = r#"set -eu
d=/run/reach-observe
u=$1
server=$2
shift 2
mkdir -p -m 700 "$d"
rm -f "$d/pid" "$d/requests" "$d/idle"
mkfifo -m 600 "$d/requests" "$d/idle"
/usr/bin/systemd-run --quiet --collect --service-type=exec --unit="$u" "$@" \
  -- /bin/bash -c "$server" reach-observe "$d"
pid=$(/usr/bin/systemctl show --property=MainPID --value "$u")
[ "$pid" -gt 0 ]
echo "$pid" >"$d/pid.new"
mv "$d/pid.new" "$d/pid"
"#;

const BASH: &str = "/bin/bash";
const SH: &str = "/bin/sh";

/// The argv that runs `argv` in the instance's session, bounded by `timeout` (the server
/// allows [`SERVER_GRACE_S`] more). This is what the broker reports as an observation's argv.
pub fn client_argv(argv: &[String], timeout: Duration) -> Vec<String> {
    let mut v = vec![
        SH.to_owned(),
        "-c".to_owned(),
        CLIENT.to_owned(),
        "reach-observe".to_owned(),
        (timeout.as_secs().max(1) + SERVER_GRACE_S).to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// The argv that starts a session as `unit` (a name [`SESSION_UNIT_PREFIX`]`…`.service).
pub fn start_argv(unit: &str) -> Vec<String> {
    let mut v = vec![
        BASH.to_owned(),
        "-c".to_owned(),
        START.to_owned(),
        "reach-observe-start".to_owned(),
        unit.to_owned(),
        SERVER.to_owned(),
    ];
    for p in READ_ONLY_PROPERTIES {
        v.push(format!("--property={p}"));
    }
    v.push(format!(
        "--property=RuntimeMaxSec={}",
        SESSION_LIFETIME.as_secs()
    ));
    v
}

/// A fresh unit name for a session started now.
pub fn unit_name(nonce: u64) -> String {
    format!("{SESSION_UNIT_PREFIX}{nonce:x}.service")
}

/// Whether a client's outcome says no session was alive (and so nothing ran).
pub fn no_session(exit_code: Option<i64>, stderr: &[u8]) -> bool {
    exit_code == Some(NO_SESSION_EXIT) && stderr.trim_ascii_end() == NO_SESSION.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_argv_carries_the_deadline_and_the_command_after_the_script() {
        let argv = client_argv(
            &["/bin/ls".to_owned(), "/sys/class/net".to_owned()],
            Duration::from_secs(30),
        );
        assert_eq!(argv[..2], [SH, "-c"]);
        assert_eq!(argv[2], CLIENT);
        assert_eq!(
            argv[3..],
            ["reach-observe", "32", "/bin/ls", "/sys/class/net"]
        );
    }

    #[test]
    fn a_session_starts_with_every_sandbox_property() {
        let argv = start_argv(&unit_name(0xabc));
        assert_eq!(argv[4], "reach-observe-abc.service");
        assert_eq!(argv[5], SERVER);
        for p in READ_ONLY_PROPERTIES {
            assert!(argv.contains(&format!("--property={p}")), "{p}");
        }
        assert!(argv.contains(&"--property=RuntimeMaxSec=21600".to_owned()));
    }

    #[test]
    fn only_the_exact_marker_means_no_session() {
        assert!(no_session(Some(125), b"reach-observe: no session\n"));
        assert!(!no_session(Some(125), b"mkfifo: cannot create fifo\n"));
        assert!(!no_session(Some(1), b"reach-observe: no session\n"));
        assert!(!no_session(None, b"reach-observe: no session\n"));
    }

    #[test]
    fn systemd_has_nothing_to_expand_in_the_server() {
        // The server is one argument of the unit's command line (systemd replaces `$NAME` only
        // as a whole argument); the other scripts go through the agent.
        assert!(!SERVER.contains("${"));
    }

    #[test]
    fn the_scripts_name_the_session_dir_they_are_given() {
        assert!(CLIENT.contains(&format!("d={SESSION_DIR}\n")));
        assert!(START.contains(&format!("d={SESSION_DIR}\n")));
        assert!(START.contains(SYSTEMD_RUN));
        assert!(CLIENT.contains(NO_SESSION));
        assert!(CLIENT.contains(&format!("exit {NO_SESSION_EXIT}\n")));
    }
}
