//! Quarantine of a peer's answer before adoption (seed 001, step 8, applied to A2A): a peer is
//! another party's agent, so what it returns is judged like a model's return — schema, size,
//! privacy, output class, in that order — and the first failed check is the refusal. The codes
//! are the Portal's ([`reach_portal::Quarantine`]), so a quarantined answer reads the same
//! whichever egress produced it; the checks are A2A's (parts instead of a completion, no
//! citations: a peer's answer is not grounded in Reach's corpus).
//!
//! An answer that fails is not adopted: core settles the turn REFUSED with the code and keeps
//! neither the text nor its digest as the turn's answer.

use reach_portal::Quarantine;
use reach_portal::cut::contains_sigil;

use crate::task::Answer;
use crate::wire::{Part, TaskState};

/// Most text an adopted answer may hold, in bytes (all text parts together).
pub const MAX_ANSWER_BYTES: usize = 8 * 1024;
/// Most parts an answer may have (artifacts' parts and the status message's together).
pub const MAX_ANSWER_PARTS: usize = 16;

/// Media types a text part may declare (absent means text).
const TEXT_TYPES: [&str; 2] = ["text/plain", "text/markdown"];

/// Judges a settled task's answer; on success returns the text that may be adopted.
///
/// - schema: every part is a text part (no `data`, `url`, `raw` or other media type), and at
///   most [`MAX_ANSWER_PARTS`] of them → [`Quarantine::Schema`];
/// - size: at most [`MAX_ANSWER_BYTES`] of text → [`Quarantine::OverLong`]; none →
///   [`Quarantine::Empty`];
/// - privacy: no Sigil, no credential-shaped token, no e-mail address →
///   [`Quarantine::Privacy`];
/// - output class: plain text, no mention syntax, no control characters but newline and tab
///   → [`Quarantine::OutputClass`].
pub fn quarantine_answer(answer: &Answer) -> Result<String, Quarantine> {
    judge(&answer_parts(answer))
}

/// Judges the peer's status message of a task it settled `TASK_STATE_FAILED`,
/// `TASK_STATE_REJECTED` or `TASK_STATE_INPUT_REQUIRED` (issue #33 item 7) by exactly the
/// checks of an answer ([`quarantine_answer`]); `None` for any other answer or a task without
/// a status message. The text that passes is for the operator only (`reach a2a status`), never
/// adopted as the turn's answer and never shown to a Discord user.
pub fn quarantine_status_message(answer: &Answer) -> Option<Result<String, Quarantine>> {
    let Answer::Task(t) = answer else {
        return None;
    };
    if !matches!(
        t.status.state,
        TaskState::Failed | TaskState::Rejected | TaskState::InputRequired
    ) {
        return None;
    }
    let message = t.status.message.as_ref()?;
    Some(judge(&message.parts.iter().collect::<Vec<_>>()))
}

