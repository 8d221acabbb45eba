//! The desk: admission of guest scopes, Sigils, the issue/redeem/revoke life of
//! EgressDecisions, and the mint/redeem/fence life of step grants, on ward's own store.
//!
//! Every operation that reads and then writes runs in one `BEGIN IMMEDIATE` transaction, so
//! budget and rate-limit checks cannot interleave. Redemption is a single conditional `UPDATE`
//! (`... WHERE state = 'issued' AND expires_at > now` for a decision, `... WHERE redeemed_at IS
//! NULL ...` for a step grant): of two concurrent redeems of one, exactly one changes the row.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reach_digest::Sha256Digest;
use ring::rand::SystemRandom;
use sqlx::Row;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{Sqlite, SqlitePool, SqliteRow};

use crate::clock::{Clock, UnixMillis};
use crate::grant::{
    self, EffectClass, FenceRequest, Fenced, GrantRecord, GrantRefusal, HilAnswer, HilMode,
    MintedGrant, PresentedToken, RedeemedGrant, Standing, StepClaim, StepGrantRequest,
};
use crate::ids::{DecisionId, HilRequestId, SigilId, StepGrantId};
use crate::policy::{TaskBudgets, WardPolicy, WindowKind};
use crate::refusal::{Budget, DeskError, Dimension, Refusal, Result};
use crate::scope::{GuestEvent, GuestScope, ScopeId, WardKey};

/// How long an EgressDecision lives. It is issued immediately before bytes leave, so it only
/// needs to outlast one dial and handshake; anything slower asks for a new decision.
pub const DECISION_TTL: Duration = Duration::from_secs(30);

/// How long expired Sigils and decisions are kept as secret-free correlation (ids, digests,
/// states) before [`Desk::purge`] deletes them. Matches the manifest's idempotency horizon.
pub const RECORD_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Longest accepted run, attempt or policy revision id, in bytes.
pub const MAX_ID_BYTES: usize = 128;
/// Longest accepted destination (a canonical HTTPS URL), in bytes.
pub const MAX_DESTINATION_BYTES: usize = 2048;
/// Most labels on one decision, and the longest label.
pub const MAX_LABELS: usize = 32;
pub const MAX_LABEL_BYTES: usize = 64;

/// A secret-free task badge: it names the run, scope, expiry and budgets, and proves nothing by
/// itself. Only its holder (core) can use it, and only to ask for decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sigil {
    pub id: SigilId,
    pub run_id: String,
    pub scope_id: ScopeId,
    pub expires_at: UnixMillis,
    pub budgets: TaskBudgets,
}

/// The answer to a successful admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub scope: GuestScope,
    pub sigil: Sigil,
    /// True when the run already held this Sigil (a replayed admission); no counter moved.
    pub replayed: bool,
}

/// The run a Sigil is minted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub run_id: String,
    /// The run's own deadline; `None` takes the task time budget.
    pub deadline: Option<UnixMillis>,
}

/// Everything a decision binds, as core asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    pub sigil_id: String,
    pub run_id: String,
    pub attempt_id: String,
    pub destination: String,
    pub purpose: String,
    pub payload_digest: Sha256Digest,
    pub labels: Vec<String>,
    pub policy_revision: String,
    pub cut_receipt_digest: Option<Sha256Digest>,
    pub max_tokens: u64,
    pub max_spend_micros: u64,
}

/// A decision ward has issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedDecision {
    pub id: DecisionId,
    pub expires_at: UnixMillis,
    /// The one principal that may redeem it.
    pub redeemer: String,
}

/// A decision redeemed for exactly one physical attempt. Only [`Desk::redeem`] builds one, so
/// a sender that takes a `RedeemedDecision` cannot be reached with an unchecked decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedDecision {
    id: DecisionId,
    run_id: String,
    attempt_id: String,
    purpose: String,
    destination: String,
    payload_digest: Sha256Digest,
    max_tokens: u64,
    max_spend_micros: u64,
}

impl RedeemedDecision {
    pub fn id(&self) -> &DecisionId {
        &self.id
    }
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
    pub fn attempt_id(&self) -> &str {
        &self.attempt_id
    }
    pub fn purpose(&self) -> &str {
        &self.purpose
    }
    pub fn destination(&self) -> &str {
        &self.destination
    }
    pub fn payload_digest(&self) -> &Sha256Digest {
        &self.payload_digest
    }
    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
    }
    pub fn max_spend_micros(&self) -> u64 {
        self.max_spend_micros
    }
}

/// A duty Sigil: secret-free like a task Sigil, but minted for one duty (a purpose whose
/// rule is `duty`, such as `discord-reconcile-read`) on one subject (a delivery intent id)
/// instead of a run, with its own expiry and a budget of reads. Decisions issued on it name the
/// subject as their run and the duty as their purpose, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DutySigil {
    pub id: SigilId,
    pub subject: String,
    pub purpose: String,
    pub expires_at: UnixMillis,
    /// Decisions (physical reads) the Sigil allows in all.
    pub reads: u32,
    /// Of those, how many are not yet issued.
    pub reads_left: u32,
    /// True when the holder already held this live Sigil; nothing was minted.
    pub reused: bool,
}

/// What a holder asks a duty Sigil for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DutyRequest {
    /// The one thing the duty is about (a delivery intent id).
    pub subject: String,
    /// The duty purpose.
    pub purpose: String,
}

/// What a duty Sigil binds, read back at issue.
struct Duty {
    purpose: String,
    subject: String,
}

/// The result of a revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// Unredeemed decisions revoked with the Sigil by this call.
    pub decisions_revoked: u32,
    /// True when the Sigil was already revoked before this call.
    pub already_revoked: bool,
}

/// What [`Desk::purge`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Purged {
    pub counters: u64,
    pub sigils: u64,
    pub grants: u64,
}

