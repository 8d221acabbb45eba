//! Rendering a turn's outcome into the Discord messages a user sees. Pure.
//!
//! Answers are split into parts of at most [`MAX_PART_UNITS`] without breaking a code fence:
//! a fence open at a split is closed at the end of the part and reopened (with its info
//! string) at the start of the next. Citations are numbered, commit-pinned links in angle
//! brackets, which stops Discord from unfurling them (the Create Message flag
//! `SUPPRESS_EMBEDS` is set as well), each after the cited section's title where it has one
//! and the titles do not push the answer past one message, markdown escaped so a title is read
//! as written. Refusals are honest and short; the channel policy decides
//! whether they are posted at all.
//!
//! Length is counted in UTF-16 code units, which is never less than the character count
//! Discord's 2,000 limit is stated in, so a part that fits here fits there.

use std::fmt;

/// Largest part, in UTF-16 code units (Discord: 2,000 characters per message).
pub const MAX_PART_UNITS: usize = 2_000;
/// Most parts an answer may take; beyond it the last part says the answer was cut. Each part
/// is one delivery intent, and a wall of messages helps nobody.
pub const MAX_PARTS: usize = 5;
/// Longest citation URL accepted.
pub const MAX_CITATION_LEN: usize = 512;
/// Longest citation title shown, in characters; a longer one is cut with `…`.
pub const MAX_CITATION_TITLE_CHARS: usize = 80;
/// The note that ends a cut answer.
const TRUNCATED: &str = "\n(answer shortened)";

/// A commit-pinned citation link, and the title of the section it cites (shown before it).
#[derive(Clone, PartialEq, Eq)]
pub struct Citation {
    url: String,
    /// Plain text: one line, at most [`MAX_CITATION_TITLE_CHARS`], markdown escaped.
    title: Option<String>,
}

impl fmt::Debug for Citation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.title {
            Some(t) => write!(f, "Citation({t} {})", self.url),
            None => write!(f, "Citation({})", self.url),
        }
    }
}

/// The URL cannot be rendered as a citation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "citation must be an https URL of at most 512 bytes without spaces, <, > or control characters"
)]
pub struct InvalidCitation;

impl Citation {
    /// Validate a citation URL. That it is commit-pinned and resolves to a bundle passage is
    /// checked upstream (the evidence bundle); here it must only be safe inside `<…>`.
    pub fn new(url: &str) -> Result<Self, InvalidCitation> {
        let ok = url.starts_with("https://")
            && url.len() > "https://".len()
            && url.len() <= MAX_CITATION_LEN
            && url
                .chars()
                .all(|c| !c.is_whitespace() && !c.is_control() && c != '<' && c != '>');
        if ok {
            Ok(Citation {
                url: url.to_owned(),
                title: None,
            })
        } else {
            Err(InvalidCitation)
        }
    }

    /// The same link under the cited section's title. The title is the documentation's text,
    /// so it is made inert: whitespace runs and control characters become one space, it is cut
    /// to [`MAX_CITATION_TITLE_CHARS`], and every markdown character is escaped (a title like
    /// `max_connections` or `Vec<T>` reads as written). A title left empty adds nothing.
    pub fn titled(mut self, title: &str) -> Self {
        let words: Vec<&str> = title
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .collect();
        let plain = words.join(" ");
        let mut kept: String = plain.chars().take(MAX_CITATION_TITLE_CHARS).collect();
        if kept.len() < plain.len() {
            kept.pop();
            kept.push('…');
        }
        let mut escaped = String::with_capacity(kept.len());
        for c in kept.chars() {
            if matches!(c, '\\' | '*' | '_' | '~' | '`' | '|' | '<' | '[' | ']') {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        self.title = (!escaped.is_empty()).then_some(escaped);
        self
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The escaped title shown before the link, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
}

/// The turn's outcome, as far as rendering cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnView {
    /// SUCCEEDED: the validated answer text and its citations, in citation-number order.
    Answer {
        /// The answer text (may refer to citations as `[1]`, `[2]`…).
        text: String,
        /// The citations.
        citations: Vec<Citation>,
    },
    /// REFUSED: the question is not answerable from the admitted documentation.
    Refused,
    /// DEPENDENCY_UNAVAILABLE: the corpus is stale or a dependency is down.
    DependencyUnavailable,
}

/// Whether refusals are posted in a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChannelPolicy {
    /// Post the refusal text (default: an asker deserves to know).
    #[default]
    PostRefusals,
    /// Stay silent on refusals; answers are still posted.
    Silent,
}

/// The refusal policy of every admitted channel: a default, and the channels that differ.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefusalPolicy {
    pub default: ChannelPolicy,
    /// Channel id -> its own policy.
    pub channels: std::collections::BTreeMap<String, ChannelPolicy>,
}

