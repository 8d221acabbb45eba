//! Secret files: written 0600 in 0700 directories, read only when nobody else can read them.

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
    /// secret file is readable or writable by group or others
    #[error("secret file {path} has mode {mode:o}; group and others must have no access")]
    TooOpen { path: PathBuf, mode: u32 },
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

/// Creates `dir` (mode 0700) if needed.
pub fn ensure_secret_dir(dir: &Path) -> Result<(), SecretFileError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

/// Writes `bytes` to `path` with mode 0600, atomically and durably (`reach_durable_file`), so a
/// reader never sees half a key and a rotation is one rename.
pub fn write_secret(path: &Path, bytes: &[u8]) -> Result<(), SecretFileError> {
    reach_durable_file::replace(path, bytes, 0o600).map_err(io(path))
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

/// Reads a secret file, refusing it when group or others have any access.
pub fn read_secret(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SecretFileError::Missing(path.to_owned()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::TooOpen {
            path: path.to_owned(),
            mode,
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
    }
}
