//! The node's ed25519 key, with which ward signs Room records (facts, execution records, the
//! recipe) for core, which holds no key.
//!
//! The key is a PKCS#8 v2 document in ward's own data directory, created on first start
//! ([`RoomKey::open`]) and loaded on every later one. A file that is there but unreadable,
//! corrupt, not a regular file, or open to group or others is refused, never replaced: a node
//! whose key changed silently would sign records nobody can tie to the ones before.
//!
//! **Architecture Invariant:** the private key never leaves this module: no accessor returns
//! it, [`RoomKey`]'s `Debug` shows the key id only, and nothing here logs bytes of the file or
//! of what is signed.

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use reach_room::fact::{SignatureRefusal, SignedKind, check_signable, signing_input};
use ring::signature::{Ed25519KeyPair, KeyPair as _};

/// The key file's name inside ward's data directory.
pub const ROOM_KEY_FILE: &str = "room-key.pkcs8";

/// The mode the key file is created with, and the most it may have: owner only.
pub const ROOM_KEY_MODE: u32 = 0o600;

/// More than any ed25519 PKCS#8 document (ring's is 83 bytes): a larger file is corrupt.
const MAX_KEY_FILE_BYTES: u64 = 1024;

/// Why ward could not open its room key. None of these carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum RoomKeyError {
    #[error(
        "room key {}: mode {mode:04o} lets group or others read it; it must be 0600 (chmod 600)",
        path.display()
    )]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("room key {}: not a regular file", .0.display())]
    NotAFile(PathBuf),
    #[error(
        "room key {}: not an ed25519 PKCS#8 key (corrupt); ward will not replace it",
        .0.display()
    )]
    Corrupt(PathBuf),
    #[error("room key {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating the room key failed")]
    Generate,
}

/// The node's ed25519 signing key.
pub struct RoomKey {
    pair: Ed25519KeyPair,
    key_id: String,
}

