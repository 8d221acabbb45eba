//! The guest-agent client: QGA JSON over the instance's virtio-serial socket.
//!
//! The socket is QEMU's end of the `org.qemu.guest_agent.0` port: it accepts connections
//! before the guest's agent runs, and bytes written before then may be lost or answered
//! late. So every conversation starts with `guest-sync-delimited` and a fresh id, and replies
//! to older ids are discarded. Output and file contents are bounded by named limits, and
//! every result carries the SHA-256 of the exact bytes returned.
//!
//! Why not crates/bounded: it bounds HTTP returns and links an HTTP client, which this
//! offline role must not link; the bounds here are byte counts and a deadline, applied inline.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use reach_digest::Sha256Digest;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Longest reply line accepted (base64 output of a bounded command fits well inside).
pub const MAX_REPLY_LINE: u64 = 8 << 20;
/// Largest file the broker reads or writes through the agent.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Chunk size of guest-file-read / guest-file-write.
const FILE_CHUNK: usize = 48 * 1024;
/// How often a running command's status is polled.
const EXEC_POLL: Duration = Duration::from_millis(50);
/// How far a guest clock may read from the time just set when QGA's hwclock step failed.
const CLOCK_SET_SLACK_NS: i64 = 5_000_000_000;
/// Per-request timeout for an agent round trip (commands have their own deadline).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// the agent socket could not be used
    #[error("guest agent io: {0}")]
    Io(#[from] std::io::Error),
    /// the agent did not answer in time
    #[error("guest agent timed out")]
    Timeout,
    /// the agent socket closed
    #[error("guest agent socket closed")]
    Closed,
    /// the agent answered with an error
    #[error("guest agent error: {0}")]
    Guest(String),
    /// the reply is not QGA
    #[error("guest agent protocol: {0}")]
    Protocol(String),
    /// the file exceeds MAX_FILE_BYTES
    #[error("file exceeds {MAX_FILE_BYTES} bytes")]
    FileTooLarge,
}

/// Bounds of one command run.
#[derive(Debug, Clone, Copy)]
pub struct ExecBounds {
    pub timeout: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is counted as truncated.
    pub max_output: usize,
}

/// The exact outcome of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    pub argv: Vec<String>,
    /// `None` when the command timed out or was killed by a signal.
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_sha256: Sha256Digest,
    pub stderr_sha256: Sha256Digest,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// A file's owner, mode and size in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// A regular file (not a directory, link or device).
    pub regular: bool,
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`0o644`).
    pub mode: u32,
    pub size: u64,
}

/// A file read from the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub path: String,
    pub bytes: Vec<u8>,
    pub sha256: Sha256Digest,
}

#[derive(Debug)]
pub struct Agent {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    /// A request was sent whose reply was not read: it timed out, or its caller's future was
    /// dropped mid-call (a cancelled port call drops the broker's handler). The reply may
    /// still arrive, and QGA replies carry no id, so the next request first resynchronizes
    /// (which discards that late reply) instead of taking it for its own.
    in_doubt: bool,
    /// How long a plain request waits for its reply ([`REQUEST_TIMEOUT`]).
    request_timeout: Duration,
}

