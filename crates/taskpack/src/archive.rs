//! `reach.taskpack.v1`: the deterministic signed archive.
//!
//! A POSIX ustar stream, uncompressed, written and read here (no tar library: the reader
//! accepts exactly what the writer makes, nothing a general tar reader would be lenient
//! about). Entries in this order: `facts.json`, `facts.sig`, then `src/<path>` for every pack
//! file in byte order of the path. Every header is the canonical one for its name and size:
//! regular file, mode `0644`, uid and gid 0, mtime 0, empty user and group names, no link
//! name, no prefix field; data padded with zeros to 512 bytes; the end is two zero blocks and
//! nothing after. The archive digest is sha256 of the archive bytes.

use std::collections::BTreeMap;

use reach_digest::Sha256Digest;

use crate::facts::Facts;
use crate::source::{MAX_PATH_BYTES, PackFiles, check_path};

pub const ARCHIVE_FORMAT: &str = "reach.taskpack.v1";

/// The largest archive read: a pack's files are bounded to
/// [`crate::source::MAX_TOTAL_BYTES`]; this leaves room for the headers and the facts.
pub const MAX_ARCHIVE_BYTES: usize = 8 << 20;
/// Bounds on the two entries that are not pack files.
pub const MAX_FACTS_BYTES: usize = 1 << 20;
pub const MAX_SIG_BYTES: usize = 1024;

pub const FACTS_ENTRY: &str = "facts.json";
pub const SIG_ENTRY: &str = "facts.sig";
pub const SRC_PREFIX: &str = "src/";

const BLOCK: usize = 512;

/// The header fields, by name and byte range, in header order.
const FIELDS: [(&str, std::ops::Range<usize>); 16] = [
    ("name", 0..100),
    ("mode", 100..108),
    ("uid", 108..116),
    ("gid", 116..124),
    ("size", 124..136),
    ("mtime", 136..148),
    ("checksum", 148..156),
    ("typeflag", 156..157),
    ("linkname", 157..257),
    ("magic", 257..263),
    ("version", 263..265),
    ("uname", 265..297),
    ("gname", 297..329),
    ("devmajor", 329..337),
    ("devminor", 337..345),
    ("prefix", 345..512),
];

/// Why an archive was refused (`package/archive-malformed`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("archive entry `{entry}`: {reason}")]
pub struct ArchiveError {
    /// The entry concerned (`<archive>` for the whole).
    pub entry: String,
    pub reason: String,
}

fn malformed(entry: impl Into<String>, reason: impl Into<String>) -> ArchiveError {
    ArchiveError {
        entry: entry.into(),
        reason: reason.into(),
    }
}

/// What an archive holds.
#[derive(Debug, Clone)]
pub struct ArchiveContents {
    /// `facts.json`'s exact bytes (what the signature covers).
    pub facts_json: Vec<u8>,
    /// `facts.json`, parsed.
    pub facts: Facts,
    pub facts_sig: Vec<u8>,
    /// The `src/` entries, as pack files.
    pub files: PackFiles,
}

/// The canonical header of a regular file `name` of `size` bytes.
fn header(name: &str, size: usize) -> [u8; BLOCK] {
    debug_assert!(name.len() <= 100);
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; BLOCK], range: std::ops::Range<usize>, value: u64| {
        let width = range.len() - 1;
        let text = format!("{value:0width$o}");
        h[range.start..range.start + width].copy_from_slice(text.as_bytes());
    };
    octal(&mut h, 100..108, 0o644);
    octal(&mut h, 108..116, 0);
    octal(&mut h, 116..124, 0);
    octal(&mut h, 124..136, size as u64);
    octal(&mut h, 136..148, 0);
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    octal(&mut h, 329..337, 0);
    octal(&mut h, 337..345, 0);
    // The checksum counts its own field as eight spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

fn padding(size: usize) -> usize {
    (BLOCK - size % BLOCK) % BLOCK
}

fn push_entry(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    out.extend_from_slice(&header(name, data.len()));
    out.extend_from_slice(data);
    out.resize(out.len() + padding(data.len()), 0);
}

