//! Answer-quality evaluation: question sets and the figures a run over them yields.
//!
//! A question set is JSON Lines. The first line names the corpus and where its files are; every
//! later line is one question, either in the corpus (the sections that answer it and the key
//! facts a good answer states) or out of it (the answer must be a refusal):
//!
//! ```text
//! {"corpus": "The Cargo Book", "root": "cargo", "include": ["**/*.html"], "exclude": ["print.html"]}
//! {"question": "What does opt-level control?", "expect": [{"path": "reference/profiles.html", "anchor": "opt-level"}], "facts": ["optimization"]}
//! {"question": "Who won the 2018 World Cup?", "out_of_corpus": true}
//! ```
//!
//! This module is pure: the runner (`benches/answers.rs`) reads the files and the corpus, asks
//! the questions and hands each [`Observed`] outcome to a [`Tally`].

use std::time::Duration;

use serde::Deserialize;

/// Why a question set was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalRefusal {
    /// the set has no header line
    #[error("question set is empty")]
    Empty,
    /// a line is not the JSON its position calls for
    #[error("line {line}: {detail}")]
    Malformed { line: usize, detail: String },
    /// an in-corpus question names no expected section
    #[error("line {line}: an in-corpus question needs at least one expected section")]
    NoExpectation { line: usize },
}

impl EvalRefusal {
    pub const fn code(&self) -> &'static str {
        match self {
            EvalRefusal::Empty => "eval/empty",
            EvalRefusal::Malformed { .. } => "eval/malformed",
            EvalRefusal::NoExpectation { .. } => "eval/no-expectation",
        }
    }
}

/// Where the corpus of a set lives, relative to a documentation root the runner knows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetHeader {
    pub corpus: String,
    pub root: String,
    pub include: Vec<String>,
    /// Globs of paths left out, as `include`'s (`technical/**`, `print.html`).
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// A section that answers a question: a path in the corpus and the section's anchor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub path: String,
    pub anchor: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub expect: Vec<Expected>,
    /// Short strings a good answer contains (compared case-insensitively).
    #[serde(default)]
    pub facts: Vec<String>,
    #[serde(default)]
    pub out_of_corpus: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionSet {
    pub header: SetHeader,
    pub questions: Vec<Question>,
}

/// Parse a question set (JSON Lines; blank lines and lines starting with `#` are skipped).
pub fn parse_set(text: &str) -> Result<QuestionSet, EvalRefusal> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let (n, first) = lines.next().ok_or(EvalRefusal::Empty)?;
    let header: SetHeader = serde_json::from_str(first).map_err(|e| EvalRefusal::Malformed {
        line: n,
        detail: format!("header: {e}"),
    })?;
    crate::process::glob_set(&header.exclude).map_err(|e| EvalRefusal::Malformed {
        line: n,
        detail: format!("header: exclude: {e}"),
    })?;
    let mut questions = Vec::new();
    for (line, l) in lines {
        let q: Question = serde_json::from_str(l).map_err(|e| EvalRefusal::Malformed {
            line,
            detail: e.to_string(),
        })?;
        if !q.out_of_corpus && q.expect.is_empty() {
            return Err(EvalRefusal::NoExpectation { line });
        }
        questions.push(q);
    }
    Ok(QuestionSet { header, questions })
}

/// What the answer path did with one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// `(path, anchor)` of the bundle's passages, best first.
    pub retrieved: Vec<(String, String)>,
    /// The rendered answer (or refusal) text.
    pub answer: String,
    /// The answer path refused ("not in the docs").
    pub refused: bool,
    /// Question in, answer out.
    pub latency: Duration,
}

/// One question's verdict, for the runner's per-question listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Rank (1-based) of the first expected section among the retrieved ones.
    pub rank: Option<usize>,
    /// Key facts found in the answer, of those expected.
    pub facts_found: usize,
    pub facts_expected: usize,
    /// Characters of the answer (none when refused): a longer answer holds more facts.
    pub answer_chars: usize,
    pub refused: bool,
    pub out_of_corpus: bool,
}

impl Verdict {
    /// Whether the verdict is the one wanted: in-corpus answered with the first passage right
    /// and every fact, or out-of-corpus refused.
    pub fn good(&self) -> bool {
        if self.out_of_corpus {
            self.refused
        } else {
            !self.refused && self.rank == Some(1) && self.facts_found == self.facts_expected
        }
    }
}

