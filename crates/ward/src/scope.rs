//! Guest scopes and subject pseudonyms.
//!
//! A public event names (platform, application, guild, channel-or-thread, external subject).
//! The subject id is replaced at the door by a keyed hash (HMAC-SHA256 under ward's key), so
//! ward stores, logs and returns only the pseudonym. Without the key, which only ward holds, the
//! pseudonym cannot be linked back to the subject or recomputed from a guessed id.
//!
//! **Architecture Invariant:** no raw subject id is written to ward's store or its logs, and
//! nothing keeps a subject's history: only counters in rate-limit windows, which expire.

use std::fmt;

use reach_digest::Sha256Digest;
use ring::hmac;

use crate::refusal::{DeskError, Dimension};

/// Longest accepted id or name in a scope, in bytes. Discord snowflakes are at most 20 digits;
/// the slack covers other platforms without letting a caller store arbitrary text.
pub const MAX_SCOPE_FIELD_BYTES: usize = 128;

/// Fewest bytes of key material ward accepts: 128 bits, the security floor of HMAC-SHA256
/// pseudonyms. Scribe writes 32 random bytes.
pub const MIN_WARD_KEY_BYTES: usize = 16;

/// Ward's keyed-hash key. Never printed, never logged, never leaves ward.
#[derive(Clone)]
pub struct WardKey(hmac::Key);

impl WardKey {
    /// Uses `bytes` (at least [`MIN_WARD_KEY_BYTES`]) as the HMAC-SHA256 key.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DeskError> {
        if bytes.len() < MIN_WARD_KEY_BYTES {
            return Err(DeskError::Malformed("ward key must hold at least 16 bytes"));
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// The keyed hash of `parts` under `domain`, in hex: the one MAC ward makes, for
    /// pseudonyms, scope ids and step grant tokens alike (each its own domain).
    pub(crate) fn tag(&self, domain: &str, parts: &[&str]) -> String {
        hex::encode(hmac::sign(&self.0, &tagged_message(domain, parts)).as_ref())
    }

    /// Whether `tag` (raw bytes) is [`WardKey::tag`] of `parts` under `domain`, compared in
    /// constant time.
    pub(crate) fn verify(&self, domain: &str, parts: &[&str], tag: &[u8]) -> bool {
        hmac::verify(&self.0, &tagged_message(domain, parts), tag).is_ok()
    }
}

/// The bytes [`WardKey::tag`] signs: the domain and each part, length-prefixed, so part
/// boundaries are bound and ("ab","c") differs from ("a","bc").
fn tagged_message(domain: &str, parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in std::iter::once(domain).chain(parts.iter().copied()) {
        out.extend_from_slice(&(p.len() as u64).to_be_bytes());
        out.extend_from_slice(p.as_bytes());
    }
    out
}

impl fmt::Debug for WardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WardKey(<redacted>)")
    }
}

/// A subject pseudonym: stable for one (platform, application, subject), unlinkable without
/// ward's key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pseudonym(String);

impl Pseudonym {
    pub const PREFIX: &'static str = "psn_";
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Pseudonym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A guest scope id: a keyed hash of the whole scope, so the same scope maps to the same id.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ScopeId(String);

impl ScopeId {
    pub const PREFIX: &'static str = "scope_";
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A public event's scope as it arrives, with the raw subject id. Consumed by
/// [`GuestEvent::into_scope`]; the raw subject goes no further.
#[derive(Clone)]
pub struct GuestEvent {
    pub platform: String,
    pub application: String,
    pub guild: String,
    /// The channel, or the thread when the event is in a thread.
    pub channel: String,
    pub subject: String,
}

impl fmt::Debug for GuestEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuestEvent")
            .field("platform", &self.platform)
            .field("application", &self.application)
            .field("guild", &self.guild)
            .field("channel", &self.channel)
            .field("subject", &"<redacted>")
            .finish()
    }
}

fn check_field(value: &str, name: &'static str) -> Result<(), DeskError> {
    if value.is_empty() {
        return Err(DeskError::Malformed(name));
    }
    if value.len() > MAX_SCOPE_FIELD_BYTES || value.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(DeskError::Malformed(name));
    }
    Ok(())
}

