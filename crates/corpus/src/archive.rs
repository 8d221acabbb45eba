//! Release archives: deterministic packing of a docs directory, and bounded unpacking of a
//! digest-verified `.tar.gz` into an in-memory tree.
//!
//! **Architecture Invariant:** unpacking never touches the file system. Entries become
//! [`TreeEntry`] values with their raw paths; the processing stage judges every path, so there is
//! exactly one place where `../`, absolute paths and links are decided.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::path::Path;
use std::rc::Rc;

use reach_digest::Sha256Digest;

use crate::error::BuildError;
use crate::rules::Rule;
use crate::source::Ceilings;
use crate::tree::{EntryKind, TreeEntry};

/// Small archives carry fixed tar padding (512-byte headers, a 10 KiB end block) that inflates
/// their apparent ratio; a bomb is about large expansion, so the ratio applies above this floor.
pub const EXPANSION_FLOOR_BYTES: u64 = 1024 * 1024;

/// Fixed modification time in packed archives so the digest depends on content only.
const PACK_MTIME: u64 = 0;

/// Pack the regular files under `dir` (sorted, relative paths, mode 0644, uid/gid 0, mtime 0)
/// into a deterministic `.tar.gz` at `out`. Returns the digest to publish beside it.
/// Symbolic links and special files are not packed; `.git` directories are not descended.
pub fn pack_release_archive(dir: &Path, out: &Path) -> io::Result<Sha256Digest> {
    let mut files = Vec::new();
    collect_files(dir, dir, &mut files)?;
    files.sort();
    let mut entries = Vec::with_capacity(files.len());
    for rel in files {
        let bytes = std::fs::read(dir.join(&rel))?;
        entries.push((rel, bytes));
    }
    let bytes = pack_entries(entries.iter().map(|(p, b)| (p.as_str(), b.as_slice())))?;
    reach_durable_file::replace(out, &bytes, 0o644)?;
    Ok(Sha256Digest::of(&bytes))
}

/// Pack `(path, bytes)` entries, in the given order, into deterministic `.tar.gz` bytes.
pub fn pack_entries<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> io::Result<Vec<u8>> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, bytes) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(PACK_MTIME);
        tar.append_data(&mut h, path, bytes)?;
    }
    let gz = tar.into_inner()?;
    let mut out = gz.finish()?;
    out.flush()?;
    Ok(out)
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        let p = e.path();
        if ft.is_dir() {
            if e.file_name() == ".git" {
                continue;
            }
            collect_files(root, &p, out)?;
        } else if ft.is_file() {
            let rel = p.strip_prefix(root).map_err(io::Error::other)?;
            let rel = rel
                .to_str()
                .ok_or_else(|| io::Error::other(format!("non-UTF-8 path {}", rel.display())))?;
            out.push(rel.replace(std::path::MAIN_SEPARATOR, "/"));
        }
    }
    Ok(())
}

/// The result of unpacking: raw entries plus the byte accounting used for the ratio ceiling.
#[derive(Debug)]
pub struct Unpacked {
    pub entries: Vec<TreeEntry>,
    pub compressed_bytes: u64,
    pub expanded_bytes: u64,
}

/// Which ceiling a [`LimitedReader`] tripped, shared with the caller because the tar reader only
/// sees an opaque `io::Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tripped {
    None,
    Bytes,
    Ratio,
}

struct LimitedReader<R> {
    inner: R,
    read: u64,
    max_bytes: u64,
    max_ratio_bytes: u64,
    tripped: Rc<Cell<Tripped>>,
}

impl<R: Read> Read for LimitedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.max_ratio_bytes {
            self.tripped.set(Tripped::Ratio);
            return Err(io::Error::other("expansion ratio ceiling"));
        }
        if self.read > self.max_bytes {
            self.tripped.set(Tripped::Bytes);
            return Err(io::Error::other("byte ceiling"));
        }
        Ok(n)
    }
}

