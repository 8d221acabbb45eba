//! Group commit for SQLite: many synced commits, one `fsync` of the write-ahead log.
//!
//! Every SQLite commit is written to the WAL with `synchronous=NORMAL` (frames handed to the OS,
//! no flush), under the single writer. A commit that must be [`super::Durability::Synced`] then
//! waits here, *after* releasing the writer, for a flush of the WAL file that **started after
//! its commit returned**. One flush covers every commit written before it began, so concurrent
//! chains share flushes instead of queueing one `fsync` each behind the writer, and the writer
//! keeps appending while a flush is in progress (the way PostgreSQL's WAL writer groups
//! commits).
//!
//! Why this is as durable as `synchronous=FULL`, which is exactly "append the frames, then
//! `fsync` the WAL file":
//! - `fsync` flushes every byte written to the file's inode before the call, whichever
//!   connection wrote it; so a commit's frames, and the WAL header of a restarted log, are on
//!   stable storage when a flush that began after the commit ends.
//! - WAL recovery replays a prefix (cumulative frame checksums), so a durable commit implies
//!   every earlier one is durable too.
//! - With `NORMAL`, SQLite itself syncs the WAL before a checkpoint copies it and the database
//!   after; a checkpoint never makes durable data depend on an unsynced frame.
//! - The WAL file exists for as long as a connection is open. The writer pool keeps its one
//!   connection for the vault's life; a flush still opens the file by path each time, and a
//!   missing file means the last connection closed, which checkpoints and syncs the database.
//! - A WAL file is created afresh when a vault opens (the last close removed the old one), and
//!   its name is an entry of the directory, which `fsync` of the file does not promise to make
//!   durable. SQLite syncs the directory on a new WAL's first sync, which `synchronous=NORMAL`
//!   leaves to the first checkpoint; so the first flush of each WAL file (told apart by its
//!   inode) syncs the directory too, as SQLite's `FULL` would have.
//!
//! Where the flush runs: a synced commit has nothing to do until it ends, so a flush it leads
//! runs on its own worker thread (`block_in_place`, on the multi-thread runtime core uses),
//! sparing the two thread hand-offs of the blocking pool (about 75 µs of a SUBMITTING step on
//! the reference machine, issue 4's bench). [`GroupCommit::sync`], awaited beside other work
//! (an admission's flush beside its turn), keeps the blocking pool so that work runs meanwhile.
//!
//! A failed `fsync` poisons the gate: after one, the kernel may have dropped the dirty pages
//! ("fsyncgate"), so no later flush can prove anything and every synced commit fails until the
//! vault is reopened.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::RuntimeFlavor;
use tokio::sync::watch;

use crate::error::{LedgerError, Result};

/// Flushes of one vault's WAL, numbered; see the module documentation.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    wal: PathBuf,
    /// The inode of the WAL file whose directory entry a flush has synced (0: none yet).
    dir_synced_for: Arc<AtomicU64>,
    state: Mutex<State>,
    /// The number of the last completed flush (`u64::MAX` once poisoned).
    completed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    /// The number of the last flush that began.
    started: u64,
    /// Whether a flush is in progress (it has number `started`).
    running: bool,
    poisoned: bool,
}

const POISONED: u64 = u64::MAX;

/// Where a flush runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushOn {
    BlockingPool,
    CallerThread,
}

impl GroupCommit {
    /// The gate for the database at `db` (its WAL is `<db>-wal`, SQLite's fixed name).
    pub(crate) fn new(db: &std::path::Path) -> Self {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        Self {
            wal: PathBuf::from(wal),
            dir_synced_for: Arc::new(AtomicU64::new(0)),
            state: Mutex::new(State::default()),
            completed: watch::channel(0).0,
        }
    }

    /// The number of flushes begun so far.
    pub(crate) fn flushes(&self) -> u64 {
        self.lock().started
    }

