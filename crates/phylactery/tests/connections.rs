//! PostgreSQL connections of the vault (`backend::PgLane`): a connection the server dropped
//! fails the one statement that meets it, is not handed out again, and the next statement runs
//! on a fresh connection; nothing is half-applied. Both lanes are met: the synchronous one
//! (synced writes and reads) and the asynchronous one (deferred writes). (SQLite has no server
//! to drop it.)

mod common;

use std::sync::Arc;

use common::*;
use reach_phylactery::*;
use sqlx::postgres::PgPoolOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_dropped_is_replaced() {
    // The vault's connections carry a name of their own, so only they are terminated (other
    // tests share the server).
    let app = unique_schema("lane");
    let url = pg_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let vault_url = format!("{url}{sep}application_name={app}");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(
        VaultConfig::postgres(vault_url, Some(app.clone())),
        Arc::new(clock.clone()),
    )
    .await
    .unwrap();
    genesis(&p).await;
    let i1 = admitted_intent(&p, 1).await;
    let c1 = p.claim(&i1, "edge", LEASE).await.unwrap();

    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let terminated: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = $1) AS t",
    )
    .bind(&app)
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(terminated >= 2, "the vault's connections were found");
    // The server closes the sockets asynchronously; wait until none of them is listed.
    for _ in 0..200 {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
                .bind(&app)
                .fetch_one(&admin)
                .await
                .unwrap();
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // The synchronous lane's connection is gone: the first statement that meets it (a synced
    // SUBMITTING) fails as a database error and wrote nothing, and the next statement on that
    // lane (a read) runs on a fresh connection.
    let err = p.mark_submitting(&c1.lease).await.unwrap_err();
    assert_eq!(err.code(), "ledger/database", "{err}");
    assert_eq!(p.intent(&i1).await.unwrap().state, IntentState::Claimed);
    p.mark_submitting(&c1.lease).await.unwrap();
    // So is the asynchronous lane's: the first deferred write (the settlement) fails the same
    // way, and the chain goes on where it was, on a fresh connection.
    let err = p.settle(&c1.lease, &sent(1)).await.unwrap_err();
    assert_eq!(err.code(), "ledger/database", "{err}");
    assert_eq!(p.intent(&i1).await.unwrap().state, IntentState::Submitting);
    assert_eq!(
        p.settle(&c1.lease, &sent(1)).await.unwrap(),
        IntentState::KnownSent
    );
    // A second chain runs on the replaced connections without error.
    let i2 = admitted_intent(&p, 2).await;
    let c2 = p.claim(&i2, "edge", LEASE).await.unwrap();
    p.mark_submitting(&c2.lease).await.unwrap();
    p.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA \"{app}\" CASCADE"
    )))
    .execute(&admin)
    .await
    .unwrap();
}
