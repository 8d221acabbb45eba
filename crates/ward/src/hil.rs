//! HIL (human in the loop): the operator's answer to one stamped step, before it may run.
//!
//! Core files a [`HilFiling`] for every step that asks (`grant::HilMode::asks`); ward stores
//! it as a [`HilRequest`] with a digest over everything it shows, and the operator answers it
//! with their own leaf (`reach hil approve|deny`), naming that digest. The answer is final and
//! the first one stands ([`HilState::answer`]); nothing but an operator's call answers. A step
//! grant for a step that asks is minted only with the request approved and unexpired, and its
//! redemption checks the approval again (`grant::check`).
//!
//! **Architecture Invariant:** a request shows only what core formed from the stamped plan:
//! ids, digests, the class and the pack entry it came from, the diff, unit or argv, and the
//! rollback. No step bytes beyond those, no secret: the plan holds none.

use std::fmt;
use std::time::Duration;

use reach_digest::Sha256Digest;
use serde::Serialize;

use crate::clock::UnixMillis;
use crate::grant::{EffectClass, StepClaim};
use crate::ids::HilRequestId;

/// How long the operator has to answer when core asks for no other expiry.
pub const DEFAULT_HIL_TTL: Duration = Duration::from_secs(15 * 60);
/// The longest expiry core may ask for.
pub const MAX_HIL_TTL: Duration = Duration::from_secs(24 * 3600);
/// The longest diff a request may show.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;
/// Most argv entries, and the longest text field but the diff.
pub const MAX_ARGV: usize = 64;
pub const MAX_TEXT_BYTES: usize = 1024;
/// The longest reason an operator may give.
pub const MAX_REASON_BYTES: usize = 1024;
/// The digest domain of a request.
pub const HIL_DIGEST_DOMAIN: &str = "reach.ward.hil-request/1";

/// What a step does, as the request shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepAction {
    Run,
    Patch,
    Restart,
    Verify,
}

impl StepAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Patch => "patch",
            Self::Restart => "restart",
            Self::Verify => "verify",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "run" => Some(Self::Run),
            "patch" => Some(Self::Patch),
            "restart" => Some(Self::Restart),
            "verify" => Some(Self::Verify),
            _ => None,
        }
    }
}

/// What core files for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HilFiling {
    pub step: StepClaim,
    pub effect_class: EffectClass,
    /// The pack file and entry the class came from.
    pub class_source: String,
    pub action: StepAction,
    /// The patched file, restarted unit or command profile.
    pub target: String,
    pub argv: Vec<String>,
    /// A patch's unified diff against the plan's pre-image; empty otherwise.
    pub diff: String,
    pub rollback: String,
    /// `None` takes [`DEFAULT_HIL_TTL`].
    pub ttl: Option<Duration>,
}

/// Where a request stands. `Expired` is never stored: a pending request past its expiry reads
/// as expired, and can no longer be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HilState {
    Pending,
    Approved,
    Denied,
    Expired,
}

impl HilState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    /// The stored state read at `now`.
    pub(crate) fn at(stored: &str, expires_at: UnixMillis, now: UnixMillis) -> Option<Self> {
        Some(match stored {
            "pending" if now >= expires_at => Self::Expired,
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "denied" => Self::Denied,
            _ => return None,
        })
    }

    /// The one transition: a pending request takes the operator's answer. An answered request
    /// keeps its first answer, and an expired one takes none.
    pub fn answer(self, approve: bool) -> Result<Self, HilRefusal> {
        match self {
            Self::Pending if approve => Ok(Self::Approved),
            Self::Pending => Ok(Self::Denied),
            Self::Expired => Err(HilRefusal::Expired),
            Self::Approved | Self::Denied => Err(HilRefusal::Answered(self)),
        }
    }
}

impl fmt::Display for HilState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request as ward holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HilRequest {
    pub id: HilRequestId,
    /// Over [`HilRequest::digest_of`]; an answer must name it.
    pub digest: Sha256Digest,
    pub filing: HilFiling,
    pub filed_by: String,
    pub filed_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub state: HilState,
    pub answered_at: Option<UnixMillis>,
    pub answered_by: Option<String>,
    pub reason: String,
    /// Filing order.
    pub seq: u64,
}

