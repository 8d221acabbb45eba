//! The image cache (`reach image build|prepare --cache DIR`): where its entries live, and
//! pruning the ones the operator no longer pins.
//!
//! Layout: `DIR/<spec digest hex>` holds an image ([`crate::image::cached_build`]),
//! `DIR/prepared/<key>` a prepared layer ([`crate::prepared::cached_prepare`]). Nothing else
//! under `DIR` is an entry, so pruning never touches it (the lock file, the accelerator probe's
//! answer, an operator's own files).
//!
//! Which digests are still pinned is the operator's to say, by name or through the vm-broker's
//! settings (which may name directories anywhere): [`prune`] keeps exactly those digests and
//! the base image of every kept prepared layer, and refuses, removing nothing, when a digest
//! the operator named is not in the cache (a mistyped pin would otherwise lose the layer it
//! meant).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use reach_digest::Sha256Digest;

use crate::manifest::ImageManifest;
use crate::prepared::PreparedManifest;

/// The subdirectory holding prepared layers.
const PREPARED_DIR: &str = "prepared";
/// Hex digits of its cache key that name a prepared layer's directory.
const PREPARED_KEY_HEX: usize = 32;
/// Hex digits of a spec digest, which names an image's directory.
const SPEC_DIGEST_HEX: usize = 64;

/// Where the image of a spec is cached.
pub fn image_dir(root: &Path, spec: &Sha256Digest) -> PathBuf {
    root.join(spec.hex())
}

/// Where the prepared layer of a cache key (spec, base, accelerator) is cached.
pub fn prepared_dir(root: &Path, key: &Sha256Digest) -> PathBuf {
    root.join(PREPARED_DIR).join(&key.hex()[..PREPARED_KEY_HEX])
}

/// What a cache entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Image,
    Prepared,
}

/// One cache entry as pruning sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    pub dir: PathBuf,
    /// Its image or prepared-system digest; `None` when its manifest does not read (a build
    /// that stopped half-way), which nothing can pin.
    pub digest: Option<Sha256Digest>,
    /// A prepared layer's base image.
    pub base: Option<Sha256Digest>,
    /// Bytes allocated on disk (the rootfs is sparse, so not its apparent size).
    pub allocated: u64,
}

/// The digests [`prune`] keeps (with the base image of each kept prepared layer).
#[derive(Debug, Default, Clone, Copy)]
pub struct Keep<'a> {
    /// Digests the operator named: each must be in the cache.
    pub named: &'a [Sha256Digest],
    /// Digests a deployment pins: kept where the cache holds them (a pin may name a directory
    /// elsewhere).
    pub pinned: &'a [Sha256Digest],
}

/// What [`prune`] kept and removed (or would remove, on a dry run).
#[derive(Debug, Default)]
pub struct Pruned {
    pub kept: Vec<Entry>,
    pub removed: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// A digest to keep names no entry: nothing was removed.
    #[error("{0} is in no entry of the cache; nothing removed")]
    NotCached(Sha256Digest),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PruneError + 'a {
    move |source| PruneError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

fn is_hex(name: &str, len: usize) -> bool {
    name.len() == len && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Every entry of the cache at `root`, images first, each group by directory name.
pub fn entries(root: &Path) -> Result<Vec<Entry>, PruneError> {
    let mut out = Vec::new();
    for (kind, dir, name_len) in [
        (EntryKind::Image, root.to_owned(), SPEC_DIGEST_HEX),
        (
            EntryKind::Prepared,
            root.join(PREPARED_DIR),
            PREPARED_KEY_HEX,
        ),
    ] {
        let listing = match fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("list", &dir)(e)),
        };
        let mut dirs = Vec::new();
        for d in listing {
            let d = d.map_err(io_err("list", &dir))?;
            let is_dir = d.file_type().map_err(io_err("stat", &d.path()))?.is_dir();
            if is_dir && d.file_name().to_str().is_some_and(|n| is_hex(n, name_len)) {
                dirs.push(d.path());
            }
        }
        dirs.sort();
        for dir in dirs {
            let (digest, base) = match kind {
                EntryKind::Image => (ImageManifest::read(&dir).ok().map(|m| m.digest()), None),
                EntryKind::Prepared => match PreparedManifest::read(&dir) {
                    Ok(m) => (Some(m.digest()), Some(m.base_image)),
                    Err(_) => (None, None),
                },
            };
            let allocated = allocated(&dir).map_err(io_err("measure", &dir))?;
            out.push(Entry {
                kind,
                dir,
                digest,
                base,
                allocated,
            });
        }
    }
    Ok(out)
}

