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
//! A grant is also minted *under* something: the pack's current-use [`Standing`] as core last
//! fenced it (generation, revoked, paused, the profile digest bound and active, the HIL mode,
//! and the fence's epoch) and, when the step needs one, the operator's approval of exactly
//! that step ([`crate::hil`]). Redemption re-checks both, so a pause, revocation, upgrade or
//! expiry that lands between mint and redemption still stops the step.
//!
//! **Architecture Invariant:** every check a mint passes is in [`admit_mint`] and every check a
//! redemption passes is in [`check`], over typed records; nothing else decides whether a step
//! may run. Both read the standing through the one [`standing_refusal`].

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
    /// core never stated the pack's standing (no `FencePack` since ward's store was made)
    #[error("grant/unfenced")]
    Unfenced,
    /// the pack is revoked
    #[error("package/revoked")]
    Revoked,
    /// the binding is paused (or was paused and resumed since the grant was minted)
    #[error("local-binding/paused")]
    Paused,
    /// the task profile the step was stamped under is not the one bound and active
    #[error("local-binding/profile-changed")]
    ProfileChanged,
    /// the step needs the operator's answer and none was filed for exactly this step
    #[error("hil/missing")]
    HilMissing,
    /// the step's HIL request is not answered yet
    #[error("hil/pending")]
    HilPending,
    /// the operator denied the step
    #[error("hil/denied")]
    HilDenied,
    /// the step's HIL request expired unanswered, or its approval expired before the step ran
    #[error("hil/expired")]
    HilExpired,
    /// the approval was spent: a grant under it already ran the step once
    #[error("hil/spent")]
    HilSpent,
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
            Self::Unfenced => "grant/unfenced",
            Self::Revoked => "package/revoked",
            Self::Paused => "local-binding/paused",
            Self::ProfileChanged => "local-binding/profile-changed",
            Self::HilMissing => "hil/missing",
            Self::HilPending => "hil/pending",
            Self::HilDenied => "hil/denied",
            Self::HilExpired => "hil/expired",
            Self::HilSpent => "hil/spent",
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

    /// Whether, at redemption, the grant is spent or dead whatever is presented next: used,
    /// expired, or minted under a standing or an approval that no longer holds (a fence epoch
    /// never returns, an answer never changes). A mismatched claim or a forged tag leaves a live
    /// grant as it was (see [`crate::Desk::redeem_step_grant`]).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::Used
                | Self::Expired
                | Self::GenerationStale
                | Self::Revoked
                | Self::Paused
                | Self::ProfileChanged
                | Self::HilDenied
                | Self::HilExpired
                | Self::HilSpent
        )
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

/// When the operator is asked (`reach_plan::HilMode`'s wire names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HilMode {
    /// Every mutation asks; observations do not.
    EachMutation,
    /// Every step asks.
    EachStep,
}

impl HilMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EachMutation => "each-mutation",
            Self::EachStep => "each-step",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "each-mutation" => Some(Self::EachMutation),
            "each-step" => Some(Self::EachStep),
            _ => None,
        }
    }

    /// Whether a step of `class` needs the operator's answer under this mode, or because its
    /// stamped plan says so. Never weaker than the mode: a mutation always asks.
    pub fn asks(self, class: EffectClass, stamped_hil_required: bool) -> bool {
        stamped_hil_required || class == EffectClass::ContainedMutation || self == Self::EachStep
    }
}

/// A pack's current-use standing, as core states it after every change in its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceRequest {
    pub pack_name: String,
    pub generation: u64,
    pub revoked: bool,
    /// The binding is paused, or there is none.
    pub paused: bool,
    pub bound_profile_digest: Sha256Digest,
    pub active_profile_digest: Sha256Digest,
    /// The stricter of the pack's minimum and the binding's mode.
    pub hil: HilMode,
}

/// The standing ward holds for a pack: the last [`FenceRequest`] it took, and its epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub generation: u64,
    pub revoked: bool,
    pub paused: bool,
    pub bound_profile_digest: Sha256Digest,
    pub active_profile_digest: Sha256Digest,
    pub hil: HilMode,
    /// Bumped by every change of the fields above.
    pub epoch: u64,
}

