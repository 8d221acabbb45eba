//! Sealing of the interaction token: the one mechanism by which an `/ask` interaction's token
//! crosses core and ward without being readable there.
//!
//! ingress-edge seals the token to egress-discord's public key on admission and drops the
//! plaintext; core carries the sealed blob in the delivery intent and never opens it;
//! egress-discord alone holds the private key and opens the blob right before the callback.
//!
//! Construction (one shot, per blob): a fresh X25519 key pair for the sender; the shared secret
//! with the recipient's static key goes through HKDF-SHA256 (salt = ephemeral public key ‖
//! recipient public key) into a ChaCha20-Poly1305 key. A key is used for exactly one blob, so
//! the all-zero nonce is unique for it. The AAD binds the application id and the interaction
//! id: a blob opens only for its own interaction, so a blob copied into another intent is
//! refused rather than redeemed.
//!
//! Blob layout (version 2): `version (1) ‖ key id (32) ‖ ephemeral public key (32) ‖
//! ciphertext ‖ tag (16)`. The key id is the SHA-256 of the recipient's public key
//! ([`SealKeyId`]), so a blob names the key that opens it.
//!
//! Rotation: Scribe mints a new pair and keeps the old private key as the *previous* one,
//! with the time it stopped being current ([`SealKeyring`]). egress-discord opens blobs sealed
//! to the current key, and to the previous one for [`PREVIOUS_KEY_GRACE`] after the rotation
//! (longer than Discord's 15-minute interaction token lifetime, so every token sealed before
//! the rotation can still be answered); after that the previous key is refused
//! ([`SealError::RetiredKey`]), and a key the ring does not hold is [`SealError::UnknownKey`].
//!
//! X25519 with a static recipient key comes from `x25519-dalek` (ring offers only ephemeral
//! agreement keys); HKDF, the AEAD and the randomness come from ring, already in the tree.

use std::fmt;
use std::time::Duration;

use ring::aead::{self, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use ring::rand::{SecureRandom, SystemRandom};
use x25519_dalek::{PublicKey, StaticSecret};

use crate::model::{InteractionToken, Snowflake};

/// The blob format version this build writes and opens.
pub const SEAL_VERSION: u8 = 2;
/// Length of an X25519 key, public or private.
pub const KEY_LEN: usize = 32;
/// Length of a key id (a SHA-256).
pub const KEY_ID_LEN: usize = 32;
const TAG_LEN: usize = 16;
/// The shortest blob that can be well formed (an empty plaintext).
pub const MIN_BLOB_LEN: usize = 1 + KEY_ID_LEN + KEY_LEN + TAG_LEN;
/// How long after a rotation the previous key still opens blobs: more than Discord's 15-minute
/// interaction token lifetime, so no token sealed before the rotation is orphaned.
pub const PREVIOUS_KEY_GRACE: Duration = Duration::from_secs(20 * 60);
const HKDF_INFO: &[u8] = b"reach interaction token seal v1";
const AAD_LABEL: &[u8] = b"reach-interaction-seal-v1";

/// Why a seal or an open failed. Variants name the cause only: never the token or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("seal/random: the system random source failed")]
    Random,
    #[error("seal/bad-key: a key must be exactly {KEY_LEN} bytes, got {0}")]
    BadKeyLength(usize),
    #[error("seal/truncated: a sealed blob is at least {MIN_BLOB_LEN} bytes, got {0}")]
    Truncated(usize),
    #[error("seal/unknown-version: blob version {0}, this build opens version {SEAL_VERSION}")]
    UnknownVersion(u8),
    #[error("seal/non-contributory: the ephemeral key is a low-order point")]
    NonContributory,
    #[error("seal/open: the blob does not open with this key for this interaction")]
    Open,
    #[error("seal/unknown-key: the blob is sealed to a key this ring does not hold ({0})")]
    UnknownKey(SealKeyId),
    #[error(
        "seal/retired-key: the blob is sealed to the previous key, retired more than the grace window ago ({0})"
    )]
    RetiredKey(SealKeyId),
    #[error("seal/bad-ring: a key ring is {KEY_LEN} or {RING_LEN} bytes, got {0}")]
    BadRingLength(usize),
    #[error("seal/not-utf8: the opened token is not UTF-8")]
    NotUtf8,
}

/// egress-discord's public sealing key, held by ingress-edge.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SealPublicKey([u8; KEY_LEN]);

/// The id of a sealing key: the SHA-256 of its public half. A blob carries it in clear.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SealKeyId([u8; KEY_ID_LEN]);

