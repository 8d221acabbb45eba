//! Rate limits per application, guild, channel and subject, in fixed and sliding windows.

mod common;

use std::time::Duration;

use common::*;
use reach_ward_desk::{Dimension, RateLimits, Refusal, WardPolicy, Window};

const MINUTE: Duration = Duration::from_secs(60);
const LOOSE: Window = Window::fixed(10_000, MINUTE);

fn only(dimension: Dimension, w: Window) -> WardPolicy {
    let mut limits = RateLimits {
        application: LOOSE,
        guild: LOOSE,
        channel: LOOSE,
        subject: LOOSE,
    };
    match dimension {
        Dimension::Application => limits.application = w,
        Dimension::Guild => limits.guild = w,
        Dimension::Channel => limits.channel = w,
        Dimension::Subject => limits.subject = w,
    }
    WardPolicy {
        rate_limits: limits,
        ..WardPolicy::default()
    }
}

/// The n-th event that repeats only `dimension`'s key (and everything above it).
fn nth(dimension: Dimension, n: usize) -> reach_ward_desk::GuestEvent {
    let mut e = event(&format!("g{n}"), &format!("c{n}"), &format!("u{n}"));
    match dimension {
        Dimension::Application => {}
        Dimension::Guild => e.guild = "g-same".into(),
        Dimension::Channel => (e.guild, e.channel) = ("g-same".into(), "c-same".into()),
        // The same person asking in different guilds and channels of one application.
        Dimension::Subject => e.subject = "u-same".into(),
    }
    e
}

#[tokio::test]
async fn each_dimension_refuses_past_its_limit_and_names_itself() {
    for dimension in Dimension::ALL {
        let f = Fixture::with_policy(only(dimension, Window::fixed(3, MINUTE))).await;
        for n in 0..3 {
            f.desk
                .admit(CORE, nth(dimension, n), run_ref(&format!("r{n}")))
                .await
                .unwrap();
        }
        let r = f.desk.admit(CORE, nth(dimension, 3), run_ref("r3")).await;
        assert_eq!(refusal(r), Refusal::RateLimited(dimension), "{dimension}");
        // Refused events consume no quota and mint no Sigil.
        let r = f.desk.admit(CORE, nth(dimension, 4), run_ref("r3")).await;
        assert_eq!(refusal(r), Refusal::RateLimited(dimension), "{dimension}");
        // Another key on the same dimension is untouched (the application has only one key).
        if dimension != Dimension::Application {
            let fresh = event("g-other", "c-other", "u-other");
            f.desk.admit(CORE, fresh, run_ref("r-other")).await.unwrap();
        }
    }
}

#[tokio::test]
async fn fixed_window_resets_at_its_boundary() {
    let f = Fixture::with_policy(only(Dimension::Subject, Window::fixed(2, MINUTE))).await;
    // START is not on a minute boundary; move to one so the window arithmetic is visible.
    let into = START.0.rem_euclid(60_000);
    f.advance(Duration::from_millis(u64::try_from(60_000 - into).unwrap()));
    f.advance(Duration::from_secs(50));
    for n in 0..2 {
        f.desk
            .admit(CORE, nth(Dimension::Subject, n), run_ref(&format!("r{n}")))
            .await
            .unwrap();
    }
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, nth(Dimension::Subject, 2), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Subject)
    );
    f.advance(Duration::from_secs(10)); // next window
    f.desk
        .admit(CORE, nth(Dimension::Subject, 3), run_ref("r3"))
        .await
        .unwrap();
}

#[tokio::test]
async fn sliding_window_weighs_the_previous_window() {
    let f = Fixture::with_policy(only(Dimension::Subject, Window::sliding(2, MINUTE))).await;
    let into = START.0.rem_euclid(60_000);
    f.advance(Duration::from_millis(u64::try_from(60_000 - into).unwrap()));
    f.advance(Duration::from_secs(50));
    for n in 0..2 {
        f.desk
            .admit(CORE, nth(Dimension::Subject, n), run_ref(&format!("r{n}")))
            .await
            .unwrap();
    }
    // 10 s into the next window: 2 × 50/60 + 1 > 2, refused (a fixed window would admit).
    f.advance(Duration::from_secs(20));
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, nth(Dimension::Subject, 2), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Subject)
    );
    // 50 s into it: 2 × 10/60 + 1 ≤ 2, admitted.
    f.advance(Duration::from_secs(40));
    f.desk
        .admit(CORE, nth(Dimension::Subject, 3), run_ref("r3"))
        .await
        .unwrap();
}

#[tokio::test]
async fn narrowest_dimension_is_named_when_several_are_exhausted() {
    let policy = WardPolicy {
        rate_limits: RateLimits {
            application: Window::fixed(1, MINUTE),
            guild: Window::fixed(1, MINUTE),
            channel: Window::fixed(1, MINUTE),
            subject: Window::fixed(1, MINUTE),
        },
        ..WardPolicy::default()
    };
    let f = Fixture::with_policy(policy).await;
    f.desk
        .admit(CORE, event("g", "c", "u"), run_ref("r1"))
        .await
        .unwrap();
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, event("g", "c", "u"), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Subject)
    );
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, event("g", "c", "v"), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Channel)
    );
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, event("g", "d", "v"), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Guild)
    );
    assert_eq!(
        refusal(
            f.desk
                .admit(CORE, event("h", "d", "v"), run_ref("r2"))
                .await
        ),
        Refusal::RateLimited(Dimension::Application)
    );
}

#[tokio::test]
async fn purge_drops_dead_counters_and_old_records() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    f.issue(&a, "att-1", b"p").await.unwrap();
    let p = f.desk.purge().await.unwrap();
    assert_eq!((p.counters, p.sigils), (0, 0));
    f.advance(Duration::from_secs(25 * 3600));
    let p = f.desk.purge().await.unwrap();
    assert_eq!((p.counters, p.sigils), (4, 1));
}
