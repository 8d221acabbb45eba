//! The extractive answer: the default local cognition every deployment without a model
//! provider uses. It quotes only bundle passages, each sentence or code block cited as `[n]`.
//!
//! Sentences are chosen to answer, not to summarise: the best-ranked passage leads, up to four of
//! its sentences holding most of the question's words, their synonyms or an abbreviation the bundle
//! defines for them (and its opening sentence, which in documentation usually defines the section's
//! subject) come first, in the page's order; one sentence from another passage may follow when it
//! holds as much of the question, and when the lead has fewer than four to give, the next passages'
//! sentences holding as much of the question as the lead's best (two words at least) fill the room;
//! a lead with no sentence (a page title over its first section) leaves the room to the bundle's
//! best sentences. When the bundle holds the lead page's own "Summary" section, its first two
//! sentences (or items) holding a word of the question lead the answer: the author's one-line
//! answer before its details. Asked how, a lead sentence holding the question whose colon
//! introduces a code block or a list ranks as if it held one word more. A chosen sentence brings
//! what it needs to be read: the sentence before it when it leans on it ("It is called…"), the list
//! or the code block its colon introduces; a chosen list item brings its list and the sentence
//! introducing it, under that sentence's citation. Otherwise one fenced code block is kept whole
//! when the question asks how, or names what the block holds: the best-ranked chosen passage's
//! block holding most of the question, with the sentence introducing it (its colon) or the list
//! item it belongs to, so no block stands unexplained and uncited. Everything is quoted in the
//! page's order (a lead page's summary first), as much as fits one Discord message with its
//! sources, the chosen sentences first. A lead section named by a code identifier (a lint, a
//! setting, a flag) is named first when its sentences do not. A label left in a page's text
//! ("Note", "Filename: src/main.rs" without a stop) is not a sentence; an abbreviation's point
//! ("e.g. the") ends none.

use serde::{Deserialize, Serialize};

use crate::abbreviation::Abbreviations;
use crate::analysis;
use crate::retrieve::{CorpusEvidenceBundle, EvidencePassage};

/// An answer formed locally from a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    /// `(n, passage id, url)` for each `[n]` marker in `text`.
    pub citations: Vec<(u32, String, String)>,
    pub not_in_docs: bool,
}

/// The honest reply when the docs do not cover a question.
pub const NOT_IN_DOCS: &str = "I could not find this in the documentation.";

/// Maximum prose sentences in an answer.
const ANSWER_SENTENCES: usize = 5;
/// Sentences of the lead page's summary section that lead an answer.
const SUMMARY_SENTENCES: usize = 2;
/// Maximum sentences of the lead passage in an answer.
const LEAD_SENTENCES: usize = 4;
/// A sentence of another passage fills a short lead's room when it holds at least this many of
/// the question's words (and as many as the lead's best).
const FILL_FLOOR: f32 = 2.0;
/// Sentences longer than this are cut at a word boundary in the answer.
const ANSWER_SENTENCE_BYTES: usize = 400;
/// The answer text's budget: Discord's 2,000 characters, less the sources list that the
/// renderer appends (one line of at most ~150 characters per cited passage).
const ANSWER_BYTES: usize = 1_400;
/// A code block longer than this is not quoted (it would crowd out the prose).
const CODE_BLOCK_BYTES: usize = 700;

/// Words of a question asking for a procedure or a form, which code answers.
const HOW_WORDS: &[&str] = &[
    "how",
    "syntax",
    "example",
    "write",
    "written",
    "declare",
    "specify",
    "define",
    "configure",
    "set",
    "add",
    "create",
    "enable",
    "disable",
];

/// A sentence whose colon introduces a list quotes at most this many of its items.
const LIST_ITEMS: usize = 8;

/// One quotable unit of a passage.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unit {
    Sentence(String),
    /// A whole list item (bullet or number), its marker dropped.
    Item(String),
    /// A whole fenced block, fences included.
    Code(String),
}

impl Unit {
    /// The unit's text when it is prose (a sentence or a list item).
    fn prose(&self) -> Option<&str> {
        match self {
            Unit::Sentence(s) | Unit::Item(s) => Some(s),
            Unit::Code(_) => None,
        }
    }

    /// Prose ending in ":", which introduces what follows it (a list, a code block).
    fn introduces(&self) -> bool {
        self.prose().is_some_and(|s| s.trim_end().ends_with(':'))
    }
}

/// Whether a section title names a page's summary ("Summary", "TL;DR").
fn is_summary(title: &str) -> bool {
    let t = title.trim().trim_end_matches(':').to_lowercase();
    matches!(t.as_str(), "summary" | "tl;dr" | "tldr" | "in summary")
}

/// Whether a sentence leans on the one before it for its subject ("It is called…", "This
/// means…"): quoted alone it says nothing the reader can place.
fn leans_back(s: &str) -> bool {
    let first = s
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .next()
        .unwrap_or("");
    matches!(
        first,
        "It" | "Its"
            | "It's"
            | "It’s"
            | "This"
            | "That"
            | "That's"
            | "That’s"
            | "These"
            | "Those"
            | "They"
            | "Such"
            | "Then"
            | "Otherwise"
            | "Instead"
            | "However"
    )
}

/// Whether a sentence tells the reader what they must do ("You need to add a `CNAME` file…"):
/// asked how, that is the answer even when it holds none of the question's words, which the
/// sentence before it ("…you need to take one additional step") usually holds instead.
fn instructs(s: &str) -> bool {
    let lower = s.trim_start().to_lowercase().replace('’', "'");
    [
        "you need to ",
        "you must ",
        "you have to ",
        "you'll need to ",
        "you will need to ",
        "you should ",
    ]
    .iter()
    .any(|opening| lower.starts_with(opening))
}

