//! Abbreviations a corpus defines for itself: "link time optimization (LTO)", "Write-Ahead
//! Logging (WAL)", "higher rank trait bounds (HRTB)". Documentation often heads and indexes a
//! thing by its abbreviation (the rustc book's `lto` option) while a question spells it out
//! ("how do I turn on link-time optimization?"); the corpus's own definition joins the two.
//!
//! Only what the corpus writes counts: a phrase is an abbreviation's expansion where a passage
//! writes the phrase and then, in parentheses, capitals that are exactly its words' initials.
//! No list of abbreviations is kept in code, so nothing joins a question to documentation that
//! never defined the term.

use std::collections::HashMap;

use crate::analysis::{self, Analysis};

/// The longest abbreviation read, in letters (and so the longest expansion, in words).
const MAX_LETTERS: usize = 8;

/// Every expansion a corpus defines, keyed by its words analyzed ([`Abbreviations::key`]).
#[derive(Debug, Default, Clone)]
pub struct Abbreviations {
    /// Expansion (its words' keys) → the abbreviation, analyzed as a term.
    by_expansion: HashMap<Vec<String>, String>,
    /// The most words of any expansion held.
    longest: usize,
}

impl Abbreviations {
    /// Read the definitions `text` writes: `words (CAPS)` where the last `n` words before the
    /// parenthesis (split at spaces and hyphens) start with the `n` capitals, in order.
    pub fn learn(&mut self, text: &str, a: Analysis) {
        let mut rest = text;
        let mut offset = 0;
        while let Some(open) = rest.find('(') {
            let at = offset + open;
            offset = at + 1;
            rest = &text[offset..];
            // Only the few bytes after the parenthesis are read: "(LTO)" or "(DSOs)".
            let near = &rest.as_bytes()[..rest.len().min(MAX_LETTERS + 2)];
            let Some(close) = near.iter().position(|&b| b == b')') else {
                continue;
            };
            let inner = &rest[..close];
            // Two capitals or more, and nothing else but a plural's "s".
            let caps = inner.strip_suffix('s').unwrap_or(inner);
            if !(2..=MAX_LETTERS).contains(&caps.len())
                || !caps.bytes().all(|b| b.is_ascii_uppercase())
            {
                continue;
            }
            let before = text[..at].trim_end();
            let words: Vec<&str> = before
                .rsplit(|c: char| c.is_whitespace() || c == '-')
                .filter(|w| !w.is_empty())
                .take(caps.len())
                .collect();
            if words.len() != caps.len() {
                continue;
            }
            // `rsplit` read them last first.
            let initials_hold = words.iter().rev().zip(caps.bytes()).all(|(w, c)| {
                w.bytes().all(|b| b.is_ascii_alphabetic())
                    && w.as_bytes()[0].eq_ignore_ascii_case(&c)
            });
            if !initials_hold {
                continue;
            }
            let Some(short) = analysis::content_terms_with(caps, a).into_iter().next() else {
                continue;
            };
            let key: Vec<String> = words.iter().rev().map(|w| Self::key(w, a)).collect();
            self.longest = self.longest.max(key.len());
            self.by_expansion.entry(key).or_insert(short);
        }
    }

    /// One word as an expansion is matched: its analyzed form, stopwords included ("point in
    /// time recovery").
    pub fn key(word: &str, a: Analysis) -> String {
        analysis::terms_with(word, a)
            .into_iter()
            .find(|t| !t.compound)
            .map_or_else(|| word.to_lowercase(), |t| t.text)
    }

    /// What each expansion `question` spells out stands for: `(k, abbreviation)` for each of
    /// its words whose analyzed term is `terms[k]` (the question's content terms).
    pub fn stands_for(
        &self,
        question: &str,
        terms: &[String],
        a: Analysis,
    ) -> Vec<(usize, String)> {
        if self.is_empty() {
            return Vec::new();
        }
        let words: Vec<&str> = question
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let keys: Vec<String> = words.iter().map(|w| Self::key(w, a)).collect();
        let mut out = Vec::new();
        for (span, short) in self.found_in(&keys) {
            // Each word the expansion holds as a content term of its own: not padding such as
            // "time", which only the joined "link-time" makes a term (measured: standing for
            // it too, "Linker-plugin-based LTO" took the rustc book's `lto` option's place).
            for w in &words[span] {
                for part in analysis::content_terms_with(w, a) {
                    if let Some(k) = terms.iter().position(|t| *t == part) {
                        out.push((k, short.to_owned()));
                    }
                }
            }
        }
        out
    }

    /// Each expansion `words` (keys, in the question's order) holds, as the range of words it
    /// spans and its abbreviation.
    fn found_in(&self, words: &[String]) -> Vec<(std::ops::Range<usize>, &str)> {
        let mut out = Vec::new();
        for len in 2..=self.longest.min(words.len()) {
            for start in 0..=words.len() - len {
                if let Some(short) = self.by_expansion.get(&words[start..start + len]) {
                    out.push((start..start + len, short.as_str()));
                }
            }
        }
        out
    }

    /// How many expansions are held.
    pub fn len(&self) -> usize {
        self.by_expansion.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_expansion.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(text: &str) -> Abbreviations {
        let mut a = Abbreviations::default();
        a.learn(text, Analysis::CURRENT);
        a
    }

    fn keys(question: &str) -> Vec<String> {
        question
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| Abbreviations::key(w, Analysis::CURRENT))
            .collect()
    }

    #[test]
    fn a_definition_the_docs_write_joins_the_spelled_out_question_to_the_abbreviation() {
        let a = learned(
            "This flag enables link time optimization (LTO) across crates. \
             Recovery uses Write-Ahead Logging (WAL), and point in time recovery (PITR).",
        );
        assert_eq!(a.len(), 3);
        let q = keys("How do I turn on link-time optimizations?");
        assert_eq!(a.found_in(&q), vec![(5..8, "lto")]);
        let q = keys("How does write ahead logging work?");
        assert_eq!(a.found_in(&q), vec![(2..5, "wal")]);
        let q = keys("Can I do point-in-time recovery?");
        assert_eq!(a.found_in(&q), vec![(3..7, "pitr")]);
        // What the abbreviation stands for, by the question's content terms ("time" is
        // padding alone).
        let q = "How do I turn on link-time optimizations?";
        let terms = analysis::content_terms(q);
        let stands: Vec<(&str, String)> = a
            .stands_for(q, &terms, Analysis::CURRENT)
            .into_iter()
            .map(|(k, s)| (terms[k].as_str(), s))
            .collect();
        let lto = || "lto".to_string();
        assert_eq!(stands, [("link", lto()), ("optimiz", lto())]);
    }

    #[test]
    fn capitals_that_are_not_the_words_initials_define_nothing() {
        // Not the initials, a lowercase word in parentheses, one capital, a mixed word.
        let a = learned(
            "the standard library (STD) is linked; an example (see below) and a struct (T) \
             or a path (PATH) in the C2 compiler (CC); the Rust project (RFCs); \
             été élevé (ÉÉ) (( unclosed (ABC",
        );
        assert!(a.is_empty(), "{a:?}");
        // A question naming words the corpus never defined finds nothing.
        let a = learned("higher rank trait bounds (HRTB)");
        assert!(a.found_in(&keys("higher rank trait objects")).is_empty());
        assert!(a.found_in(&keys("rank trait bounds")).is_empty());
    }
}