impl Agent {
    /// Connects and synchronizes, retrying until `deadline` (the guest may still be booting).
    pub async fn connect(path: &Path, deadline: Instant) -> Result<Self, AgentError> {
        let mut last = AgentError::Timeout;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 & 0x7fff_ffff)
            .unwrap_or(1);
        while Instant::now() < deadline {
            match UnixStream::connect(path).await {
                Ok(s) => {
                    let (r, w) = s.into_split();
                    let mut a = Agent::over(r, w, seed);
                    // Sync attempts on one connection until the agent answers or time is up.
                    while Instant::now() < deadline {
                        match a.sync(Duration::from_secs(1)).await {
                            Ok(()) => return Ok(a),
                            Err(AgentError::Timeout) => continue,
                            Err(e) => {
                                last = e;
                                break;
                            }
                        }
                    }
                }
                Err(e) => last = AgentError::Io(e),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(last)
    }

    fn over(r: OwnedReadHalf, w: OwnedWriteHalf, seed: u64) -> Self {
        Agent {
            reader: BufReader::new(r),
            writer: w,
            next_id: seed,
            in_doubt: false,
            request_timeout: REQUEST_TIMEOUT,
        }
    }

    /// `guest-sync-delimited` with a fresh id: flushes anything stale between us and the agent.
    pub async fn sync(&mut self, wait: Duration) -> Result<(), AgentError> {
        // Until its own reply is read, whatever is in the stream is someone else's.
        self.in_doubt = true;
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = vec![0xFFu8];
        msg.extend(
            serde_json::to_vec(
                &json!({"execute": "guest-sync-delimited", "arguments": {"id": id}}),
            )
            .expect("json"),
        );
        msg.push(b'\n');
        self.writer.write_all(&msg).await?;
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(AgentError::Timeout);
            }
            // Skip to the delimiter, then read the reply that follows it.
            let mut junk = Vec::new();
            let n = tokio::time::timeout(
                left,
                (&mut self.reader)
                    .take(MAX_REPLY_LINE)
                    .read_until(0xFF, &mut junk),
            )
            .await
            .map_err(|_| AgentError::Timeout)??;
            if n == 0 {
                return Err(AgentError::Closed);
            }
            if junk.last() != Some(&0xFF) {
                continue;
            }
            let v = self.read_line(left).await?;
            if v.get("return").and_then(Value::as_u64) == Some(id) {
                self.in_doubt = false;
                return Ok(());
            }
        }
    }

    async fn read_line(&mut self, wait: Duration) -> Result<Value, AgentError> {
        let mut line = Vec::new();
        let n = tokio::time::timeout(
            wait,
            (&mut self.reader)
                .take(MAX_REPLY_LINE)
                .read_until(b'\n', &mut line),
        )
        .await
        .map_err(|_| AgentError::Timeout)??;
        if n == 0 {
            return Err(AgentError::Closed);
        }
        let text = line.strip_prefix(&[0xFF]).unwrap_or(&line);
        serde_json::from_slice(text).map_err(|e| AgentError::Protocol(e.to_string()))
    }

    /// One request → its `return` value, waiting [`REQUEST_TIMEOUT`] for the reply.
    pub async fn call(&mut self, command: &str, arguments: Value) -> Result<Value, AgentError> {
        self.call_within(command, arguments, self.request_timeout)
            .await
    }

    /// One request → its `return` value, waiting up to `wait` for the reply. A guest under
    /// load (TCG, a busy disk) may answer late; one request is in flight at a time, so
    /// waiting longer is never a retry. After a request timed out, the next one resyncs first.
    async fn call_within(
        &mut self,
        command: &str,
        arguments: Value,
        wait: Duration,
    ) -> Result<Value, AgentError> {
        if self.in_doubt {
            self.sync(self.request_timeout).await?;
        }
        let mut bytes =
            serde_json::to_vec(&json!({"execute": command, "arguments": arguments})).expect("json");
        bytes.push(b'\n');
        // Set before the first byte is sent and cleared once the reply is read: a timeout, an
        // error or a dropped future in between leaves the next request to resync.
        self.in_doubt = true;
        self.writer.write_all(&bytes).await?;
        let v = self.read_line(wait).await?;
        self.in_doubt = false;
        if let Some(r) = v.get("return") {
            return Ok(r.clone());
        }
        if let Some(e) = v.get("error") {
            return Err(AgentError::Guest(
                e.get("desc")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned(),
            ));
        }
        Err(AgentError::Protocol(format!("unexpected reply: {v}")))
    }

    /// Runs `argv` (absolute path first) with captured output, bounded by `bounds`.
    pub async fn exec(
        &mut self,
        argv: &[String],
        bounds: ExecBounds,
    ) -> Result<ExecOutcome, AgentError> {
        let started = Instant::now();
        let (path, args) = argv
            .split_first()
            .ok_or_else(|| AgentError::Protocol("empty argv".into()))?;
        // The command's own deadline bounds each reply: a late answer is waited for, since
        // a guest-exec asked again would start the command twice, and an exited command's
        // status is handed out once.
        let floor = self.request_timeout;
        let patient =
            |started: Instant| bounds.timeout.saturating_sub(started.elapsed()).max(floor);
        let wait = patient(started);
        let r = self
            .call_within(
                "guest-exec",
                json!({"path": path, "arg": args, "capture-output": true}),
                wait,
            )
            .await?;
        let pid = r
            .get("pid")
            .and_then(Value::as_i64)
            .ok_or_else(|| AgentError::Protocol(format!("guest-exec reply: {r}")))?;
        loop {
            let wait = patient(started);
            let s = self
                .call_within("guest-exec-status", json!({"pid": pid}), wait)
                .await?;
            if s.get("exited").and_then(Value::as_bool) == Some(true) {
                let (stdout, stdout_truncated) =
                    decode_bounded(&s, "out-data", "out-truncated", bounds.max_output)?;
                let (stderr, stderr_truncated) =
                    decode_bounded(&s, "err-data", "err-truncated", bounds.max_output)?;
                return Ok(ExecOutcome {
                    argv: argv.to_vec(),
                    exit_code: s.get("exitcode").and_then(Value::as_i64),
                    signal: s.get("signal").and_then(Value::as_i64),
                    stdout_sha256: Sha256Digest::of(&stdout),
                    stderr_sha256: Sha256Digest::of(&stderr),
                    stdout,
                    stderr,
                    stdout_truncated,
                    stderr_truncated,
                    timed_out: false,
                    elapsed: started.elapsed(),
                });
            }
            if started.elapsed() >= bounds.timeout {
                // QGA has no kill call: end the command with kill(1) inside the guest.
                let _ = self
                    .call(
                        "guest-exec",
                        json!({"path": "/bin/kill", "arg": ["-KILL", pid.to_string()]}),
                    )
                    .await;
                return Ok(ExecOutcome {
                    argv: argv.to_vec(),
                    exit_code: None,
                    signal: None,
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                    stdout_sha256: Sha256Digest::of(b""),
                    stderr_sha256: Sha256Digest::of(b""),
                    stdout_truncated: false,
                    stderr_truncated: false,
                    timed_out: true,
                    elapsed: started.elapsed(),
                });
            }
            tokio::time::sleep(EXEC_POLL).await;
        }
    }

    /// Reads a whole file (at most MAX_FILE_BYTES).
    pub async fn read_file(&mut self, path: &str) -> Result<FileContent, AgentError> {
        let h = self.open(path, "r").await?;
        let mut bytes = Vec::new();
        let result = async {
            loop {
                let r = self
                    .call("guest-file-read", json!({"handle": h, "count": FILE_CHUNK}))
                    .await?;
                let chunk = B64
                    .decode(r.get("buf-b64").and_then(Value::as_str).unwrap_or(""))
                    .map_err(|e| AgentError::Protocol(e.to_string()))?;
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_FILE_BYTES {
                    return Err(AgentError::FileTooLarge);
                }
                if r.get("eof").and_then(Value::as_bool) == Some(true) || chunk.is_empty() {
                    return Ok(());
                }
            }
        }
        .await;
        let closed = self.call("guest-file-close", json!({"handle": h})).await;
        result?;
        closed?;
        Ok(FileContent {
            path: path.to_owned(),
            sha256: Sha256Digest::of(&bytes),
            bytes,
        })
    }

    /// Replaces a file's content (at most MAX_FILE_BYTES).
    pub async fn write_file(&mut self, path: &str, content: &[u8]) -> Result<(), AgentError> {
        if content.len() > MAX_FILE_BYTES {
            return Err(AgentError::FileTooLarge);
        }
        let h = self.open(path, "w").await?;
        let result = async {
            for chunk in content.chunks(FILE_CHUNK) {
                self.call(
                    "guest-file-write",
                    json!({"handle": h, "buf-b64": B64.encode(chunk)}),
                )
                .await?;
            }
            self.call("guest-file-flush", json!({"handle": h}))
                .await
                .map(|_| ())
        }
        .await;
        let closed = self.call("guest-file-close", json!({"handle": h})).await;
        result?;
        closed?;
        Ok(())
    }

    /// Writes a file atomically, with its owner and mode, and re-reads it: the content is
    /// written to a temporary file beside `path`, owned and moded, then renamed over `path`
    /// (one `rename(2)`: a reader sees the old file or the new one, never a partial one).
    /// The returned content is the guest's bytes after the rename, not ours.
    pub async fn place_file(
        &mut self,
        path: &str,
        content: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<FileContent, AgentError> {
        let (dir, name) = path
            .rsplit_once('/')
            .ok_or_else(|| AgentError::Protocol(format!("{path}: not absolute")))?;
        let tmp = format!("{dir}/.{name}.reach-{:016x}", crate::host::nanos());
        self.write_file(&tmp, content).await?;
        for argv in [
            vec![
                "/bin/chown".to_owned(),
                format!("{uid}:{gid}"),
                "--".into(),
                tmp.clone(),
            ],
            vec![
                "/bin/chmod".to_owned(),
                format!("{mode:o}"),
                "--".into(),
                tmp.clone(),
            ],
            vec![
                "/bin/mv".to_owned(),
                "-f".into(),
                "-T".into(),
                "--".into(),
                tmp.clone(),
                path.to_owned(),
            ],
        ] {
            if let Err(e) = self.run_ok(&argv).await {
                let _ = self
                    .run_ok(&["/bin/rm".into(), "-f".into(), "--".into(), tmp])
                    .await;
                return Err(e);
            }
        }
        self.read_file(path).await
    }

    /// Owner, mode and size of a regular file (`stat(1)` in the guest).
    pub async fn stat_file(&mut self, path: &str) -> Result<FileStat, AgentError> {
        let out = self
            .run_ok(&[
                "/usr/bin/stat".into(),
                "--format=%F|%u|%g|%a|%s".into(),
                "--".into(),
                path.to_owned(),
            ])
            .await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let bad = || AgentError::Protocol(format!("stat {path}: {text:?}"));
        let f: Vec<&str> = text.trim_end().split('|').collect();
        let [kind, uid, gid, mode, size] = f[..] else {
            return Err(bad());
        };
        Ok(FileStat {
            regular: kind == "regular file" || kind == "regular empty file",
            uid: uid.parse().map_err(|_| bad())?,
            gid: gid.parse().map_err(|_| bad())?,
            mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
            size: size.parse().map_err(|_| bad())?,
        })
    }

    /// Runs a fixed helper command; a non-zero exit is [`AgentError::Guest`].
    async fn run_ok(&mut self, argv: &[String]) -> Result<ExecOutcome, AgentError> {
        let bounds = ExecBounds {
            timeout: Duration::from_secs(10),
            max_output: 4096,
        };
        let o = self.exec(argv, bounds).await?;
        if o.exit_code != Some(0) {
            return Err(AgentError::Guest(format!(
                "{} failed: {}",
                argv[0],
                String::from_utf8_lossy(&o.stderr).trim_end()
            )));
        }
        Ok(o)
    }

    /// Sets the guest's clock to `unix_ns` (a restored guest resumes at the moment of its
    /// capture). QGA then runs `hwclock -w`, which a minimal guest may lack; the system
    /// clock is what matters, so that failure is accepted when `guest-get-time` shows the
    /// new time. Returns the guest's clock after setting, in ns since the epoch.
    pub async fn set_time(&mut self, unix_ns: i64) -> Result<i64, AgentError> {
        let set = self.call("guest-set-time", json!({"time": unix_ns})).await;
        let now = self
            .call("guest-get-time", json!({}))
            .await?
            .as_i64()
            .ok_or_else(|| AgentError::Protocol("guest-get-time".into()))?;
        match set {
            Ok(_) => Ok(now),
            Err(AgentError::Guest(msg))
                if msg.contains("hwclock") && (now - unix_ns).abs() < CLOCK_SET_SLACK_NS =>
            {
                Ok(now)
            }
            Err(e) => Err(e),
        }
    }

    /// Makes a restored guest's random numbers its own. Every instance restored from one
    /// capture resumes with the same kernel random state, so two of them would draw the same
    /// "random" bytes. Writing host randomness to /dev/urandom mixes it into the input pool
    /// but (Linux 6.1) does not reseed the CRNG that serves reads; the `RNDRESEEDCRNG` ioctl
    /// does, and Perl (Essential in Debian, so in every image) is the guest's way to issue it.
    pub async fn reseed_rng(&mut self, seed: &[u8]) -> Result<(), AgentError> {
        self.write_file("/dev/urandom", seed).await?;
        let argv: Vec<String> = [
            "/usr/bin/perl",
            "-e",
            // RNDRESEEDCRNG = _IO('R', 0x07)
            "open(my $f, '<', '/dev/urandom') or die $!; ioctl($f, 0x5207, 0) or die \"RNDRESEEDCRNG: $!\"",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let o = self
            .exec(
                &argv,
                ExecBounds {
                    timeout: Duration::from_secs(10),
                    max_output: 4096,
                },
            )
            .await?;
        if o.exit_code != Some(0) {
            return Err(AgentError::Guest(format!(
                "reseeding the guest's CRNG failed: {}",
                String::from_utf8_lossy(&o.stderr)
            )));
        }
        Ok(())
    }

    /// Writes `id` as the guest's `/etc/machine-id` (32 lowercase hex digits and a newline, as
    /// systemd writes it), marked as a random v4 UUID the way `systemd-id128 new` marks one.
    pub async fn set_machine_id(&mut self, mut id: [u8; 16]) -> Result<(), AgentError> {
        id[6] = (id[6] & 0x0f) | 0x40;
        id[8] = (id[8] & 0x3f) | 0x80;
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        self.write_file("/etc/machine-id", format!("{hex}\n").as_bytes())
            .await
    }

    async fn open(&mut self, path: &str, mode: &str) -> Result<i64, AgentError> {
        let r = self
            .call("guest-file-open", json!({"path": path, "mode": mode}))
            .await?;
        r.as_i64()
            .ok_or_else(|| AgentError::Protocol(format!("guest-file-open reply: {r}")))
    }
}

/// Decodes one base64 output field, keeping at most `max` bytes.
fn decode_bounded(
    status: &Value,
    field: &str,
    truncated_field: &str,
    max: usize,
) -> Result<(Vec<u8>, bool), AgentError> {
    let mut bytes = match status.get(field).and_then(Value::as_str) {
        Some(b) => B64
            .decode(b)
            .map_err(|e| AgentError::Protocol(e.to_string()))?,
        None => Vec::new(),
    };
    let mut truncated = status.get(truncated_field).and_then(Value::as_bool) == Some(true);
    if bytes.len() > max {
        bytes.truncate(max);
        truncated = true;
    }
    Ok((bytes, truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QGA peer over a socket pair that answers each request with `answer`, after the
    /// delay it returns; syncs are answered at once. The client's request timeout is 100 ms.
    fn peer(
        answer: impl Fn(&Value, usize) -> (Duration, Value) + Send + 'static,
    ) -> (Agent, tokio::task::JoinHandle<()>) {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        let (r, w) = ours.into_split();
        let mut agent = Agent::over(r, w, 1);
        agent.request_timeout = Duration::from_millis(100);
        let task = tokio::spawn(async move {
            let (r, mut w) = theirs.into_split();
            let mut lines = BufReader::new(r);
            let mut n = 0;
            loop {
                let mut line = Vec::new();
                if lines.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let sync = line.first() == Some(&0xFF);
                let v: Value = serde_json::from_slice(line.strip_prefix(&[0xFF]).unwrap_or(&line))
                    .expect("json request");
                let mut out = Vec::new();
                if sync {
                    out.push(0xFF);
                    out.extend(
                        serde_json::to_vec(&json!({"return": v["arguments"]["id"]})).unwrap(),
                    );
                } else {
                    let (delay, r) = answer(&v, n);
                    n += 1;
                    tokio::time::sleep(delay).await;
                    out.extend(serde_json::to_vec(&json!({ "return": r })).unwrap());
                }
                out.push(b'\n');
                if w.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        (agent, task)
    }

    #[tokio::test]
    async fn a_late_status_reply_is_waited_for_within_the_commands_deadline() {
        let (mut agent, _peer) = peer(|v, _| match v["execute"].as_str() {
            Some("guest-exec") => (Duration::ZERO, json!({"pid": 7})),
            // Three times the request timeout: a loaded guest's agent.
            _ => (
                Duration::from_millis(300),
                json!({"exited": true, "exitcode": 0, "out-data": B64.encode(b"done")}),
            ),
        });
        let argv = ["/bin/true".to_owned()];
        let o = agent
            .exec(
                &argv,
                ExecBounds {
                    timeout: Duration::from_secs(5),
                    max_output: 64,
                },
            )
            .await
            .expect("the command's deadline bounds its replies, not the request timeout");
        assert_eq!((o.exit_code, o.stdout), (Some(0), b"done".to_vec()));
    }

    #[tokio::test]
    async fn a_call_whose_caller_gave_up_leaves_no_reply_for_the_next() {
        // The broker's handler is dropped when its port call is cancelled (a verifier attempt
        // that overran): the command's reply, due later, must not answer the next command.
        let (mut agent, _peer) = peer(|v, _| match v["execute"].as_str() {
            Some("guest-exec") if v["arguments"]["path"] == "/bin/first" => {
                (Duration::from_millis(50), json!({"pid": 1}))
            }
            Some("guest-exec") => (Duration::ZERO, json!({"pid": 2})),
            // Each command's status is its own.
            _ => {
                let out: &[u8] = if v["arguments"]["pid"] == 1 {
                    b"first's output"
                } else {
                    b"second's output"
                };
                (
                    Duration::ZERO,
                    json!({"exited": true, "exitcode": 0, "out-data": B64.encode(out)}),
                )
            }
        });
        agent.request_timeout = Duration::from_secs(5);
        let bounds = ExecBounds {
            timeout: Duration::from_secs(5),
            max_output: 64,
        };
        let first = ["/bin/first".to_owned()];
        // Dropped while its guest-exec reply is due: the caller gave up.
        assert!(
            tokio::time::timeout(Duration::from_millis(10), agent.exec(&first, bounds))
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = ["/bin/second".to_owned()];
        let o = agent.exec(&second, bounds).await.unwrap();
        assert_eq!(o.stdout, b"second's output");
    }

    #[tokio::test]
    async fn after_a_request_timed_out_its_late_reply_is_not_taken_for_the_next() {
        let (mut agent, _peer) = peer(|_, n| match n {
            0 => (Duration::from_millis(300), json!(111)),
            _ => (Duration::ZERO, json!(222)),
        });
        assert!(matches!(
            agent.call("guest-get-time", json!({})).await,
            Err(AgentError::Timeout)
        ));
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            agent.call("guest-get-time", json!({})).await.unwrap(),
            json!(222),
            "the first request's late reply was discarded by a resync"
        );
    }

    #[test]
    fn output_is_bounded_and_marked() {
        let s = json!({"out-data": B64.encode(b"hello world")});
        assert_eq!(
            decode_bounded(&s, "out-data", "out-truncated", 5).unwrap(),
            (b"hello".to_vec(), true)
        );
        assert_eq!(
            decode_bounded(&s, "out-data", "out-truncated", 64).unwrap(),
            (b"hello world".to_vec(), false)
        );
        assert_eq!(
            decode_bounded(&s, "err-data", "err-truncated", 5).unwrap(),
            (vec![], false)
        );
    }
}