/// Writes the archive of `facts_json`, `facts_sig` and `files`. Deterministic: the same
/// inputs give the same bytes.
pub fn write(facts_json: &[u8], facts_sig: &[u8], files: &PackFiles) -> Vec<u8> {
    let mut out = Vec::new();
    push_entry(&mut out, FACTS_ENTRY, facts_json);
    push_entry(&mut out, SIG_ENTRY, facts_sig);
    for (path, bytes) in files.iter() {
        push_entry(&mut out, &format!("{SRC_PREFIX}{path}"), bytes);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

/// sha256 of the archive bytes.
pub fn digest(archive: &[u8]) -> Sha256Digest {
    Sha256Digest::of(archive)
}

/// Parses the size field: 11 octal digits and a NUL.
fn parse_size(field: &[u8]) -> Option<usize> {
    let (digits, nul) = field.split_at(field.len() - 1);
    if nul != [0] || !digits.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return None;
    }
    usize::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok()
}

/// Reads an archive, refusing anything [`write`] would not have written, and any `src/`
/// entry set that differs from the files `facts.json` names.
pub fn read(archive: &[u8]) -> Result<ArchiveContents, ArchiveError> {
    if archive.len() > MAX_ARCHIVE_BYTES {
        return Err(malformed(
            "<archive>",
            format!(
                "{} bytes; an archive has at most {MAX_ARCHIVE_BYTES}",
                archive.len()
            ),
        ));
    }
    if !archive.len().is_multiple_of(BLOCK) {
        return Err(malformed(
            "<archive>",
            "its length is not a whole number of 512-byte blocks",
        ));
    }
    let mut at = 0usize;
    let mut entries: Vec<(String, &[u8])> = Vec::new();
    loop {
        let Some(block) = archive.get(at..at + BLOCK) else {
            return Err(malformed(
                "<archive>",
                "ends without the two zero blocks that close it",
            ));
        };
        if block.iter().all(|&b| b == 0) {
            let rest = &archive[at + BLOCK..];
            if rest.len() != BLOCK || rest.iter().any(|&b| b != 0) {
                return Err(malformed(
                    "<archive>",
                    "the two closing zero blocks must be followed by nothing",
                ));
            }
            break;
        }
        let raw_name = &block[..100];
        let name_len = raw_name.iter().position(|&b| b == 0).unwrap_or(100);
        let Ok(name) = std::str::from_utf8(&raw_name[..name_len]) else {
            return Err(malformed(
                String::from_utf8_lossy(&raw_name[..name_len]),
                "a name that is not UTF-8",
            ));
        };
        if name.is_empty() {
            // A refusal names its entry; this one has none, so it is named by its place.
            return Err(malformed(
                format!("<entry at byte {at}>"),
                "an entry without a name",
            ));
        }
        let name = name.to_owned();
        if block[156] != b'0' {
            return Err(malformed(
                &name,
                "not a regular file (a pack archive holds regular files only)",
            ));
        }
        let Some(size) = parse_size(&block[124..136]) else {
            return Err(malformed(&name, "its size field is not 11 octal digits"));
        };
        let canonical = header(&name, size);
        if let Some((field, _)) = FIELDS
            .iter()
            .find(|(_, r)| block[r.clone()] != canonical[r.clone()])
        {
            return Err(malformed(
                &name,
                format!(
                    "its `{field}` field differs from the canonical header (ustar, regular file, mode 0644, uid/gid 0, mtime 0, no names)"
                ),
            ));
        }
        let start = at + BLOCK;
        let end = start + size;
        let padded = end + padding(size);
        if padded > archive.len() {
            return Err(malformed(
                &name,
                "its data runs past the end of the archive",
            ));
        }
        if archive[end..padded].iter().any(|&b| b != 0) {
            return Err(malformed(&name, "its padding is not zeros"));
        }
        check_order(&entries, &name)?;
        entries.push((name, &archive[start..end]));
        at = padded;
    }

    let mut entries = entries.into_iter();
    let (_, facts_json) = entries
        .next()
        .ok_or_else(|| malformed(FACTS_ENTRY, "missing"))?;
    let (_, facts_sig) = entries
        .next()
        .ok_or_else(|| malformed(SIG_ENTRY, "missing"))?;
    if facts_json.len() > MAX_FACTS_BYTES {
        return Err(malformed(
            FACTS_ENTRY,
            format!("more than {MAX_FACTS_BYTES} bytes"),
        ));
    }
    if facts_sig.len() > MAX_SIG_BYTES {
        return Err(malformed(
            SIG_ENTRY,
            format!("more than {MAX_SIG_BYTES} bytes"),
        ));
    }
    let facts: Facts = serde_json::from_slice(facts_json).map_err(|e| {
        malformed(
            FACTS_ENTRY,
            format!("not {}: {e}", crate::facts::FACTS_FORMAT),
        )
    })?;
    if facts.format != crate::facts::FACTS_FORMAT {
        return Err(malformed(
            FACTS_ENTRY,
            format!("format is not {}", crate::facts::FACTS_FORMAT),
        ));
    }
    let mut files = BTreeMap::new();
    for (name, data) in entries {
        let path = &name[SRC_PREFIX.len()..];
        if !facts.files.contains_key(path) {
            return Err(malformed(&name, "not a file facts.json names"));
        }
        files.insert(path.to_owned(), data.to_vec());
    }
    if let Some(missing) = facts.files.keys().find(|p| !files.contains_key(*p)) {
        return Err(malformed(
            format!("{SRC_PREFIX}{missing}"),
            "facts.json names this file; the archive has no such entry",
        ));
    }
    let files = PackFiles::new(files)
        .map_err(|e| malformed(format!("{SRC_PREFIX}{}", e.path), e.reason))?;
    Ok(ArchiveContents {
        facts_json: facts_json.to_vec(),
        facts,
        facts_sig: facts_sig.to_vec(),
        files,
    })
}

/// The entry after `entries` must be `facts.json`, then `facts.sig`, then `src/` paths in
/// strictly increasing byte order (a duplicate is out of order too).
fn check_order(entries: &[(String, &[u8])], name: &str) -> Result<(), ArchiveError> {
    match entries.len() {
        0 if name == FACTS_ENTRY => return Ok(()),
        0 => {
            return Err(malformed(
                name,
                format!("the first entry must be `{FACTS_ENTRY}`"),
            ));
        }
        1 if name == SIG_ENTRY => return Ok(()),
        1 => {
            return Err(malformed(
                name,
                format!("the second entry must be `{SIG_ENTRY}`"),
            ));
        }
        _ => {}
    }
    let Some(path) = name.strip_prefix(SRC_PREFIX) else {
        return Err(malformed(
            name,
            format!("after `{SIG_ENTRY}` every entry is `{SRC_PREFIX}<path>`"),
        ));
    };
    check_path(path).map_err(|e| malformed(name, e.reason))?;
    debug_assert!(path.len() <= MAX_PATH_BYTES);
    if let Some((previous, _)) = entries.last().filter(|_| entries.len() > 2) {
        match previous.as_str().cmp(name) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => return Err(malformed(name, "a duplicate entry")),
            std::cmp::Ordering::Greater => {
                return Err(malformed(
                    name,
                    format!("out of order (after `{previous}`)"),
                ));
            }
        }
    }
    Ok(())
}