/// Removes every entry of the cache at `root` except the prepared layers and images `keep`
/// names, and the base image of each kept prepared layer. With `dry_run`, only says what it
/// would remove. The caller holds the cache's lock.
pub fn prune(root: &Path, keep: Keep<'_>, dry_run: bool) -> Result<Pruned, PruneError> {
    let all = entries(root)?;
    let present: BTreeSet<Sha256Digest> = all.iter().filter_map(|e| e.digest).collect();
    if let Some(missing) = keep.named.iter().find(|d| !present.contains(d)) {
        return Err(PruneError::NotCached(*missing));
    }
    let pinned: BTreeSet<Sha256Digest> = keep.named.iter().chain(keep.pinned).copied().collect();
    let bases = all
        .iter()
        .filter(|e| e.kind == EntryKind::Prepared && e.digest.is_some_and(|d| pinned.contains(&d)));
    let keep: BTreeSet<Sha256Digest> = bases
        .filter_map(|e| e.base)
        .chain(pinned.iter().copied())
        .collect();
    let mut pruned = Pruned::default();
    for e in all {
        if e.digest.is_some_and(|d| keep.contains(&d)) {
            pruned.kept.push(e);
        } else {
            if !dry_run {
                clear(&e.dir).map_err(io_err("remove", &e.dir))?;
            }
            pruned.removed.push(e);
        }
    }
    Ok(pruned)
}

/// Removes an entry's directory. Its artifacts and directories are read-only once written;
/// the directories get their owner's write bit back first so their files can be unlinked.
pub(crate) fn clear(dir: &Path) -> io::Result<()> {
    fn writable(dir: &Path) -> io::Result<()> {
        let meta = fs::symlink_metadata(dir)?;
        let mut perms = meta.permissions();
        perms.set_mode(perms.mode() | 0o700);
        fs::set_permissions(dir, perms)?;
        for d in fs::read_dir(dir)? {
            let d = d?;
            if d.file_type()?.is_dir() {
                writable(&d.path())?;
            }
        }
        Ok(())
    }
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return fs::remove_file(dir),
        Ok(_) => {}
    }
    writable(dir)?;
    fs::remove_dir_all(dir)
}