impl RefusalPolicy {
    /// The policy for `channel_id` (its own, or the default).
    pub fn for_channel(&self, channel_id: &str) -> ChannelPolicy {
        self.channels
            .get(channel_id)
            .copied()
            .unwrap_or(self.default)
    }
}

impl std::str::FromStr for ChannelPolicy {
    type Err = String;
    /// `post` or `silent`, as the manifest writes them.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "post" => Ok(ChannelPolicy::PostRefusals),
            "silent" => Ok(ChannelPolicy::Silent),
            other => Err(format!(
                "a refusal policy is \"post\" or \"silent\", not {other:?}"
            )),
        }
    }
}

/// The refusal text for REFUSED.
pub const REFUSED_TEXT: &str = "I can't answer that from the documentation I'm allowed to use, \
so I won't guess. Try rephrasing, or ask about something the docs cover.";
/// The refusal text for DEPENDENCY_UNAVAILABLE.
pub const UNAVAILABLE_TEXT: &str = "I can't answer right now: my copy of the documentation \
is out of date or a service I depend on is unavailable. Please ask again later.";

/// Render an outcome under a channel policy: the message parts to send, in order (empty when
/// the policy is silent for this outcome).
pub fn render(view: &TurnView, policy: ChannelPolicy) -> Vec<String> {
    match view {
        TurnView::Answer { text, citations } => render_answer(text, citations),
        TurnView::Refused | TurnView::DependencyUnavailable if policy == ChannelPolicy::Silent => {
            Vec::new()
        }
        TurnView::Refused => vec![REFUSED_TEXT.to_owned()],
        TurnView::DependencyUnavailable => vec![UNAVAILABLE_TEXT.to_owned()],
    }
}

fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// The answer and its sources list; the sources are titled when `titled`.
fn with_sources(text: &str, citations: &[Citation], titled: bool) -> String {
    let mut full = text.trim_end().to_owned();
    if !citations.is_empty() {
        full.push_str("\n\nSources:");
        for (i, c) in citations.iter().enumerate() {
            match c.title().filter(|_| titled) {
                Some(t) => full.push_str(&format!("\n[{}] {t} <{}>", i + 1, c.as_str())),
                None => full.push_str(&format!("\n[{}] <{}>", i + 1, c.as_str())),
            }
        }
    }
    full
}

fn render_answer(text: &str, citations: &[Citation]) -> Vec<String> {
    // Titles help a reader choose a source, but never cost a second message.
    let mut full = with_sources(text, citations, true);
    if units(&full) > MAX_PART_UNITS {
        full = with_sources(text, citations, false);
    }
    let mut parts = split(&full, MAX_PART_UNITS);
    if parts.len() > MAX_PARTS {
        parts.truncate(MAX_PARTS);
        let last = parts.last_mut().expect("MAX_PARTS > 0");
        // Make room for the note without breaking a character; a fence that was open is closed
        // by `split` already, so cutting text before the closing fence would reopen it: cut
        // whole lines instead.
        while units(last) + units(TRUNCATED) > MAX_PART_UNITS {
            match last.rfind('\n') {
                Some(i) => last.truncate(i),
                None => last.clear(),
            }
        }
        let open = fence_open_after(last);
        if let Some(fence) = open {
            last.push('\n');
            last.push_str(fence_marker(&fence));
        }
        last.push_str(TRUNCATED);
    }
    parts
}

/// Whether a line opens or closes a fence: up to three spaces, then three or more backticks or
/// tildes. Returns the marker and the whole trimmed line (the info string is kept to reopen).
fn fence_line(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = rest.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let run = rest.chars().take_while(|&c| c == ch).count();
    (run >= 3).then(|| rest.trim_end().to_owned())
}

/// The marker (backticks or tildes) of a fence opening line.
fn fence_marker(open: &str) -> &str {
    let ch = open.chars().next().unwrap_or('`');
    let run = open.chars().take_while(|&c| c == ch).count();
    &open[..run * ch.len_utf8()]
}