/// The default local cognition: answer from the bundle's passages, citing them as `[1]`, `[2]`….
pub fn extractive_answer(question: &str, bundle: &CorpusEvidenceBundle) -> Answer {
    if bundle.passages.is_empty() {
        return Answer {
            text: NOT_IN_DOCS.into(),
            citations: vec![],
            not_in_docs: true,
        };
    }
    // The question's terms and their synonyms: a sentence saying "prevent" answers "stop".
    let mut q_terms = analysis::content_terms(question);
    let asked = q_terms.len();
    let mut group: Vec<usize> = (0..q_terms.len()).collect();
    for k in 0..q_terms.len() {
        for alt in analysis::synonyms(&q_terms[k], analysis::Analysis::CURRENT) {
            if !q_terms.contains(&alt) {
                q_terms.push(alt);
                group.push(k);
            }
        }
    }
    // An abbreviation the bundle defines ("profile-guided optimization (PGO)") says each word
    // of the phrase the question spells out.
    let mut abbreviations = Abbreviations::default();
    for p in &bundle.passages {
        abbreviations.learn(&p.text, analysis::Analysis::CURRENT);
    }
    let defined =
        abbreviations.stands_for(question, &q_terms[..asked], analysis::Analysis::CURRENT);
    for (k, short) in defined {
        q_terms.push(short);
        group.push(k);
    }
    let q: Vec<&str> = q_terms.iter().map(String::as_str).collect();
    let q_compounds: Vec<String> = analysis::terms(question)
        .into_iter()
        .filter(|t| t.compound)
        .map(|t| t.text)
        .collect();
    let wants_code = question
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| HOW_WORDS.contains(&w.to_lowercase().as_str()));
    let asks_how = question
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("how"));
    let score = |s: &str| -> f32 {
        let base = analysis::count_groups_held(s, &q, &group) as f32;
        let exact = if q_compounds.is_empty() {
            0
        } else {
            let lower = s.to_lowercase();
            q_compounds
                .iter()
                .filter(|c| lower.contains(c.as_str()))
                .count()
        };
        base + exact as f32
    };
    let units: Vec<Vec<Unit>> = bundle.passages.iter().map(passage_units).collect();
    // The units asked for, most wanted first: (passage, unit).
    let mut wanted: Vec<(usize, usize)> = Vec::new();
    // The lead passage: its first sentence when it holds any word, and its best sentences.
    let lead: Vec<(usize, f32)> = units[0]
        .iter()
        .enumerate()
        .filter_map(|(i, u)| u.prose().map(|s| (i, score(s))))
        .collect();
    let best_lead = lead.iter().map(|l| l.1).fold(0.0, f32::max);
    // Asked how, a sentence holding the question that introduces a procedure (its colon
    // before a code block or a list) ranks as if it held one word more: what follows it is
    // the how.
    let procedure = |i: usize| -> f32 {
        let next = units[0].get(i + 1);
        if wants_code
            && units[0][i].introduces()
            && matches!(next, Some(Unit::Code(_) | Unit::Item(_)))
        {
            1.0
        } else {
            0.0
        }
    };
    let mut by_score: Vec<(usize, f32)> = lead
        .iter()
        .map(|&(i, s)| (i, if s > 0.0 { s + procedure(i) } else { s }))
        .collect();
    by_score.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if let Some(&(i, s)) = lead.first()
        && s > 0.0
    {
        wanted.push((0, i));
    }
    // Asked how, the lead's first sentence telling the reader what to do is the how.
    if asks_how
        && best_lead > 0.0
        && let Some(i) = units[0]
            .iter()
            .position(|u| matches!(u, Unit::Sentence(s) if instructs(s)))
        && !wanted.contains(&(0, i))
    {
        wanted.push((0, i));
    }
    for &(i, s) in &by_score {
        if wanted.len() >= LEAD_SENTENCES || s <= 0.0 {
            break;
        }
        if !wanted.contains(&(0, i)) {
            wanted.push((0, i));
        }
    }
    // One sentence from another passage, when it holds as much of the question as the lead's best.
    let mut other: Option<(usize, usize, f32)> = None;
    for (pi, us) in units.iter().enumerate().skip(1) {
        for (ui, u) in us.iter().enumerate() {
            if let Some(s) = u.prose() {
                let sc = score(s);
                if sc >= best_lead && sc > 0.0 && other.is_none_or(|o| sc > o.2) {
                    other = Some((pi, ui, sc));
                }
            }
        }
    }
    if let Some((pi, ui, _)) = other {
        wanted.push((pi, ui));
    }
    // A lead with little to say leaves room: the next passages' sentences holding most of the
    // question fill it, the better-ranked passage first. A lead with no sentence at all (a
    // page's title straight over its first section) leads nothing: the whole bundle's best
    // sentences fill the room, the better-ranked passage first only among equals.
    let lead_wanted = wanted.iter().filter(|w| w.0 == 0).count();
    if lead_wanted < LEAD_SENTENCES {
        let floor = FILL_FLOOR.max(best_lead);
        // A lead of a sentence or two (a chapter's opening that says what the chapter will
        // explain) holds the question's every word and nothing of its answer: the other
        // sections of its page say the rest, their sentences holding two words of it.
        let short_lead = lead.len() <= 2;
        let mut cands: Vec<(usize, usize, f32)> = units
            .iter()
            .enumerate()
            .skip(1)
            .flat_map(|(pi, us)| {
                us.iter()
                    .enumerate()
                    .filter_map(move |(ui, u)| u.prose().map(|s| (pi, ui, s)))
            })
            .map(|(pi, ui, s)| (pi, ui, score(s)))
            .filter(|c| {
                c.2 >= floor
                    || short_lead
                        && c.2 >= FILL_FLOOR
                        && bundle.passages[c.0].path == bundle.passages[0].path
            })
            .collect();
        if lead.is_empty() {
            cands.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        } else {
            cands.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.total_cmp(&a.2)).then(a.1.cmp(&b.1)));
        }
        for (pi, ui, _) in cands {
            if wanted.len() >= LEAD_SENTENCES {
                break;
            }
            if !wanted.contains(&(pi, ui)) {
                wanted.push((pi, ui));
            }
        }
    }
    if wanted.is_empty() {
        // Retrieval matched headings only: the lead passage's first sentence says what it is.
        if let Some(i) = units[0].iter().position(|u| u.prose().is_some()) {
            wanted.push((0, i));
        }
    }
    // The lead page's own summary, when the bundle holds it, says in a line what the lead
    // details: its sentences holding the question come first.
    let lead_path = &bundle.passages[0].path;
    let summary = bundle
        .passages
        .iter()
        .skip(1)
        .position(|p| &p.path == lead_path && is_summary(&p.section))
        .map(|i| i + 1);
    if let Some(pi) = summary {
        let mut first: Vec<(usize, usize)> = units[pi]
            .iter()
            .enumerate()
            .filter(|(_, u)| u.prose().is_some_and(|s| score(s) > 0.0))
            .map(|(ui, _)| (pi, ui))
            .take(SUMMARY_SENTENCES)
            .collect();
        first.retain(|w| !wanted.contains(w));
        wanted.splice(0..0, first);
    }
    wanted.truncate(ANSWER_SENTENCES);
    // A code block of the best-ranked wanted passage that has one that answers: the one holding
    // most of the question, one a wanted sentence introduces (its colon) before another, the
    // first before a later.
    let mut passages_wanted: Vec<usize> = wanted.iter().map(|c| c.0).collect();
    passages_wanted.sort();
    passages_wanted.dedup();
    let mut code: Option<(usize, usize)> = None;
    let mut code_score = f32::MIN;
    for &pi in &passages_wanted {
        if code.is_some() {
            break;
        }
        for (ui, u) in units[pi].iter().enumerate() {
            let Unit::Code(c) = u else {
                continue;
            };
            let held = score(c);
            if c.len() > CODE_BLOCK_BYTES || !(wants_code || held >= 1.0) {
                continue;
            }
            let introduced =
                ui > 0 && wanted.contains(&(pi, ui - 1)) && units[pi][ui - 1].introduces();
            let sc = held + if introduced { 0.5 } else { 0.0 };
            if sc > code_score {
                code = Some((pi, ui));
                code_score = sc;
            }
        }
    }
    // The list starting at unit `start` of passage `pi`, at most LIST_ITEMS items.
    let list_from = |pi: usize, start: usize| {
        let us = &units[pi];
        (start..us.len())
            .take_while(move |&k| matches!(us[k], Unit::Item(_)))
            .take(LIST_ITEMS)
            .map(move |k| (pi, k))
    };
    // What each wanted sentence brings along: the sentence it leans on, and the list its colon
    // introduces.
    let mut along: Vec<(usize, usize)> = Vec::new();
    for &(pi, ui) in &wanted {
        let Some(s) = units[pi][ui].prose() else {
            continue;
        };
        if ui > 0
            && matches!(units[pi][ui], Unit::Sentence(_))
            && leans_back(s)
            && matches!(units[pi][ui - 1], Unit::Sentence(_))
        {
            along.push((pi, ui - 1));
        }
        if matches!(units[pi][ui], Unit::Item(_)) {
            // A list item out of its list loses the other options: its list comes along, and the
            // sentence introducing it.
            let first = (0..ui)
                .rev()
                .take_while(|&k| matches!(units[pi][k], Unit::Item(_)))
                .last()
                .unwrap_or(ui);
            if first > 0 && units[pi][first - 1].introduces() {
                along.push((pi, first - 1));
            }
            along.extend(list_from(pi, first));
        }
        if units[pi][ui].introduces() {
            along.extend(list_from(pi, ui + 1));
            // The code block its colon introduces: quoted without it, the sentence dangles.
            if let Some(Unit::Code(c)) = units[pi].get(ui + 1)
                && c.len() <= CODE_BLOCK_BYTES
            {
                along.push((pi, ui + 1));
            }
        }
    }
    // Keep what fits, most wanted first, then quote it in the pages' order.
    let budget = ANSWER_BYTES - TITLE_RESERVE;
    let cost = |(pi, ui): (usize, usize)| -> usize {
        match &units[pi][ui] {
            Unit::Sentence(s) | Unit::Item(s) => s.trim().len() + 6,
            Unit::Code(c) => c.len() + 2,
        }
    };
    let mut kept: Vec<(usize, usize)> = Vec::new();
    let mut used = 0usize;
    // The sentence introducing the kept code block (its colon), or the list item it belongs
    // to: quoted without it, the block has no words and no citation.
    let code_intro = code
        .and_then(|(pi, ui)| Some((pi, ui.checked_sub(1)?)))
        .filter(|&(pi, ui)| units[pi][ui].introduces() || matches!(units[pi][ui], Unit::Item(_)));
    for u in wanted
        .iter()
        .chain(code.iter())
        .chain(code_intro.iter())
        .chain(along.iter())
    {
        if kept.contains(u) {
            continue;
        }
        let c = cost(*u);
        if !kept.is_empty() && used + c > budget {
            continue;
        }
        used += c;
        kept.push(*u);
    }
    // The pages' order, but a summary quoted leads.
    kept.sort_by_key(|&(pi, ui)| (Some(pi) != summary, pi, ui));
    // The items a kept sentence's (or item's) colon introduced carry its citation.
    let introduced = |(pi, ui): (usize, usize)| -> bool {
        (0..ui)
            .rev()
            .take_while(|&k| k + 1 == ui || matches!(units[pi][k + 1], Unit::Item(_)))
            .any(|k| kept.contains(&(pi, k)) && units[pi][k].introduces())
    };
    let mut citations: Vec<(u32, String, String)> = Vec::new();
    let mut text = String::new();
    let mut cite = |p: &EvidencePassage| -> u32 {
        match citations.iter().find(|c| c.1 == p.passage_id) {
            Some(c) => c.0,
            None => {
                let n = citations.len() as u32 + 1;
                citations.push((n, p.passage_id.clone(), p.url.clone()));
                n
            }
        }
    };
    let mut line_start = true;
    for &(pi, ui) in &kept {
        match &units[pi][ui] {
            Unit::Sentence(s) => {
                if !line_start {
                    text.push(' ');
                }
                text.push_str(&format!("{} [{}]", s.trim(), cite(&bundle.passages[pi])));
                line_start = false;
            }
            Unit::Item(s) => {
                if !line_start {
                    text.push('\n');
                }
                text.push_str("- ");
                text.push_str(s.trim());
                if !introduced((pi, ui)) {
                    text.push_str(&format!(" [{}]", cite(&bundle.passages[pi])));
                }
                text.push('\n');
                line_start = true;
            }
            Unit::Code(c) => {
                if !text.is_empty() && !line_start {
                    text.push('\n');
                }
                text.push_str(c);
                text.push('\n');
                line_start = true;
            }
        }
    }
    // A section named by an identifier (a lint, a setting, a flag) is often the answer itself,
    // and its sentences say "this lint…" without naming it: the lead names it.
    if let Some(name) = named_by_title(bundle.passages[0].section.trim())
        && !text
            .to_lowercase()
            .replace('`', "")
            .contains(&name.to_lowercase())
    {
        text = format!("`{name}`: {text}");
    }
    Answer {
        text: text.trim_end().to_string(),
        citations,
        not_in_docs: false,
    }
}