/// Ward's authority over scopes, Sigils and decisions.
pub struct Desk {
    pub(crate) pool: SqlitePool,
    key: WardKey,
    policy: WardPolicy,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) rng: SystemRandom,
    /// The filing sequence of the newest HIL request, for watchers (`crate::hil_desk`).
    pub(crate) hil_filed: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk")
            .field("policy", &self.policy)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

fn check_id(value: &str, max: usize, field: &'static str) -> Result<()> {
    if value.is_empty() || value.len() > max || value.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(DeskError::Malformed(field));
    }
    Ok(())
}

fn to_i64(v: u64, field: &'static str) -> Result<i64> {
    i64::try_from(v).map_err(|_| DeskError::Malformed(field))
}

pub(crate) fn col_u64(row: &SqliteRow, col: &str) -> Result<u64> {
    u64::try_from(row.try_get::<i64, _>(col)?).map_err(|_| DeskError::Corrupt("negative counter"))
}

fn window_start(now: UnixMillis, window_ms: i64) -> i64 {
    now.0 - now.0.rem_euclid(window_ms)
}

impl Desk {
    /// Opens ward's store at `path` (creating it) under `key` and `policy`.
    pub async fn open(
        path: &Path,
        key: WardKey,
        policy: WardPolicy,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        for d in Dimension::ALL {
            let w = policy.rate_limits.window(d);
            if w.window_ms == 0 || i64::try_from(w.window_ms).is_err() {
                return Err(DeskError::Malformed(
                    "rate limit windows must be between 1 ms and i64::MAX ms",
                ));
            }
        }
        let g = policy.step_grants;
        if g.default_ttl_ms == 0
            || g.default_ttl_ms > g.max_ttl_ms
            || i64::try_from(g.max_ttl_ms).is_err()
        {
            return Err(DeskError::Malformed(
                "step grant lives must be 1 ms <= default_ttl_ms <= max_ttl_ms <= i64::MAX ms",
            ));
        }
        let pool = crate::store::open(path).await?;
        let (decisions, grants) = void_previous(&pool, clock.now()).await?;
        if decisions + grants > 0 {
            tracing::info!(
                decisions,
                grants,
                "unredeemed decisions and step grants of the previous ward process voided"
            );
        }
        let newest: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM hil_request")
            .fetch_one(&pool)
            .await?;
        Ok(Self {
            pool,
            key,
            policy,
            clock,
            rng: SystemRandom::new(),
            hil_filed: tokio::sync::watch::Sender::new(u64::try_from(newest).unwrap_or(0)),
        })
    }

    pub fn policy(&self) -> &WardPolicy {
        &self.policy
    }