/// Judge one question against what was observed.
pub fn judge(q: &Question, o: &Observed) -> Verdict {
    let rank = if o.refused {
        None
    } else {
        o.retrieved
            .iter()
            .position(|(path, anchor)| {
                q.expect
                    .iter()
                    .any(|e| &e.path == path && &e.anchor == anchor)
            })
            .map(|i| i + 1)
    };
    // Inline-code backticks are formatting, not content.
    let answer = o.answer.to_lowercase().replace('`', "");
    let facts_found = if o.refused {
        0
    } else {
        q.facts
            .iter()
            .filter(|f| answer.contains(&f.to_lowercase().replace('`', "")))
            .count()
    };
    Verdict {
        rank,
        facts_found,
        facts_expected: q.facts.len(),
        answer_chars: if o.refused {
            0
        } else {
            o.answer.chars().count()
        },
        refused: o.refused,
        out_of_corpus: q.out_of_corpus,
    }
}

/// Figures over many questions.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    in_corpus: usize,
    hit1: usize,
    hit3: usize,
    /// Sum over in-corpus questions of (facts found / facts expected).
    fact_share: f64,
    /// Characters of the in-corpus answers given (not refused), and how many.
    answer_chars: usize,
    answered: usize,
    false_refusals: usize,
    out_of_corpus: usize,
    ooc_refused: usize,
    latencies: Vec<Duration>,
}

/// The figures the bench prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub in_corpus: usize,
    pub out_of_corpus: usize,
    pub hit_at_1: f64,
    pub hit_at_3: f64,
    pub fact_coverage: f64,
    /// Mean characters of an in-corpus answer.
    pub answer_chars: usize,
    pub ooc_refused: f64,
    pub false_refusals: f64,
    pub p50: Duration,
    pub p90: Duration,
}

impl Tally {
    /// Count one question's verdict and the latency of its answer.
    pub fn add(&mut self, v: &Verdict, latency: Duration) {
        self.add_latency(latency);
        self.add_verdict(v);
    }

    /// One more answer latency (a question may be asked several times).
    pub fn add_latency(&mut self, latency: Duration) {
        self.latencies.push(latency);
    }

    /// Count one question's verdict.
    pub fn add_verdict(&mut self, v: &Verdict) {
        if v.out_of_corpus {
            self.out_of_corpus += 1;
            self.ooc_refused += usize::from(v.refused);
            return;
        }
        self.in_corpus += 1;
        self.hit1 += usize::from(v.rank == Some(1));
        self.hit3 += usize::from(v.rank.is_some_and(|r| r <= 3));
        self.false_refusals += usize::from(v.refused);
        if !v.refused {
            self.answered += 1;
            self.answer_chars += v.answer_chars;
        }
        self.fact_share += if v.facts_expected == 0 {
            1.0
        } else {
            v.facts_found as f64 / v.facts_expected as f64
        };
    }

    /// Add another tally's questions to this one.
    pub fn merge(&mut self, o: &Tally) {
        self.in_corpus += o.in_corpus;
        self.hit1 += o.hit1;
        self.hit3 += o.hit3;
        self.fact_share += o.fact_share;
        self.answer_chars += o.answer_chars;
        self.answered += o.answered;
        self.false_refusals += o.false_refusals;
        self.out_of_corpus += o.out_of_corpus;
        self.ooc_refused += o.ooc_refused;
        self.latencies.extend_from_slice(&o.latencies);
    }