/// Room kept in [`ANSWER_BYTES`] for the name of a section titled by an identifier.
const TITLE_RESERVE: usize = 70;

/// The identifier a section title names: the whole title when it is one (`opt-level`), or
/// the identifier it opens with before a colon (`--explain: provide a detailed explanation`).
fn named_by_title(title: &str) -> Option<&str> {
    if is_identifier(title) {
        return Some(title);
    }
    let (head, rest) = title.split_once(": ")?;
    (is_identifier(head) && !rest.trim().is_empty()).then_some(head)
}

/// A code identifier rather than a phrase: one word joined by `_`, `-`, `.` or `::`
/// (`broken_intra_doc_links`, `opt-level`, `--cap-lints`, `std::io`).
fn is_identifier(title: &str) -> bool {
    !title.is_empty()
        && title.len() <= 64
        && !title.contains(char::is_whitespace)
        && title.contains(['_', '-', '.', ':'])
        && title
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// The quotable units of a passage's visible text: sentences (headings, bullets' markers and
/// table rules dropped) and whole fenced code blocks.
fn passage_units(p: &EvidencePassage) -> Vec<Unit> {
    let markdown = matches!(
        crate::process::Media::of_path(&p.path),
        Some(crate::process::Media::Markdown)
    );
    let text = crate::index::visible_text(&p.path, &p.text);
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None; // (marker, block so far)
    let mut buf = String::new();
    // Whether `buf` holds a list item (ended by a blank line, a new item or an unindented line).
    let mut in_item = false;
    let flush = |buf: &mut String, out: &mut Vec<Unit>, in_item: &mut bool| {
        if !buf.trim().is_empty() && (*in_item || !is_label(buf)) {
            let s = cut(std::mem::take(buf));
            out.push(if *in_item {
                Unit::Item(s)
            } else {
                Unit::Sentence(s)
            });
        }
        buf.clear();
        *in_item = false;
    };
    for line in text.lines() {
        let t = line.trim();
        if let Some((marker, block)) = &mut fence {
            block.push('\n');
            block.push_str(line);
            if t.starts_with(marker.as_str()) && t.chars().all(|c| c == '`' || c == '~') {
                let (_, block) = fence.take().unwrap_or_default();
                if block.lines().count() > 2 {
                    out.push(Unit::Code(block));
                }
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            flush(&mut buf, &mut out, &mut in_item);
            let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
            fence = Some((marker, t.to_string()));
            continue;
        }
        if t.is_empty() || t.starts_with('#') || t.starts_with('|') && t.ends_with('|') {
            flush(&mut buf, &mut out, &mut in_item);
            continue;
        }
        let item_text = list_item(t);
        if item_text.is_some() || in_item && !line.starts_with(char::is_whitespace) {
            flush(&mut buf, &mut out, &mut in_item);
        }
        let t = match item_text {
            Some(rest) => {
                in_item = true;
                rest
            }
            None => t.trim_start_matches('>').trim(),
        };
        if !buf.is_empty() {
            buf.push(' ');
        }
        buf.push_str(t);
        while !in_item && let Some(i) = find_sentence_end(&buf) {
            let s: String = buf[..=i].to_string();
            buf = buf[i + 1..].trim_start().to_string();
            out.push(Unit::Sentence(cut(s)));
        }
        // A page's text holds one block (a paragraph, a label, an item) a line; Markdown wraps.
        if !markdown {
            flush(&mut buf, &mut out, &mut in_item);
        }
    }
    flush(&mut buf, &mut out, &mut in_item);
    out
}

/// A few words ending in no punctuation: a label or a heading left in the text ("Note",
/// "2024 Edition differences", "Example"), not a sentence that says anything.
fn is_label(s: &str) -> bool {
    let t = s.trim();
    !t.ends_with(['.', '!', '?', ':', ';', ')', '"', '”', '`']) && t.split_whitespace().count() <= 4
}

/// The text of a list item's line without its marker (`- `, `* `, `+ `, `1. `, `2) `), or
/// `None` when the line opens no item.
fn list_item(t: &str) -> Option<&str> {
    if let Some(rest) = t.strip_prefix(['-', '*', '+'])
        && rest.starts_with(' ')
    {
        return Some(rest.trim());
    }
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if (1..=3).contains(&digits) {
        let rest = &t[digits..];
        if let Some(rest) = rest.strip_prefix(['.', ')'])
            && rest.starts_with(' ')
        {
            return Some(rest.trim());
        }
    }
    None
}

/// A sentence cut to [`ANSWER_SENTENCE_BYTES`] at a word boundary.
fn cut(s: String) -> String {
    if s.len() <= ANSWER_SENTENCE_BYTES {
        return s;
    }
    let mut at = ANSWER_SENTENCE_BYTES;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    let at = s[..at].rfind(' ').unwrap_or(at);
    format!("{}…", &s[..at])
}

/// The end of the first complete sentence in `s`: `.`, `!` or `?` followed by a space, outside
/// an inline code span.
fn find_sentence_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut in_code = false;
    for i in 0..b.len() {
        if b[i] == b'`' {
            in_code = !in_code;
        }
        // "e.g. the", "etc. and": an abbreviation's point before a lowercase word ends nothing.
        if !in_code
            && matches!(b[i], b'.' | b'!' | b'?')
            && b.get(i + 1) == Some(&b' ')
            && !b.get(i + 2).is_some_and(u8::is_ascii_lowercase)
        {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::{BUNDLE_SCHEMA, BundleOutcome, RetrievalLimits};
    use reach_digest::Sha256Digest;

    fn passage(id: &str, path: &str, text: &str) -> EvidencePassage {
        EvidencePassage {
            passage_id: id.into(),
            digest: Sha256Digest::of(text.as_bytes()),
            path: path.into(),
            section: "s".into(),
            context: String::new(),
            url: format!("https://x/{path}#L1-L9"),
            section_url: format!("https://x/{path}#s"),
            line_start: 1,
            line_end: 9,
            score: 3.0,
            text: text.into(),
        }
    }

    /// A passage of a section titled `section`.
    fn titled(id: &str, path: &str, section: &str, text: &str) -> EvidencePassage {
        EvidencePassage {
            section: section.into(),
            ..passage(id, path, text)
        }
    }

    fn bundle(passages: Vec<EvidencePassage>) -> CorpusEvidenceBundle {
        CorpusEvidenceBundle {
            schema: BUNDLE_SCHEMA.into(),
            snapshot_id: "snap".into(),
            snapshot_digest: Sha256Digest::of(b"s"),
            revision: "r".into(),
            historical: false,
            question_digest: Sha256Digest::of(b"q"),
            retrieval: "t".into(),
            limits: RetrievalLimits::default(),
            outcome: BundleOutcome::Evidence,
            passages,
            total_bytes: 0,
            total_tokens: 0,
            bundle_digest: Sha256Digest::of(b"b"),
        }
    }

    #[test]
    fn the_lead_pages_summary_leads_the_answer() {
        let details = titled(
            "p1",
            "literals.md",
            "Details",
            "## Details\nC strings can be written with literal syntax and a prefix. They are \
             terminated with a NUL byte.",
        );
        let other = titled(
            "p2",
            "other.md",
            "Summary",
            "## Summary\n- A byte string literal is written `b\"foo\"`.",
        );
        let summary = titled(
            "p3",
            "literals.md",
            "Summary",
            "## Summary\n- Literals of the form `c\"foo\"` are C string literals.",
        );
        let a = extractive_answer(
            "How do I write a C string literal?",
            &bundle(vec![details, other, summary]),
        );
        // Another page's summary is not the lead's: only the lead page's leads.
        assert!(
            a.text.starts_with("- Literals of the form `c\"foo\"`"),
            "{}",
            a.text
        );
        assert!(a.text.contains("written with literal syntax"), "{}", a.text);
        assert_eq!(a.citations[0].1, "p3");
    }

    #[test]
    fn a_lead_of_a_title_alone_leaves_the_room_to_the_bundles_best_sentences() {
        let b = bundle(vec![
            passage("p1", "resolver.md", "# Default feature resolver"),
            passage(
                "p2",
                "resolver.md",
                "### Exploring features\nThe tree command shows each feature the resolver \
                 enables. It helps when a feature changes. The resolver prints a feature graph. \
                 A feature resolver report follows.",
            ),
            passage(
                "p3",
                "resolver.md",
                "## Details\nThe 2021 edition implies `resolver = \"2\"` for the feature \
                 resolver. A workspace sets the resolver for the 2021 edition in its root \
                 manifest.",
            ),
        ]);
        let a = extractive_answer("Does the 2021 edition change the feature resolver?", &b);
        // The second passage's sentences hold two of the question's words each, the third's
        // four and three: taken in passage order, the second's would fill the room.
        assert!(a.text.contains("The 2021 edition implies"), "{}", a.text);
        assert!(
            a.text.contains("A workspace sets the resolver"),
            "{}",
            a.text
        );
        assert!(!a.text.contains("report follows"), "{}", a.text);
    }

    #[test]
    fn a_section_named_by_an_identifier_is_named_by_the_answer() {
        let mut lint = passage(
            "l",
            "lints.html",
            "This lint warns when an intra-doc link cannot be resolved. It is warn by default.",
        );
        lint.section = "broken_intra_doc_links".into();
        let a = extractive_answer(
            "Which lint warns about unresolved links?",
            &bundle(vec![lint]),
        );
        assert!(
            a.text
                .starts_with("`broken_intra_doc_links`: This lint warns when an intra-doc link"),
            "{}",
            a.text
        );
        // A title in words, or one the answer already says, is not repeated.
        let mut prose = passage("p", "a.md", "The opt-level setting controls optimization.");
        prose.section = "opt-level".into();
        let a = extractive_answer("What does opt-level control?", &bundle(vec![prose.clone()]));
        assert!(a.text.starts_with("The opt-level setting"), "{}", a.text);
        prose.section = "Optimization level".into();
        let a = extractive_answer("What does opt-level control?", &bundle(vec![prose]));
        assert!(a.text.starts_with("The opt-level setting"), "{}", a.text);
        // A title opening with an identifier before a colon names it too.
        let mut flag = passage(
            "f",
            "cli.html",
            "This prints a longer explanation of an error.",
        );
        flag.section = "--explain: provide a detailed explanation of an error message".into();
        let a = extractive_answer(
            "How do I explain an error code?",
            &bundle(vec![flag.clone()]),
        );
        assert!(
            a.text.starts_with("`--explain`: This prints a longer"),
            "{}",
            a.text
        );
        flag.section = "Note: errors are explained".into();
        let a = extractive_answer("How do I explain an error code?", &bundle(vec![flag]));
        assert!(a.text.starts_with("This prints"), "{}", a.text);
    }

    #[test]
    fn answers_from_the_lead_passage_with_its_code_and_no_markup() {
        let lead = r#"## Profiles

<Listing number="1-1" caption="x">

The `opt-level` setting controls [optimization][opt]<!-- ignore --> of the build. It is
unrelated to colours. Higher levels compile slower.

```toml
[profile.dev]
opt-level = 1
```

</Listing>

[opt]: https://example.org/opt
"#;
        let b = bundle(vec![
            passage("p1", "profiles.md", lead),
            passage("p2", "other.md", "Colours are nice. Profiles are named."),
        ]);
        let a = extractive_answer("How do I set the opt-level of a profile?", &b);
        expect_test::expect![[r#"
            The `opt-level` setting controls optimization of the build. [1] Higher levels compile slower. [1]
            ```toml
            [profile.dev]
            opt-level = 1
            ```"#]]
        .assert_eq(&a.text);
        assert_eq!(a.citations.len(), 1);
        assert!(!a.not_in_docs);
    }

    #[test]
    fn the_lead_gives_four_sentences_holding_the_question_and_says_its_synonyms() {
        let lead = "A sprocket turns. Colours are nice. The sprocket has teeth. \
            The sprocket is red. A guard prevents jamming. Weather is mild.";
        let a = extractive_answer(
            "How do I stop a sprocket jamming?",
            &bundle(vec![passage("p", "s.md", lead)]),
        );
        // The opening sentence, then the best: "prevents" answers "stop".
        assert_eq!(
            a.text,
            "A sprocket turns. [1] The sprocket has teeth. [1] The sprocket is red. [1] \
             A guard prevents jamming. [1]"
        );
    }

    #[test]
    fn a_code_block_kept_for_the_question_brings_the_sentence_introducing_it() {
        // The block holds the question's word, the sentence introducing it none: the block is
        // kept for a how-question, and its introduction comes along to say what it is and
        // cite it.
        let lead = "Sprockets turn. Sprockets have teeth. Sprockets spin fast. Sprockets are red. \
            Put this in the file:\n```toml\nsprocket = 2\n```\n";
        let a = extractive_answer(
            "How do I configure a sprocket?",
            &bundle(vec![passage("p", "s.md", lead)]),
        );
        assert!(
            a.text
                .ends_with("Put this in the file: [1]\n```toml\nsprocket = 2\n```"),
            "{}",
            a.text
        );
        // A block inside a list item brings the item.
        let lead = lead.replace(
            "Put this in the file:\n",
            "Steps:\n- Install the sprocket\n",
        );
        let a = extractive_answer(
            "How do I configure a sprocket?",
            &bundle(vec![passage("p", "s.md", &lead)]),
        );
        assert!(
            a.text
                .ends_with("- Install the sprocket [1]\n```toml\nsprocket = 2\n```"),
            "{}",
            a.text
        );
    }

    #[test]
    fn an_abbreviation_the_bundle_defines_says_the_words_it_stands_for() {
        // The lead defines LTO; its sentence saying "LTO" holds the question's three words
        // besides "turn", and outranks the ones holding two.
        let lead = "Link time optimization (LTO) is a flag. The link time is shown. Linking \
            takes time. Optimization is good. Turn LTO on with `-C lto`.";
        let a = extractive_answer(
            "How do I turn on link-time optimization?",
            &bundle(vec![passage("p", "c.md", lead)]),
        );
        assert!(
            a.text.contains("Turn LTO on with `-C lto`. [1]"),
            "{}",
            a.text
        );
        // Without the definition it holds only "turn", and four sentences hold more or come
        // first.
        let a = extractive_answer(
            "How do I turn on link-time optimization?",
            &bundle(vec![passage("p", "c.md", &lead.replace(" (LTO)", ""))]),
        );
        assert!(!a.text.contains("Turn LTO on"), "{}", a.text);
    }

    #[test]
    fn asked_how_a_sentence_introducing_a_procedure_leads_and_brings_its_code() {
        // Five sentences hold the question's words; asked how, the two whose colons introduce
        // code rank above the background, and each brings its block.
        let lead = "Sprockets turn in every machine.\n\
            The sprocket machine shop sells sprocket guards.\n\
            Sprocket machines have a sprocket count.\n\
            A sprocket can also be set in the machine file:\n\
            ```toml\nsprocket = 2\n```\n\
            Or pass the sprocket to the machine:\n\
            ```sh\nmachine --sprocket 2\n```\n";
        let asked = |q: &str| extractive_answer(q, &bundle(vec![passage("p", "m.md", lead)])).text;
        assert_eq!(
            asked("How do I give the machine a sprocket?"),
            "Sprockets turn in every machine. [1] The sprocket machine shop sells sprocket \
             guards. [1] A sprocket can also be set in the machine file: [1]\n\
             ```toml\nsprocket = 2\n```\n\
             Or pass the sprocket to the machine: [1]\n\
             ```sh\nmachine --sprocket 2\n```"
        );
        // Not asked how, the procedures rank as what they hold; what a chosen one introduces
        // still comes along.
        let what = asked("What is a machine sprocket?");
        assert!(
            what.contains("Sprocket machines have a sprocket count. [1]"),
            "{what}"
        );
    }

    #[test]
    fn asked_how_the_sentence_saying_what_to_do_is_quoted_though_it_holds_no_word_asked() {
        // The sentence announcing the step holds the question; the step itself holds none of
        // its words, and the background sentences after it hold one each.
        let lead = "Widget Pages includes support for using a custom frame for your widget. \
            In addition to the vendor's steps, you need to take one more step so that the \
            widget works with your custom frame. \
            You need to add a FRAMEFILE file to the root of your site. \
            The file must name a single frame. \
            You may create the file by hand, or set up the custom frame in the vendor's panel. \
            If the vendor's panel writes the file, copy it to your widget.";
        let asked = |q: &str| extractive_answer(q, &bundle(vec![passage("p", "w.md", lead)])).text;
        let how = asked("How do I use a custom frame with Widget Pages?");
        assert!(
            how.contains("You need to add a FRAMEFILE file to the root of your site. [1]"),
            "{how}"
        );
        assert!(!how.contains("The file must name a single frame."), "{how}");
        // Not asked how, it is quoted for what it holds: nothing.
        let what = asked("What is a custom frame in Widget Pages?");
        assert!(!what.contains("FRAMEFILE"), "{what}");
    }

    #[test]
    fn a_sentence_introducing_a_list_brings_the_list_under_its_citation() {
        let lead = "The question mark operator applies to these types:\n\
            - `Result<T, E>`: an `Err(e)` returns early.\n\
            - `Option<T>`: a `None` returns early.\n\
            \n\
            Colours are nice.\n";
        let a = extractive_answer(
            "Which types does the question mark operator apply to?",
            &bundle(vec![passage("p", "q.md", lead)]),
        );
        assert_eq!(
            a.text,
            "The question mark operator applies to these types: [1]\n\
             - `Result<T, E>`: an `Err(e)` returns early.\n\
             - `Option<T>`: a `None` returns early."
        );
    }

    #[test]
    fn a_list_item_brings_its_list_and_the_sentence_introducing_it() {
        // Numbered items are items too, never a sentence "1.".
        let lead = "Colours are nice. The widget can be stopped by:\n\
            1. Pressing the red button.\n\
            2. Setting `halt = true` in the widget file.\n";
        let a = extractive_answer(
            "How do I press the button?",
            &bundle(vec![passage("p", "w.md", lead)]),
        );
        assert_eq!(
            a.text,
            "The widget can be stopped by: [1]\n\
             - Pressing the red button.\n\
             - Setting `halt = true` in the widget file."
        );
    }

    #[test]
    fn a_sentence_leaning_on_the_one_before_brings_it() {
        let lead = "The `///` syntax documents the item after it. There is another syntax: \
            `//!`, which documents the item it is inside. It is called an inner comment.";
        let a = extractive_answer(
            "What is an inner comment?",
            &bundle(vec![passage("p", "d.md", lead)]),
        );
        assert_eq!(
            a.text,
            "There is another syntax: `//!`, which documents the item it is inside. [1] \
             It is called an inner comment. [1]"
        );
    }

    #[test]
    fn each_chosen_sentence_brings_the_code_block_its_colon_introduces() {
        let lead = "Dependencies can be optional. An optional one defines a feature:\n\n\
            ```toml\n[features]\ngif = [\"dep:gif\"]\n```\n\n\
            The dependency itself is written like this:\n\n\
            ```toml\n[dependencies]\ngif = { version = \"1\", optional = true }\n```\n";
        let other = "To make a dependency optional, list it below:\n\n\
            ```toml\n[features]\nmake = [\"dependency\", \"optional\"]\n```\n";
        let a = extractive_answer(
            "How can I make a dependency optional?",
            &bundle(vec![
                passage("p1", "f.md", lead),
                passage("p2", "g.md", other),
            ]),
        );
        // Quoted without their blocks, the sentences would end in a colon and nothing.
        assert_eq!(
            a.text,
            "Dependencies can be optional. [1] An optional one defines a feature: [1]\n\
             ```toml\n[features]\ngif = [\"dep:gif\"]\n```\n\
             The dependency itself is written like this: [1]\n\
             ```toml\n[dependencies]\ngif = { version = \"1\", optional = true }\n```\n\
             To make a dependency optional, list it below: [2]\n\
             ```toml\n[features]\nmake = [\"dependency\", \"optional\"]\n```"
        );
    }

    #[test]
    fn a_pages_labels_are_not_sentences_and_abbreviations_end_none() {
        // A page's text holds a block a line: a label ends where its line does and is dropped.
        let lead = "Note\nThe sprocket turns slowly, e.g. when cold.\n\
            2024 Edition differences\nBefore 2024 the sprocket was blue.\n";
        let a = extractive_answer(
            "Why does the sprocket turn slowly?",
            &bundle(vec![passage("p", "s.html", lead)]),
        );
        assert!(
            a.text
                .starts_with("The sprocket turns slowly, e.g. when cold. [1]")
                && !a.text.contains("Note"),
            "{}",
            a.text
        );
        let a = extractive_answer(
            "Was the sprocket blue before 2024?",
            &bundle(vec![passage("p", "s.html", lead)]),
        );
        assert!(
            a.text.contains("Before 2024 the sprocket was blue. [1]")
                && !a.text.contains("differences"),
            "{}",
            a.text
        );
    }

    #[test]
    fn an_item_introducing_a_nested_list_carries_its_citation() {
        let lead = "Colours are nice.\n\n- These attributes must be unsafe:\n- `export_name`\n\
            - `no_mangle`\n";
        let a = extractive_answer(
            "Which attributes must be unsafe?",
            &bundle(vec![passage("p", "a.md", lead)]),
        );
        assert_eq!(
            a.text,
            "- These attributes must be unsafe: [1]\n- `export_name`\n- `no_mangle`"
        );
    }

    #[test]
    fn a_short_lead_leaves_room_the_next_passages_fill() {
        let lead = "Avoid global widgets.";
        let other = "Widgets are blue. A global widget can be an atomic counter. \
            Use a global lock for other widgets.";
        let a = extractive_answer(
            "What can a global widget be instead?",
            &bundle(vec![
                passage("p1", "a.md", lead),
                passage("p2", "b.md", other),
            ]),
        );
        assert_eq!(
            a.text,
            "Avoid global widgets. [1] A global widget can be an atomic counter. [2] \
             Use a global lock for other widgets. [2]"
        );
    }

    #[test]
    fn a_leads_page_says_the_rest_after_an_opening_that_only_announces_it() {
        let lead = "Rustc supports profile-guided optimization (PGO). \
            This chapter describes what PGO is and how it can be used.";
        let usage = "A PGO-optimized program is built in four steps. First compile it with \
            instrumentation enabled, then run it to gather a profile.";
        let elsewhere = "The linker can also do link-time optimization with a profile.";
        let q = "How do I use profile-guided optimization with rustc?";
        let a = extractive_answer(
            q,
            &bundle(vec![
                passage("p1", "pgo.md", lead),
                passage("p2", "pgo.md", usage),
                passage("p3", "lto.md", elsewhere),
            ]),
        );
        assert!(a.text.contains("built in four steps. [2]"), "{}", a.text);
        // Another page's sentence holding as little stays out.
        assert!(!a.text.contains("link-time"), "{}", a.text);
    }

    #[test]
    fn another_passage_gives_a_sentence_holding_as_much_as_the_leads_best() {
        let lead = "A sprocket turns. The sprocket has teeth. The sprocket is red. \
            The sprocket spins.";
        let a = extractive_answer(
            "Why does the sprocket jam?",
            &bundle(vec![
                passage("p1", "a.md", lead),
                passage("p2", "b.md", "Colours are nice. A gear can jam when cold."),
            ]),
        );
        assert!(
            a.text
                .ends_with("The sprocket spins. [1] A gear can jam when cold. [2]"),
            "{}",
            a.text
        );
    }

    #[test]
    fn an_empty_bundle_is_not_in_the_docs() {
        let a = extractive_answer("anything", &bundle(vec![]));
        assert!(a.not_in_docs);
        assert_eq!(a.text, NOT_IN_DOCS);
    }

    #[test]
    fn the_answer_fits_one_discord_message() {
        let long = format!(
            "{}\n\n```text\n{}\n```\n",
            "The widget word appears here in a long sentence. ".repeat(80),
            "widget line\n".repeat(50)
        );
        let b = bundle(vec![
            passage("p1", "a.md", &long),
            passage("p2", "b.md", &long),
            passage("p3", "c.md", &long),
        ]);
        let a = extractive_answer("How does the widget word work?", &b);
        assert!(a.text.len() <= ANSWER_BYTES, "{}", a.text.len());
        // Any fence that was opened is closed.
        assert_eq!(a.text.matches("```").count() % 2, 0);
    }
}
