//! A vault written by ledger version 3 upgrades in place: migration 4 rebuilds the intent and
//! delivery tables on SQLite (the documented table-rebuild procedure), migration 5 adds the
//! claim-order index and migration 9 rebuilds the admission table, keeping every row, state and
//! rule. A vault whose applied migration differs from this build's is refused, keeping its rows.

mod common;

use std::sync::Arc;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

const V3: [(i64, &str, &str); 3] = [
    (
        1,
        "ledger",
        include_str!("../migrations/sqlite/0001_ledger.sql"),
    ),
    (
        2,
        "outbox_guards",
        include_str!("../migrations/sqlite/0002_outbox_guards.sql"),
    ),
    (
        3,
        "chain_statements",
        include_str!("../migrations/sqlite/0003_chain_statements.sql"),
    ),
];

/// Writes a version-3 vault by hand, as the runner of that version did, with two intents: one
/// KNOWN_SENT with its ReachDelivery@1, one CLAIMED.
async fn version_3_vault(path: &std::path::Path) {
    let opts = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true);
    let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE phylactery_migration (version BIGINT PRIMARY KEY, name TEXT NOT NULL,
            digest TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    for (version, name, sql) in V3 {
        sqlx::raw_sql(sql).execute(&pool).await.unwrap();
        sqlx::query("INSERT INTO phylactery_migration VALUES ($1, $2, $3, $4)")
            .bind(version)
            .bind(name)
            .bind(Sha256Digest::of(sql.as_bytes()).to_string())
            .bind(T0.0)
            .execute(&pool)
            .await
            .unwrap();
    }
    for (n, state) in [(1, "sent"), (2, "claimed")] {
        let (adm, turn, intent) = (format!("adm_{n}"), format!("turn_{n}"), format!("int_{n}"));
        sqlx::query(
            "INSERT INTO discord_event_admission (admission_id, platform, adapter_revision,
                application_id, event_kind, external_event_id, payload_digest, habitat, admitted_at)
             VALUES ($1, 'discord', 'r', 'app', 'MESSAGE_CREATE', $2, 'd', 'h', $3)",
        )
        .bind(&adm)
        .bind(format!("ev-{n}"))
        .bind(T0.0)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO turn_commit (turn_id, outcome, reason, answer_digest, terminal_at,
                intent_id, effect, payload_digest, nonce)
             VALUES ($1, 'SUCCEEDED', NULL, 'a', $2, $3, 'create_message', $4, $5)",
        )
        .bind(&turn)
        .bind(T0.0)
        .bind(&intent)
        .bind(Sha256Digest::of(b"body").to_string())
        .bind(format!("nonce-{n}"))
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "UPDATE discord_delivery_intent SET state = 'CLAIMED', generation = 1,
                lease_owner = 'egress-discord', lease_expires_at = $1 WHERE intent_id = $2",
        )
        .bind(T0.0 + 1_000)
        .bind(&intent)
        .execute(&pool)
        .await
        .unwrap();
        if state == "sent" {
            sqlx::query(
                "UPDATE discord_delivery_intent SET state = 'SUBMITTING', submitting_at = $1
                 WHERE intent_id = $2",
            )
            .bind(T0.0)
            .bind(&intent)
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce,
                    claim_generation, platform_status, message_id, detail, settled_at)
                 SELECT intent_id, 'KNOWN_SENT', effect, payload_digest, nonce, generation, 200,
                    'm-1', NULL, $1 FROM discord_delivery_intent WHERE intent_id = $2",
            )
            .bind(T0.0)
            .bind(&intent)
            .execute(&pool)
            .await
            .unwrap();
        }
    }
    pool.close().await;
}