    /// Maps `event` to its guest scope, applies the rate limits and mints the run's Sigil.
    ///
    /// Replaying the admission of a run that already holds a live Sigil for the same scope
    /// returns that Sigil and moves no counter.
    pub async fn admit(&self, holder: &str, event: GuestEvent, run: RunRef) -> Result<Admission> {
        let scope = event.into_scope(&self.key)?;
        check_id(&run.run_id, MAX_ID_BYTES, "run_id")?;
        let now = self.clock.now();
        let budgets = self.policy.budgets;
        let cap = now.plus(Duration::from_millis(budgets.time_ms));
        let expires_at = run.deadline.map_or(cap, |d| d.min(cap));

        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let existing = sqlx::query(
            "SELECT id, scope_id, holder, state, expires_at FROM sigil WHERE run_id = ?1",
        )
        .bind(&run.run_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            let same = row.try_get::<String, _>("scope_id")? == scope.id.as_str()
                && row.try_get::<String, _>("holder")? == holder;
            if !same {
                return Err(Refusal::RunMismatch.into());
            }
            if row.try_get::<String, _>("state")? == "revoked" {
                return Err(Refusal::SigilRevoked.into());
            }
            let expires_at = UnixMillis(row.try_get("expires_at")?);
            if now >= expires_at {
                return Err(Refusal::SigilExpired.into());
            }
            let id = SigilId::parse(&row.try_get::<String, _>("id")?)
                .ok_or(DeskError::Corrupt("sigil id"))?;
            let sigil = Sigil {
                id,
                run_id: run.run_id,
                scope_id: scope.id.clone(),
                expires_at,
                budgets,
            };
            return Ok(Admission {
                scope,
                sigil,
                replayed: true,
            });
        }
        if now >= expires_at {
            return Err(Refusal::SigilExpired.into());
        }

        // Narrowest dimension first, so a refusal names the most specific limit reached.
        for dimension in [
            Dimension::Subject,
            Dimension::Channel,
            Dimension::Guild,
            Dimension::Application,
        ] {
            let w = self.policy.rate_limits.window(dimension);
            let window_ms = i64::try_from(w.window_ms).unwrap_or(i64::MAX);
            let key = scope.counter_key(dimension);
            let start = window_start(now, window_ms);
            let current: i64 = sqlx::query_scalar(
                "INSERT INTO rate_window (dimension, counter_key, window_start, count) VALUES (?1, ?2, ?3, 1)
                 ON CONFLICT (dimension, counter_key, window_start) DO UPDATE SET count = count + 1
                 RETURNING count",
            )
            .bind(dimension.as_str())
            .bind(&key)
            .bind(start)
            .fetch_one(&mut *tx)
            .await?;
            let estimate = match w.kind {
                WindowKind::Fixed => current as f64,
                WindowKind::Sliding => {
                    let previous: i64 = sqlx::query_scalar(
                        "SELECT count FROM rate_window WHERE dimension = ?1 AND counter_key = ?2 AND window_start = ?3",
                    )
                    .bind(dimension.as_str())
                    .bind(&key)
                    .bind(start - window_ms)
                    .fetch_optional(&mut *tx)
                    .await?
                    .unwrap_or(0);
                    let overlap = 1.0 - (now.0 - start) as f64 / window_ms as f64;
                    previous as f64 * overlap + current as f64
                }
            };
            if estimate > f64::from(w.limit) {
                // Dropping the transaction rolls back: a refused event consumes no quota.
                return Err(Refusal::RateLimited(dimension).into());
            }
        }

        let id = SigilId::mint(&self.rng);
        sqlx::query(
            "INSERT INTO sigil (id, run_id, scope_id, holder, issued_at, expires_at, state,
                budget_concurrency, budget_tokens, budget_retries, budget_spend_micros)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'active', ?7, ?8, ?9, ?10)",
        )
        .bind(id.as_str())
        .bind(&run.run_id)
        .bind(scope.id.as_str())
        .bind(holder)
        .bind(now.0)
        .bind(expires_at.0)
        .bind(i64::from(budgets.concurrency))
        .bind(to_i64(budgets.tokens, "budgets.tokens")?)
        .bind(i64::from(budgets.retries))
        .bind(to_i64(budgets.spend_micros, "budgets.spend_micros")?)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let sigil = Sigil {
            id,
            run_id: run.run_id,
            scope_id: scope.id.clone(),
            expires_at,
            budgets,
        };
        Ok(Admission {
            scope,
            sigil,
            replayed: false,
        })
    }

    /// Mints (or returns) the duty Sigil of `holder` for `req.purpose` on `req.subject`.
    ///
    /// One live duty Sigil per (holder, subject, purpose): while it has not expired and is not
    /// revoked, asking again returns it with its budget as spent so far, so a holder that forgot
    /// it (a restart) cannot refill the budget by asking again. A new one is minted only after
    /// it expired.
    pub async fn mint_duty(&self, holder: &str, req: DutyRequest) -> Result<DutySigil> {
        check_id(&req.subject, MAX_ID_BYTES, "subject")?;
        check_id(&req.purpose, MAX_LABEL_BYTES, "purpose")?;
        match self.policy.purposes.get(&req.purpose) {
            Some(rule) if rule.duty => {}
            // A task purpose (a Create Message, a model call) is never a duty.
            Some(_) => return Err(Refusal::PurposeMismatch.into()),
            None => return Err(Refusal::PurposeNotAdmitted.into()),
        }
        let now = self.clock.now();
        let budgets = self.policy.duty;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let live = sqlx::query(
            "SELECT id, expires_at, budget_retries, used_retries FROM sigil
             WHERE kind = 'duty' AND holder = ?1 AND duty_subject = ?2 AND duty_purpose = ?3
               AND state = 'active' AND expires_at > ?4
             ORDER BY expires_at DESC LIMIT 1",
        )
        .bind(holder)
        .bind(&req.subject)
        .bind(&req.purpose)
        .bind(now.0)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = live {
            let id = SigilId::parse(&row.try_get::<String, _>("id")?)
                .ok_or(DeskError::Corrupt("sigil id"))?;
            let reads = u32::try_from(col_u64(&row, "budget_retries")?)
                .map_err(|_| DeskError::Corrupt("duty reads budget"))?;
            let used = u32::try_from(col_u64(&row, "used_retries")?)
                .map_err(|_| DeskError::Corrupt("duty reads used"))?;
            return Ok(DutySigil {
                id,
                subject: req.subject,
                purpose: req.purpose,
                expires_at: UnixMillis(row.try_get("expires_at")?),
                reads,
                reads_left: reads.saturating_sub(used),
                reused: true,
            });
        }
        let id = SigilId::mint(&self.rng);
        let expires_at = now.plus(Duration::from_millis(budgets.time_ms));
        sqlx::query(
            "INSERT INTO sigil (id, run_id, scope_id, holder, issued_at, expires_at, state,
                budget_concurrency, budget_tokens, budget_retries, budget_spend_micros,
                kind, duty_purpose, duty_subject)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'active', ?7, 0, ?8, 0, 'duty', ?3, ?9)",
        )
        .bind(id.as_str())
        .bind(format!("duty/{id}"))
        .bind(&req.purpose)
        .bind(holder)
        .bind(now.0)
        .bind(expires_at.0)
        .bind(i64::from(budgets.concurrency))
        .bind(i64::from(budgets.reads))
        .bind(&req.subject)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(DutySigil {
            id,
            subject: req.subject,
            purpose: req.purpose,
            expires_at,
            reads: budgets.reads,
            reads_left: budgets.reads,
            reused: false,
        })
    }

    /// Issues a fresh decision for one physical attempt, reserving its budgets on the task.
    pub async fn issue(&self, issuer: &str, req: DecisionRequest) -> Result<IssuedDecision> {
        check_id(&req.run_id, MAX_ID_BYTES, "run_id")?;
        check_id(&req.attempt_id, MAX_ID_BYTES, "attempt_id")?;
        check_id(&req.policy_revision, MAX_ID_BYTES, "policy_revision")?;
        check_id(&req.purpose, MAX_LABEL_BYTES, "purpose")?;
        if !req.destination.starts_with("https://") {
            return Err(DeskError::Malformed("destination"));
        }
        check_id(&req.destination, MAX_DESTINATION_BYTES, "destination")?;
        if req.labels.len() > MAX_LABELS {
            return Err(DeskError::Malformed("labels"));
        }
        for l in &req.labels {
            check_id(l, MAX_LABEL_BYTES, "labels")?;
        }
        let max_tokens = to_i64(req.max_tokens, "max_tokens")?;
        let max_spend = to_i64(req.max_spend_micros, "max_spend_micros")?;
        let Some(sigil_id) = SigilId::parse(&req.sigil_id) else {
            return Err(Refusal::UnknownSigil.into());
        };
        let now = self.clock.now();

        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let Some(sigil) = sqlx::query("SELECT * FROM sigil WHERE id = ?1 AND holder = ?2")
            .bind(sigil_id.as_str())
            .bind(issuer)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(Refusal::UnknownSigil.into());
        };
        let duty = match sigil.try_get::<String, _>("kind")?.as_str() {
            "task" => None,
            "duty" => Some(Duty {
                purpose: sigil.try_get("duty_purpose")?,
                subject: sigil.try_get("duty_subject")?,
            }),
            _ => return Err(DeskError::Corrupt("sigil kind")),
        };
        // A task Sigil binds its run; a duty Sigil binds its subject, which its decisions name
        // as their run.
        let bound_run = match &duty {
            Some(d) => d.subject.clone(),
            None => sigil.try_get::<String, _>("run_id")?,
        };
        if bound_run != req.run_id {
            return Err(Refusal::RunMismatch.into());
        }
        if sigil.try_get::<String, _>("state")? == "revoked" {
            return Err(Refusal::SigilRevoked.into());
        }
        let sigil_expires = UnixMillis(sigil.try_get("expires_at")?);
        if now >= sigil_expires {
            return Err(Refusal::SigilExpired.into());
        }
        let Some(rule) = self.policy.purposes.get(&req.purpose) else {
            return Err(Refusal::PurposeNotAdmitted.into());
        };
        // A duty Sigil asks only for its duty; a duty purpose needs a duty Sigil.
        let purpose_fits = match &duty {
            Some(d) => d.purpose == req.purpose,
            None => !rule.duty,
        };
        if !purpose_fits {
            return Err(Refusal::PurposeMismatch.into());
        }
        if rule.requires_cut_receipt && req.cut_receipt_digest.is_none() {
            return Err(Refusal::CutReceiptMissing.into());
        }
        if req
            .labels
            .iter()
            .any(|l| self.policy.refused_labels.contains(l))
        {
            return Err(Refusal::LabelRefused.into());
        }

        let over = |used: u64, add: u64, budget: u64| used.saturating_add(add) > budget;
        if over(
            col_u64(&sigil, "used_retries")?,
            1,
            col_u64(&sigil, "budget_retries")?,
        ) {
            let spent = if duty.is_some() {
                Budget::Reads
            } else {
                Budget::Retries
            };
            return Err(Refusal::OverBudget(spent).into());
        }
        if over(
            col_u64(&sigil, "used_tokens")?,
            req.max_tokens,
            col_u64(&sigil, "budget_tokens")?,
        ) {
            return Err(Refusal::OverBudget(Budget::Tokens).into());
        }
        if over(
            col_u64(&sigil, "used_spend_micros")?,
            req.max_spend_micros,
            col_u64(&sigil, "budget_spend_micros")?,
        ) {
            return Err(Refusal::OverBudget(Budget::Spend).into());
        }
        // A task's redeemed decision still counts while it lives: its attempt (a model call, a
        // send) may still be running. A duty's read is one bounded GET made right after its
        // redemption and the next page is asked for only after it, so only reads not yet
        // redeemed are in flight; counting redeemed ones would refuse a deep page walk.
        let live_sql = if duty.is_some() {
            "SELECT COUNT(*) FROM decision WHERE sigil_id = ?1 AND state = 'issued' AND expires_at > ?2"
        } else {
            "SELECT COUNT(*) FROM decision WHERE sigil_id = ?1 AND state != 'revoked' AND expires_at > ?2"
        };
        let live: i64 = sqlx::query_scalar(live_sql)
            .bind(sigil_id.as_str())
            .bind(now.0)
            .fetch_one(&mut *tx)
            .await?;
        if over(
            u64::try_from(live).unwrap_or(0),
            1,
            col_u64(&sigil, "budget_concurrency")?,
        ) {
            return Err(Refusal::OverBudget(Budget::Concurrency).into());
        }

        let id = DecisionId::mint(&self.rng);
        let expires_at = now.plus(DECISION_TTL).min(sigil_expires);
        let labels =
            serde_json::to_string(&req.labels).map_err(|_| DeskError::Malformed("labels"))?;
        sqlx::query(
            "UPDATE sigil SET used_retries = used_retries + 1, used_tokens = used_tokens + ?2,
                used_spend_micros = used_spend_micros + ?3 WHERE id = ?1",
        )
        .bind(sigil_id.as_str())
        .bind(max_tokens)
        .bind(max_spend)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO decision (id, sigil_id, run_id, attempt_id, destination, purpose, redeemer,
                payload_digest, labels, policy_revision, cut_receipt_digest, issuer, issued_at, expires_at,
                max_tokens, max_spend_micros, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, 'issued')",
        )
        .bind(id.as_str())
        .bind(sigil_id.as_str())
        .bind(&req.run_id)
        .bind(&req.attempt_id)
        .bind(&req.destination)
        .bind(&req.purpose)
        .bind(&rule.redeemer)
        .bind(req.payload_digest.to_string())
        .bind(labels)
        .bind(&req.policy_revision)
        .bind(req.cut_receipt_digest.map(|d| d.to_string()))
        .bind(issuer)
        .bind(now.0)
        .bind(expires_at.0)
        .bind(max_tokens)
        .bind(max_spend)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(IssuedDecision {
            id,
            expires_at,
            redeemer: rule.redeemer.clone(),
        })
    }

    /// Redeems decision `decision_id` for one physical attempt by `redeemer`, which must present
    /// the destination and payload digest the decision binds.
    pub async fn redeem(
        &self,
        redeemer: &str,
        decision_id: &str,
        destination: &str,
        payload_digest: &Sha256Digest,
    ) -> Result<RedeemedDecision> {
        // A Sigil id, or anything else that is not a decision id, is unknown here by type.
        let Some(id) = DecisionId::parse(decision_id) else {
            return Err(Refusal::UnknownDecision.into());
        };
        let now = self.clock.now();
        let Some(row) = sqlx::query(
            "SELECT run_id, attempt_id, purpose, destination, redeemer, payload_digest, expires_at,
                max_tokens, max_spend_micros, state FROM decision WHERE id = ?1",
        )
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Err(Refusal::UnknownDecision.into());
        };
        if row.try_get::<String, _>("redeemer")? != redeemer {
            return Err(Refusal::WrongRedeemer.into());
        }
        classify_state(&row, now)?;
        let bound_destination: String = row.try_get("destination")?;
        if bound_destination != destination {
            return Err(Refusal::DestinationMismatch.into());
        }
        let bound_payload: Sha256Digest = row
            .try_get::<String, _>("payload_digest")?
            .parse()
            .map_err(|_| DeskError::Corrupt("payload digest"))?;
        if bound_payload != *payload_digest {
            return Err(Refusal::PayloadMismatch.into());
        }

        let changed = sqlx::query(
            "UPDATE decision SET state = 'redeemed', redeemed_at = ?2, redeemed_by = ?3
             WHERE id = ?1 AND state = 'issued' AND expires_at > ?2",
        )
        .bind(id.as_str())
        .bind(now.0)
        .bind(redeemer)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if changed != 1 {
            // Someone else redeemed it, or it was revoked or expired, since the read above.
            let row = sqlx::query("SELECT state, expires_at FROM decision WHERE id = ?1")
                .bind(id.as_str())
                .fetch_one(&self.pool)
                .await?;
            classify_state(&row, now)?;
            return Err(DeskError::Corrupt(
                "decision neither redeemable nor refused",
            ));
        }
        Ok(RedeemedDecision {
            id,
            run_id: row.try_get("run_id")?,
            attempt_id: row.try_get("attempt_id")?,
            purpose: row.try_get("purpose")?,
            destination: bound_destination,
            payload_digest: bound_payload,
            max_tokens: col_u64(&row, "max_tokens")?,
            max_spend_micros: col_u64(&row, "max_spend_micros")?,
        })
    }

    /// Revokes Sigil `sigil_id` and every unredeemed decision bound to it. Decisions already
    /// redeemed stay redeemed: their attempt may have left, and revocation cannot recall it.
    ///
    /// Unlike the other writes, a revocation commits with `synchronous = FULL`: it must survive
    /// power loss, and syncing the WAL also makes every earlier commit durable.
    pub async fn revoke(&self, by: &str, sigil_id: &str) -> Result<Revocation> {
        let Some(id) = SigilId::parse(sigil_id) else {
            return Err(Refusal::UnknownSigil.into());
        };
        let now = self.clock.now();
        let mut conn = FullSync::acquire(&self.pool).await?;
        let result = revoke_on(&mut conn.0, &id, by, now).await;
        conn.release().await;
        result
    }

    /// Mints a grant for exactly the step `req.step` names, for `minter` (core).
    ///
    /// The grant is stored and bound into its token's tag (see [`crate::grant`]); it lives for
    /// `req.ttl` (the policy's default when `None`, at most its maximum). Refused with
    /// `grant/bad-request` for a malformed field or a life out of policy, and with
    /// `package/generation-stale` when the pack is fenced above `req.step.pack_generation`.
    pub async fn mint_step_grant(
        &self,
        minter: &str,
        req: StepGrantRequest,
    ) -> Result<MintedGrant> {
        check_claim(&req.step)?;
        let policy = self.policy.step_grants;
        let ttl_ms = match req.ttl {
            None => policy.default_ttl_ms,
            Some(t) => u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
        };
        if ttl_ms == 0 || ttl_ms > policy.max_ttl_ms {
            return Err(GrantRefusal::BadRequest("ttl_ms").into());
        }
        let now = self.clock.now();
        let expires_at = now.plus(Duration::from_millis(ttl_ms));
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let standing = read_standing(&mut tx, &req.step.pack_name).await?;
        let answer = read_answer(&mut tx, &req.step, now).await?;
        let spent = grant::admit_mint(&req, standing.as_ref(), answer.as_ref(), now)?;
        let hil_request_id = spent.map(|a| a.id.as_str().to_owned());
        let Some(standing) = standing else {
            return Err(DeskError::Corrupt("a step grant was admitted unfenced"));
        };
        let record = GrantRecord {
            id: StepGrantId::mint(&self.rng),
            step: req.step,
            effect_class: req.effect_class,
            expires_at,
            redeemed: false,
            void: false,
            profile_digest: req.profile_digest,
            fence_epoch: standing.epoch,
            hil: hil_request_id.is_some(),
        };
        let s = &record.step;
        sqlx::query(
            "INSERT INTO step_grant (id, experiment_id, instance_id, plan_digest, step_index,
                step_digest, pack_name, pack_generation, effect_class, minted_by, minted_at,
                expires_at, profile_digest, fence_epoch, hil_request_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .bind(record.id.as_str())
        .bind(&s.experiment_id)
        .bind(&s.instance_id)
        .bind(s.plan_digest.to_string())
        .bind(i64::from(s.step_index))
        .bind(s.step_digest.to_string())
        .bind(&s.pack_name)
        .bind(generation_i64(s.pack_generation)?)
        .bind(record.effect_class.as_str())
        .bind(minter)
        .bind(now.0)
        .bind(expires_at.0)
        .bind(record.profile_digest.to_string())
        .bind(generation_i64(record.fence_epoch)?)
        .bind(hil_request_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(MintedGrant {
            token: record.token(&self.key),
            id: record.id,
            expires_at,
        })
    }

    /// Redeems the grant `token` for its one execution by `redeemer` (the workbench), which
    /// presents in `claim` the step it is about to run: its digest computed by the redeemer
    /// from the bytes it received, never copied from core.
    ///
    /// Every check is [`grant::check`]'s; then one `UPDATE ... WHERE redeemed_at IS NULL`
    /// redeems, so of concurrent redeems exactly one wins and the others are `grant/used`.
    ///
    /// A refusal consumes nothing. `grant/used` and `grant/expired` find the grant already dead,
    /// and a fenced (`package/generation-stale`) one stays dead; but a claim that does not match
    /// (another step, plan, pack, instance, experiment or generation) and a forged token leave a
    /// live grant redeemable. A mismatch is evidence of a confused or hostile redeemer, or of
    /// bytes changed on the way, and what to do about it (send the step again, end the
    /// experiment, fence the pack) is core's decision, not ward's. Burning on mismatch would
    /// also let anyone who learned a grant id (it is logged and journaled) burn the grant with a
    /// bad tag, and would spend an operator's approval once #29 binds one to the grant.
    pub async fn redeem_step_grant(
        &self,
        redeemer: &str,
        token: &str,
        claim: &StepClaim,
    ) -> Result<RedeemedGrant> {
        check_claim(claim)?;
        let presented = PresentedToken::parse(token);
        let now = self.clock.now();
        let state = self.grant_state(presented.as_ref(), now).await?;
        state.check(&self.key, presented.as_ref(), claim, now)?;
        let Some(record) = state.record else {
            return Err(DeskError::Corrupt("a step grant passed its check unread"));
        };
        let changed = sqlx::query(
            "UPDATE step_grant SET redeemed_at = ?2, redeemed_by = ?3
             WHERE id = ?1 AND redeemed_at IS NULL AND voided_at IS NULL AND expires_at > ?2
               AND fence_epoch = (SELECT epoch FROM pack_fence
                 WHERE pack_fence.pack_name = step_grant.pack_name)
               AND (hil_request_id IS NULL OR (EXISTS (SELECT 1 FROM hil_request h
                 WHERE h.id = step_grant.hil_request_id AND h.state = 'approved'
                   AND h.expires_at > ?2)
                 AND NOT EXISTS (SELECT 1 FROM step_grant spent
                   WHERE spent.hil_request_id = step_grant.hil_request_id
                     AND spent.redeemed_at IS NOT NULL)))",
        )
        .bind(record.id.as_str())
        .bind(now.0)
        .bind(redeemer)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if changed != 1 {
            // Another redeem won, or a fence landed, since the read above: check again to say
            // which.
            let again = self.grant_state(presented.as_ref(), now).await?;
            again.check(&self.key, presented.as_ref(), claim, now)?;
            return Err(DeskError::Corrupt(
                "step grant neither redeemable nor refused",
            ));
        }
        Ok(RedeemedGrant::new(record.id, record.effect_class, now))
    }

    /// Records `fence` as the pack's current-use standing, stated by `by` (core) after every
    /// change in its ledger (activate, upgrade, revoke, reactivate, bind, pause, resume, accept)
    /// and at its start. A standing that differs in any field bumps the fence's epoch, and from
    /// then on no grant minted in an earlier epoch redeems: it is refused by what changed
    /// (revoked, paused, profile, generation), or as paused when nothing shows any more (paused
    /// and resumed). The generation is monotonic: a standing below the recorded generation is
    /// a late message and changes nothing.
    ///
    /// Commits with `synchronous = FULL`, as a revocation does: a lost fence could let a stale
    /// grant be minted after a power loss.
    pub async fn fence_pack(&self, by: &str, fence: &FenceRequest) -> Result<Fenced> {
        check_id(&fence.pack_name, MAX_ID_BYTES, "pack_name").map_err(as_bad_request)?;
        generation_i64(fence.generation)?;
        let now = self.clock.now();
        let mut conn = FullSync::acquire(&self.pool).await?;
        let result = fence_on(&mut conn.0, fence, by, now).await;
        conn.release().await;
        result
    }

    /// The standing ward holds for `pack_name`, if core ever fenced it.
    pub async fn standing(&self, pack_name: &str) -> Result<Option<Standing>> {
        let mut conn = self.pool.acquire().await?;
        read_standing(&mut conn, pack_name).await
    }

    /// The stored grant `token` names, its pack's standing and the approval it spends.
    async fn grant_state(
        &self,
        token: Option<&PresentedToken>,
        now: UnixMillis,
    ) -> Result<GrantState> {
        let none = GrantState {
            record: None,
            standing: None,
            answer: None,
        };
        let Some(token) = token else {
            return Ok(none);
        };
        let mut conn = self.pool.acquire().await?;
        let Some(row) = sqlx::query("SELECT * FROM step_grant WHERE id = ?1")
            .bind(token.id.as_str())
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(none);
        };
        let step = step_claim(&row)?;
        let record = GrantRecord {
            id: token.id.clone(),
            effect_class: EffectClass::parse(&row.try_get::<String, _>("effect_class")?)
                .ok_or(DeskError::Corrupt("grant effect class"))?,
            expires_at: UnixMillis(row.try_get("expires_at")?),
            redeemed: row.try_get::<Option<i64>, _>("redeemed_at")?.is_some(),
            void: row.try_get::<Option<i64>, _>("voided_at")?.is_some(),
            profile_digest: row
                .try_get::<String, _>("profile_digest")?
                .parse()
                .map_err(|_| DeskError::Corrupt("grant profile digest"))?,
            fence_epoch: col_u64(&row, "fence_epoch")?,
            hil: row
                .try_get::<Option<String>, _>("hil_request_id")?
                .is_some(),
            step,
        };
        let standing = read_standing(&mut conn, &record.step.pack_name).await?;
        let answer = if record.hil {
            read_answer(&mut conn, &record.step, now).await?
        } else {
            None
        };
        Ok(GrantState {
            record: Some(record),
            standing,
            answer,
        })
    }

    /// Deletes rate-limit counters no window can still read, and Sigils (with their decisions)
    /// and step grants expired longer than [`RECORD_RETENTION`] ago. Pack fences stay.
    pub async fn purge(&self) -> Result<Purged> {
        let now = self.clock.now();
        let longest = Dimension::ALL
            .iter()
            .map(|d| self.policy.rate_limits.window(*d).window_ms)
            .max()
            .unwrap_or(0);
        // A sliding window reads the previous window too; anything older is dead.
        let horizon = now
            .0
            .saturating_sub(i64::try_from(longest.saturating_mul(2)).unwrap_or(i64::MAX));
        let counters = sqlx::query("DELETE FROM rate_window WHERE window_start < ?1")
            .bind(horizon)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let cutoff = now.0.saturating_sub(RECORD_RETENTION.as_millis() as i64);
        let sigils = sqlx::query("DELETE FROM sigil WHERE expires_at < ?1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let grants = sqlx::query("DELETE FROM step_grant WHERE expires_at < ?1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?
            .rows_affected();
        // Answered or not, a request past retention is history; one a live grant still names
        // (none can be: a grant never outlives its approval by a day) stays.
        sqlx::query(
            "DELETE FROM hil_request WHERE expires_at < ?1 AND NOT EXISTS
               (SELECT 1 FROM step_grant g WHERE g.hil_request_id = hil_request.id)",
        )
        .bind(cutoff)
        .execute(&self.pool)
        .await?;
        Ok(Purged {
            counters,
            sigils,
            grants,
        })
    }

    /// Closes the store, checkpointing the WAL.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Refuses a decision row that is revoked, redeemed or expired; `Ok` when still redeemable.
fn classify_state(row: &SqliteRow, now: UnixMillis) -> Result<()> {
    match row.try_get::<String, _>("state")?.as_str() {
        "revoked" => Err(Refusal::DecisionRevoked.into()),
        // Issued by a previous ward process: its window ended with that process.
        "void" => Err(Refusal::DecisionExpired.into()),
        "redeemed" => Err(Refusal::AlreadyRedeemed.into()),
        "issued" if now.0 >= row.try_get::<i64, _>("expires_at")? => {
            Err(Refusal::DecisionExpired.into())
        }
        "issued" => Ok(()),
        _ => Err(DeskError::Corrupt("decision state")),
    }
}

async fn revoke_on(
    conn: &mut sqlx::SqliteConnection,
    id: &SigilId,
    by: &str,
    now: UnixMillis,
) -> Result<Revocation> {
    use sqlx::Connection as _;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let Some(state) = sqlx::query_scalar::<_, String>("SELECT state FROM sigil WHERE id = ?1")
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Err(Refusal::UnknownSigil.into());
    };
    let already_revoked = state == "revoked";
    if !already_revoked {
        sqlx::query(
            "UPDATE sigil SET state = 'revoked', revoked_at = ?2, revoked_by = ?3 WHERE id = ?1",
        )
        .bind(id.as_str())
        .bind(now.0)
        .bind(by)
        .execute(&mut *tx)
        .await?;
    }
    let revoked = sqlx::query(
        "UPDATE decision SET state = 'revoked' WHERE sigil_id = ?1 AND state = 'issued'",
    )
    .bind(id.as_str())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(Revocation {
        decisions_revoked: u32::try_from(revoked).unwrap_or(u32::MAX),
        already_revoked,
    })
}

/// Voids every decision still `issued` and every step grant not yet redeemed when a ward
/// process starts; returns how many of each. A redemption committed just before an OS crash may
/// be lost (`synchronous = NORMAL`); voiding makes that loss harmless, as no pre-restart
/// decision or grant can be redeemed again. Core asks for a new decision for a new attempt, and
/// mints a new grant for a step not yet run.
async fn void_previous(pool: &SqlitePool, now: UnixMillis) -> Result<(u64, u64)> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let decisions = sqlx::query("UPDATE decision SET state = 'void' WHERE state = 'issued'")
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let grants = sqlx::query(
        "UPDATE step_grant SET voided_at = ?1 WHERE redeemed_at IS NULL AND voided_at IS NULL",
    )
    .bind(now.0)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok((decisions, grants))
}

