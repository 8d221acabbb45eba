//! Kill core mid-turn: on restart the turn finishes once (or ends INDETERMINATE); a Discord user
//! never sees two replies.

use std::time::{Duration, Instant};

use reach_discord_emulator::User;
use reach_tests::TestBody;

const CHANNEL: u64 = 1_100_000_000_000_000_200;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_core_mid_turn_never_doubles_the_reply() {
    let (mut body, em) = TestBody::start_with_discord(CHANNEL).await;
    let _operator = body.operator_after_genesis("crash drill").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_500, "asker");

    // Several questions; core dies while they are in flight, wherever each one is.
    let mut asked = Vec::new();
    for q in [
        "How does a port authenticate a call?",
        "How do I rotate the trust root?",
        "What happens when a vault is lost?",
    ] {
        asked.push(em.post_user_message(CHANNEL, &asker, &format!("<@{bot}> {q}")));
    }
    let running = body.body.as_mut().unwrap();
    running.kill_role("core").await.expect("core was running");
    running.start_role("core").await.expect("core restarts");

    // The gateway resumes and redelivers the recent events; the ledger answers replays.
    em.script_redelivery_on_resume(asked.len() as u64);
    assert!(em.drop_connection());

    let deadline = Instant::now() + WAIT;
    loop {
        let replies = em.bot_messages(CHANNEL);
        let per_question: Vec<usize> = asked
            .iter()
            .map(|q| replies.iter().filter(|m| m.reply_to == Some(*q)).count())
            .collect();
        assert!(
            per_question.iter().all(|&n| n <= 1),
            "a question got two replies: {per_question:?}"
        );
        if per_question.iter().all(|&n| n == 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every question was answered after the restart: {per_question:?}\n{}",
            body.log("core")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Settle time for any late duplicate to show up, then the count must still be one each.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for q in &asked {
        let n = em
            .bot_messages(CHANNEL)
            .iter()
            .filter(|m| m.reply_to == Some(*q))
            .count();
        assert_eq!(n, 1, "question {q} must have exactly one reply");
    }
    body.stop().await;
}