/// Bytes allocated to everything under `dir` (symbolic links are not followed).
fn allocated(dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    for d in fs::read_dir(dir)? {
        let d = d?;
        let meta = d.path().symlink_metadata()?;
        total += meta.blocks() * 512;
        if meta.is_dir() {
            total += allocated(&d.path())?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Artifact, DIGEST_FILE, MANIFEST_FILE};
    use crate::prepared::{PREPARED_DIGEST_FILE, PREPARED_MANIFEST_FILE};

    fn artifact(file: &str) -> Artifact {
        Artifact {
            file: file.into(),
            sha256: Sha256Digest::of(file.as_bytes()),
            bytes: 1,
        }
    }

    /// An image entry with a manifest of its own (`suite` tells them apart), read-only as a
    /// build leaves it. Returns its digest.
    fn image(root: &Path, suite: &str) -> Sha256Digest {
        let m = crate::testing::manifest(
            suite,
            artifact("vmlinuz"),
            artifact("initrd.img"),
            artifact("rootfs.raw"),
        );
        let dir = image_dir(root, &m.spec_digest);
        write_entry(
            &dir,
            MANIFEST_FILE,
            &m.canonical_json(),
            DIGEST_FILE,
            m.digest(),
        );
        m.digest()
    }

    fn prepared(root: &Path, base: Sha256Digest, name: &str) -> Sha256Digest {
        let m = PreparedManifest {
            format: crate::prepared::PREPARED_MANIFEST_FORMAT.into(),
            spec_digest: Sha256Digest::of(name.as_bytes()),
            base_image: base,
            prepare_revision: "test".into(),
            qemu_version: "QEMU emulator version 7.2".into(),
            machine_type: "pc-i440fx-7.2".into(),
            accel: "tcg".into(),
            memory_mib: 384,
            cpus: 1,
            disk: artifact("disk.qcow2"),
            state: artifact("state.mig"),
            files: vec![],
            system_state: "running".into(),
            notes: vec![],
        };
        let dir = prepared_dir(root, &m.spec_digest);
        write_entry(
            &dir,
            PREPARED_MANIFEST_FILE,
            &m.canonical_json(),
            PREPARED_DIGEST_FILE,
            m.digest(),
        );
        m.digest()
    }

    fn write_entry(dir: &Path, manifest: &str, json: &[u8], digest_file: &str, d: Sha256Digest) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(manifest), json).unwrap();
        fs::write(dir.join(digest_file), d.to_string()).unwrap();
        fs::write(dir.join("blob"), vec![7u8; 64 * 1024]).unwrap();
        for f in [manifest, digest_file, "blob"] {
            fs::set_permissions(dir.join(f), fs::Permissions::from_mode(0o444)).unwrap();
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
    }

    fn dirs(v: &[Entry]) -> Vec<&Path> {
        v.iter().map(|e| e.dir.as_path()).collect()
    }

    #[test]
    fn keeps_what_is_pinned_and_the_bases_of_kept_layers() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let old_base = image(root, "bullseye");
        let base = image(root, "bookworm");
        let unpinned = image(root, "trixie");
        let layer = prepared(root, base, "service");
        let old_layer = prepared(root, old_base, "service-old");
        // A build that stopped before its manifest, and things that are not entries.
        let half = root.join("ab".repeat(32));
        fs::create_dir_all(&half).unwrap();
        fs::write(root.join(".lock"), "").unwrap();
        fs::write(root.join("accel-probe"), "x tcg\n").unwrap();
        fs::create_dir_all(root.join("mine")).unwrap();

        let all = entries(root).unwrap();
        assert_eq!(all.len(), 6);
        assert!(
            all.iter()
                .all(|e| e.digest.is_none() || e.allocated >= 64 * 1024)
        );

        // A dry run names the same entries and removes none.
        let keep = Keep {
            named: &[layer],
            ..Keep::default()
        };
        let dry = prune(root, keep, true).unwrap();
        assert_eq!(entries(root).unwrap(), all);

        let done = prune(root, keep, false).unwrap();
        assert_eq!(dirs(&done.kept), dirs(&dry.kept));
        assert_eq!(dirs(&done.removed), dirs(&dry.removed));
        let kept: BTreeSet<_> = done.kept.iter().filter_map(|e| e.digest).collect();
        assert_eq!(kept, BTreeSet::from([base, layer]));
        let removed: BTreeSet<_> = done.removed.iter().map(|e| e.digest).collect();
        assert_eq!(
            removed,
            BTreeSet::from([Some(old_base), Some(unpinned), Some(old_layer), None])
        );
        for e in &done.removed {
            assert!(!e.dir.exists(), "{} left", e.dir.display());
        }
        for e in &done.kept {
            assert!(e.dir.join("blob").exists());
        }
        for other in [".lock", "accel-probe", "mine"] {
            assert!(root.join(other).exists(), "{other} touched");
        }
    }

    #[test]
    fn a_pin_not_in_the_cache_removes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let base = image(root, "bookworm");
        image(root, "trixie");
        let before = entries(root).unwrap();
        let typo = Sha256Digest::of(b"not cached");
        let named = Keep {
            named: &[base, typo],
            ..Keep::default()
        };
        match prune(root, named, false) {
            Err(PruneError::NotCached(d)) => assert_eq!(d, typo),
            other => panic!("{other:?}"),
        }
        assert_eq!(entries(root).unwrap(), before);
        // A deployment's pin may live elsewhere: not cached is no refusal, cached is kept.
        let pinned = Keep {
            pinned: &[base, typo],
            ..Keep::default()
        };
        let done = prune(root, pinned, false).unwrap();
        assert_eq!(
            done.kept.iter().map(|e| e.digest).collect::<Vec<_>>(),
            [Some(base)]
        );
        assert_eq!(done.removed.len(), 1);
        // An empty keep list is the operator saying nothing is pinned.
        let all = prune(root, Keep::default(), false).unwrap();
        assert_eq!(all.removed.len(), 1);
        assert!(entries(root).unwrap().is_empty());
    }

    #[test]
    fn an_unreadable_layout_refuses_with_io_and_removes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let kept = image(root, "bookworm");
        let stale = image(root, "trixie");
        // Where the prepared layers' directory belongs, a file: listing it fails (ENOTDIR, which
        // no permission bit of root's bypasses), after the images were listed and before any
        // entry is removed.
        fs::write(root.join(PREPARED_DIR), "not a directory").unwrap();
        let named = Keep {
            named: &[kept],
            ..Keep::default()
        };
        match prune(root, named, false) {
            Err(PruneError::Io { what, path, source }) => {
                assert_eq!(what, "list");
                assert_eq!(path, root.join(PREPARED_DIR));
                assert_eq!(source.kind(), io::ErrorKind::NotADirectory);
            }
            other => panic!("{other:?}"),
        }
        // Nothing was removed: the stale image a successful prune would remove is still whole.
        for (suite, digest) in [("bookworm", kept), ("trixie", stale)] {
            let dir = image_dir(root, &Sha256Digest::of(suite.as_bytes()));
            assert!(dir.join("blob").exists(), "{suite} touched");
            assert_eq!(ImageManifest::read(&dir).unwrap().digest(), digest);
        }
        assert!(root.join(PREPARED_DIR).is_file());
    }
}