/// A pooled connection switched to `synchronous = FULL`, for the writes that must survive power
/// loss (revocations, pack fences); syncing the WAL also makes every earlier commit durable.
pub(crate) struct FullSync(pub(crate) PoolConnection<Sqlite>);

impl FullSync {
    pub(crate) async fn acquire(pool: &SqlitePool) -> Result<Self> {
        let mut conn = pool.acquire().await?;
        sqlx::query("PRAGMA synchronous = FULL")
            .execute(&mut *conn)
            .await?;
        Ok(Self(conn))
    }

    /// Back to the pool's setting. If this fails, or is never reached, the connection merely
    /// stays stricter.
    pub(crate) async fn release(mut self) {
        let _ = sqlx::query("PRAGMA synchronous = NORMAL")
            .execute(&mut *self.0)
            .await;
    }
}

async fn fence_on(
    conn: &mut sqlx::SqliteConnection,
    fence: &FenceRequest,
    by: &str,
    now: UnixMillis,
) -> Result<Fenced> {
    use sqlx::Connection as _;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let held = read_standing(&mut tx, &fence.pack_name).await?;
    let stated = |epoch| Standing {
        generation: fence.generation,
        revoked: fence.revoked,
        paused: fence.paused,
        bound_profile_digest: fence.bound_profile_digest,
        active_profile_digest: fence.active_profile_digest,
        hil: fence.hil,
        epoch,
    };
    let now_held = match held {
        // A late message from before the recorded generation: nothing changes.
        Some(h) if fence.generation < h.generation => h,
        Some(h) if stated(h.epoch) == h => h,
        Some(h) => stated(h.epoch + 1),
        None => stated(1),
    };
    sqlx::query(
        "INSERT INTO pack_fence (pack_name, generation, fenced_at, fenced_by, revoked, paused,
            bound_profile_digest, active_profile_digest, hil, epoch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (pack_name) DO UPDATE SET generation = excluded.generation,
            fenced_at = excluded.fenced_at, fenced_by = excluded.fenced_by,
            revoked = excluded.revoked, paused = excluded.paused,
            bound_profile_digest = excluded.bound_profile_digest,
            active_profile_digest = excluded.active_profile_digest, hil = excluded.hil,
            epoch = excluded.epoch
         WHERE excluded.epoch > pack_fence.epoch",
    )
    .bind(&fence.pack_name)
    .bind(generation_i64(now_held.generation)?)
    .bind(now.0)
    .bind(by)
    .bind(now_held.revoked)
    .bind(now_held.paused)
    .bind(now_held.bound_profile_digest.to_string())
    .bind(now_held.active_profile_digest.to_string())
    .bind(now_held.hil.as_str())
    .bind(generation_i64(now_held.epoch)?)
    .execute(&mut *tx)
    .await?;
    let stale: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM step_grant WHERE pack_name = ?1 AND fence_epoch <> ?2
           AND redeemed_at IS NULL AND voided_at IS NULL AND expires_at > ?3",
    )
    .bind(&fence.pack_name)
    .bind(generation_i64(now_held.epoch)?)
    .bind(now.0)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Fenced {
        current_generation: now_held.generation,
        stale_grants: u32::try_from(stale).unwrap_or(u32::MAX),
        epoch: now_held.epoch,
    })
}