    /// Returns once every commit that returned before this call is on stable storage. A flush
    /// this call leads runs on a blocking-pool thread, so the caller's task may await other
    /// work beside it.
    pub(crate) async fn sync(&self) -> Result<()> {
        self.sync_on(FlushOn::BlockingPool).await
    }

    /// As [`GroupCommit::sync`] for a caller with nothing else to do until the flush ends (a
    /// synced commit): a flush it leads runs on the caller's own worker thread
    /// (`block_in_place`), sparing two thread hand-offs, where the runtime allows it.
    pub(crate) async fn sync_in_place(&self) -> Result<()> {
        self.sync_on(FlushOn::CallerThread).await
    }

    async fn sync_on(&self, on: FlushOn) -> Result<()> {
        let mut completed = self.completed.subscribe();
        // Any flush numbered `need` or later begins after this point, so it covers our commit.
        let need = self.lock().started + 1;
        loop {
            let lead = {
                let mut s = self.lock();
                if s.poisoned {
                    return Err(poisoned());
                }
                if *completed.borrow_and_update() >= need {
                    return Ok(());
                }
                if s.running {
                    None
                } else {
                    s.running = true;
                    s.started += 1;
                    Some(s.started)
                }
            };
            match lead {
                Some(n) => return self.flush(n, on).await,
                None => {
                    // The running flush began before us (or is ours to wait for): wait for it
                    // to end, then look again.
                    if completed.changed().await.is_err() {
                        return Err(poisoned());
                    }
                }
            }
        }
    }

