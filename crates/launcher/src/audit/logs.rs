//! `secrets/logs`: no secret's bytes in any role's log. A launcher body's logs are files of its
//! state directory; a Quadlet body's are what its manager prints (`podman logs <container>`,
//! stdout and stderr together), named by the caller in [`RoleProcess::log_command`]. Each log
//! is streamed through a fixed window, so a large log costs time, not memory.

use std::io::Read;
use std::path::PathBuf;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

use super::{Check, Processes};

const ID: &str = "secrets/logs";
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;
/// How often a log command is run before its failure is reported, and the pause between runs.
/// Podman 4.3's journald driver fails `podman logs` now and then ("initial journal cursor:
/// failed to get cursor"; containers/podman#12029), as it did right after a deployed host's
/// reboot; the next run reads the log.
const COMMAND_ATTEMPTS: u32 = 3;
const COMMAND_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Where one role's log is read from.
enum Source {
    File(PathBuf),
    Command(Vec<String>),
}

/// The check, for the secret `values` (file name, bytes) found by the caller.
pub(super) fn logs(
    manifest: &Manifest,
    layout: &StateLayout,
    processes: &Processes,
    values: &[(String, Vec<u8>)],
) -> Check {
    let sources: Vec<(String, Source)> = match processes {
        Processes::Launcher => manifest
            .roles
            .iter()
            .map(|r| r.name.as_str())
            .map(|role| (role.to_owned(), layout.log_path(role)))
            .filter(|(_, path)| path.exists())
            .map(|(role, path)| (role, Source::File(path)))
            .collect(),
        Processes::Listed(listed) => listed
            .iter()
            .filter_map(|p| Some((p.role.clone(), Source::Command(p.log_command.clone()?))))
            .collect(),
    };
    if sources.is_empty() {
        return Check::skipped(ID, "no role log known (no log file, no log command)");
    }
    if values.is_empty() {
        return Check::observed(ID, false, "no secret file readable to search for");
    }
    let mut found = Vec::new();
    let mut bytes = 0u64;
    for (role, source) in &sources {
        let mut scanned = scan_source(source, values);
        for _ in 1..COMMAND_ATTEMPTS {
            if scanned.is_ok() || matches!(source, Source::File(_)) {
                break;
            }
            std::thread::sleep(COMMAND_PAUSE);
            scanned = scan_source(source, values);
        }
        match scanned {
            Ok((read, hits)) => {
                bytes += read;
                found.extend(
                    hits.into_iter()
                        .map(|i| format!("{role}'s log holds {}", values[i].0)),
                );
            }
            Err(e) => found.push(format!("{role}'s log: {e}")),
        }
    }
    if found.is_empty() {
        Check::observed(
            ID,
            true,
            format!(
                "{} role logs ({bytes} bytes), {} secrets, none exposed",
                sources.len(),
                values.len()
            ),
        )
    } else {
        Check::observed(ID, false, found.join(", "))
    }
}

fn scan_source(
    source: &Source,
    values: &[(String, Vec<u8>)],
) -> std::io::Result<(u64, Vec<usize>)> {
    match source {
        Source::File(path) => scan(std::fs::File::open(path)?, values),
        Source::Command(argv) => {
            let (program, args) = argv
                .split_first()
                .ok_or_else(|| std::io::Error::other("an empty log command"))?;
            // One pipe for both streams: `podman logs` prints the container's stderr on its own.
            let (reader, writer) = std::io::pipe()?;
            let mut child = std::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(writer.try_clone()?)
                .stderr(writer)
                .spawn()?;
            let scanned = scan(reader, values);
            let status = child.wait()?;
            // Its output is never quoted: it is the role's log, and may hold a secret's part.
            if !status.success() {
                return Err(std::io::Error::other(format!(
                    "`{}` {status} ({COMMAND_ATTEMPTS} runs)",
                    argv.join(" ")
                )));
            }
            scanned
        }
    }
}

/// Which `values` occur in `r` (their indexes), and how many bytes were read. A window keeps the
/// last `longest - 1` bytes of each chunk, so a secret split across two reads is found.
fn scan(mut r: impl Read, values: &[(String, Vec<u8>)]) -> std::io::Result<(u64, Vec<usize>)> {
    let keep = values
        .iter()
        .map(|v| v.1.len())
        .max()
        .unwrap_or(1)
        .saturating_sub(1);
    let mut window: Vec<u8> = Vec::with_capacity(keep + CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut hits = vec![false; values.len()];
    let mut read = 0u64;
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        read += n as u64;
        window.extend_from_slice(&chunk[..n]);
        for (i, (_, secret)) in values.iter().enumerate() {
            if !hits[i] && window.windows(secret.len()).any(|w| w == secret.as_slice()) {
                hits[i] = true;
            }
        }
        let drop = window.len().saturating_sub(keep);
        window.drain(..drop);
    }
    Ok((read, (0..values.len()).filter(|&i| hits[i]).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn command_logs(role: &str, argv: &[&str]) -> Processes {
        Processes::Listed(vec![crate::audit::RoleProcess {
            role: role.to_owned(),
            pid: 0,
            configured_env: None,
            log_command: Some(argv.iter().map(|a| (*a).to_owned()).collect()),
        }])
    }

    #[test]
    fn a_log_command_that_fails_once_is_run_again_and_one_that_keeps_failing_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let layout = StateLayout::new(dir.path());
        let values = vec![("token".to_owned(), b"s3cret-token-bytes".to_vec())];
        let run = |script: &str| {
            logs(
                &manifest,
                &layout,
                &command_logs("ward", &["/bin/sh", "-c", script]),
                &values,
            )
        };
        // Fails the first time (as podman's journald cursor does), prints the log the second.
        let flag = dir.path().join("ran-once");
        let script = format!(
            "if [ -e {f} ]; then echo 'a log holding s3cret-token-bytes'; \
             else touch {f}; echo 'Error: initial journal cursor' >&2; exit 125; fi",
            f = flag.display()
        );
        let c = run(&script);
        assert_eq!(c.outcome, crate::audit::Outcome::Fail, "{c:?}");
        assert_eq!(
            c.detail, "ward's log holds token",
            "the second run was read"
        );
        // A command that always fails: its status, never its output.
        let log = dir.path().join("log");
        std::fs::write(&log, "s3cret-token-bytes-partial").unwrap();
        let script = format!("cat {}; exit 125", log.display());
        let c = run(&script);
        assert_eq!(c.outcome, crate::audit::Outcome::Fail, "{c:?}");
        assert!(
            c.detail.contains("exit status: 125 (3 runs)"),
            "{}",
            c.detail
        );
        assert!(!c.detail.contains("s3cret"), "{}", c.detail);
    }

    #[test]
    fn a_secret_split_across_reads_is_found() {
        let secret = b"0123456789abcdef-secret".to_vec();
        let values = vec![
            ("k".to_owned(), secret.clone()),
            ("absent".to_owned(), b"zzzzzzzzzzzzzzzzzz".to_vec()),
        ];
        let mut log = vec![b'x'; CHUNK - 5];
        log.extend_from_slice(&secret);
        log.extend_from_slice(&[b'y'; 100]);
        for step in [1, 7, CHUNK] {
            let (read, hits) = scan(Trickle(&log, step), &values).unwrap();
            assert_eq!((read, hits), (log.len() as u64, vec![0]), "step {step}");
        }
        let (_, none) = scan(&b"nothing here"[..], &values).unwrap();
        assert!(none.is_empty());
    }
}