/// Why the standing refuses a step stamped under `generation` and `profile`, or `None`. In
/// order: revoked, paused, profile, generation (an upgrade that changed the profile is a
/// profile change first).
pub(crate) fn standing_refusal(
    standing: &Standing,
    generation: u64,
    profile: &Sha256Digest,
) -> Option<GrantRefusal> {
    if standing.revoked {
        Some(GrantRefusal::Revoked)
    } else if standing.paused {
        Some(GrantRefusal::Paused)
    } else if standing.bound_profile_digest != standing.active_profile_digest
        || *profile != standing.active_profile_digest
    {
        Some(GrantRefusal::ProfileChanged)
    } else if generation != standing.generation {
        Some(GrantRefusal::GenerationStale)
    } else {
        None
    }
}

/// The operator's answer to a step's HIL request, as a grant check reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HilAnswer {
    pub id: crate::ids::HilRequestId,
    /// The step the request was filed for.
    pub step: StepClaim,
    pub effect_class: EffectClass,
    /// `Some(true)` approved, `Some(false)` denied, `None` unanswered.
    pub approved: Option<bool>,
    pub expires_at: UnixMillis,
    /// A grant under this approval was redeemed: one approval runs its step once.
    pub spent: bool,
}

/// Whether `answer` lets the step run now: approved, unexpired, and filed for exactly this
/// step and class. Used at mint and again at redemption.
fn hil_admits(
    answer: Option<&HilAnswer>,
    step: &StepClaim,
    class: EffectClass,
    now: UnixMillis,
) -> Result<(), GrantRefusal> {
    let Some(a) = answer else {
        return Err(GrantRefusal::HilMissing);
    };
    if a.step != *step || a.effect_class != class {
        return Err(GrantRefusal::HilMissing);
    }
    match a.approved {
        Some(false) => Err(GrantRefusal::HilDenied),
        _ if a.spent => Err(GrantRefusal::HilSpent),
        _ if now >= a.expires_at => Err(GrantRefusal::HilExpired),
        None => Err(GrantRefusal::HilPending),
        Some(true) => Ok(()),
    }
}

/// Every check a mint must pass, and the only place they are made: the pack was fenced, its
/// standing admits the step, and (when the step asks) its request is approved. Returns the
/// approval the grant will spend, if any.
pub(crate) fn admit_mint<'a>(
    req: &StepGrantRequest,
    standing: Option<&Standing>,
    answer: Option<&'a HilAnswer>,
    now: UnixMillis,
) -> Result<Option<&'a HilAnswer>, GrantRefusal> {
    let Some(standing) = standing else {
        return Err(GrantRefusal::Unfenced);
    };
    if let Some(r) = standing_refusal(standing, req.step.pack_generation, &req.profile_digest) {
        return Err(r);
    }
    if !standing.hil.asks(req.effect_class, req.hil_required) {
        return Ok(None);
    }
    hil_admits(answer, &req.step, req.effect_class, now)?;
    Ok(answer)
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
    /// The task profile the plan was stamped under.
    pub profile_digest: Sha256Digest,
    /// The stamped step's own `hil_required` (ward asks at least what the fence's mode asks).
    pub hil_required: bool,
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
    /// Live unredeemed grants of the pack that can no longer redeem (minted in another epoch).
    pub stale_grants: u32,
    /// The standing's epoch now.
    pub epoch: u64,
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
    /// The profile the step was stamped under, and the fence epoch it was minted in.
    pub profile_digest: Sha256Digest,
    pub fence_epoch: u64,
    /// Whether the grant spends an approval (then [`check`] is handed it).
    pub hil: bool,
}

