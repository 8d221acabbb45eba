//! Durable, atomic replacement of a small file: the one implementation every role uses (secret
//! files, the corpus store's pointers and release archives, the corpus builder's sources, the
//! launcher's `run/roles`, the vault's high-water mark).
//!
//! A reader sees the old file or the new one, never half of either, and once [`replace`]
//! returns, the new one survives a crash of the host:
//! - the bytes go to a temporary file in the same directory (so the rename is atomic), created
//!   with the target's mode, and are flushed (`fsync`);
//! - the temporary file is renamed over the target;
//! - the directory is flushed, since `fsync` of a file does not make its name durable, and a
//!   rename is a change of the directory.
//!
//! One writer per path: the temporary file's name is derived from the target's, so a stale one
//! left by a crash is removed by the next write, which creates its own (`O_EXCL`, with the
//! target's mode: a leftover's looser mode, or a link planted in its place, is never used).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` (file mode `mode`, e.g. `0o600` for a secret), atomically and
/// durably (see the crate documentation).
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = temp_path(path)?;
    // A temporary file left by a crash goes first: the new one is created afresh (`O_EXCL`),
    // so it has exactly `mode` and is never a file or link someone else put there.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // Exactly `mode`, whatever the umask took from it at creation (a 0640 secret the
        // body's group must read stays 0640 under an operator's umask 077).
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_dir_of(path)
}

/// Flushes the directory holding `path`, which makes a name created or renamed there durable
/// (`fsync` of the file itself does not).
pub fn sync_dir_of(path: &Path) -> io::Result<()> {
    File::open(parent_dir(path))?.sync_all()
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.<name>.tmp` beside `path`: hidden, and distinct for every target in the directory.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a file path names a file"))?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(".tmp");
    Ok(parent_dir(path).join(tmp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn replaces_the_file_with_its_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leaf.key");
        replace(&path, b"first", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(mode_of(&path), 0o600);
        replace(&path, b"second, longer", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["leaf.key"]);
    }

    /// The mode is exact under any umask: a group-readable secret stays group-readable when
    /// the writer's umask would have taken the group's bit (the other tests here create only
    /// 0600 files, which a umask of 077 leaves as they are).
    #[test]
    fn the_mode_is_exact_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tls.key");
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let written = replace(&path, b"key", 0o640);
        nix::sys::stat::umask(old);
        written.unwrap();
        assert_eq!(mode_of(&path), 0o640);
    }

    /// Two targets that differ only in their extension get different temporary files (the
    /// identity crate writes `leaf.key` and `leaf.crt` side by side).
    #[test]
    fn every_target_has_its_own_temporary_file() {
        let a = temp_path(Path::new("/d/leaf.key")).unwrap();
        let b = temp_path(Path::new("/d/leaf.crt")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a, Path::new("/d/.leaf.key.tmp"));
        assert_eq!(
            temp_path(Path::new("mark")).unwrap(),
            Path::new("./.mark.tmp")
        );
    }

    /// A temporary file left by a crash mid-write (with a looser mode) is replaced, not reused,
    /// and a target made with a looser mode takes the new mode.
    #[test]
    fn a_stale_temporary_file_and_an_old_mode_do_not_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(temp_path(&path).unwrap(), b"half of a much longer write").unwrap();
        replace(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(mode_of(&path), 0o600);
    }

    /// A link planted where the temporary file goes is removed, not followed.
    #[test]
    fn a_link_in_place_of_the_temporary_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        std::os::unix::fs::symlink(&elsewhere, temp_path(&path).unwrap()).unwrap();
        replace(&path, b"secret", 0o600).unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn a_missing_directory_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("file");
        assert_eq!(
            replace(&path, b"x", 0o644).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(!path.exists());
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        assert_eq!(
            replace(Path::new("/"), b"x", 0o644).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
