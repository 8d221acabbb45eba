//! The one digest type of Reach.
//!
//! Every payload, passage, image and record digest is a [`Sha256Digest`]; its text form is
//! `sha256:<64 lowercase hex>`. Parsing accepts only that form, so a digest from another
//! algorithm or a truncated one cannot be mistaken for ours.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

/// The text prefix naming the algorithm.
pub const PREFIX: &str = "sha256:";

impl Sha256Digest {
    /// Digest of `bytes`.
    pub fn of(bytes: impl AsRef<[u8]>) -> Self {
        Self(Sha256::digest(bytes.as_ref()).into())
    }

    /// Digest of several parts, each length-prefixed so that part boundaries are bound too.
    pub fn of_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_be_bytes());
            h.update(p);
        }
        Self(h.finalize().into())
    }

    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 hex characters without the algorithm prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// A streaming hasher producing a [`Sha256Digest`].
#[derive(Default, Clone, Debug)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }
    pub fn finish(self) -> Sha256Digest {
        Sha256Digest(self.0.finalize().into())
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a digest text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestParseError {
    /// digest must start with `sha256:`
    #[error("digest must start with `sha256:`")]
    MissingPrefix,
    /// digest must have 64 lowercase hex characters after the prefix
    #[error("digest must have 64 lowercase hex characters after the prefix")]
    BadHex,
}

impl FromStr for Sha256Digest {
    type Err = DigestParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex_part = s
            .strip_prefix(PREFIX)
            .ok_or(DigestParseError::MissingPrefix)?;
        if hex_part.len() != 64 || hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(DigestParseError::BadHex);
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| DigestParseError::BadHex)?;
        Ok(Self(out))
    }
}

impl serde::Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let d = Sha256Digest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.to_string().parse::<Sha256Digest>(), Ok(d));
    }

    #[test]
    fn refuses_foreign_forms() {
        let hex = Sha256Digest::of(b"abc").hex();
        assert_eq!(
            hex.parse::<Sha256Digest>(),
            Err(DigestParseError::MissingPrefix)
        );
        assert_eq!(
            format!("sha256:{}", &hex[..63]).parse::<Sha256Digest>(),
            Err(DigestParseError::BadHex)
        );
        assert_eq!(
            format!("sha256:{}", hex.to_uppercase()).parse::<Sha256Digest>(),
            Err(DigestParseError::BadHex)
        );
    }

    #[test]
    fn parts_bind_boundaries() {
        let a = Sha256Digest::of_parts([b"ab".as_slice(), b"c".as_slice()]);
        let b = Sha256Digest::of_parts([b"a".as_slice(), b"bc".as_slice()]);
        assert_ne!(a, b);
    }
}