/// What a redemption checks, read together.
struct GrantState {
    record: Option<GrantRecord>,
    standing: Option<Standing>,
    answer: Option<HilAnswer>,
}

impl GrantState {
    fn check(
        &self,
        key: &WardKey,
        token: Option<&PresentedToken>,
        claim: &StepClaim,
        now: UnixMillis,
    ) -> std::result::Result<(), GrantRefusal> {
        grant::check(
            key,
            token,
            self.record.as_ref(),
            self.standing.as_ref(),
            self.answer.as_ref(),
            claim,
            now,
        )
    }
}

/// The pack's standing as fenced, or `None` if core never fenced it.
async fn read_standing(
    conn: &mut sqlx::SqliteConnection,
    pack_name: &str,
) -> Result<Option<Standing>> {
    let Some(row) = sqlx::query("SELECT * FROM pack_fence WHERE pack_name = ?1")
        .bind(pack_name)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let epoch = col_u64(&row, "epoch")?;
    // A row fenced before standings existed (generation only) states nothing: never fenced.
    if epoch == 0 {
        return Ok(None);
    }
    let digest = |col: &str| -> Result<Sha256Digest> {
        row.try_get::<String, _>(col)?
            .parse()
            .map_err(|_| DeskError::Corrupt("fenced profile digest"))
    };
    Ok(Some(Standing {
        generation: col_u64(&row, "generation")?,
        revoked: row.try_get("revoked")?,
        paused: row.try_get("paused")?,
        bound_profile_digest: digest("bound_profile_digest")?,
        active_profile_digest: digest("active_profile_digest")?,
        hil: HilMode::parse(&row.try_get::<String, _>("hil")?)
            .ok_or(DeskError::Corrupt("fenced hil mode"))?,
        epoch,
    }))
}