/// The fence left open at the end of `text`, if any.
fn fence_open_after(text: &str) -> Option<String> {
    let mut open: Option<String> = None;
    for line in text.split('\n') {
        if let Some(f) = fence_line(line) {
            match &open {
                Some(o)
                    if f.starts_with(fence_marker(o))
                        && f.trim_start_matches(fence_marker(o)).trim().is_empty() =>
                {
                    open = None
                }
                Some(_) => {}
                None => open = Some(f),
            }
        }
    }
    open
}

/// Split `text` into parts of at most `max` UTF-16 units, at line ends where possible, closing
/// and reopening any code fence open at a split.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    // The fence open at the end of `current`, as its opening line.
    let mut open: Option<String> = None;

    let lines: Vec<&str> = text.split('\n').collect();
    for line in lines {
        // Reserve room to close an open fence (newline plus marker).
        let next_open = next_fence_state(&open, line);
        let closing = |o: &Option<String>| o.as_ref().map_or(0, |f| 1 + units(fence_marker(f)));
        let sep = usize::from(!current.is_empty());
        if units(&current) + sep + units(line) + closing(&next_open) <= max {
            if sep == 1 {
                current.push('\n');
            }
            current.push_str(line);
            open = next_open;
            continue;
        }
        // The line does not fit: end the current part (if it has anything).
        if !current.is_empty() && !is_only_fence_open(&current, &open) {
            if let Some(f) = &open {
                current.push('\n');
                current.push_str(fence_marker(f));
            }
            parts.push(std::mem::take(&mut current));
            reopen(&mut current, &mut open);
        }
        // Now place the line, cutting it if it is longer than a part can hold.
        let mut rest = line;
        loop {
            let next_open = next_fence_state(&open, rest);
            let sep = usize::from(!current.is_empty());
            let room = max.saturating_sub(units(&current) + sep + closing(&next_open));
            if units(rest) <= room {
                if sep == 1 {
                    current.push('\n');
                }
                current.push_str(rest);
                open = next_open;
                break;
            }
            let (mut head, mut tail) = cut(rest, room);
            if head.is_empty() && (current.is_empty() || is_only_fence_open(&current, &open)) {
                // Not even one character fits in a fresh part (a tiny `max`): take one anyway
                // rather than loop forever.
                let first = rest.chars().next().map_or(0, char::len_utf8);
                (head, tail) = rest.split_at(first);
            }
            if !head.is_empty() {
                if sep == 1 {
                    current.push('\n');
                }
                current.push_str(head);
            }
            if let Some(f) = &open {
                current.push('\n');
                current.push_str(fence_marker(f));
            }
            parts.push(std::mem::take(&mut current));
            reopen(&mut current, &mut open);
            rest = tail;
        }
    }
    if !current.is_empty() && !is_only_fence_open(&current, &open) {
        parts.push(current);
    }
    parts
}

/// Longest fence opening line reopened verbatim; a longer one is reopened as its bare
/// three-character marker so a reopened fence never crowds out the part.
const MAX_REOPEN_UNITS: usize = 64;

/// Start a new part: reopen the fence that was open at the split.
fn reopen(current: &mut String, open: &mut Option<String>) {
    if let Some(f) = open.as_mut() {
        if units(f) > MAX_REOPEN_UNITS {
            *f = fence_marker(f).chars().take(3).collect();
        }
        current.push_str(f);
    }
}

/// Whether `current` holds nothing but a reopened fence line.
fn is_only_fence_open(current: &str, open: &Option<String>) -> bool {
    open.as_deref() == Some(current)
}

fn next_fence_state(open: &Option<String>, line: &str) -> Option<String> {
    match (open, fence_line(line)) {
        (None, Some(f)) => Some(f),
        (Some(o), Some(f))
            if f.starts_with(fence_marker(o))
                && f.trim_start_matches(fence_marker(o)).trim().is_empty() =>
        {
            None
        }
        (o, _) => o.clone(),
    }
}

/// Cut `line` so the head is at most `room` UTF-16 units, preferring the last space, never
/// splitting a character. The head is never empty unless `room` is too small for any
/// character.
fn cut(line: &str, room: usize) -> (&str, &str) {
    let mut used = 0;
    let mut end = 0;
    for (i, c) in line.char_indices() {
        let u = c.len_utf16();
        if used + u > room {
            break;
        }
        used += u;
        end = i + c.len_utf8();
    }
    if end == 0 {
        // Not even one character fits in what remains of this part; the caller starts a new
        // part and tries again with the full room.
        return ("", line);
    }
    if end < line.len()
        && let Some(space) = line[..end].rfind(' ')
        && space > end / 2
    {
        return (&line[..space], &line[space + 1..]);
    }
    (&line[..end], &line[end..])
}
