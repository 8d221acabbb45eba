//! Step grants: ward's permission for exactly one stamped plan step of one experiment on one
//! instance, under one pack generation, redeemed exactly once by the workbench right before
//! the step runs.
//!
//! The token is `stg_<32 hex>.<64 hex>`: the grant's random id, then an HMAC-SHA256 under
//! ward's key ([`WardKey`], domain [`GRANT_TAG_DOMAIN`]) over the id and every field the grant
//! binds. Ward stores the record and recomputes the tag from it at redemption, so a token is
//! forged unless ward minted it with this key for exactly this record: a flipped byte, another
//! key, a guessed id or a row edited in the store all verify as nothing.
//!
//! **Architecture Invariant:** every check a redemption passes is in [`check`], over a typed
//! [`GrantRecord`] and [`StepClaim`]; nothing else decides whether a step may run. The HIL
//! answer (issue #29) is one more input to it.

use std::fmt;

use reach_digest::Sha256Digest;

use crate::clock::UnixMillis;
use crate::ids::StepGrantId;
use crate::scope::WardKey;

/// The domain of the grant tag under ward's key; a pseudonym or scope id never collides with it.
pub const GRANT_TAG_DOMAIN: &str = "reach.ward.step-grant/1";

/// The separator between the id and the tag in a token.
const TOKEN_SEPARATOR: char = '.';
/// Bytes of an HMAC-SHA256 tag.
const TAG_BYTES: usize = 32;

/// Why ward refuses to mint or redeem a step grant. A refused redemption executes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GrantRefusal {
    /// the token does not verify under ward's key, or names no grant ward minted
    #[error("grant/forged")]
    Forged,
    /// the grant was already redeemed
    #[error("grant/used")]
    Used,
    /// the grant's expiry has passed, or it was minted by an earlier ward process
    #[error("grant/expired")]
    Expired,
    /// the step index or step digest presented is not the grant's
    #[error("grant/other-step")]
    OtherStep,
    /// the plan digest presented is not the grant's
    #[error("grant/other-plan")]
    OtherPlan,
    /// the pack presented is not the grant's
    #[error("grant/other-pack")]
    OtherPack,
    /// the instance presented is not the grant's
    #[error("grant/other-instance")]
    OtherInstance,
    /// the experiment presented is not the grant's
    #[error("grant/other-experiment")]
    OtherExperiment,
    /// the grant's pack generation is below the fenced one, or the presented one differs; at
    /// mint, the requested generation is below the fenced one
    #[error("package/generation-stale")]
    GenerationStale,
    /// a field of the request is malformed or out of policy; names the field, never its value
    #[error("grant/bad-request: {0}")]
    BadRequest(&'static str),
}

impl GrantRefusal {
    /// The stable code, exactly as the gRPC status message starts.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Forged => "grant/forged",
            Self::Used => "grant/used",
            Self::Expired => "grant/expired",
            Self::OtherStep => "grant/other-step",
            Self::OtherPlan => "grant/other-plan",
            Self::OtherPack => "grant/other-pack",
            Self::OtherInstance => "grant/other-instance",
            Self::OtherExperiment => "grant/other-experiment",
            Self::GenerationStale => "package/generation-stale",
            Self::BadRequest(_) => "grant/bad-request",
        }
    }

    /// What the refusal names beyond its code (the malformed field), or `""`.
    pub fn detail(&self) -> &'static str {
        match self {
            Self::BadRequest(field) => field,
            _ => "",
        }
    }

    /// Whether the grant is spent or dead whatever is presented next: `used`, `expired` and a
    /// fenced generation. Every other refusal leaves a live grant as it was (see
    /// [`crate::Desk::redeem_step_grant`]).
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Used | Self::Expired | Self::GenerationStale)
    }
}

/// A step's effect class as the host derived it (`reach_plan::EffectClass`'s wire names; ward
/// links no plan crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectClass {
    Observation,
    ContainedMutation,
}

impl EffectClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observation => "observation",
            Self::ContainedMutation => "contained-mutation",
        }
    }

    /// The class named exactly `text`, or `None`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "observation" => Some(Self::Observation),
            "contained-mutation" => Some(Self::ContainedMutation),
            _ => None,
        }
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The step a grant is for, as core states it at mint and the redeemer states it at redemption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepClaim {
    pub experiment_id: String,
    pub instance_id: String,
    pub plan_digest: Sha256Digest,
    pub step_index: u32,
    pub step_digest: Sha256Digest,
    pub pack_name: String,
    pub pack_generation: u64,
}