impl SealKeyId {
    pub fn as_bytes(&self) -> &[u8; KEY_ID_LEN] {
        &self.0
    }
}

impl fmt::Display for SealKeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SealKeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKeyId({self})")
    }
}

impl SealPublicKey {
    /// This key's id (what a blob sealed to it names).
    pub fn id(&self) -> SealKeyId {
        let d = ring::digest::digest(&ring::digest::SHA256, &self.0);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(d.as_ref());
        SealKeyId(id)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SealError> {
        let arr: [u8; KEY_LEN] = bytes
            .try_into()
            .map_err(|_| SealError::BadKeyLength(bytes.len()))?;
        Ok(Self(arr))
    }

    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for SealPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealPublicKey({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// egress-discord's private sealing key. Never printed.
pub struct SealSecretKey(StaticSecret);

impl SealSecretKey {
    /// A fresh key from the system random source (Scribe mints it once per deployment).
    pub fn generate() -> Result<Self, SealError> {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| SealError::Random)?;
        Ok(Self(StaticSecret::from(bytes)))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SealError> {
        let arr: [u8; KEY_LEN] = bytes
            .try_into()
            .map_err(|_| SealError::BadKeyLength(bytes.len()))?;
        Ok(Self(StaticSecret::from(arr)))
    }

    /// The bytes to store in egress-discord's secret dir (0600).
    pub fn to_bytes(&self) -> [u8; KEY_LEN] {
        self.0.to_bytes()
    }

    pub fn public_key(&self) -> SealPublicKey {
        SealPublicKey(PublicKey::from(&self.0).to_bytes())
    }
}

impl fmt::Debug for SealSecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealSecretKey(<redacted>)")
    }
}

/// The interaction a blob belongs to: its bytes are the AEAD's associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealBinding {
    pub application_id: Snowflake,
    pub interaction_id: Snowflake,
}

impl SealBinding {
    fn aad(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(AAD_LABEL.len() + 16);
        v.extend_from_slice(AAD_LABEL);
        v.extend_from_slice(&self.application_id.0.to_be_bytes());
        v.extend_from_slice(&self.interaction_id.0.to_be_bytes());
        v
    }
}

/// A sealed interaction token: opaque bytes that core and ward carry but cannot read.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedToken(Vec<u8>);

impl SealedToken {
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for SealedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedToken({} bytes)", self.0.len())
    }
}

fn aead_key(
    shared: &[u8; KEY_LEN],
    ephemeral: &[u8; KEY_LEN],
    recipient: &[u8; KEY_LEN],
) -> LessSafeKey {
    let mut salt = [0u8; 2 * KEY_LEN];
    salt[..KEY_LEN].copy_from_slice(ephemeral);
    salt[KEY_LEN..].copy_from_slice(recipient);
    let prk = Salt::new(HKDF_SHA256, &salt).extract(shared);
    let okm = prk
        .expand(&[HKDF_INFO], &CHACHA20_POLY1305)
        .expect("HKDF-SHA256 expands 32 bytes");
    LessSafeKey::new(UnboundKey::from(okm))
}

/// Seals `token` to `recipient` for the interaction `binding`.
pub fn seal(
    recipient: &SealPublicKey,
    binding: SealBinding,
    token: &InteractionToken,
) -> Result<SealedToken, SealError> {
    let ephemeral = SealSecretKey::generate()?;
    let ephemeral_public = ephemeral.public_key();
    let shared = ephemeral.0.diffie_hellman(&PublicKey::from(recipient.0));
    if !shared.was_contributory() {
        return Err(SealError::NonContributory);
    }
    let key = aead_key(shared.as_bytes(), &ephemeral_public.0, &recipient.0);
    let mut body = token.0.as_bytes().to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key([0u8; aead::NONCE_LEN]),
        Aad::from(binding.aad()),
        &mut body,
    )
    .map_err(|_| SealError::Open)?;
    let mut blob = Vec::with_capacity(1 + KEY_ID_LEN + KEY_LEN + body.len());
    blob.push(SEAL_VERSION);
    blob.extend_from_slice(recipient.id().as_bytes());
    blob.extend_from_slice(&ephemeral_public.0);
    blob.extend_from_slice(&body);
    Ok(SealedToken(blob))
}