    /// Runs flush number `n` and publishes its outcome to every waiter.
    async fn flush(&self, n: u64, on: FlushOn) -> Result<()> {
        // The leader may be dropped while its flush runs on the pool (a caller's request was
        // cancelled); the guard then hands the lead back, or every later waiter would wait on
        // a flush that never publishes.
        let lead = Lead(self);
        let wal = self.wal.clone();
        let dir_synced_for = self.dir_synced_for.clone();
        let work = move || flush_wal(&wal, &dir_synced_for);
        // `block_in_place` exists only on the multi-thread runtime (core's); elsewhere (a
        // current-thread test runtime) the flush goes to the blocking pool.
        let in_place = on == FlushOn::CallerThread
            && tokio::runtime::Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread;
        let outcome = if in_place {
            tokio::task::block_in_place(work)
        } else {
            tokio::task::spawn_blocking(work)
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        };
        std::mem::forget(lead);
        let mut s = self.lock();
        s.running = false;
        match outcome {
            Ok(()) => {
                self.completed.send_replace(n);
                Ok(())
            }
            Err(e) => {
                s.poisoned = true;
                self.completed.send_replace(POISONED);
                tracing::error!(error = %e, "fsync of the vault's write-ahead log failed; synced commits refuse until the vault is reopened");
                Err(LedgerError::Durability(e.to_string()))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few integers updated in place: a panic cannot leave it half-written.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Flushes the WAL file's data and, the first time this file is flushed, its directory entry.
fn flush_wal(wal: &Path, dir_synced_for: &AtomicU64) -> std::io::Result<()> {
    let f = match std::fs::File::open(wal) {
        Ok(f) => f,
        // No WAL: the last connection closed, checkpointing into a synced database file.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    f.sync_data()?;
    let inode = inode_of(&f)?;
    if dir_synced_for.load(Ordering::Acquire) != inode {
        reach_durable_file::sync_dir_of(wal)?;
        dir_synced_for.store(inode, Ordering::Release);
    }
    Ok(())
}

/// The file's inode number, asking the kernel for nothing else.
///
/// A full `fstat` (`File::metadata`) asks for the timestamps too, and on a filesystem with
/// multigrain timestamps (ext4, xfs, btrfs... since Linux 6.13) a queried ctime makes the next
/// write stamp a fine-grained time, so every commit between two flushes dirtied the WAL's
/// inode and every `fdatasync` wrote the inode block as well: ~50 µs more per flush on the
/// reference machine (issue 4's bench, session 11). `statx` with only `STATX_INO` leaves the
/// timestamps unqueried; where it is unavailable (an old kernel, a seccomp filter) the full
/// `fstat` answers instead.
fn inode_of(f: &std::fs::File) -> std::io::Result<u64> {
    use rustix::fs::{AtFlags, StatxFlags, statx};
    match statx(f, c"", AtFlags::EMPTY_PATH, StatxFlags::INO) {
        Ok(s) if s.stx_mask & StatxFlags::INO.bits() != 0 => Ok(s.stx_ino),
        _ => Ok(f.metadata()?.ino()),
    }
}

/// The lead of a flush in progress; dropped unfinished, it frees the lead and wakes the waiters
/// so that one of them leads a new flush (this one's outcome is never published: nobody is
/// left to act on it, and a later flush covers every commit it would have).
struct Lead<'a>(&'a GroupCommit);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        self.0.lock().running = false;
        self.0.completed.send_modify(|_| {});
    }
}

fn poisoned() -> LedgerError {
    LedgerError::Durability("an earlier fsync of the write-ahead log failed".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate over a WAL file with some frames in it, in a fresh directory.
    fn gate_with_wal() -> (tempfile::TempDir, Arc<GroupCommit>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("v.sqlite-wal"), b"frames").unwrap();
        let g = Arc::new(GroupCommit::new(&dir.path().join("v.sqlite")));
        (dir, g)
    }

    /// A gate whose WAL cannot be opened: it lies "under" a regular file (ENOTDIR), so every
    /// flush fails.
    fn unflushable_gate(dir: &std::path::Path) -> GroupCommit {
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        GroupCommit::new(&file.join("v.sqlite"))
    }

    /// A lone waiter leads one flush; then 64 concurrent waiters (every other one in place when
    /// `mixed`) all return, sharing at most one flush each.
    async fn sixty_four_waiters_share_flushes(g: &Arc<GroupCommit>, mixed: bool) {
        g.sync().await.unwrap();
        assert_eq!(*g.completed.borrow(), 1, "a lone waiter leads one flush");
        let waiters: Vec<_> = (0..64)
            .map(|i| {
                let g = g.clone();
                tokio::spawn(async move {
                    if mixed && i % 2 == 0 {
                        g.sync_in_place().await
                    } else {
                        g.sync().await
                    }
                })
            })
            .collect();
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        let flushes = *g.completed.borrow() - 1;
        assert!(
            (1..=64).contains(&flushes),
            "64 waiters took {flushes} flushes"
        );
    }

    #[tokio::test]
    async fn concurrent_waiters_share_flushes_and_each_waits_for_one_that_began_after_it() {
        let (_dir, g) = gate_with_wal();
        sixty_four_waiters_share_flushes(&g, false).await;
        // A waiter arriving after all of that still needs a new flush.
        let before = *g.completed.borrow();
        g.sync().await.unwrap();
        assert_eq!(*g.completed.borrow(), before + 1);
    }

    /// On the multi-thread runtime (core's), a synced commit's flush runs in place; waiters of
    /// both kinds still share flushes, and a failure in place poisons the gate as well.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn flushes_in_place_and_on_the_pool_are_shared_and_poison_alike() {
        let (dir, g) = gate_with_wal();
        sixty_four_waiters_share_flushes(&g, true).await;

        let g = unflushable_gate(dir.path());
        assert_eq!(
            g.sync_in_place().await.unwrap_err().code(),
            "ledger/durability"
        );
        assert_eq!(g.sync().await.unwrap_err().code(), "ledger/durability");
    }

    /// A leader dropped while its flush is on the blocking pool (its request was cancelled)
    /// hands the lead back: the next synced commit still returns, after a flush of its own.
    #[tokio::test]
    async fn a_leader_cancelled_mid_flush_does_not_strand_later_commits() {
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("v.sqlite");
        let wal = dir.path().join("v.sqlite-wal");
        // The WAL is a FIFO: opening it for reading blocks until a writer appears, so the
        // leader's flush is held on the pool for as long as the test needs.
        nix::unistd::mkfifo(&wal, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let g = Arc::new(GroupCommit::new(&db));
        let waiter = {
            let g = g.clone();
            tokio::spawn(async move {
                // Queues behind the held leader, then must lead once it is dropped.
                tokio::task::yield_now().await;
                g.sync().await
            })
        };
        // Polled once: it takes the lead, hands its flush to the pool, and is dropped.
        let cancelled = tokio::time::timeout(Duration::ZERO, g.sync()).await;
        assert!(cancelled.is_err(), "the held flush cannot have ended");
        // The held flush keeps the FIFO (renamed); a plain WAL takes its place.
        let held = dir.path().join("held-fifo");
        std::fs::rename(&wal, &held).unwrap();
        std::fs::write(&wal, b"frames").unwrap();
        let later = tokio::time::timeout(Duration::from_secs(10), g.sync()).await;
        let waited = tokio::time::timeout(Duration::from_secs(10), waiter).await;
        // Release the held flush (a read-write open of a FIFO never blocks) so the runtime can
        // shut its pool down, before asserting anything.
        let _release = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&held)
            .unwrap();
        later.expect("a later sync returns").unwrap();
        waited.expect("the waiter returns").unwrap().unwrap();
    }

    /// The first flush of a WAL file syncs its directory entry too, once per file: again after
    /// the file is replaced (a vault reopened), not on every flush.
    #[tokio::test]
    async fn the_first_flush_of_each_wal_file_syncs_its_directory() {
        let (dir, g) = gate_with_wal();
        let wal = dir.path().join("v.sqlite-wal");
        let inode = || std::fs::metadata(&wal).unwrap().ino();
        assert_eq!(g.dir_synced_for.load(Ordering::Acquire), 0);
        g.sync().await.unwrap();
        let first = inode();
        assert_eq!(g.dir_synced_for.load(Ordering::Acquire), first);
        g.sync().await.unwrap();
        assert_eq!(g.dir_synced_for.load(Ordering::Acquire), first);
        // A new file under the same name (keeping the old one alive so its inode is not reused).
        let _old = std::fs::File::open(&wal).unwrap();
        std::fs::remove_file(&wal).unwrap();
        std::fs::write(&wal, b"new frames").unwrap();
        assert_ne!(inode(), first);
        g.sync().await.unwrap();
        assert_eq!(g.dir_synced_for.load(Ordering::Acquire), inode());
    }

    /// The inode a flush reads without querying timestamps is the file's own.
    #[test]
    fn inode_of_is_the_files_inode() {
        let (dir, _g) = gate_with_wal();
        let wal = dir.path().join("v.sqlite-wal");
        let f = std::fs::File::open(&wal).unwrap();
        assert_eq!(
            inode_of(&f).unwrap(),
            std::fs::metadata(&wal).unwrap().ino()
        );
        let other = dir.path().join("other");
        std::fs::write(&other, b"x").unwrap();
        assert_ne!(
            inode_of(&std::fs::File::open(&other).unwrap()).unwrap(),
            inode_of(&f).unwrap()
        );
    }

    #[tokio::test]
    async fn a_missing_wal_is_nothing_to_flush() {
        let dir = tempfile::tempdir().unwrap();
        let g = GroupCommit::new(&dir.path().join("absent.sqlite"));
        g.sync().await.unwrap();
    }

    #[tokio::test]
    async fn a_failed_flush_poisons_every_later_sync() {
        let dir = tempfile::tempdir().unwrap();
        let g = unflushable_gate(dir.path());
        let err = g.sync().await.unwrap_err();
        assert_eq!(err.code(), "ledger/durability");
        let again = g.sync().await.unwrap_err();
        assert_eq!(again.code(), "ledger/durability");
    }
}
