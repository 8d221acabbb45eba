//! ed25519 pack keys and the operator's trusted keys.
//!
//! `facts.sig` is a small JSON object, `{"key": "ed25519:<hex>", "sig": "<hex>"}`: the
//! signer's public key and the ed25519 signature over `facts.json`'s exact bytes. ed25519 is
//! deterministic, so the same key over the same facts gives the same `facts.sig`, and the same
//! sources the same archive.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

/// The text prefix of a public key.
pub const KEY_PREFIX: &str = "ed25519:";

/// A pack signing key (ed25519), loaded from PKCS#8 v2 DER.
pub struct PackKey(Ed25519KeyPair);

impl fmt::Debug for PackKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PackKey({})", self.public())
    }
}

/// Why a key or a signature text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// not an ed25519 PKCS#8 v2 key: {0}
    #[error("not an ed25519 PKCS#8 v2 key: {0}")]
    Pkcs8(String),
    /// generating a key failed
    #[error("generating an ed25519 key failed")]
    Generate,
    /// not a public key `ed25519:<64 lowercase hex>`
    #[error("not a public key `ed25519:<64 lowercase hex>`: `{0}`")]
    PublicKey(String),
    /// not a facts signature
    #[error(
        "not a facts signature {{\"key\": \"ed25519:<hex>\", \"sig\": \"<128 lowercase hex>\"}}: {0}"
    )]
    Signature(String),
}

impl PackKey {
    /// A fresh key, as PKCS#8 v2 DER bytes (what `reach pack key` writes to a file).
    pub fn generate() -> Result<Vec<u8>, KeyError> {
        let rng = ring::rand::SystemRandom::new();
        Ed25519KeyPair::generate_pkcs8(&rng)
            .map(|doc| doc.as_ref().to_vec())
            .map_err(|_| KeyError::Generate)
    }

    /// Loads a key from PKCS#8 v2 DER bytes (the public key included and checked).
    pub fn from_pkcs8(bytes: &[u8]) -> Result<Self, KeyError> {
        Ed25519KeyPair::from_pkcs8(bytes)
            .map(Self)
            .map_err(|e| KeyError::Pkcs8(e.to_string()))
    }

    pub fn public(&self) -> PublicKey {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.0.public_key().as_ref());
        PublicKey(key)
    }

    /// Signs `facts_json`, exactly those bytes.
    pub fn sign(&self, facts_json: &[u8]) -> FactsSignature {
        let mut sig = [0u8; 64];
        sig.copy_from_slice(self.0.sign(facts_json).as_ref());
        FactsSignature {
            key: self.public(),
            sig: Signature(sig),
        }
    }
}

/// An ed25519 public key; text form `ed25519:<64 lowercase hex>`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Whether `sig` is this key's signature over `message`.
    pub fn verifies(&self, message: &[u8], sig: &Signature) -> bool {
        UnparsedPublicKey::new(&ED25519, self.0)
            .verify(message, &sig.0)
            .is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{KEY_PREFIX}{}", hex::encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Lowercase hex of exactly `N` bytes.
fn decode_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || s.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

impl FromStr for PublicKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix(KEY_PREFIX)
            .and_then(decode_hex::<32>)
            .map(Self)
            .ok_or_else(|| KeyError::PublicKey(s.chars().take(80).collect()))
    }
}

impl Serialize for PublicKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// An ed25519 signature; text form 128 lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature([u8; 64]);

impl Signature {
    pub const fn from_bytes(bytes: [u8; 64]) -> Self {
        Self(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; 64] {
        &self.0
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl Serialize for Signature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(self.0))
    }
}

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        decode_hex::<64>(&s)
            .map(Self)
            .ok_or_else(|| serde::de::Error::custom("expected 128 lowercase hex"))
    }
}

/// `facts.sig`: who signed `facts.json`, and the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactsSignature {
    pub key: PublicKey,
    pub sig: Signature,
}

impl FactsSignature {
    /// The bytes of `facts.sig`.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a signature serializes")
    }

    /// Parses `facts.sig` strictly (an unknown key is refused).
    pub fn parse(bytes: &[u8]) -> Result<Self, KeyError> {
        serde_json::from_slice(bytes).map_err(|e| KeyError::Signature(e.to_string()))
    }
}

/// The operator's trusted pack keys, each with a name for messages and records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys(BTreeMap<PublicKey, String>);

/// Who signed a verified pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signer {
    /// The trusted key's name.
    pub name: String,
    pub key: PublicKey,
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    /// the signer's key is not among the trusted keys
    #[error("facts.sig names the key {0}, which is not a trusted pack key")]
    UnknownSigner(PublicKey),
    /// the signature does not verify under the (trusted) key it names
    #[error(
        "facts.sig's signature does not verify over facts.json under the trusted key `{name}` ({key})"
    )]
    BadSignature { name: String, key: PublicKey },
}

/// One entry of a role's `settings.pack_keys`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PackKeySetting {
    name: String,
    /// `ed25519:<hex>`.
    key: String,
}

impl TrustedKeys {
    pub fn new() -> Self {
        Self::default()
    }

    /// A role's `settings.pack_keys = [{ name, key = "ed25519:<hex>" }]` (core, workbench
    /// and vm-broker read the same setting). Absent: no key is trusted, so every pack is
    /// refused `package/unknown-signer`.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, String> {
        let mut keys = Self::default();
        let Some(v) = settings.get("pack_keys") else {
            return Ok(keys);
        };
        let list: Vec<PackKeySetting> = v
            .clone()
            .try_into()
            .map_err(|e| format!("settings.pack_keys: {e}"))?;
        for k in list {
            let public: PublicKey = k
                .key
                .parse()
                .map_err(|e| format!("settings.pack_keys {}: {e}", k.name))?;
            keys.insert(&k.name, public);
        }
        Ok(keys)
    }

    /// Trusts `key` under `name` (replacing an earlier name of the same key).
    pub fn insert(&mut self, name: impl Into<String>, key: PublicKey) {
        self.0.insert(key, name.into());
    }

    /// The name `key` is trusted under.
    pub fn name_of(&self, key: &PublicKey) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &PublicKey)> {
        self.0.iter().map(|(k, n)| (n.as_str(), k))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Verifies `sig` over `message`: the key it names must be trusted, then the signature
    /// must verify under it.
    pub fn verify(&self, message: &[u8], sig: &FactsSignature) -> Result<Signer, SignatureRefusal> {
        let name = self
            .name_of(&sig.key)
            .ok_or(SignatureRefusal::UnknownSigner(sig.key))?;
        if sig.key.verifies(message, &sig.sig) {
            Ok(Signer {
                name: name.to_owned(),
                key: sig.key,
            })
        } else {
            Err(SignatureRefusal::BadSignature {
                name: name.to_owned(),
                key: sig.key,
            })
        }
    }
}