/// The key id a blob names, after its length and version are checked.
pub fn key_id_of(blob: &SealedToken) -> Result<SealKeyId, SealError> {
    let bytes = &blob.0;
    if bytes.len() < MIN_BLOB_LEN {
        return Err(SealError::Truncated(bytes.len()));
    }
    if bytes[0] != SEAL_VERSION {
        return Err(SealError::UnknownVersion(bytes[0]));
    }
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&bytes[1..1 + KEY_ID_LEN]);
    Ok(SealKeyId(id))
}

/// Opens `blob` with egress-discord's key, for the interaction `binding` only. A blob naming
/// another key is [`SealError::UnknownKey`].
pub fn open(
    key: &SealSecretKey,
    binding: SealBinding,
    blob: &SealedToken,
) -> Result<InteractionToken, SealError> {
    let id = key_id_of(blob)?;
    let public = key.public_key();
    if id != public.id() {
        return Err(SealError::UnknownKey(id));
    }
    let bytes = &blob.0;
    let at = 1 + KEY_ID_LEN;
    let mut ephemeral = [0u8; KEY_LEN];
    ephemeral.copy_from_slice(&bytes[at..at + KEY_LEN]);
    let shared = key.0.diffie_hellman(&PublicKey::from(ephemeral));
    if !shared.was_contributory() {
        return Err(SealError::NonContributory);
    }
    let aead_key = aead_key(shared.as_bytes(), &ephemeral, &public.0);
    let mut body = bytes[at + KEY_LEN..].to_vec();
    let plain = aead_key
        .open_in_place(
            Nonce::assume_unique_for_key([0u8; aead::NONCE_LEN]),
            Aad::from(binding.aad()),
            &mut body,
        )
        .map_err(|_| SealError::Open)?;
    let token = String::from_utf8(plain.to_vec()).map_err(|_| SealError::NotUtf8)?;
    Ok(InteractionToken(token))
}

/// Length of a stored ring with a previous key: current ‖ previous ‖ retired-at (u64 BE, ms).
pub const RING_LEN: usize = 2 * KEY_LEN + 8;

/// egress-discord's sealing keys: the current one, and the previous one with the time (Unix ms)
/// it stopped being current. Stored in the one `interaction-seal-key` file: the 32 bytes of the
/// current key alone (no rotation yet), or [`RING_LEN`] bytes.
pub struct SealKeyring {
    current: SealSecretKey,
    previous: Option<(SealSecretKey, u64)>,
}

impl SealKeyring {
    /// A ring of one fresh key.
    pub fn generate() -> Result<Self, SealError> {
        Ok(Self::single(SealSecretKey::generate()?))
    }

    /// A ring of `current` alone.
    pub fn single(current: SealSecretKey) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SealError> {
        match bytes.len() {
            KEY_LEN => Ok(Self::single(SealSecretKey::from_bytes(bytes)?)),
            RING_LEN => {
                let current = SealSecretKey::from_bytes(&bytes[..KEY_LEN])?;
                let previous = SealSecretKey::from_bytes(&bytes[KEY_LEN..2 * KEY_LEN])?;
                let mut at = [0u8; 8];
                at.copy_from_slice(&bytes[2 * KEY_LEN..]);
                Ok(Self {
                    current,
                    previous: Some((previous, u64::from_be_bytes(at))),
                })
            }
            n => Err(SealError::BadRingLength(n)),
        }
    }

    /// The bytes to store in egress-discord's secret dir (0600).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.current.to_bytes().to_vec();
        if let Some((previous, at)) = &self.previous {
            v.extend_from_slice(&previous.to_bytes());
            v.extend_from_slice(&at.to_be_bytes());
        }
        v
    }

    /// The key ingress-edge seals to.
    pub fn current_public(&self) -> SealPublicKey {
        self.current.public_key()
    }

    /// The previous key's id and when it was retired (Unix ms), if the ring holds one.
    pub fn previous(&self) -> Option<(SealKeyId, u64)> {
        self.previous
            .as_ref()
            .map(|(k, at)| (k.public_key().id(), *at))
    }

    /// A new current key; the current one becomes the previous, retired at `now_ms`. A key that
    /// was previous before is dropped: its blobs are then [`SealError::UnknownKey`].
    pub fn rotate(self, now_ms: u64) -> Result<Self, SealError> {
        Ok(Self {
            current: SealSecretKey::generate()?,
            previous: Some((self.current, now_ms)),
        })
    }

    /// Opens `blob` for `binding` with the key it names: the current one, or the previous one
    /// until [`PREVIOUS_KEY_GRACE`] after its retirement (`now_ms`, Unix ms).
    pub fn open(
        &self,
        binding: SealBinding,
        blob: &SealedToken,
        now_ms: u64,
    ) -> Result<InteractionToken, SealError> {
        let id = key_id_of(blob)?;
        if id == self.current.public_key().id() {
            return open(&self.current, binding, blob);
        }
        match &self.previous {
            Some((previous, retired_at)) if previous.public_key().id() == id => {
                let grace = PREVIOUS_KEY_GRACE.as_millis() as u64;
                if now_ms >= retired_at.saturating_add(grace) {
                    return Err(SealError::RetiredKey(id));
                }
                open(previous, binding, blob)
            }
            _ => Err(SealError::UnknownKey(id)),
        }
    }
}