/// A prepared system found for a pack's spec digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPrepared {
    pub image_digest: Sha256Digest,
    pub prepared_digest: Sha256Digest,
    pub image_dir: PathBuf,
    pub prepared_dir: PathBuf,
    /// Whether it came from the broker's pins (else from its cache directory).
    pub pinned: bool,
}

/// Where [`find_prepared`] looks: the broker's pinned directories, then its cache.
#[derive(Debug, Default, Clone, Copy)]
pub struct Search<'a> {
    pub pinned_images: &'a [PathBuf],
    pub pinned_prepared: &'a [PathBuf],
    pub cache: Option<&'a Path>,
}

/// The prepared system whose manifest names `prepared_spec` and lies on an image whose
/// manifest names `image_spec`, if one is pinned or cached; read-only. A directory whose
/// manifest does not read is passed over. Artifacts are not hashed here (a rootfs is hundreds
/// of MiB): the broker verifies them when it creates an instance from them.
pub fn find_prepared(
    search: Search<'_>,
    image_spec: &Sha256Digest,
    prepared_spec: &Sha256Digest,
) -> Option<FoundPrepared> {
    let image_of = |dirs: Vec<PathBuf>, digest: &Sha256Digest| {
        dirs.into_iter().find(|d| {
            ImageManifest::read(d)
                .is_ok_and(|m| m.digest() == *digest && m.spec_digest == *image_spec)
        })
    };
    let cached_images = || -> Vec<PathBuf> {
        search
            .cache
            .map(|c| vec![image_dir(c, image_spec)])
            .unwrap_or_default()
    };
    let cached_prepared = search
        .cache
        .and_then(|c| fs::read_dir(c.join(PREPARED_DIR)).ok())
        .map(|l| {
            let mut v: Vec<PathBuf> = l.filter_map(|d| d.ok().map(|d| d.path())).collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    let candidates = search
        .pinned_prepared
        .iter()
        .map(|d| (d.clone(), true))
        .chain(cached_prepared.into_iter().map(|d| (d, false)));
    for (dir, pinned) in candidates {
        let Ok(m) = PreparedManifest::read(&dir) else {
            continue;
        };
        if m.spec_digest != *prepared_spec {
            continue;
        }
        let images: Vec<PathBuf> = search
            .pinned_images
            .iter()
            .cloned()
            .chain(cached_images())
            .collect();
        if let Some(image_dir) = image_of(images, &m.base_image) {
            return Some(FoundPrepared {
                image_digest: m.base_image,
                prepared_digest: m.digest(),
                image_dir,
                prepared_dir: dir,
                pinned,
            });
        }
    }
    None
}
