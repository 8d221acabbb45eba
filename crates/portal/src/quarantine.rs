//! Quarantine: a provider's return is judged before adoption (seed 001, step 8) — protocol and
//! schema, correlation, terminal reason, size, privacy, output class, citations, in that order.
//! The first failed check is the refusal; nothing of a refused return reaches a user.
//!
//! Adoption renumbers citations by first appearance (`[3] … [1]` becomes `[1] … [2]`), so the
//! rendered sources list matches the text, and every citation is a passage of the bundle the
//! Cut sent.

use crate::cut::{CutPayload, contains_sigil};
use crate::openai::ProviderReturn;

/// Why a return was quarantined. The doc comment is the message; the code is the seed's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Quarantine {
    /// the return is not the protocol's schema
    #[error("quarantine/schema")]
    Schema,
    /// the return names another completion or model than the one asked for
    #[error("quarantine/correlation")]
    Correlation,
    /// the answer was cut short (`finish_reason` `length`, or no terminal at all)
    #[error("quarantine/truncated")]
    Truncated,
    /// the answer ended for a reason other than `stop` (content filter, tool call…)
    #[error("quarantine/terminal")]
    Terminal,
    /// the answer is longer than the Cut allowed
    #[error("quarantine/over-long")]
    OverLong,
    /// the answer is empty
    #[error("quarantine/empty")]
    Empty,
    /// the answer holds a value the Cut withheld, a Sigil, or a credential-like string
    #[error("quarantine/privacy")]
    Privacy,
    /// the answer is not plain cited prose (mentions, links, control characters)
    #[error("quarantine/output-class")]
    OutputClass,
    /// the answer cites nothing
    #[error("quarantine/no-citation")]
    NoCitation,
    /// a citation names no passage of the bundle
    #[error("quarantine/citation-out-of-bundle")]
    CitationOutOfBundle,
}

impl Quarantine {
    /// The seed-style code.
    pub fn code(&self) -> String {
        self.to_string()
    }

    /// The variant of a code (core reads codes egress-provider returned).
    pub fn from_code(code: &str) -> Option<Self> {
        ALL.iter().copied().find(|q| q.code() == code)
    }
}

const ALL: [Quarantine; 10] = [
    Quarantine::Schema,
    Quarantine::Correlation,
    Quarantine::Truncated,
    Quarantine::Terminal,
    Quarantine::OverLong,
    Quarantine::Empty,
    Quarantine::Privacy,
    Quarantine::OutputClass,
    Quarantine::NoCitation,
    Quarantine::CitationOutOfBundle,
];

/// What the return is judged against.
#[derive(Debug, Clone, Copy)]
pub struct Expectation<'a> {
    /// The model core's Portal configuration names.
    pub model: &'a str,
    /// The payload the Cut sent.
    pub payload: &'a CutPayload,
    /// Values the Cut withheld (asker, guild, channel ids…): none may come back.
    pub withheld: &'a [String],
}

/// An adopted answer: the text with citations renumbered, and the cited passages in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub text: String,
    pub citations: Vec<AdoptedCitation>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptedCitation {
    pub passage_id: String,
    pub url: String,
}

/// Withheld values shorter than this are not searched for (a one-digit id would match prose).
const MIN_WITHHELD_LEN: usize = 4;