impl fmt::Debug for SealKeyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKeyring(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> SealBinding {
        SealBinding {
            application_id: Snowflake(1_000_000_000_000_001),
            interaction_id: Snowflake(2_000_000_000_000_002),
        }
    }

    fn token() -> InteractionToken {
        InteractionToken("aW50ZXJhY3Rpb246dG9rZW4tc2VjcmV0".to_owned())
    }

    #[test]
    fn round_trip_opens_the_same_token_and_hides_it() {
        let key = SealSecretKey::generate().unwrap();
        let blob = seal(&key.public_key(), binding(), &token()).unwrap();
        assert!(
            !blob
                .as_bytes()
                .windows(token().0.len())
                .any(|w| w == token().0.as_bytes())
        );
        assert_eq!(blob.as_bytes().len(), MIN_BLOB_LEN + token().0.len());
        assert_eq!(open(&key, binding(), &blob).unwrap().0, token().0);
    }

    #[test]
    fn two_seals_of_one_token_differ() {
        let key = SealSecretKey::generate().unwrap();
        let a = seal(&key.public_key(), binding(), &token()).unwrap();
        let b = seal(&key.public_key(), binding(), &token()).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn stored_key_bytes_open_what_the_public_key_sealed() {
        let key = SealSecretKey::generate().unwrap();
        let public = SealPublicKey::from_bytes(key.public_key().as_bytes()).unwrap();
        let blob = seal(&public, binding(), &token()).unwrap();
        let reloaded = SealSecretKey::from_bytes(&key.to_bytes()).unwrap();
        assert_eq!(open(&reloaded, binding(), &blob).unwrap().0, token().0);
    }

    #[test]
    fn wrong_key_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let other = SealSecretKey::generate().unwrap();
        let blob = seal(&key.public_key(), binding(), &token()).unwrap();
        assert_eq!(
            open(&other, binding(), &blob),
            Err(SealError::UnknownKey(key.public_key().id()))
        );
        // A blob that claims the other key's id still does not open with it.
        let mut bytes = blob.into_bytes();
        bytes[1..1 + KEY_ID_LEN].copy_from_slice(other.public_key().id().as_bytes());
        assert_eq!(
            open(&other, binding(), &SealedToken::from_bytes(bytes)),
            Err(SealError::Open)
        );
    }

    #[test]
    fn another_interaction_or_application_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let blob = seal(&key.public_key(), binding(), &token()).unwrap();
        let mut other_interaction = binding();
        other_interaction.interaction_id = Snowflake(2_000_000_000_000_003);
        assert_eq!(open(&key, other_interaction, &blob), Err(SealError::Open));
        let mut other_app = binding();
        other_app.application_id = Snowflake(7);
        assert_eq!(open(&key, other_app, &blob), Err(SealError::Open));
    }

    #[test]
    fn tampered_blob_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let blob = seal(&key.public_key(), binding(), &token()).unwrap();
        for i in 1..blob.as_bytes().len() {
            let mut bytes = blob.as_bytes().to_vec();
            bytes[i] ^= 0x01;
            let r = open(&key, binding(), &SealedToken::from_bytes(bytes));
            assert!(
                matches!(
                    r,
                    Err(SealError::Open | SealError::NonContributory | SealError::UnknownKey(_))
                ),
                "flipping byte {i} gave {r:?}"
            );
        }
    }

    #[test]
    fn unknown_version_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let mut bytes = seal(&key.public_key(), binding(), &token())
            .unwrap()
            .into_bytes();
        bytes[0] = 1;
        assert_eq!(
            open(&key, binding(), &SealedToken::from_bytes(bytes)),
            Err(SealError::UnknownVersion(1))
        );
    }

    #[test]
    fn truncated_blob_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let bytes = seal(&key.public_key(), binding(), &token())
            .unwrap()
            .into_bytes();
        assert_eq!(
            open(
                &key,
                binding(),
                &SealedToken::from_bytes(bytes[..MIN_BLOB_LEN - 1].to_vec())
            ),
            Err(SealError::Truncated(MIN_BLOB_LEN - 1))
        );
        // Long enough to parse but cut inside the tag: authentication refuses it.
        assert_eq!(
            open(
                &key,
                binding(),
                &SealedToken::from_bytes(bytes[..bytes.len() - 1].to_vec())
            ),
            Err(SealError::Open)
        );
    }

    #[test]
    fn low_order_ephemeral_key_is_refused() {
        let key = SealSecretKey::generate().unwrap();
        let mut bytes = vec![SEAL_VERSION];
        bytes.extend_from_slice(key.public_key().id().as_bytes());
        bytes.extend_from_slice(&[0u8; KEY_LEN]);
        bytes.extend_from_slice(&[0u8; TAG_LEN + 4]);
        assert_eq!(
            open(&key, binding(), &SealedToken::from_bytes(bytes)),
            Err(SealError::NonContributory)
        );
    }

    #[test]
    fn bad_key_lengths_are_refused() {
        assert_eq!(
            SealPublicKey::from_bytes(&[0u8; 31]).unwrap_err(),
            SealError::BadKeyLength(31)
        );
        assert_eq!(
            SealSecretKey::from_bytes(&[0u8; 33]).unwrap_err(),
            SealError::BadKeyLength(33)
        );
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let key = SealSecretKey::generate().unwrap();
        assert_eq!(format!("{key:?}"), "SealSecretKey(<redacted>)");
    }

    const NOW: u64 = 1_800_000_000_000;
    const GRACE_MS: u64 = PREVIOUS_KEY_GRACE.as_millis() as u64;

    #[test]
    fn a_blob_names_its_key() {
        let key = SealSecretKey::generate().unwrap();
        let blob = seal(&key.public_key(), binding(), &token()).unwrap();
        assert_eq!(key_id_of(&blob).unwrap(), key.public_key().id());
        let other = SealSecretKey::generate().unwrap();
        assert_eq!(
            open(&other, binding(), &blob),
            Err(SealError::UnknownKey(key.public_key().id()))
        );
    }

    #[test]
    fn the_previous_key_opens_within_the_grace_window_then_is_retired() {
        assert!(PREVIOUS_KEY_GRACE >= Duration::from_secs(15 * 60));
        let ring = SealKeyring::generate().unwrap();
        let old = ring.current_public();
        let before = seal(&old, binding(), &token()).unwrap();
        let ring = ring.rotate(NOW).unwrap();
        assert_ne!(ring.current_public(), old);
        assert_eq!(ring.previous(), Some((old.id(), NOW)));
        let after = seal(&ring.current_public(), binding(), &token()).unwrap();
        assert_eq!(ring.open(binding(), &after, NOW).unwrap().0, token().0);
        assert_eq!(
            ring.open(binding(), &before, NOW + GRACE_MS - 1).unwrap().0,
            token().0
        );
        assert_eq!(
            ring.open(binding(), &before, NOW + GRACE_MS),
            Err(SealError::RetiredKey(old.id()))
        );
        // A second rotation drops the first key altogether.
        let ring = ring.rotate(NOW + 1).unwrap();
        assert_eq!(
            ring.open(binding(), &before, NOW + 1),
            Err(SealError::UnknownKey(old.id()))
        );
    }

    #[test]
    fn a_ring_round_trips_through_its_file_bytes() {
        let ring = SealKeyring::generate().unwrap();
        assert_eq!(ring.to_bytes().len(), KEY_LEN);
        let single = SealKeyring::from_bytes(&ring.to_bytes()).unwrap();
        assert_eq!(single.current_public(), ring.current_public());
        assert_eq!(single.previous(), None);
        let rotated = ring.rotate(NOW).unwrap();
        let bytes = rotated.to_bytes();
        assert_eq!(bytes.len(), RING_LEN);
        let back = SealKeyring::from_bytes(&bytes).unwrap();
        assert_eq!(back.current_public(), rotated.current_public());
        assert_eq!(back.previous(), rotated.previous());
        assert_eq!(
            SealKeyring::from_bytes(&bytes[..40]).unwrap_err(),
            SealError::BadRingLength(40)
        );
        assert_eq!(format!("{back:?}"), "SealKeyring(<redacted>)");
    }
}