/// The answer to the HIL request filed at `step`'s plan position, if one was filed.
async fn read_answer(
    conn: &mut sqlx::SqliteConnection,
    step: &StepClaim,
    now: UnixMillis,
) -> Result<Option<HilAnswer>> {
    let Some(row) = sqlx::query(
        "SELECT h.*, EXISTS (SELECT 1 FROM step_grant g WHERE g.hil_request_id = h.id
             AND g.redeemed_at IS NOT NULL) AS spent
         FROM hil_request h WHERE experiment_id = ?1 AND plan_digest = ?2 AND step_index = ?3",
    )
    .bind(&step.experiment_id)
    .bind(step.plan_digest.to_string())
    .bind(i64::from(step.step_index))
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let expires_at = UnixMillis(row.try_get("expires_at")?);
    let state = crate::hil::HilState::at(&row.try_get::<String, _>("state")?, expires_at, now)
        .ok_or(DeskError::Corrupt("hil state"))?;
    Ok(Some(HilAnswer {
        id: HilRequestId::parse(&row.try_get::<String, _>("id")?)
            .ok_or(DeskError::Corrupt("hil request id"))?,
        step: step_claim(&row)?,
        effect_class: EffectClass::parse(&row.try_get::<String, _>("effect_class")?)
            .ok_or(DeskError::Corrupt("hil effect class"))?,
        approved: match state {
            crate::hil::HilState::Approved => Some(true),
            crate::hil::HilState::Denied => Some(false),
            crate::hil::HilState::Pending | crate::hil::HilState::Expired => None,
        },
        expires_at,
        spent: row.try_get("spent")?,
    }))
}