/// What core asks a grant for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepGrantRequest {
    pub step: StepClaim,
    pub effect_class: EffectClass,
    /// How long the grant lives; `None` takes the policy's default.
    pub ttl: Option<std::time::Duration>,
}

/// A grant ward minted.
#[derive(Clone, PartialEq, Eq)]
pub struct MintedGrant {
    pub id: StepGrantId,
    /// The token for the redeemer. Anyone holding it may try to redeem it; only the
    /// workbench's port grant lets one reach ward.
    pub token: String,
    pub expires_at: UnixMillis,
}

impl fmt::Debug for MintedGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MintedGrant")
            .field("id", &self.id)
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// A grant redeemed for its one execution. Only [`crate::Desk::redeem_step_grant`] builds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedGrant {
    id: StepGrantId,
    effect_class: EffectClass,
    redeemed_at: UnixMillis,
}

impl RedeemedGrant {
    pub(crate) fn new(id: StepGrantId, effect_class: EffectClass, redeemed_at: UnixMillis) -> Self {
        Self {
            id,
            effect_class,
            redeemed_at,
        }
    }
    pub fn id(&self) -> &StepGrantId {
        &self.id
    }
    /// The class minted with the grant, which the redeemer enforces.
    pub fn effect_class(&self) -> EffectClass {
        self.effect_class
    }
    pub fn redeemed_at(&self) -> UnixMillis {
        self.redeemed_at
    }
}

/// What a pack fence holds after [`crate::Desk::fence_pack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced {
    /// The generation now recorded: the one asked for, or a higher one already recorded.
    pub current_generation: u64,
    /// Live unredeemed grants of the pack minted below it.
    pub stale_grants: u32,
}

/// A grant as ward stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrantRecord {
    pub id: StepGrantId,
    pub step: StepClaim,
    pub effect_class: EffectClass,
    pub expires_at: UnixMillis,
    pub redeemed: bool,
    /// Minted by an earlier ward process (see `Desk::open`).
    pub void: bool,
}

impl GrantRecord {
    fn tag_parts(&self) -> [String; 10] {
        let s = &self.step;
        [
            self.id.as_str().to_owned(),
            s.experiment_id.clone(),
            s.instance_id.clone(),
            s.plan_digest.to_string(),
            s.step_index.to_string(),
            s.step_digest.to_string(),
            s.pack_name.clone(),
            s.pack_generation.to_string(),
            self.effect_class.as_str().to_owned(),
            self.expires_at.0.to_string(),
        ]
    }

    /// The token of this record under `key`.
    pub fn token(&self, key: &WardKey) -> String {
        let parts = self.tag_parts();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        format!(
            "{}{TOKEN_SEPARATOR}{}",
            self.id,
            key.tag(GRANT_TAG_DOMAIN, &parts)
        )
    }

    fn verifies(&self, key: &WardKey, tag: &[u8; TAG_BYTES]) -> bool {
        let parts = self.tag_parts();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        key.verify(GRANT_TAG_DOMAIN, &parts, tag)
    }
}

/// A token split into its id and tag; nothing is verified yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PresentedToken {
    pub id: StepGrantId,
    tag: [u8; TAG_BYTES],
}

impl PresentedToken {
    /// `None` for anything not shaped like a token (which [`check`] refuses as forged).
    pub fn parse(token: &str) -> Option<Self> {
        let (id, tag_hex) = token.split_once(TOKEN_SEPARATOR)?;
        let id = StepGrantId::parse(id)?;
        if tag_hex.len() != TAG_BYTES * 2 || tag_hex.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let mut tag = [0u8; TAG_BYTES];
        hex::decode_to_slice(tag_hex, &mut tag).ok()?;
        Some(Self { id, tag })
    }
}

