//! The desk's HIL operations on ward's store: file (core), read, list and watch (operator;
//! core reads one), answer (operator). The types and the one transition are in [`crate::hil`].
//!
//! An answer is one `UPDATE ... WHERE state = 'pending' AND expires_at > now`, committed with
//! `synchronous = FULL`, so of two concurrent answers exactly one lands and a lost answer
//! cannot resurface after a power loss; a database trigger refuses any later change of an
//! answered row.

use std::time::Duration;

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::clock::UnixMillis;
use crate::desk::{Desk, FullSync, check_claim, col_u64, generation_i64, step_claim};
use crate::grant::EffectClass;
use crate::hil::{
    DEFAULT_HIL_TTL, HilFiling, HilRefusal, HilRequest, HilState, MAX_REASON_BYTES, StepAction,
    check_filing, check_text,
};
use crate::ids::HilRequestId;
use crate::refusal::{DeskError, Result};

/// Most requests one list returns (newest dropped first is never right for an operator, so
/// the oldest are returned; a body with more pending requests than this has a bigger problem).
pub const MAX_LISTED: i64 = 500;

impl Desk {
    /// Files `filing` for `by` (core). Filing the same step again (a replay after a restart)
    /// returns the request already filed, answered or not; a different step at the same
    /// experiment and plan position is `hil/conflict`. Watchers hear of a new request.
    pub async fn file_hil_request(&self, by: &str, filing: HilFiling) -> Result<HilRequest> {
        check_claim(&filing.step).map_err(as_hil_bad_request)?;
        check_filing(&filing)?;
        let now = self.clock.now();
        let ttl = filing.ttl.unwrap_or(DEFAULT_HIL_TTL);
        let expires_at = now.plus(ttl);
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let existing = sqlx::query(
            "SELECT * FROM hil_request WHERE experiment_id = ?1 AND plan_digest = ?2
               AND step_index = ?3",
        )
        .bind(&filing.step.experiment_id)
        .bind(filing.step.plan_digest.to_string())
        .bind(i64::from(filing.step.step_index))
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            let held = request_of(&row, now)?;
            return if held.files_the_same(&filing) {
                Ok(held)
            } else {
                Err(HilRefusal::Conflict.into())
            };
        }
        let id = HilRequestId::mint(&self.rng);
        let digest = HilRequest::digest_of(&id, &filing, now, expires_at);
        let seq: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM hil_request")
            .fetch_one(&mut *tx)
            .await?;
        let s = &filing.step;
        sqlx::query(
            "INSERT INTO hil_request (id, seq, digest, experiment_id, instance_id, plan_digest,
                step_index, step_digest, pack_name, pack_generation, effect_class, class_source,
                action, target, argv, diff, rollback, filed_by, filed_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17, ?18, ?19, ?20)",
        )
        .bind(id.as_str())
        .bind(seq)
        .bind(digest.to_string())
        .bind(&s.experiment_id)
        .bind(&s.instance_id)
        .bind(s.plan_digest.to_string())
        .bind(i64::from(s.step_index))
        .bind(s.step_digest.to_string())
        .bind(&s.pack_name)
        .bind(generation_i64(s.pack_generation)?)
        .bind(filing.effect_class.as_str())
        .bind(&filing.class_source)
        .bind(filing.action.as_str())
        .bind(&filing.target)
        .bind(serde_json::to_string(&filing.argv).expect("strings serialize"))
        .bind(&filing.diff)
        .bind(&filing.rollback)
        .bind(by)
        .bind(now.0)
        .bind(expires_at.0)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let seq = u64::try_from(seq).map_err(|_| DeskError::Corrupt("hil seq"))?;
        self.hil_filed.send_replace(seq);
        Ok(HilRequest {
            id,
            digest,
            filing: HilFiling {
                ttl: Some(ttl),
                ..filing
            },
            filed_by: by.to_owned(),
            filed_at: now,
            expires_at,
            state: HilState::Pending,
            answered_at: None,
            answered_by: None,
            reason: String::new(),
            seq,
        })
    }

    /// The request `id` names, as it stands now.
    pub async fn hil_request(&self, id: &str) -> Result<HilRequest> {
        let id = HilRequestId::parse(id).ok_or(HilRefusal::Unknown)?;
        let row = sqlx::query("SELECT * FROM hil_request WHERE id = ?1")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?
            .ok_or(HilRefusal::Unknown)?;
        request_of(&row, self.clock.now())
    }

    /// Requests in filing order: the pending ones (unexpired), or with `all` every one kept.
    pub async fn hil_requests(&self, all: bool) -> Result<Vec<HilRequest>> {
        let now = self.clock.now();
        let rows = if all {
            sqlx::query("SELECT * FROM hil_request ORDER BY seq LIMIT ?1")
                .bind(MAX_LISTED)
                .fetch_all(&self.pool)
                .await?
        } else {
            self.pending_rows(0, now).await?
        };
        rows.iter().map(|r| request_of(r, now)).collect()
    }

    /// Pending, unexpired requests filed after `seq`, in filing order.
    pub async fn hil_pending_after(&self, seq: u64) -> Result<Vec<HilRequest>> {
        let now = self.clock.now();
        let rows = self.pending_rows(seq, now).await?;
        rows.iter().map(|r| request_of(r, now)).collect()
    }

    async fn pending_rows(&self, after: u64, now: UnixMillis) -> Result<Vec<SqliteRow>> {
        Ok(sqlx::query(
            "SELECT * FROM hil_request WHERE state = 'pending' AND expires_at > ?1 AND seq > ?2
             ORDER BY seq LIMIT ?3",
        )
        .bind(now.0)
        .bind(generation_i64(after)?)
        .bind(MAX_LISTED)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Wakes whenever a request is filed (its value is the newest filing sequence).
    pub fn hil_filings(&self) -> tokio::sync::watch::Receiver<u64> {
        self.hil_filed.subscribe()
    }

    /// `by` (the operator) answers request `id`, which they were shown with `digest`. The
    /// first answer stands: a second is `hil/answered` (naming the first), an answer after
    /// expiry `hil/expired`, a digest that is not the request's `hil/other-request`. A denial
    /// needs a reason.
    pub async fn answer_hil_request(
        &self,
        by: &str,
        id: &str,
        digest: &str,
        approve: bool,
        reason: &str,
    ) -> Result<HilRequest> {
        check_text(reason, MAX_REASON_BYTES, false, "reason")?;
        if !approve && reason.trim().is_empty() {
            return Err(HilRefusal::BadRequest("reason").into());
        }
        let held = self.hil_request(id).await?;
        if held.digest.to_string() != digest {
            return Err(HilRefusal::OtherRequest.into());
        }
        let answered = held.state.answer(approve)?;
        let now = self.clock.now();
        let mut conn = FullSync::acquire(&self.pool).await?;
        let changed = sqlx::query(
            "UPDATE hil_request SET state = ?2, answered_at = ?3, answered_by = ?4, reason = ?5
             WHERE id = ?1 AND state = 'pending' AND expires_at > ?3",
        )
        .bind(held.id.as_str())
        .bind(answered.as_str())
        .bind(now.0)
        .bind(by)
        .bind(reason)
        .execute(&mut *conn.0)
        .await
        .map(|r| r.rows_affected());
        conn.release().await;
        let after = self.hil_request(id).await?;
        if changed? != 1 {
            // Another answer won, or the request expired, since the read above.
            return Err(after
                .state
                .answer(approve)
                .err()
                .unwrap_or(HilRefusal::Expired)
                .into());
        }
        Ok(after)
    }
}

fn as_hil_bad_request(e: DeskError) -> DeskError {
    match e {
        DeskError::Malformed(field) | DeskError::Grant(crate::GrantRefusal::BadRequest(field)) => {
            HilRefusal::BadRequest(field).into()
        }
        other => other,
    }
}

fn request_of(row: &SqliteRow, now: UnixMillis) -> Result<HilRequest> {
    let expires_at = UnixMillis(row.try_get("expires_at")?);
    let filed_at = UnixMillis(row.try_get("filed_at")?);
    let state = HilState::at(&row.try_get::<String, _>("state")?, expires_at, now)
        .ok_or(DeskError::Corrupt("hil state"))?;
    let argv: Vec<String> = serde_json::from_str(&row.try_get::<String, _>("argv")?)
        .map_err(|_| DeskError::Corrupt("hil argv"))?;
    let ttl =
        u64::try_from(expires_at.0 - filed_at.0).map_err(|_| DeskError::Corrupt("hil expiry"))?;
    Ok(HilRequest {
        id: HilRequestId::parse(&row.try_get::<String, _>("id")?)
            .ok_or(DeskError::Corrupt("hil request id"))?,
        digest: row
            .try_get::<String, _>("digest")?
            .parse()
            .map_err(|_| DeskError::Corrupt("hil digest"))?,
        filing: HilFiling {
            step: step_claim(row)?,
            effect_class: EffectClass::parse(&row.try_get::<String, _>("effect_class")?)
                .ok_or(DeskError::Corrupt("hil effect class"))?,
            class_source: row.try_get("class_source")?,
            action: StepAction::parse(&row.try_get::<String, _>("action")?)
                .ok_or(DeskError::Corrupt("hil action"))?,
            target: row.try_get("target")?,
            argv,
            diff: row.try_get("diff")?,
            rollback: row.try_get("rollback")?,
            ttl: Some(Duration::from_millis(ttl)),
        },
        filed_by: row.try_get("filed_by")?,
        filed_at,
        expires_at,
        state,
        answered_at: row
            .try_get::<Option<i64>, _>("answered_at")?
            .map(UnixMillis),
        answered_by: row.try_get("answered_by")?,
        reason: row.try_get("reason")?,
        seq: col_u64(row, "seq")?,
    })
}
