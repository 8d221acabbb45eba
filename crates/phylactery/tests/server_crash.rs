//! A PostgreSQL server crash: the vault's synced steps survive it, and what it loses of the
//! deferred ones never becomes a second send.
//!
//! The test runs a private server of its own (`initdb` into a temporary directory, run as the
//! `postgres` user because the server refuses to run as root), with the WAL writer slowed to its
//! longest delay (10 s), so an asynchronous commit stays in the server's WAL buffers until a
//! synchronous one flushes it. It drives chains to SUBMITTING and settles them (deferred), kills
//! every server process with SIGKILL, as a crash would, restarts the server (crash recovery from
//! the WAL on disk) and reopens the vault:
//! - every admission and every SUBMITTING is there: each was flushed before its step returned;
//! - an intent is SUBMITTING or KNOWN_SENT, never PENDING or CLAIMED, so recovery turns a lost
//!   settlement into UNKNOWN and nothing can be claimed, let alone sent, again.
//!
//! Until session 10 a synced step was an asynchronous commit followed by a `txid_current()`
//! commit that flushes nothing; this test then loses the last chain's admission and SUBMITTING.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

mod common;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, User, chown};
use reach_phylactery::*;

const CHAINS: u64 = 2;

/// The newest installed server's binaries (Debian's layout; `scripts/test.sh` installs them).
fn bindir() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server binaries under /usr/lib/postgresql (scripts/test.sh)")
        .map(|e| e.unwrap().path().join("bin"))
        .filter(|d| d.join("initdb").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
    });
    dirs.pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

/// A command run as the `postgres` user (the server refuses root), as a child of this process
/// so that waiting for it reaps it (a postmaster left a zombie would hold its lock file).
fn as_postgres(program: &Path) -> Command {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the server-crash test runs its own PostgreSQL server as `postgres`, which needs root"
    );
    let pg = User::from_name("postgres")
        .unwrap()
        .expect("a postgres user");
    let mut c = Command::new(program);
    c.uid(pg.uid.as_raw()).gid(pg.gid.as_raw());
    c
}

/// A private server: its data directory and socket directory, and the running process group.
struct Server {
    dir: tempfile::TempDir,
    bin: PathBuf,
    running: Option<Child>,
}

impl Server {
    fn init() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let pg = User::from_name("postgres")
            .unwrap()
            .expect("a postgres user");
        chown(dir.path(), Some(pg.uid), Some(pg.gid)).unwrap();
        let bin = bindir();
        let status = as_postgres(&bin.join("initdb"))
            .args(["--no-sync", "-A", "trust", "-U", "root", "-D"])
            .arg(dir.path().join("data"))
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "initdb failed");
        Server {
            dir,
            bin,
            running: None,
        }
    }

    /// Starts the server in a process group of its own and waits until it accepts connections.
    async fn start(&mut self) {
        let child = as_postgres(&self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-k")
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=",
                "-c",
                "wal_writer_delay=10000",
                "-c",
                "shared_buffers=16MB",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("server.log")).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        self.running = Some(child);
        for _ in 0..300 {
            if accepts_connections(self.dir.path()).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        panic!("the private PostgreSQL server did not start:\n{log}");
    }

    /// SIGKILL to every process of the server, as a crash; returns once the postmaster is gone.
    fn crash(&mut self) {
        let mut child = self.running.take().expect("a running server");
        killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        // The backends and auxiliary processes were in the same group; give the kernel a moment
        // to tear them down and release the old shared memory, then reap them (they were
        // orphaned to this process, their subreaper).
        std::thread::sleep(Duration::from_millis(500));
        reap_orphans();
    }

    fn url(&self) -> String {
        let socket = self.dir.path().to_str().unwrap().replace('/', "%2F");
        format!("postgres://root@{socket}/postgres")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.running.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
            reap_orphans();
        }
    }
}

/// Waits for every child that has ended (the killed server's processes, orphaned to this
/// process as their subreaper), so none is left a zombie.
fn reap_orphans() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Whether the server behind the socket directory accepts a connection.
async fn accepts_connections(socket_dir: &Path) -> bool {
    use sqlx::{ConnectOptions as _, Connection as _};
    let opts = sqlx::postgres::PgConnectOptions::new()
        .socket(socket_dir)
        .username("root")
        .database("postgres");
    match tokio::time::timeout(Duration::from_secs(2), opts.connect()).await {
        Ok(Ok(c)) => {
            let _ = c.close().await;
            true
        }
        _ => false,
    }
}

async fn open_vault(server: &Server, now: UnixMillis) -> Phylactery {
    Phylactery::open(
        VaultConfig::postgres(server.url(), Some("crash".into())),
        Arc::new(ManualClock::new(now)),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_crash_keeps_every_synced_step_and_never_reopens_a_send() {
    // The server's processes are reaped here when it is killed, not left to PID 1.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let mut server = Server::init();
    server.start().await;
    let p = open_vault(&server, T0).await;
    genesis(&p).await;

    let mut intents = Vec::new();
    for n in 0..CHAINS {
        let (admission, flush) = p.admit_unflushed(&request(n)).await.unwrap();
        flush.durable().await.unwrap();
        let turn = p
            .commit_turn(&admission.status().turn_id, &success(n))
            .await
            .unwrap();
        let intent = turn.intent.unwrap().0;
        let claimed = p.claim(&intent, "edge", LEASE).await.unwrap();
        p.mark_submitting(&claimed.lease).await.unwrap();
        // Deferred: a crash may take it.
        p.settle(&claimed.lease, &sent(n)).await.unwrap();
        intents.push(intent);
    }

    server.crash();
    drop(p);
    server.start().await;
    // Core comes back after the leases ran out: no holder of one is left to settle.
    let p = open_vault(&server, T0.plus(LEASE + Duration::from_secs(1))).await;

    for (n, intent) in (0..CHAINS).zip(&intents) {
        let status = p
            .admission_status(&key(n).admission_id())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("admission {n} was flushed before its answer, and is lost"));
        assert_eq!(status.turn_state, TurnState::Succeeded, "chain {n}");
        let state = p.intent(intent).await.unwrap().state;
        assert!(
            matches!(state, IntentState::Submitting | IntentState::KnownSent),
            "chain {n}: SUBMITTING was flushed before the send; found {state}"
        );
    }
    let report = p.recover().await.unwrap();
    assert!(report.claimable_intents.is_empty(), "{report:?}");
    for intent in &intents {
        let state = p.intent(intent).await.unwrap().state;
        assert!(
            matches!(state, IntentState::Unknown | IntentState::KnownSent),
            "a lost settlement awaits evidence; found {state}"
        );
        assert!(
            p.claim(intent, "edge", LEASE).await.is_err(),
            "never claimable again"
        );
    }
    p.close().await;
}