/// The step columns shared by `step_grant` and `hil_request`.
pub(crate) fn step_claim(row: &SqliteRow) -> Result<StepClaim> {
    let digest = |col: &str, what| -> Result<Sha256Digest> {
        row.try_get::<String, _>(col)?
            .parse()
            .map_err(|_| DeskError::Corrupt(what))
    };
    Ok(StepClaim {
        experiment_id: row.try_get("experiment_id")?,
        instance_id: row.try_get("instance_id")?,
        plan_digest: digest("plan_digest", "plan digest")?,
        step_index: u32::try_from(row.try_get::<i64, _>("step_index")?)
            .map_err(|_| DeskError::Corrupt("step index"))?,
        step_digest: digest("step_digest", "step digest")?,
        pack_name: row.try_get("pack_name")?,
        pack_generation: col_u64(row, "pack_generation")?,
    })
}

/// A step as core or the redeemer states it, checked for shape (the digests are typed already).
pub(crate) fn check_claim(step: &StepClaim) -> Result<()> {
    check_id(&step.experiment_id, MAX_ID_BYTES, "experiment_id").map_err(as_bad_request)?;
    check_id(&step.instance_id, MAX_ID_BYTES, "instance_id").map_err(as_bad_request)?;
    check_id(&step.pack_name, MAX_ID_BYTES, "pack_name").map_err(as_bad_request)?;
    generation_i64(step.pack_generation)?;
    Ok(())
}

/// Step grant requests say `grant/bad-request` where the other calls say malformed.
fn as_bad_request(e: DeskError) -> DeskError {
    match e {
        DeskError::Malformed(field) => GrantRefusal::BadRequest(field).into(),
        other => other,
    }
}

/// A pack generation as SQLite stores it.
pub(crate) fn generation_i64(g: u64) -> Result<i64> {
    i64::try_from(g).map_err(|_| GrantRefusal::BadRequest("pack_generation").into())
}