impl std::fmt::Debug for RoomKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl RoomKey {
    /// Loads the key at `path`, or creates it there (mode 0600, atomically and durably) when
    /// there is no file at all. Any other state of the file is refused.
    pub fn open(path: &Path) -> Result<Self, RoomKeyError> {
        let io = |source| RoomKeyError::Io {
            path: path.to_owned(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Err(e) => Err(io(e)),
            Ok(meta) => {
                if !meta.file_type().is_file() {
                    return Err(RoomKeyError::NotAFile(path.to_owned()));
                }
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(RoomKeyError::TooOpen {
                        path: path.to_owned(),
                        mode,
                    });
                }
                let mut bytes = Vec::new();
                std::fs::File::open(path)
                    .and_then(|f| f.take(MAX_KEY_FILE_BYTES + 1).read_to_end(&mut bytes))
                    .map_err(io)?;
                if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
                    return Err(RoomKeyError::Corrupt(path.to_owned()));
                }
                Self::from_pkcs8(&bytes).ok_or_else(|| RoomKeyError::Corrupt(path.to_owned()))
            }
        }
    }

    fn create(path: &Path) -> Result<Self, RoomKeyError> {
        let doc = Self::generate_pkcs8()?;
        let key = Self::from_pkcs8(&doc).ok_or(RoomKeyError::Generate)?;
        reach_durable_file::replace(path, &doc, ROOM_KEY_MODE).map_err(|source| {
            RoomKeyError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
        tracing::info!(key = key.key_id, "room key created");
        Ok(key)
    }

    /// A key that lives in memory only (tests and benches).
    pub fn ephemeral() -> Result<Self, RoomKeyError> {
        Self::from_pkcs8(&Self::generate_pkcs8()?).ok_or(RoomKeyError::Generate)
    }

    fn generate_pkcs8() -> Result<Vec<u8>, RoomKeyError> {
        let rng = ring::rand::SystemRandom::new();
        Ed25519KeyPair::generate_pkcs8(&rng)
            .map(|doc| doc.as_ref().to_vec())
            .map_err(|_| RoomKeyError::Generate)
    }

    fn from_pkcs8(bytes: &[u8]) -> Option<Self> {
        let pair = Ed25519KeyPair::from_pkcs8(bytes).ok()?;
        let key_id = format!("ed25519:{}", hex::encode(pair.public_key().as_ref()));
        Some(Self { pair, key_id })
    }

    /// The raw 32-byte public key.
    pub fn public_key(&self) -> [u8; 32] {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.pair.public_key().as_ref());
        key
    }

    /// `ed25519:<64 lowercase hex>` of the public key.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Signs `record` as `kind` — exactly [`signing_input`]`(kind, record)` — when
    /// [`check_signable`] admits it.
    pub fn sign(&self, kind: SignedKind, record: &[u8]) -> Result<[u8; 64], SignatureRefusal> {
        check_signable(kind, record)?;
        let mut sig = [0u8; 64];
        sig.copy_from_slice(self.pair.sign(&signing_input(kind, record)).as_ref());
        Ok(sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_room::fact::verify;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn fact() -> Vec<u8> {
        br#"{"format":"reach.room.fact.v1","n":1}"#.to_vec()
    }

    #[test]
    fn created_once_with_mode_0600_then_reloaded_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ROOM_KEY_FILE);
        let first = RoomKey::open(&path).unwrap();
        assert_eq!(mode_of(&path), 0o600);
        let bytes = std::fs::read(&path).unwrap();
        // Nothing else in the directory: no temporary file left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let again = RoomKey::open(&path).unwrap();
        assert_eq!(again.public_key(), first.public_key());
        assert_eq!(again.key_id(), first.key_id());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "reload rewrote the key"
        );
        assert_eq!(
            first.key_id(),
            format!("ed25519:{}", hex::encode(first.public_key()))
        );
        // A signature by one verifies under the other's public key.
        let sig = first.sign(SignedKind::Fact, &fact()).unwrap();
        verify(SignedKind::Fact, &fact(), &sig, &again.public_key()).unwrap();
    }

    #[test]
    fn a_file_open_to_group_or_others_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ROOM_KEY_FILE);
        RoomKey::open(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for mode in [0o640, 0o604, 0o660, 0o644] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = RoomKey::open(&path).unwrap_err();
            assert!(
                matches!(e, RoomKeyError::TooOpen { mode: m, .. } if m == mode),
                "{e:?}"
            );
            assert!(e.to_string().contains("must be 0600"), "{e}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
        // Owner-only read is enough.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        RoomKey::open(&path).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_refused_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ROOM_KEY_FILE);
        let good = {
            RoomKey::open(&path).unwrap();
            std::fs::read(&path).unwrap()
        };
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x01;
        for bytes in [
            Vec::new(),
            b"not a key".to_vec(),
            good[..good.len() - 1].to_vec(),
            flipped,
            vec![0; 4096],
        ] {
            reach_durable_file::replace(&path, &bytes, 0o600).unwrap();
            let e = RoomKey::open(&path).unwrap_err();
            assert!(matches!(e, RoomKeyError::Corrupt(_)), "{e:?}");
            assert!(e.to_string().contains("corrupt"), "{e}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "the file was replaced"
            );
        }
    }

    #[test]
    fn a_directory_or_link_in_its_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ROOM_KEY_FILE);
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(
            RoomKey::open(&path),
            Err(RoomKeyError::NotAFile(_))
        ));
        let real = dir.path().join("elsewhere");
        RoomKey::open(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            RoomKey::open(&link),
            Err(RoomKeyError::NotAFile(_))
        ));
    }

    #[test]
    fn signs_only_what_check_signable_admits_and_never_across_kinds() {
        let key = RoomKey::ephemeral().unwrap();
        let sig = key.sign(SignedKind::Fact, &fact()).unwrap();
        assert_eq!(
            verify(SignedKind::Recipe, &fact(), &sig, &key.public_key()),
            Err(SignatureRefusal::BadSignature)
        );
        assert_eq!(
            key.sign(SignedKind::Recipe, &fact()).unwrap_err().code(),
            "room-sign/format"
        );
        let big = vec![b' '; reach_room::fact::MAX_SIGNED_BYTES + 1];
        assert_eq!(
            key.sign(SignedKind::Fact, &big).unwrap_err().code(),
            "room-sign/too-large"
        );
        assert!(!format!("{key:?}").contains("pair"), "{key:?}");
    }
}