/// The digested form: every field the operator is shown, in a fixed order.
#[derive(Serialize)]
struct Shown<'a> {
    domain: &'a str,
    id: &'a str,
    experiment_id: &'a str,
    instance_id: &'a str,
    plan_digest: String,
    step_index: u32,
    step_digest: String,
    pack_name: &'a str,
    pack_generation: u64,
    effect_class: &'a str,
    class_source: &'a str,
    action: StepAction,
    target: &'a str,
    argv: &'a [String],
    diff: &'a str,
    rollback: &'a str,
    filed_at: i64,
    expires_at: i64,
}

impl HilRequest {
    /// The digest of what a request with this id, filing and times shows.
    pub fn digest_of(
        id: &HilRequestId,
        f: &HilFiling,
        filed_at: UnixMillis,
        expires_at: UnixMillis,
    ) -> Sha256Digest {
        let shown = Shown {
            domain: HIL_DIGEST_DOMAIN,
            id: id.as_str(),
            experiment_id: &f.step.experiment_id,
            instance_id: &f.step.instance_id,
            plan_digest: f.step.plan_digest.to_string(),
            step_index: f.step.step_index,
            step_digest: f.step.step_digest.to_string(),
            pack_name: &f.step.pack_name,
            pack_generation: f.step.pack_generation,
            effect_class: f.effect_class.as_str(),
            class_source: &f.class_source,
            action: f.action,
            target: &f.target,
            argv: &f.argv,
            diff: &f.diff,
            rollback: &f.rollback,
            filed_at: filed_at.0,
            expires_at: expires_at.0,
        };
        Sha256Digest::of(serde_json::to_vec(&shown).expect("plain fields serialize"))
    }

    /// Whether `other` files what this request already shows (a replayed filing).
    pub fn files_the_same(&self, other: &HilFiling) -> bool {
        let mine = &self.filing;
        mine.step == other.step
            && mine.effect_class == other.effect_class
            && mine.class_source == other.class_source
            && mine.action == other.action
            && mine.target == other.target
            && mine.argv == other.argv
            && mine.diff == other.diff
            && mine.rollback == other.rollback
    }
}

/// Why ward refuses a HIL call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum HilRefusal {
    /// no request has this id
    #[error("hil/unknown")]
    Unknown,
    /// the request was answered already; the first answer stands
    #[error("hil/answered: {0}")]
    Answered(HilState),
    /// the request expired unanswered
    #[error("hil/expired")]
    Expired,
    /// the answer names another digest than the request's: the operator saw something else
    #[error("hil/other-request")]
    OtherRequest,
    /// a different step was already filed at this experiment's plan position
    #[error("hil/conflict")]
    Conflict,
    /// a field is malformed or out of bounds; names the field, never its value
    #[error("hil/bad-request: {0}")]
    BadRequest(&'static str),
}

impl HilRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown => "hil/unknown",
            Self::Answered(_) => "hil/answered",
            Self::Expired => "hil/expired",
            Self::OtherRequest => "hil/other-request",
            Self::Conflict => "hil/conflict",
            Self::BadRequest(_) => "hil/bad-request",
        }
    }
}

/// Text a person reads: bounded, and no control character but a newline or tab (in a diff),
/// so a request cannot rewrite the operator's terminal.
pub(crate) fn check_text(
    text: &str,
    max: usize,
    multiline: bool,
    field: &'static str,
) -> Result<(), HilRefusal> {
    let control = |c: char| c.is_control() && !(multiline && (c == '\n' || c == '\t'));
    if text.len() > max || text.chars().any(control) {
        return Err(HilRefusal::BadRequest(field));
    }
    Ok(())
}