impl GrantRecord {
    fn tag_parts(&self) -> [String; 13] {
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
            self.profile_digest.to_string(),
            self.fence_epoch.to_string(),
            self.hil.to_string(),
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
/// grant its id names (`None` if there is none), `standing` the pack's fence now, `answer` the
/// approval the grant spends (read again now), `claim` what the redeemer computed and holds.
///
/// The order puts what no redeemer can repair first: forged, used, expired; then the standing
/// (any change since mint stops the step, named by what changed), then the approval; then the
/// claim against the record from the widest binding to the narrowest: experiment, instance,
/// plan, pack, generation, step.
pub(crate) fn check(
    key: &WardKey,
    token: Option<&PresentedToken>,
    record: Option<&GrantRecord>,
    standing: Option<&Standing>,
    answer: Option<&HilAnswer>,
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
    // A grant is only minted under a standing, so a missing one is a store edited under ward.
    let Some(standing) = standing else {
        return Err(GrantRefusal::Unfenced);
    };
    if standing.epoch != record.fence_epoch {
        // What changed, if it still shows; otherwise the binding was paused and resumed.
        return Err(
            standing_refusal(standing, minted.pack_generation, &record.profile_digest)
                .unwrap_or(GrantRefusal::Paused),
        );
    }
    if record.hil {
        hil_admits(answer, minted, record.effect_class, now)?;
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
            profile_digest: Sha256Digest::of(b"profile"),
            fence_epoch: 4,
            hil: false,
        };
        let token = r.token(key);
        (r, token)
    }

    fn standing() -> Standing {
        Standing {
            generation: 3,
            revoked: false,
            paused: false,
            bound_profile_digest: Sha256Digest::of(b"profile"),
            active_profile_digest: Sha256Digest::of(b"profile"),
            hil: HilMode::EachMutation,
            epoch: 4,
        }
    }

    fn request(class: EffectClass, hil_required: bool) -> StepGrantRequest {
        let (r, _) = record(&WardKey::from_bytes(&[1; 32]).unwrap());
        StepGrantRequest {
            step: r.step,
            effect_class: class,
            ttl: None,
            profile_digest: Sha256Digest::of(b"profile"),
            hil_required,
        }
    }

    fn answer(req: &StepGrantRequest, approved: Option<bool>) -> HilAnswer {
        HilAnswer {
            id: crate::ids::HilRequestId::mint(&ring::rand::SystemRandom::new()),
            step: req.step.clone(),
            effect_class: req.effect_class,
            approved,
            expires_at: UnixMillis(1_000),
            spent: false,
        }
    }

    #[test]
    fn a_mutation_always_asks_an_observation_only_under_each_step() {
        use EffectClass::*;
        use HilMode::*;
        assert!(EachMutation.asks(ContainedMutation, false));
        assert!(!EachMutation.asks(Observation, false));
        assert!(EachMutation.asks(Observation, true));
        assert!(EachStep.asks(Observation, false));
        assert!(EachStep.asks(ContainedMutation, false));
    }

    #[test]
    fn a_mint_needs_a_fence_a_clear_standing_and_the_exact_approval() {
        let now = UnixMillis(10);
        let obs = request(EffectClass::Observation, false);
        let mutation = request(EffectClass::ContainedMutation, false);
        let st = standing();
        assert_eq!(
            admit_mint(&obs, None, None, now),
            Err(GrantRefusal::Unfenced)
        );
        assert_eq!(admit_mint(&obs, Some(&st), None, now), Ok(None));
        assert_eq!(
            admit_mint(&mutation, Some(&st), None, now),
            Err(GrantRefusal::HilMissing)
        );
        let each_step = Standing {
            hil: HilMode::EachStep,
            ..st.clone()
        };
        assert_eq!(
            admit_mint(&obs, Some(&each_step), None, now),
            Err(GrantRefusal::HilMissing)
        );
        for (approved, at, want) in [
            (None, now, Err(GrantRefusal::HilPending)),
            (None, UnixMillis(1_000), Err(GrantRefusal::HilExpired)),
            (Some(false), now, Err(GrantRefusal::HilDenied)),
            (Some(true), UnixMillis(1_000), Err(GrantRefusal::HilExpired)),
        ] {
            let a = answer(&mutation, approved);
            assert_eq!(
                admit_mint(&mutation, Some(&st), Some(&a), at).map(|_| ()),
                want,
                "{approved:?} at {at:?}"
            );
        }
        let approved = answer(&mutation, Some(true));
        assert_eq!(
            admit_mint(&mutation, Some(&st), Some(&approved), now),
            Ok(Some(&approved))
        );
        let spent = HilAnswer {
            spent: true,
            ..approved.clone()
        };
        assert_eq!(
            admit_mint(&mutation, Some(&st), Some(&spent), now),
            Err(GrantRefusal::HilSpent)
        );
        // An approval of another step's digest, or of the step as another class, is none.
        let mut other = approved.clone();
        other.step.step_digest = Sha256Digest::of(b"another step");
        assert_eq!(
            admit_mint(&mutation, Some(&st), Some(&other), now),
            Err(GrantRefusal::HilMissing)
        );
        let as_observation = HilAnswer {
            effect_class: EffectClass::Observation,
            ..approved.clone()
        };
        assert_eq!(
            admit_mint(&mutation, Some(&st), Some(&as_observation), now),
            Err(GrantRefusal::HilMissing)
        );
        // The standing refuses before any approval is read.
        for (changed, want) in [
            (
                Standing {
                    revoked: true,
                    ..st.clone()
                },
                GrantRefusal::Revoked,
            ),
            (
                Standing {
                    paused: true,
                    ..st.clone()
                },
                GrantRefusal::Paused,
            ),
            (
                Standing {
                    active_profile_digest: Sha256Digest::of(b"v2"),
                    generation: 4,
                    ..st.clone()
                },
                GrantRefusal::ProfileChanged,
            ),
            (
                Standing {
                    generation: 4,
                    ..st.clone()
                },
                GrantRefusal::GenerationStale,
            ),
        ] {
            assert_eq!(
                admit_mint(&mutation, Some(&changed), Some(&approved), now),
                Err(want)
            );
        }
    }

    #[test]
    fn a_redemption_stops_on_any_standing_change_since_mint() {
        let key = WardKey::from_bytes(&[1; 32]).unwrap();
        let (r, token) = record(&key);
        let t = PresentedToken::parse(&token).unwrap();
        let now = UnixMillis(0);
        let st = standing();
        let redeem = |st: &Standing| check(&key, Some(&t), Some(&r), Some(st), None, &r.step, now);
        assert_eq!(redeem(&st), Ok(()));
        // Paused and resumed: nothing shows, but the epoch moved.
        let resumed = Standing {
            epoch: 6,
            ..st.clone()
        };
        assert_eq!(redeem(&resumed), Err(GrantRefusal::Paused));
        let upgraded = Standing {
            epoch: 5,
            generation: 4,
            ..st.clone()
        };
        assert_eq!(redeem(&upgraded), Err(GrantRefusal::GenerationStale));
        let revoked = Standing {
            epoch: 5,
            revoked: true,
            generation: 4,
            ..st.clone()
        };
        assert_eq!(redeem(&revoked), Err(GrantRefusal::Revoked));
        assert!(GrantRefusal::Paused.is_final() && GrantRefusal::HilExpired.is_final());
        assert!(!GrantRefusal::OtherStep.is_final() && !GrantRefusal::Forged.is_final());
    }

    #[test]
    fn token_verifies_only_for_its_record_and_key() {
        let key = WardKey::from_bytes(&[1; 32]).unwrap();
        let other = WardKey::from_bytes(&[2; 32]).unwrap();
        let (r, token) = record(&key);
        let now = UnixMillis(0);
        let t = PresentedToken::parse(&token).unwrap();
        let st = standing();
        let st = Some(&st);
        assert_eq!(
            check(&key, Some(&t), Some(&r), st, None, &r.step, now),
            Ok(())
        );
        assert_eq!(
            check(&other, Some(&t), Some(&r), st, None, &r.step, now),
            Err(GrantRefusal::Forged)
        );
        // A row edited in the store (another class) no longer matches its tag.
        let edited = GrantRecord {
            effect_class: EffectClass::Observation,
            ..r.clone()
        };
        assert_eq!(
            check(&key, Some(&t), Some(&edited), st, None, &r.step, now),
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
            GrantRefusal::Unfenced,
            GrantRefusal::Revoked,
            GrantRefusal::Paused,
            GrantRefusal::ProfileChanged,
            GrantRefusal::HilMissing,
            GrantRefusal::HilPending,
            GrantRefusal::HilDenied,
            GrantRefusal::HilExpired,
            GrantRefusal::HilSpent,
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
                "grant/unfenced",
                "package/revoked",
                "local-binding/paused",
                "local-binding/profile-changed",
                "hil/missing",
                "hil/pending",
                "hil/denied",
                "hil/expired",
                "hil/spent",
                "grant/bad-request: ttl_ms",
            ]
        "#]]
        .assert_debug_eq(&shown);
        for r in all {
            assert!(r.to_string().starts_with(r.code()));
        }
    }
}
