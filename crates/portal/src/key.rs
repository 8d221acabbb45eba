//! The provider API key: read from a 0600 file only, never from the environment, and never
//! printed (its `Debug` is redacted).

use std::fmt;
use std::path::Path;

/// Longest key accepted (real keys are under 200 bytes).
const MAX_KEY_BYTES: usize = 1024;

/// A provider API key.
#[derive(Clone)]
pub struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Why a key was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// the key file is missing, too open, or unreadable
    #[error("provider key file: {0}")]
    File(#[from] reach_identity::files::SecretFileError),
    /// the key is empty, too long, or holds characters a header cannot carry
    #[error("provider key is not a bearer token")]
    Malformed,
}

impl ApiKey {
    /// The key from a file's bytes (surrounding whitespace trimmed).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| KeyError::Malformed)?
            .trim();
        if text.is_empty()
            || text.len() > MAX_KEY_BYTES
            || !text.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(KeyError::Malformed);
        }
        Ok(ApiKey(text.to_owned()))
    }

    /// Reads the key from a file that group and others cannot access.
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        Self::from_bytes(&reach_identity::files::read_secret(path)?)
    }

    pub(crate) fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_read_only_from_a_private_file_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("provider-api-key");
        std::fs::write(&path, "sk-test-key\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(ApiKey::read(&path), Err(KeyError::File(_))));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let key = ApiKey::read(&path).unwrap();
        assert_eq!(key.bearer(), "Bearer sk-test-key");
        assert!(!format!("{key:?}").contains("sk-test"));
        assert!(matches!(
            ApiKey::from_bytes(b"  "),
            Err(KeyError::Malformed)
        ));
        assert!(matches!(
            ApiKey::from_bytes(b"a b"),
            Err(KeyError::Malformed)
        ));
    }
}