#[tokio::test]
async fn a_version_3_sqlite_vault_upgrades_keeping_every_row_and_rule() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.sqlite");
    version_3_vault(&path).await;

    let clock = ManualClock::new(T0);
    let p = Phylactery::open(VaultConfig::sqlite(&path), Arc::new(clock.clone()))
        .await
        .expect("the version-3 vault opens and migrates");
    genesis(&p).await;
    let sent = p.intent(&IntentId("int_1".into())).await.unwrap();
    assert_eq!(sent.state, IntentState::KnownSent);
    assert_eq!(sent.nonce, "nonce-1");
    let claimed = p.intent(&IntentId("int_2".into())).await.unwrap();
    assert_eq!(
        (claimed.state, claimed.generation),
        (IntentState::Claimed, 1)
    );

    // The migrated tables keep their rules and gain NOT_ATTEMPTED: the lapsed claim is taken
    // again through the new index, and ends NOT_ATTEMPTED; the sent one is never handed out.
    clock.advance(LEASE);
    let again = p
        .claim_next("egress-discord", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.lease.intent_id.0.as_str(), again.lease.generation),
        ("int_2", 2)
    );
    p.settle_not_attempted(&again.lease, "sigil/expired")
        .await
        .unwrap();
    assert!(
        p.claim_next("egress-discord", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        p.intent(&IntentId("int_2".into())).await.unwrap().state,
        IntentState::NotAttempted
    );

    // Migration 9 rebuilt the admission table: its rows, its key and its triggers are kept. The
    // version-3 admission is found by its event id, its key still refuses a different payload,
    // and a new admission still opens its turn.
    let trail = p
        .trail(&TrailKey::ExternalEventId("ev-1".into()))
        .await
        .unwrap();
    assert!(!trail.is_empty(), "the version-3 admission is in the trail");
    let replay = AdmissionRequest {
        key: EventKey {
            platform: "discord".into(),
            adapter_revision: "r".into(),
            application_id: "app".into(),
            event_kind: "MESSAGE_CREATE".into(),
            external_event_id: "ev-1".into(),
        },
        payload_digest: Sha256Digest::of(b"another payload"),
        habitat: "h".into(),
    };
    match p.admit(&replay).await.unwrap_err() {
        LedgerError::SecurityFault { admission_id, .. } => assert_eq!(admission_id, "adm_1"),
        e => panic!("expected a security fault, got {e}"),
    }
    let fresh = p.admit(&request(3)).await.unwrap();
    assert_eq!(
        p.turn_state(&fresh.status().turn_id).await.unwrap(),
        TurnState::Open
    );
}

/// Runs `sql` on the vault's own database, bypassing the Phylactery; returns the rows changed.
async fn raw(cfg: &VaultConfig, sql: &'static str) -> u64 {
    match &cfg.location {
        StoreLocation::Sqlite { path } => {
            let pool = sqlx::SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
                .await
                .unwrap();
            let n = sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
            n.rows_affected()
        }
        StoreLocation::Postgres { url, schema } => {
            let opts: PgConnectOptions = url.parse().unwrap();
            let opts = opts.options([("search_path", schema.as_deref().unwrap())]);
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect_with(opts)
                .await
                .unwrap();
            let n = sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
            n.rows_affected()
        }
    }
}

/// An applied migration whose recorded digest is not this build's script (an edited migration,
/// or a vault written by a diverging build) refuses the open with `vault/migration-mismatch`;
/// the vault's rows are untouched and serve again once the record matches.
async fn an_edited_applied_migration_refuses_the_open(db: Db) {
    let (cfg, _guard) = config(db, "migration_mismatch");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    genesis(&p).await;
    let intent = admitted_intent(&p, 1).await;
    p.close().await;
    drop(p);

    assert_eq!(
        raw(
            &cfg,
            "UPDATE phylactery_migration SET digest = 'sha256:edited' || digest WHERE version = 2"
        )
        .await,
        1
    );
    let err = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .expect_err("a vault with an edited migration must not open");
    assert_eq!(err.code(), "vault/migration-mismatch", "{err}");
    match err {
        LedgerError::MigrationMismatch { version, name } => {
            assert_eq!((version, name.as_str()), (2, "outbox_guards"))
        }
        e => panic!("expected a migration mismatch, got {e}"),
    }

    // The refusal changed nothing: restoring the record opens the vault with its rows intact.
    assert_eq!(
        raw(
            &cfg,
            "UPDATE phylactery_migration SET digest = substr(digest, 14) WHERE version = 2"
        )
        .await,
        1
    );
    let p = Phylactery::open(cfg, Arc::new(clock))
        .await
        .expect("the restored vault opens");
    let record = p.intent(&intent).await.unwrap();
    assert_eq!(record.state, IntentState::Pending);
    assert_eq!(
        p.turn_state(&record.turn_id).await.unwrap(),
        TurnState::Succeeded
    );
    p.close().await;
}

on_both!(an_edited_applied_migration_refuses_the_open);