    pub fn figures(&self) -> Figures {
        let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let mut lat = self.latencies.clone();
        lat.sort();
        let pct = |p: f64| {
            lat.get(((lat.len().max(1) - 1) as f64 * p).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        Figures {
            in_corpus: self.in_corpus,
            out_of_corpus: self.out_of_corpus,
            hit_at_1: share(self.hit1, self.in_corpus),
            hit_at_3: share(self.hit3, self.in_corpus),
            fact_coverage: if self.in_corpus == 0 {
                0.0
            } else {
                self.fact_share / self.in_corpus as f64
            },
            answer_chars: self.answer_chars.checked_div(self.answered).unwrap_or(0),
            ooc_refused: share(self.ooc_refused, self.out_of_corpus),
            false_refusals: share(self.false_refusals, self.in_corpus),
            p50: pct(0.5),
            p90: pct(0.9),
        }
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "hit@1 {:.1}%  hit@3 {:.1}%  key facts {:.1}% (answers {} chars)  out-of-corpus \
             refused {:.1}%  false refusals {:.1}%  answer p50 {:.3} ms  p90 {:.3} ms  ({} in \
             corpus, {} out)",
            self.hit_at_1 * 100.0,
            self.hit_at_3 * 100.0,
            self.fact_coverage * 100.0,
            self.answer_chars,
            self.ooc_refused * 100.0,
            self.false_refusals * 100.0,
            self.p50.as_secs_f64() * 1e3,
            self.p90.as_secs_f64() * 1e3,
            self.in_corpus,
            self.out_of_corpus,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"{"corpus": "c", "root": "r", "include": ["**/*.md"]}
# a comment
{"question": "q1", "expect": [{"path": "a.md", "anchor": "x"}], "facts": ["Alpha", "beta"]}
{"question": "q2", "out_of_corpus": true}
"#;

    fn seen(retrieved: &[(&str, &str)], answer: &str, refused: bool) -> Observed {
        Observed {
            retrieved: retrieved
                .iter()
                .map(|(p, a)| (p.to_string(), a.to_string()))
                .collect(),
            answer: answer.into(),
            refused,
            latency: Duration::from_millis(1),
        }
    }

    #[test]
    fn parses_a_set() {
        let s = parse_set(SET).unwrap();
        assert_eq!(s.header.root, "r");
        assert_eq!(s.questions.len(), 2);
        assert!(s.questions[1].out_of_corpus);
    }

    #[test]
    fn bad_sets_are_refused_with_codes() {
        let cases = [
            "",
            "{\"corpus\": 1}",
            "{\"corpus\": \"c\", \"root\": \"r\", \"include\": []}\n{\"question\": \"q\"}",
            "{\"corpus\": \"c\", \"root\": \"r\", \"include\": []}\nnot json",
            "{\"corpus\": \"c\", \"root\": \"r\", \"include\": [], \"exclude\": [\"a[\"]}",
        ];
        let out: Vec<&str> = cases
            .iter()
            .map(|c| parse_set(c).map(|_| "ok").unwrap_or_else(|e| e.code()))
            .collect();
        assert_eq!(
            out,
            [
                "eval/empty",
                "eval/malformed",
                "eval/no-expectation",
                "eval/malformed",
                "eval/malformed"
            ]
        );
    }

    #[test]
    fn judges_rank_facts_and_refusals() {
        let s = parse_set(SET).unwrap();
        let (q1, q2) = (&s.questions[0], &s.questions[1]);
        let v = judge(
            q1,
            &seen(&[("b.md", ""), ("a.md", "x")], "ALPHA only", false),
        );
        assert_eq!((v.rank, v.facts_found, v.good()), (Some(2), 1, false));
        let v = judge(q1, &seen(&[("a.md", "x")], "alpha and beta", false));
        assert!(v.good());
        // A refused in-corpus question hits nothing, whatever the bundle held.
        let v = judge(q1, &seen(&[("a.md", "x")], "alpha beta", true));
        assert_eq!((v.rank, v.facts_found), (None, 0));
        let v = judge(q2, &seen(&[], "not in the docs", true));
        assert!(v.good());

        let mut t = Tally::default();
        t.add(
            &judge(q1, &seen(&[("b.md", ""), ("a.md", "x")], "alpha", false)),
            Duration::from_millis(2),
        );
        t.add(
            &judge(q1, &seen(&[("a.md", "x")], "alpha", true)),
            Duration::from_millis(4),
        );
        t.add(&judge(q2, &seen(&[], "", true)), Duration::from_millis(6));
        let f = t.figures();
        assert_eq!((f.in_corpus, f.out_of_corpus), (2, 1));
        assert_eq!((f.hit_at_1, f.hit_at_3), (0.0, 0.5));
        assert_eq!(f.fact_coverage, 0.25);
        assert_eq!((f.ooc_refused, f.false_refusals), (1.0, 0.5));
        assert_eq!(f.p50, Duration::from_millis(4));
    }
}
