//! Subjects are pseudonymized by a keyed hash before anything is stored; the raw id never
//! reaches ward's files.

mod common;

use std::sync::Arc;

use common::*;
use reach_ward_desk::{Desk, ManualClock, WardKey, WardPolicy};

/// A subject id that cannot occur by accident in SQLite pages.
const RAW_SUBJECT: &str = "subject-481516234271828";

#[tokio::test]
async fn same_subject_same_pseudonym_and_raw_id_is_never_stored() {
    let f = Fixture::new().await;
    let a = f
        .desk
        .admit(CORE, event("g1", "c1", RAW_SUBJECT), run_ref("r1"))
        .await
        .unwrap();
    let b = f
        .desk
        .admit(CORE, event("g2", "c9", RAW_SUBJECT), run_ref("r2"))
        .await
        .unwrap();
    let c = f
        .desk
        .admit(CORE, event("g1", "c1", "someone-else"), run_ref("r3"))
        .await
        .unwrap();
    assert_eq!(
        a.scope.subject, b.scope.subject,
        "same subject, same pseudonym across scopes"
    );
    assert_ne!(a.scope.id, b.scope.id);
    assert_ne!(a.scope.subject, c.scope.subject);
    assert!(a.scope.subject.as_str().starts_with("psn_"));
    for s in [&a, &b, &c] {
        assert!(!format!("{s:?}").contains(RAW_SUBJECT));
    }
    let d = f.issue(&a, "att-1", b"answer").await.unwrap();
    f.desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            DISCORD_REST,
            &reach_digest::Sha256Digest::of(b"answer"),
        )
        .await
        .unwrap();

    // A second desk on the same key maps the subject to the same pseudonym; another key does not.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let same_key = Desk::open(
        &dir.path().join("a.sqlite3"),
        WardKey::from_bytes(&[7; 32]).unwrap(),
        WardPolicy::default(),
        clock.clone(),
    )
    .await
    .unwrap();
    let other_key = Desk::open(
        &dir.path().join("b.sqlite3"),
        WardKey::from_bytes(&[8; 32]).unwrap(),
        WardPolicy::default(),
        clock,
    )
    .await
    .unwrap();
    let x = same_key
        .admit(CORE, event("g1", "c1", RAW_SUBJECT), run_ref("r1"))
        .await
        .unwrap();
    let y = other_key
        .admit(CORE, event("g1", "c1", RAW_SUBJECT), run_ref("r1"))
        .await
        .unwrap();
    assert_eq!(x.scope, a.scope);
    assert_ne!(y.scope.subject, a.scope.subject);

    // Every byte ward wrote: the database, its WAL and shared memory, before and after close.
    // Positive control: the scan does see what ward stores (the Sigil id, the pseudonymous
    // scope id), so its silence about the raw subject id means something.
    let contains =
        |hay: &[u8], needle: &str| hay.windows(needle.len()).any(|w| w == needle.as_bytes());
    let scan = |when: &str| {
        let mut all = Vec::new();
        for entry in std::fs::read_dir(f.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !contains(&bytes, RAW_SUBJECT),
                "{when}: raw subject id found in {}",
                path.display()
            );
            all.extend(bytes);
        }
        assert!(
            contains(&all, a.sigil.id.as_str()),
            "{when}: control value not found"
        );
        assert!(
            contains(&all, a.scope.id.as_str()),
            "{when}: control value not found"
        );
    };
    scan("open");
    f.desk.close().await;
    scan("closed");
}
