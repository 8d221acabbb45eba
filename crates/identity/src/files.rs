//! Secret files: written 0640 in 0750 directories, read only when no one but their owner and
//! the reader's own group can read them.
//!
//! The group bit is what lets a Quadlet body read its secrets live: Scribe bind-mounts each
//! role's secret directory read-only into its container, where the body user's group is the
//! role's group (`gidmapping=2000:0:1`) and the owner maps to nobody. So a renewed leaf or a
//! rotated bundle is one rename the role's [`PortMaterial`] reload sees, with no restart and
//! no copy. On the host the group is the body user's own, and the state directory above is
//! 0700: no other account can reach the files.
//!
//! [`PortMaterial`]: ../../reach_port/material/index.html

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// File names inside a role's secret directory.
pub const LEAF_CERT: &str = "tls.crt";
pub const LEAF_KEY: &str = "tls.key";
/// The trust bundle: every root a peer's chain may end in (two during a root rotation).
pub const TRUST_BUNDLE: &str = "bundle.pem";

/// Why a secret file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// secret file is missing
    #[error("secret file {0} is missing")]
    Missing(PathBuf),
    /// secret file is open to others, writable by its group, or readable by a group that is
    /// not the reader's own
    #[error(
        "secret file {path} has mode {mode:o} and group {gid}; others must have no access, and \
         its group (read only) must be the reader's own ({own})"
    )]
    TooOpen {
        path: PathBuf,
        mode: u32,
        gid: u32,
        own: u32,
    },
    /// secret file could not be read or written
    #[error("secret file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// a leaf certificate file holds no PEM certificate
    #[error("{0} holds no certificate")]
    NoCertificate(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SecretFileError + '_ {
    move |source| SecretFileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The mode of a secret file: its owner writes it, the owner's group (the role, inside a
/// container) reads it.
pub const SECRET_FILE_MODE: u32 = 0o640;
/// The mode of a secret directory: the group may list and enter it (see the module's doc).
pub const SECRET_DIR_MODE: u32 = 0o750;

/// Whether a secret file or directory with permission bits `mode` and group `gid` is private
/// enough for a reader whose effective group is `own`: nothing for others, no group write, and
/// any group access only when the group is the reader's own. The one rule every reader and the
/// receipt's `secrets/modes` apply.
pub fn private_enough(mode: u32, gid: u32, own: u32) -> bool {
    let mode = mode & 0o777;
    mode & 0o007 == 0 && mode & 0o020 == 0 && (mode & 0o070 == 0 || gid == own)
}

/// The calling process's effective group: the "own" of [`private_enough`].
pub fn own_group() -> u32 {
    nix::unistd::getegid().as_raw()
}

/// Creates `dir` (mode [`SECRET_DIR_MODE`]) if needed, and any missing directory above it
/// with mode 0700: the group reads a role's own directory through its mount, never the state
/// directory's other entries.
pub fn ensure_secret_dir(dir: &Path) -> Result<(), SecretFileError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io(parent))?;
    }
    match fs::DirBuilder::new().mode(SECRET_DIR_MODE).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(dir)(e)),
        _ => {}
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(SECRET_DIR_MODE)).map_err(io(dir))
}