/// The checks, in order, over the parts of peer content.
fn judge(parts: &[&Part]) -> Result<String, Quarantine> {
    if parts.len() > MAX_ANSWER_PARTS || !parts.iter().all(|p| is_text_part(p)) {
        return Err(Quarantine::Schema);
    }
    let mut text = String::new();
    for p in parts {
        let t = p.text.as_deref().unwrap_or_default();
        if text.len() + t.len() > MAX_ANSWER_BYTES {
            return Err(Quarantine::OverLong);
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(t);
    }
    let text = text.trim();
    if text.is_empty() {
        return Err(Quarantine::Empty);
    }
    if contains_sigil(text) || contains_credential(text) || contains_email(text) {
        return Err(Quarantine::Privacy);
    }
    if !plain_text(text) {
        return Err(Quarantine::OutputClass);
    }
    Ok(text.to_owned())
}

/// The parts of the final content: a task's artifacts, then its status message; or a direct
/// message's parts.
fn answer_parts(answer: &Answer) -> Vec<&Part> {
    match answer {
        Answer::Task(t) => t
            .artifacts
            .iter()
            .flat_map(|a| a.parts.iter())
            .chain(t.status.message.iter().flat_map(|m| m.parts.iter()))
            .collect(),
        Answer::Message(m) => m.parts.iter().collect(),
    }
}

fn is_text_part(p: &Part) -> bool {
    p.text.is_some()
        && p.data.is_none()
        && p.url.is_none()
        && p.media_type
            .as_deref()
            .is_none_or(|m| TEXT_TYPES.contains(&m))
}

/// A credential-shaped token: provider API keys (`sk-`), GitHub tokens (`ghp_`, `gho_`,
/// `github_pat_`), Slack tokens (`xoxb-`, `xoxp-`), AWS access key ids (`AKIA` + 16), a PEM
/// private key, or a bearer token. Each prefix must be followed by a run of key characters
/// long enough that prose does not match.
fn contains_credential(text: &str) -> bool {
    const PREFIXED: [(&str, usize); 8] = [
        ("sk-", 20),
        ("ghp_", 20),
        ("gho_", 20),
        ("github_pat_", 20),
        ("xoxb-", 10),
        ("xoxp-", 10),
        ("AKIA", 16),
        ("Bearer ", 20),
    ];
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        return true;
    }
    PREFIXED.iter().any(|(prefix, min)| {
        text.match_indices(prefix).any(|(i, _)| {
            text[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .count()
                >= *min
        })
    })
}

/// An e-mail address: `local@domain.tld` with a non-empty local part and a dotted domain.
fn contains_email(text: &str) -> bool {
    let is_local = |c: char| c.is_ascii_alphanumeric() || "._%+-".contains(c);
    let is_domain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    text.match_indices('@').any(|(i, _)| {
        let local = text[..i].chars().rev().take_while(|&c| is_local(c)).count();
        let domain: String = text[i + 1..]
            .chars()
            .take_while(|&c| is_domain(c))
            .collect();
        let domain = domain.trim_end_matches('.');
        let labels: Vec<&str> = domain.split('.').collect();
        local > 0
            && labels.len() >= 2
            && labels.iter().all(|l| !l.is_empty())
            && labels
                .last()
                .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
    })
}

/// Plain text: no Discord mention syntax, no control characters but newline and tab.
fn plain_text(text: &str) -> bool {
    const REFUSED: [&str; 4] = ["<@", "<#", "@everyone", "@here"];
    !REFUSED.iter().any(|r| text.contains(r))
        && text
            .chars()
            .all(|c| !c.is_control() || c == '\n' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Artifact, Message, Role, Task, TaskState, TaskStatus};

    fn task(parts: Vec<Part>) -> Answer {
        Answer::Task(Task {
            id: "r1".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            artifacts: vec![Artifact {
                artifact_id: "a".into(),
                name: None,
                parts,
            }],
            history: vec![],
        })
    }

    fn text(t: &str) -> Answer {
        task(vec![Part::text(t)])
    }

    #[test]
    fn a_plain_text_answer_is_adopted() {
        assert_eq!(
            quarantine_answer(&text("  Leases are generation-fenced.\n")),
            Ok("Leases are generation-fenced.".to_owned())
        );
        let m = Answer::Message(Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::Agent,
            parts: vec![Part::text("one"), Part::text("two")],
        });
        assert_eq!(quarantine_answer(&m), Ok("one\ntwo".to_owned()));
        // Prose that only looks near a credential or an address passes.
        for ok in [
            "ask sk-short or mail at example dot com",
            "the @ sign alone, a@b, x@localhost",
            "tab\tand newline\n",
        ] {
            assert!(quarantine_answer(&text(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn each_failed_check_has_its_code() {
        let data = Part {
            data: Some(serde_json::json!({"k": 1})),
            ..Part::default()
        };
        let url = Part {
            url: Some("https://example.test/x".into()),
            ..Part::default()
        };
        let html = Part {
            media_type: Some("text/html".into()),
            ..Part::text("<b>x</b>")
        };
        let cases: Vec<(Answer, Quarantine)> = vec![
            (task(vec![data]), Quarantine::Schema),
            (task(vec![url]), Quarantine::Schema),
            (task(vec![html]), Quarantine::Schema),
            (task(vec![Part::default()]), Quarantine::Schema),
            (
                task((0..=MAX_ANSWER_PARTS).map(|_| Part::text("x")).collect()),
                Quarantine::Schema,
            ),
            (
                text(&"a".repeat(MAX_ANSWER_BYTES + 1)),
                Quarantine::OverLong,
            ),
            (text("   "), Quarantine::Empty),
            (task(vec![]), Quarantine::Empty),
            (
                text(&format!("sigil_{}", "ab".repeat(16))),
                Quarantine::Privacy,
            ),
            (text("key sk-abcdefghijklmnopqrstuvwx"), Quarantine::Privacy),
            (text("ghp_0123456789abcdefghijABCD"), Quarantine::Privacy),
            (text("id AKIAABCDEFGHIJKLMNOP"), Quarantine::Privacy),
            (text("-----BEGIN RSA PRIVATE KEY-----"), Quarantine::Privacy),
            (
                text("write to jane.doe+x@example.org today"),
                Quarantine::Privacy,
            ),
            (text("hello <@123>"), Quarantine::OutputClass),
            (text("ping @everyone"), Quarantine::OutputClass),
            (text("bell \u{7}"), Quarantine::OutputClass),
        ];
        for (answer, want) in cases {
            assert_eq!(quarantine_answer(&answer), Err(want), "{answer:?}");
        }
    }

    #[test]
    fn a_status_message_is_judged_like_an_answer_for_failed_rejected_and_input_required() {
        let with = |state: TaskState, parts: Vec<Part>| {
            Answer::Task(Task {
                id: "t".into(),
                context_id: "c".into(),
                status: TaskStatus {
                    state,
                    message: Some(Message {
                        message_id: "s".into(),
                        context_id: None,
                        task_id: None,
                        role: Role::Agent,
                        parts,
                    }),
                    timestamp: None,
                },
                artifacts: vec![],
                history: vec![],
            })
        };
        for state in [
            TaskState::Failed,
            TaskState::Rejected,
            TaskState::InputRequired,
        ] {
            assert_eq!(
                quarantine_status_message(&with(state, vec![Part::text(" disk full ")])),
                Some(Ok("disk full".to_owned()))
            );
            assert_eq!(
                quarantine_status_message(&with(state, vec![Part::text("mail a@example.org")])),
                Some(Err(Quarantine::Privacy))
            );
            assert_eq!(
                quarantine_status_message(&with(state, vec![Part::text("a".repeat(9_000))])),
                Some(Err(Quarantine::OverLong))
            );
        }
        // Not for a completed or cancelled task, nor a task without a status message.
        for state in [TaskState::Completed, TaskState::Canceled] {
            assert_eq!(
                quarantine_status_message(&with(state, vec![Part::text("x")])),
                None
            );
        }
        assert_eq!(quarantine_status_message(&text("x")), None);
    }
}