/// A filing checked for shape and bounds.
pub(crate) fn check_filing(f: &HilFiling) -> Result<(), HilRefusal> {
    check_text(&f.class_source, MAX_TEXT_BYTES, false, "class_source")?;
    check_text(&f.target, MAX_TEXT_BYTES, false, "target")?;
    check_text(&f.rollback, MAX_TEXT_BYTES, false, "rollback")?;
    check_text(&f.diff, MAX_DIFF_BYTES, true, "diff")?;
    if f.class_source.is_empty() {
        return Err(HilRefusal::BadRequest("class_source"));
    }
    if f.rollback.is_empty() {
        return Err(HilRefusal::BadRequest("rollback"));
    }
    if f.argv.len() > MAX_ARGV {
        return Err(HilRefusal::BadRequest("argv"));
    }
    for a in &f.argv {
        check_text(a, MAX_TEXT_BYTES, false, "argv")?;
    }
    // What the operator must see for each action is there.
    let shown = match f.action {
        StepAction::Patch => !f.diff.is_empty() && !f.target.is_empty(),
        StepAction::Restart | StepAction::Run => !f.target.is_empty(),
        StepAction::Verify => true,
    };
    if !shown {
        return Err(HilRefusal::BadRequest(match f.action {
            StepAction::Patch if f.diff.is_empty() => "diff",
            _ => "target",
        }));
    }
    if f.ttl.is_some_and(|t| t.is_zero() || t > MAX_HIL_TTL) {
        return Err(HilRefusal::BadRequest("ttl_ms"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filing() -> HilFiling {
        HilFiling {
            step: StepClaim {
                experiment_id: "exp".into(),
                instance_id: "vm".into(),
                plan_digest: Sha256Digest::of(b"plan"),
                step_index: 1,
                step_digest: Sha256Digest::of(b"step"),
                pack_name: "pack".into(),
                pack_generation: 1,
            },
            effect_class: EffectClass::ContainedMutation,
            class_source: "patch-policy.toml".into(),
            action: StepAction::Patch,
            target: "etc/app/app.conf".into(),
            argv: vec![],
            diff: "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n".into(),
            rollback: "recreate-prepared-system".into(),
            ttl: None,
        }
    }

    #[test]
    fn the_first_answer_stands_and_an_expired_request_takes_none() {
        use HilState::*;
        assert_eq!(Pending.answer(true), Ok(Approved));
        assert_eq!(Pending.answer(false), Ok(Denied));
        assert_eq!(Approved.answer(false), Err(HilRefusal::Answered(Approved)));
        assert_eq!(Denied.answer(true), Err(HilRefusal::Answered(Denied)));
        assert_eq!(Expired.answer(true), Err(HilRefusal::Expired));
        assert_eq!(
            HilState::at("pending", UnixMillis(5), UnixMillis(5)),
            Some(Expired)
        );
        assert_eq!(
            HilState::at("approved", UnixMillis(5), UnixMillis(9)),
            Some(Approved)
        );
        assert_eq!(HilState::at("expired", UnixMillis(5), UnixMillis(1)), None);
    }

    #[test]
    fn the_digest_covers_everything_shown() {
        let id = HilRequestId::mint(&ring::rand::SystemRandom::new());
        let f = filing();
        let d = HilRequest::digest_of(&id, &f, UnixMillis(1), UnixMillis(2));
        let edits: [fn(&mut HilFiling); 6] = [
            |f| f.diff.push('z'),
            |f| f.target.push('z'),
            |f| f.step.step_index += 1,
            |f| f.effect_class = EffectClass::Observation,
            |f| f.argv.push("x".into()),
            |f| f.rollback.push('z'),
        ];
        for edit in edits {
            let mut g = f.clone();
            edit(&mut g);
            assert_ne!(
                HilRequest::digest_of(&id, &g, UnixMillis(1), UnixMillis(2)),
                d
            );
        }
        assert_ne!(
            HilRequest::digest_of(&id, &f, UnixMillis(1), UnixMillis(3)),
            d
        );
    }

    #[test]
    fn a_filing_that_could_mislead_or_hide_is_refused() {
        assert_eq!(check_filing(&filing()), Ok(()));
        type Edit = fn(&mut HilFiling);
        let cases: [(Edit, &str); 6] = [
            (|f| f.diff.clear(), "diff"),
            (|f| f.target = "app.conf\u{1b}[2K".into(), "target"),
            (|f| f.diff.push('\u{1b}'), "diff"),
            (|f| f.argv = vec!["a".into(); MAX_ARGV + 1], "argv"),
            (|f| f.rollback.clear(), "rollback"),
            (|f| f.ttl = Some(Duration::ZERO), "ttl_ms"),
        ];
        for (edit, field) in cases {
            let mut f = filing();
            edit(&mut f);
            assert_eq!(check_filing(&f), Err(HilRefusal::BadRequest(field)));
        }
    }
}