/// Gives the group read access to every owner-only regular file (0600) of secret directory
/// `dir`: the files a body wrote before secrets were group-readable, which its containers could
/// not read through the mount. Returns how many changed.
pub fn open_to_group(dir: &Path) -> Result<usize, SecretFileError> {
    let mut changed = 0;
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.is_file() && meta.permissions().mode() & 0o777 == 0o600 {
            fs::set_permissions(&path, fs::Permissions::from_mode(SECRET_FILE_MODE))
                .map_err(io(&path))?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Creates `dir` with mode 0700 if needed: for what no role reads (Scribe's trust root).
pub fn ensure_private_dir(dir: &Path) -> Result<(), SecretFileError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

/// Writes `bytes` to `path` with mode 0600, like [`write_secret`]: for what no role reads.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), SecretFileError> {
    reach_durable_file::replace(path, bytes, 0o600).map_err(io(path))
}

/// Writes `bytes` to `path` with mode [`SECRET_FILE_MODE`], atomically and durably
/// (`reach_durable_file`), so a reader never sees half a key and a rotation is one rename.
pub fn write_secret(path: &Path, bytes: &[u8]) -> Result<(), SecretFileError> {
    reach_durable_file::replace(path, bytes, SECRET_FILE_MODE).map_err(io(path))
}

/// Writes a leaf into a secret directory: key first, then certificate, so a reader that sees
/// the new certificate also sees its key.
pub fn write_leaf(dir: &Path, leaf: &crate::IssuedLeaf) -> Result<(), SecretFileError> {
    write_secret(&dir.join(LEAF_KEY), leaf.key_pem.as_bytes())?;
    write_secret(&dir.join(LEAF_CERT), leaf.cert_pem.as_bytes())
}

/// The DER of the leaf certificate in secret directory `dir` (read as a secret file), for
/// [`crate::inspect_leaf`].
pub fn read_leaf_cert(dir: &Path) -> Result<Vec<u8>, SecretFileError> {
    let path = dir.join(LEAF_CERT);
    let pem = read_secret(&path)?;
    match rustls_pemfile::certs(&mut &pem[..]).next() {
        Some(Ok(der)) => Ok(der.to_vec()),
        _ => Err(SecretFileError::NoCertificate(path)),
    }
}

/// Reads a secret file, refusing it unless it is [`private_enough`] for this process.
pub fn read_secret(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SecretFileError::Missing(path.to_owned()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    let own = own_group();
    if !private_enough(mode, meta.gid(), own) {
        return Err(SecretFileError::TooOpen {
            path: path.to_owned(),
            mode,
            gid: meta.gid(),
            own,
        });
    }
    fs::read(path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_file_without_a_certificate_is_refused_as_such() {
        let dir = tempfile::tempdir().unwrap();
        write_secret(&dir.path().join(LEAF_CERT), b"not a certificate").unwrap();
        assert!(matches!(
            read_leaf_cert(dir.path()),
            Err(SecretFileError::NoCertificate(p)) if p == dir.path().join(LEAF_CERT)
        ));
    }

    #[test]
    fn refuses_open_modes_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        assert!(matches!(read_secret(&p), Err(SecretFileError::Missing(_))));
        write_secret(&p, b"x").unwrap();
        assert_eq!(read_secret(&p).unwrap(), b"x");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_secret(&p),
            Err(SecretFileError::TooOpen { mode: 0o644, .. })
        ));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o660)).unwrap();
        assert!(matches!(
            read_secret(&p),
            Err(SecretFileError::TooOpen { mode: 0o660, .. })
        ));
    }

    #[test]
    fn secrets_are_written_for_the_owner_and_read_by_the_own_group_only() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let sd = dir.path().join("state/secrets/role");
        ensure_secret_dir(&sd).unwrap();
        assert_eq!(
            mode(&dir.path().join("state")),
            0o700,
            "the state above stays closed"
        );
        assert_eq!(mode(&dir.path().join("state/secrets")), 0o700);
        let p = sd.join("k");
        write_secret(&p, b"x").unwrap();
        assert_eq!(mode(&sd), 0o750);
        assert_eq!(mode(&p), 0o640);
        assert_eq!(fs::metadata(&p).unwrap().gid(), own_group());
        assert_eq!(read_secret(&p).unwrap(), b"x");
        // The same file under a group that is not the reader's is refused.
        let other = own_group().wrapping_add(4242);
        if nix::unistd::chown(&p, None, Some(nix::unistd::Gid::from_raw(other))).is_ok() {
            assert!(matches!(
                read_secret(&p),
                Err(SecretFileError::TooOpen { gid, .. }) if gid == other
            ));
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(read_secret(&p).unwrap(), b"x", "no group access: any group");
        } else {
            assert_ne!(nix::unistd::geteuid().as_raw(), 0, "root may chown");
        }
    }

    #[test]
    fn an_older_bodys_owner_only_secrets_are_opened_to_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let (old, other) = (dir.path().join("tls.key"), dir.path().join("notes"));
        fs::write(&old, b"k").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&other, b"n").unwrap();
        fs::set_permissions(&other, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(open_to_group(dir.path()).unwrap(), 1);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&old), 0o640);
        assert_eq!(mode(&other), 0o400, "only 0600 files change");
        assert_eq!(open_to_group(dir.path()).unwrap(), 0);
    }

    #[test]
    fn the_rule_admits_group_read_of_the_own_group_only() {
        assert!(private_enough(0o600, 5, 7));
        assert!(private_enough(0o640, 7, 7));
        assert!(private_enough(0o750, 7, 7));
        assert!(!private_enough(0o640, 5, 7));
        assert!(!private_enough(0o660, 7, 7));
        assert!(!private_enough(0o604, 7, 7));
        assert!(!private_enough(0o601, 7, 7));
    }
}