/// Judges `ret`; on success the answer may be adopted.
pub fn quarantine(ret: &ProviderReturn, exp: &Expectation<'_>) -> Result<Adopted, Quarantine> {
    if ret.schema != crate::openai::RETURN_SCHEMA {
        return Err(Quarantine::Schema);
    }
    // Correlation: a completion id, and the model asked for (providers may echo a dated
    // snapshot of it, `name-2024-08-06`).
    let model_ok = ret.model == exp.model
        || ret
            .model
            .strip_prefix(exp.model)
            .is_some_and(|s| s.starts_with('-'));
    if ret.id.trim().is_empty() || !model_ok {
        return Err(Quarantine::Correlation);
    }
    match ret.finish_reason.as_deref() {
        _ if !ret.complete => return Err(Quarantine::Truncated),
        Some("stop") => {}
        Some("length") | None => return Err(Quarantine::Truncated),
        Some(_) => return Err(Quarantine::Terminal),
    }
    let text = ret.content.trim();
    if text.is_empty() {
        return Err(Quarantine::Empty);
    }
    if text.chars().count() > exp.payload.max_answer_chars as usize {
        return Err(Quarantine::OverLong);
    }
    if contains_sigil(text)
        || looks_like_key(text)
        || exp
            .withheld
            .iter()
            .any(|w| w.len() >= MIN_WITHHELD_LEN && text.contains(w.as_str()))
    {
        return Err(Quarantine::Privacy);
    }
    if !plain_prose(text) {
        return Err(Quarantine::OutputClass);
    }
    adopt_citations(text, exp.payload)
}