/// Every check a redemption must pass, in order, and the only place they are made.
///
/// `token` is the presented token as parsed (`None` if it did not parse), `record` the stored
/// grant its id names (`None` if there is none), `fenced` the pack's fenced generation (0 when
/// never fenced), `claim` what the redeemer computed and holds.
///
/// The order puts what no redeemer can repair first: forged, used, expired, stale; then the
/// claim against the record from the widest binding to the narrowest: experiment, instance,
/// plan, pack, generation, step.
pub(crate) fn check(
    key: &WardKey,
    token: Option<&PresentedToken>,
    record: Option<&GrantRecord>,
    fenced: u64,
    claim: &StepClaim,
    now: UnixMillis,
) -> Result<(), GrantRefusal> {
    let (Some(token), Some(record)) = (token, record) else {
        return Err(GrantRefusal::Forged);
    };
    if token.id != record.id || !record.verifies(key, &token.tag) {
        return Err(GrantRefusal::Forged);
    }
    if record.redeemed {
        return Err(GrantRefusal::Used);
    }
    if record.void || now >= record.expires_at {
        return Err(GrantRefusal::Expired);
    }
    let minted = &record.step;
    if minted.pack_generation < fenced {
        return Err(GrantRefusal::GenerationStale);
    }
    if claim.experiment_id != minted.experiment_id {
        return Err(GrantRefusal::OtherExperiment);
    }
    if claim.instance_id != minted.instance_id {
        return Err(GrantRefusal::OtherInstance);
    }
    if claim.plan_digest != minted.plan_digest {
        return Err(GrantRefusal::OtherPlan);
    }
    if claim.pack_name != minted.pack_name {
        return Err(GrantRefusal::OtherPack);
    }
    if claim.pack_generation != minted.pack_generation {
        return Err(GrantRefusal::GenerationStale);
    }
    if claim.step_index != minted.step_index || claim.step_digest != minted.step_digest {
        return Err(GrantRefusal::OtherStep);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &WardKey) -> (GrantRecord, String) {
        let rng = ring::rand::SystemRandom::new();
        let r = GrantRecord {
            id: StepGrantId::mint(&rng),
            step: StepClaim {
                experiment_id: "exp-1".into(),
                instance_id: "vm-1".into(),
                plan_digest: Sha256Digest::of(b"plan"),
                step_index: 2,
                step_digest: Sha256Digest::of(b"step"),
                pack_name: "pack".into(),
                pack_generation: 3,
            },
            effect_class: EffectClass::ContainedMutation,
            expires_at: UnixMillis(10_000),
            redeemed: false,
            void: false,
        };
        let token = r.token(key);
        (r, token)
    }

    #[test]
    fn token_verifies_only_for_its_record_and_key() {
        let key = WardKey::from_bytes(&[1; 32]).unwrap();
        let other = WardKey::from_bytes(&[2; 32]).unwrap();
        let (r, token) = record(&key);
        let now = UnixMillis(0);
        let t = PresentedToken::parse(&token).unwrap();
        assert_eq!(check(&key, Some(&t), Some(&r), 0, &r.step, now), Ok(()));
        assert_eq!(
            check(&other, Some(&t), Some(&r), 0, &r.step, now),
            Err(GrantRefusal::Forged)
        );
        // A row edited in the store (another class) no longer matches its tag.
        let edited = GrantRecord {
            effect_class: EffectClass::Observation,
            ..r.clone()
        };
        assert_eq!(
            check(&key, Some(&t), Some(&edited), 0, &r.step, now),
            Err(GrantRefusal::Forged)
        );
        for bad in ["", "stg_", &token.replace('.', ""), &token.to_uppercase()] {
            assert_eq!(PresentedToken::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn codes_are_area_slash_reason() {
        let all = [
            GrantRefusal::Forged,
            GrantRefusal::Used,
            GrantRefusal::Expired,
            GrantRefusal::OtherStep,
            GrantRefusal::OtherPlan,
            GrantRefusal::OtherPack,
            GrantRefusal::OtherInstance,
            GrantRefusal::OtherExperiment,
            GrantRefusal::GenerationStale,
            GrantRefusal::BadRequest("ttl_ms"),
        ];
        let shown: Vec<String> = all.iter().map(|r| r.to_string()).collect();
        expect_test::expect![[r#"
            [
                "grant/forged",
                "grant/used",
                "grant/expired",
                "grant/other-step",
                "grant/other-plan",
                "grant/other-pack",
                "grant/other-instance",
                "grant/other-experiment",
                "package/generation-stale",
                "grant/bad-request: ttl_ms",
            ]
        "#]]
        .assert_debug_eq(&shown);
        for r in all {
            assert!(r.to_string().starts_with(r.code()));
        }
    }
}