/// Verify `bytes` against the published `digest`, then unpack the `.tar.gz` within `ceilings`.
///
/// Refuses before decompressing anything if the digest differs, and refuses zip (and any other
/// container) as an unsupported archive. Decompression stops at the first byte past the byte
/// ceiling or past `max_expansion_ratio × compressed size` (above [`EXPANSION_FLOOR_BYTES`]).
pub fn unpack_release_archive(
    bytes: &[u8],
    digest: &Sha256Digest,
    ceilings: &Ceilings,
) -> Result<Unpacked, BuildError> {
    let actual = Sha256Digest::of(bytes);
    if actual != *digest {
        return Err(BuildError::DigestMismatch {
            expected: *digest,
            actual,
        });
    }
    match bytes {
        [0x1f, 0x8b, ..] => {}
        [b'P', b'K', 3, 4, ..] | [b'P', b'K', 5, 6, ..] => {
            return Err(BuildError::UnsupportedArchive("zip".into()));
        }
        _ => {
            return Err(BuildError::UnsupportedArchive(
                "not a gzip-compressed tar".into(),
            ));
        }
    }
    let compressed = bytes.len() as u64;
    let tripped = Rc::new(Cell::new(Tripped::None));
    let limited = LimitedReader {
        inner: flate2::read::GzDecoder::new(bytes),
        read: 0,
        max_bytes: ceilings.max_bytes,
        max_ratio_bytes: compressed
            .saturating_mul(ceilings.max_expansion_ratio)
            .max(EXPANSION_FLOOR_BYTES),
        tripped: tripped.clone(),
    };
    let map_err = |e: io::Error, tripped: &Rc<Cell<Tripped>>| match tripped.get() {
        Tripped::Ratio => BuildError::refused(
            Rule::ExpansionRatio,
            "<archive>",
            format!(
                "expands past {}x its {compressed} compressed bytes",
                ceilings.max_expansion_ratio
            ),
        ),
        Tripped::Bytes => BuildError::refused(
            Rule::TooManyBytes,
            "<archive>",
            format!("expands past {} bytes", ceilings.max_bytes),
        ),
        Tripped::None => BuildError::MalformedArchive(e.to_string()),
    };
    let mut archive = tar::Archive::new(limited);
    let mut entries = Vec::new();
    let iter = archive.entries().map_err(|e| map_err(e, &tripped))?;
    for entry in iter {
        let mut entry = entry.map_err(|e| map_err(e, &tripped))?;
        // Raw bytes: the tar crate's `path()` would already interpret the name.
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let header = entry.header();
        let kind = match header.entry_type() {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let executable = header.mode().map(|m| m & 0o111 != 0).unwrap_or(false);
                let mut data = Vec::new();
                entry
                    .read_to_end(&mut data)
                    .map_err(|e| map_err(e, &tripped))?;
                EntryKind::File {
                    bytes: data,
                    executable,
                }
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                EntryKind::Symlink { target }
            }
            // Global/PAX extension headers are consumed by the tar crate; anything else
            // (hard links, devices, fifos) is not a file we read.
            other => EntryKind::Other(format!("{other:?}")),
        };
        entries.push(TreeEntry { path, kind });
    }
    // Drain the tail so the ratio also covers trailing garbage after the end-of-archive block.
    let mut rest = archive.into_inner();
    io::copy(&mut rest, &mut io::sink()).map_err(|e| map_err(e, &tripped))?;
    Ok(Unpacked {
        entries,
        compressed_bytes: compressed,
        expanded_bytes: rest.read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_is_deterministic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/x.md"), "# X\n").unwrap();
        std::fs::write(dir.path().join("a.md"), "# A\n").unwrap();
        let outdir = tempfile::tempdir().unwrap();
        let out1 = outdir.path().join("one.tar.gz");
        let out2 = outdir.path().join("two.tar.gz");
        let d1 = pack_release_archive(dir.path(), &out1).unwrap();
        let d2 = pack_release_archive(dir.path(), &out2).unwrap();
        assert_eq!(d1, d2);
        let bytes = std::fs::read(&out1).unwrap();
        let un = unpack_release_archive(&bytes, &d1, &Ceilings::default()).unwrap();
        let paths: Vec<_> = un.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.md", "b/c/x.md"]);
    }

    #[test]
    fn digest_is_verified_before_unpacking() {
        let bytes = pack_entries([("a.md", b"# A\n".as_slice())]).unwrap();
        let err = unpack_release_archive(&bytes, &Sha256Digest::of(b"other"), &Ceilings::default())
            .unwrap_err();
        assert_eq!(err.code(), "corpus/digest-mismatch");
    }
}