/// An API-key-shaped token: `sk-` followed by 20 or more key characters.
fn looks_like_key(text: &str) -> bool {
    text.match_indices("sk-").any(|(i, _)| {
        text[i + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .count()
            >= 20
    })
}

/// Plain prose: no Discord mention syntax, no links (sources come only from citations), no
/// control characters but newline and tab.
fn plain_prose(text: &str) -> bool {
    const REFUSED: [&str; 7] = [
        "<@",
        "<#",
        "@everyone",
        "@here",
        "http://",
        "https://",
        "](",
    ];
    !REFUSED.iter().any(|r| text.contains(r))
        && text
            .chars()
            .all(|c| !c.is_control() || c == '\n' || c == '\t')
}

/// Finds every `[n]`, checks each names a passage, renumbers by first appearance.
fn adopt_citations(text: &str, payload: &CutPayload) -> Result<Adopted, Quarantine> {
    let mut order: Vec<u32> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 3 || !after[digits..].starts_with(']') {
            out.push('[');
            rest = after;
            continue;
        }
        let n: u32 = after[..digits].parse().map_err(|_| Quarantine::Schema)?;
        if n == 0 || n as usize > payload.passages.len() {
            return Err(Quarantine::CitationOutOfBundle);
        }
        let k = match order.iter().position(|&m| m == n) {
            Some(i) => i + 1,
            None => {
                order.push(n);
                order.len()
            }
        };
        out.push_str(&format!("[{k}]"));
        rest = &after[digits + 1..];
    }
    out.push_str(rest);
    if order.is_empty() {
        return Err(Quarantine::NoCitation);
    }
    let citations = order
        .iter()
        .map(|&n| {
            let p = &payload.passages[n as usize - 1];
            AdoptedCitation {
                passage_id: p.passage_id.clone(),
                url: p.url.clone(),
            }
        })
        .collect();
    Ok(Adopted {
        text: out,
        citations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::{CutInput, EvidenceIn, cut};
    use crate::openai::RETURN_SCHEMA;
    use reach_digest::Sha256Digest;

    fn payload(n: u32) -> CutPayload {
        cut(&CutInput {
            question: "How are deliveries settled?".into(),
            bundle_digest: Sha256Digest::of(b"bundle"),
            revision: "abc".into(),
            passages: (1..=n)
                .map(|i| {
                    let text = format!("Passage {i}.");
                    EvidenceIn {
                        passage_id: format!("p-{i}"),
                        digest: Sha256Digest::of(text.as_bytes()),
                        section: "S".into(),
                        url: format!("https://example.test/doc.md#L{i}"),
                        text,
                    }
                })
                .collect(),
            withheld: vec!["subject_id"],
        })
        .unwrap()
        .payload
    }

    fn ret(content: &str) -> ProviderReturn {
        ProviderReturn {
            schema: RETURN_SCHEMA.into(),
            id: "chatcmpl-1".into(),
            model: "reach-test-model".into(),
            content: content.into(),
            finish_reason: Some("stop".into()),
            complete: true,
            streamed: false,
            usage: None,
        }
    }

    fn judge(r: &ProviderReturn) -> Result<Adopted, Quarantine> {
        let p = payload(4);
        let withheld = vec!["123456789012345678".to_owned()];
        quarantine(
            r,
            &Expectation {
                model: "reach-test-model",
                payload: &p,
                withheld: &withheld,
            },
        )
    }

    #[test]
    fn a_good_answer_is_adopted_with_citations_renumbered() {
        let a = judge(&ret(
            "Settled from evidence [3]. Never resent [1][3]. See [x] and [].",
        ))
        .unwrap();
        assert_eq!(
            a.text,
            "Settled from evidence [1]. Never resent [2][1]. See [x] and []."
        );
        let ids: Vec<_> = a.citations.iter().map(|c| c.passage_id.as_str()).collect();
        assert_eq!(ids, ["p-3", "p-1"]);
        assert_eq!(a.citations[0].url, "https://example.test/doc.md#L3");
        // A dated snapshot of the configured model correlates.
        let dated = ProviderReturn {
            model: "reach-test-model-2026-01-01".into(),
            ..ret("Yes [1].")
        };
        assert!(judge(&dated).is_ok());
    }

    /// One case per code: the return and the refusal it must draw.
    #[test]
    fn each_quarantine_code() {
        let cases: Vec<(ProviderReturn, &str)> = vec![
            (
                ProviderReturn {
                    schema: "other/1".into(),
                    ..ret("Yes [1].")
                },
                "quarantine/schema",
            ),
            (
                ProviderReturn {
                    model: "another-model".into(),
                    ..ret("Yes [1].")
                },
                "quarantine/correlation",
            ),
            (
                ProviderReturn {
                    id: " ".into(),
                    ..ret("Yes [1].")
                },
                "quarantine/correlation",
            ),
            (
                ProviderReturn {
                    finish_reason: Some("length".into()),
                    ..ret("Yes [1].")
                },
                "quarantine/truncated",
            ),
            (
                ProviderReturn {
                    finish_reason: None,
                    ..ret("Yes [1].")
                },
                "quarantine/truncated",
            ),
            (
                ProviderReturn {
                    complete: false,
                    ..ret("Yes [1].")
                },
                "quarantine/truncated",
            ),
            (
                ProviderReturn {
                    finish_reason: Some("content_filter".into()),
                    ..ret("Yes [1].")
                },
                "quarantine/terminal",
            ),
            (
                ret(&format!("{} [1]", "a".repeat(1_200))),
                "quarantine/over-long",
            ),
            (ret("  \n "), "quarantine/empty"),
            (
                ret("Your id is 123456789012345678 [1]."),
                "quarantine/privacy",
            ),
            (
                ret(&format!("Use sigil_{} [1].", "ab".repeat(16))),
                "quarantine/privacy",
            ),
            (
                ret("Use key sk-abcdefghijklmnopqrstuvwxyz [1]."),
                "quarantine/privacy",
            ),
            (ret("Ask <@42> [1]."), "quarantine/output-class"),
            (ret("Hi @everyone [1]."), "quarantine/output-class"),
            (ret("See https://evil.test [1]."), "quarantine/output-class"),
            (ret("Bell \u{7} [1]."), "quarantine/output-class"),
            (ret("It is settled."), "quarantine/no-citation"),
            (
                ret("It is settled [7]."),
                "quarantine/citation-out-of-bundle",
            ),
            (
                ret("It is settled [0]."),
                "quarantine/citation-out-of-bundle",
            ),
        ];
        for (r, want) in cases {
            assert_eq!(judge(&r).unwrap_err().code(), want, "{:?}", r.content);
        }
    }

    #[test]
    fn codes_round_trip() {
        for q in ALL {
            assert_eq!(Quarantine::from_code(&q.code()), Some(q));
        }
        assert_eq!(Quarantine::from_code("bounded/status"), None);
    }
}