impl GuestEvent {
    /// Checks the fields and pseudonymizes the subject.
    pub fn into_scope(self, key: &WardKey) -> Result<GuestScope, DeskError> {
        check_field(&self.platform, "platform")?;
        check_field(&self.application, "application_id")?;
        check_field(&self.guild, "guild_id")?;
        check_field(&self.channel, "channel_id")?;
        check_field(&self.subject, "subject_id")?;
        let subject = Pseudonym(format!(
            "{}{}",
            Pseudonym::PREFIX,
            key.tag(
                "reach.ward.subject/1",
                &[&self.platform, &self.application, &self.subject]
            )
        ));
        let id = ScopeId(format!(
            "{}{}",
            ScopeId::PREFIX,
            key.tag(
                "reach.ward.scope/1",
                &[
                    &self.platform,
                    &self.application,
                    &self.guild,
                    &self.channel,
                    subject.as_str()
                ]
            )
        ));
        Ok(GuestScope {
            id,
            platform: self.platform,
            application: self.application,
            guild: self.guild,
            channel: self.channel,
            subject,
        })
    }
}

/// A guest scope: public ids and the subject's pseudonym. The raw subject id is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestScope {
    pub id: ScopeId,
    pub platform: String,
    pub application: String,
    pub guild: String,
    pub channel: String,
    pub subject: Pseudonym,
}

impl GuestScope {
    /// The counter key of this scope on `dimension`: a digest of the public ids above it (and
    /// of the pseudonym for subjects), so counters of different scopes never collide.
    pub(crate) fn counter_key(&self, dimension: Dimension) -> String {
        let (p, a, g, c, s) = (
            self.platform.as_bytes(),
            self.application.as_bytes(),
            self.guild.as_bytes(),
            self.channel.as_bytes(),
            self.subject.0.as_bytes(),
        );
        let parts: &[&[u8]] = match dimension {
            Dimension::Application => &[b"application", p, a],
            Dimension::Guild => &[b"guild", p, a, g],
            Dimension::Channel => &[b"channel", p, a, g, c],
            // Per application: a subject's questions in every guild of one bot count together.
            Dimension::Subject => &[b"subject", p, a, s],
        };
        Sha256Digest::of_parts(parts.iter().copied()).hex()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(subject: &str, channel: &str) -> GuestEvent {
        GuestEvent {
            platform: "discord".into(),
            application: "app1".into(),
            guild: "g1".into(),
            channel: channel.into(),
            subject: subject.into(),
        }
    }

    #[test]
    fn same_subject_same_pseudonym_other_key_other_pseudonym() {
        let k1 = WardKey::from_bytes(&[1; 32]).unwrap();
        let k2 = WardKey::from_bytes(&[2; 32]).unwrap();
        let a = event("u42", "c1").into_scope(&k1).unwrap();
        let b = event("u42", "c2").into_scope(&k1).unwrap();
        let c = event("u42", "c1").into_scope(&k2).unwrap();
        let d = event("u43", "c1").into_scope(&k1).unwrap();
        assert_eq!(a.subject, b.subject);
        assert_ne!(a.id, b.id);
        assert_ne!(a.subject, c.subject);
        assert_ne!(a.subject, d.subject);
        assert!(!a.subject.as_str().contains("u42"));
        assert!(!format!("{:?}", event("u42", "c1")).contains("u42"));
    }

    #[test]
    fn refuses_short_keys_and_bad_fields() {
        assert!(WardKey::from_bytes(&[0; MIN_WARD_KEY_BYTES - 1]).is_err());
        let k = WardKey::from_bytes(&[1; 32]).unwrap();
        assert!(matches!(
            event("", "c").into_scope(&k),
            Err(DeskError::Malformed("subject_id"))
        ));
        assert!(matches!(
            event("a b", "c").into_scope(&k),
            Err(DeskError::Malformed("subject_id"))
        ));
        let long = "x".repeat(MAX_SCOPE_FIELD_BYTES + 1);
        assert!(matches!(
            event("u", &long).into_scope(&k),
            Err(DeskError::Malformed("channel_id"))
        ));
    }
}
