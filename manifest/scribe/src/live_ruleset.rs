//! The egress ruleset the kernel holds, against the file Scribe wrote ([`compare`]): the live
//! `inet reach_egress` table as `nft` lists it, line by line against the file's table as `nft`
//! lists it once loaded into a throwaway network namespace.
//!
//! Both sides are the kernel's own normal form (merged intervals, its order and layout), so a
//! file and the table it loaded list the same, and any rule added, removed or changed since, by
//! hand or by another tool, shows as a differing line. The scratch namespace lives only as long
//! as its `nft` process and holds nothing but the file's table; it never touches the host's.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Output};

use crate::nftables::TABLE;

/// What the kernel holds, against a ruleset file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// The live table lists exactly as the file's does, in this many lines.
    Matches { lines: usize },
    /// No `inet reach_egress` table is loaded.
    Absent,
    /// The first line (1-based) where the live listing differs from the file's, and the chain
    /// or set it falls in (the live listing's last `chain`/`set` header above it).
    Differs {
        line: usize,
        within: Option<String>,
        expected: String,
        found: String,
    },
}

/// Why the comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LiveRulesetError {
    /// `nft` or `unshare` could not be started
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// the live table exists but could not be listed (e.g. the auditor lacks CAP_NET_ADMIN)
    #[error("the live table cannot be listed: {0}")]
    Live(String),
    /// the file does not load (or list) in a scratch network namespace
    #[error("the ruleset file does not load in a scratch network namespace: {0}")]
    Ruleset(String),
}

/// Compares the live table with `ruleset`. `nft` is how to run `nft` against the live
/// namespace (`Command::new("nft")` on the host; a test names its own namespace); the
/// `list table` arguments are added here.
pub fn compare(nft: Command, ruleset: &Path) -> Result<Loaded, LiveRulesetError> {
    compare_listing(listing(nft)?.as_deref(), ruleset)
}

/// [`compare`] for a live table already listed ([`listing`]; `None`: not loaded).
pub fn compare_listing(live: Option<&str>, ruleset: &Path) -> Result<Loaded, LiveRulesetError> {
    let Some(live) = live else {
        return Ok(Loaded::Absent);
    };
    let expected = scratch_listing(ruleset)?;
    let (line, want, found) = crate::check::first_difference(&expected, live);
    Ok(if want.is_empty() && found.is_empty() {
        Loaded::Matches {
            lines: expected.lines().count(),
        }
    } else {
        Loaded::Differs {
            line,
            within: enclosing(live, line),
            expected: want.trim().to_owned(),
            found: found.trim().to_owned(),
        }
    })
}

/// The live table as `nft` lists it (`nft` as in [`compare`]); `None` when it is not loaded.
pub fn listing(mut nft: Command) -> Result<Option<String>, LiveRulesetError> {
    let live = output(nft.args(["list", "table", "inet", TABLE]))?;
    if live.status.success() {
        return Ok(Some(String::from_utf8_lossy(&live.stdout).into_owned()));
    }
    let err = String::from_utf8_lossy(&live.stderr);
    // nft's answer for a table that does not exist (ENOENT from the kernel).
    if err.contains("No such file or directory") {
        return Ok(None);
    }
    Err(LiveRulesetError::Live(first_line(&err)))
}

/// The addresses a listing admits for each destination: the rules Scribe renders as
/// `ip daddr A tcp dport P accept comment "DESTINATION"` (or `ip6 daddr`), in any role's chain.
pub fn admitted(listing: &str) -> BTreeMap<String, BTreeSet<IpAddr>> {
    let mut out: BTreeMap<String, BTreeSet<IpAddr>> = BTreeMap::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [
            "ip" | "ip6",
            "daddr",
            addr,
            "tcp",
            "dport",
            _,
            "accept",
            "comment",
            name,
        ] = words[..]
            && let Ok(addr) = addr.parse::<IpAddr>()
        {
            out.entry(name.trim_matches('"').to_owned())
                .or_default()
                .insert(addr);
        }
    }
    out
}

/// The `chain NAME` or `set NAME` header (without its brace) that line `line` of a listing sits
/// under.
fn enclosing(listing: &str, line: usize) -> Option<String> {
    listing
        .lines()
        .take(line.saturating_sub(1))
        .map(str::trim)
        .filter(|l| l.starts_with("chain ") || l.starts_with("set "))
        .last()
        .map(|l| l.trim_end_matches('{').trim().to_owned())
}

/// The file's table as the kernel lists it: loaded and listed by one shell inside a new network
/// namespace (a user namespace too, where the caller is not root, which gives it CAP_NET_ADMIN
/// there only). The path is a positional argument, never part of the script.
fn scratch_listing(ruleset: &Path) -> Result<String, LiveRulesetError> {
    let mut unshare = Command::new("unshare");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt as _;
        m.uid() == 0
    });
    if !root {
        unshare.args(["--user", "--map-root-user"]);
    }
    let script = format!("nft -f \"$1\" && nft list table inet {TABLE}");
    let out = output(
        unshare
            .args(["--net", "--", "sh", "-c", &script, "sh"])
            .arg(ruleset),
    )?;
    if !out.status.success() {
        return Err(LiveRulesetError::Ruleset(first_line(
            &String::from_utf8_lossy(&out.stderr),
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn output(cmd: &mut Command) -> Result<Output, LiveRulesetError> {
    cmd.output().map_err(|source| LiveRulesetError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })
}

/// nft's error is its first line; the rest repeats the input with a caret under it.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_owned()
}
