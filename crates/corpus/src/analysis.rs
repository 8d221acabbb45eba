//! Text analysis shared by indexing, retrieval, the relevance gate and the answer: words split
//! at non-alphanumerics and camelCase humps, lowercased and lightly stemmed, with code
//! identifiers (`CARGO_TARGET_DIR`, `opt-level`, `std::io`, `build.rs`) also kept whole.
//!
//! The stemmer is deliberately light (plurals, `-ing`, `-ed`, a final `e`): it must make
//! "profiles", "profile" and "profiling" meet without merging words a reader would keep apart,
//! and it must be the same at index and query time, which the [`ReachTokenizer`] guarantees.

use std::collections::HashSet;

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// The tokenizer name registered on every index of schema 3 and later.
pub const TOKENIZER: &str = "reach";

/// Revisions of the analysis. An index is always queried with the analysis it was built with,
/// which its snapshot records (`tools.index`); a new index is built with [`Analysis::CURRENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Analysis {
    /// Index schema 3: the suffix rules only.
    Suffixes,
    /// Index schema 4: also irregular forms ("written" → "write") and the final `e` a short
    /// stem lost to `-ing` or `-ed` ("naming" → "name", "hiding" → "hide").
    Irregular,
    /// Index schema 5: also more irregular forms ("forbidden" → "forbid", "halves" → "half"),
    /// a base that is a stopword kept as one ("knew"), British `-ise` spellings meeting `-ize`,
    /// `-ied` meeting `-y` ("specified" → "specify"), and a noun in `-ation` or a verb in `-ate`
    /// meeting its stem ("configuration" and "configure", "deprecation" and "deprecated",
    /// "specification" and "specify"): a question's word and the documentation's meet though one
    /// says "optimise" or "configure" and the other "optimization" or "configuration" (schema 6
    /// too).
    Derived,
    /// Index schema 7: also an acronym ends its camelCase hump where a capitalised word follows
    /// (`UUIDField` is `UUID` and `Field`, `JSONEncoder` is `JSON` and `Encoder`), so a question
    /// saying "UUID" or "JSON" meets the identifiers of Python, Java or JavaScript docs; never
    /// before a plural's `s` (`URLs`, `IDs` stay one word).
    Acronyms,
}

impl Analysis {
    pub const CURRENT: Analysis = Analysis::Acronyms;

    /// The analysis an index of revision `index` (`PublicCorpusSnapshot.tools.index`) was
    /// built with: schema 3 had [`Analysis::Suffixes`], schema 4 [`Analysis::Irregular`], schema
    /// 5 and 6 [`Analysis::Derived`]; any later one the current analysis.
    pub fn of_index(index: &str) -> Analysis {
        if index.ends_with("/reach-schema-3") {
            Analysis::Suffixes
        } else if index.ends_with("/reach-schema-4") {
            Analysis::Irregular
        } else if index.ends_with("/reach-schema-5") || index.ends_with("/reach-schema-6") {
            Analysis::Derived
        } else {
            Analysis::CURRENT
        }
    }

    /// The name recorded in a bundle's retrieval method.
    pub const fn name(self) -> &'static str {
        match self {
            Analysis::Suffixes => "reach-analysis-1",
            Analysis::Irregular => "reach-analysis-2",
            Analysis::Derived => "reach-analysis-3",
            Analysis::Acronyms => "reach-analysis-4",
        }
    }
}

/// Words that carry no retrieval signal in a question.
#[rustfmt::skip]
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "between", "both", "but", "by", "can", "could", "did",
    "difference", "differences", "do", "does", "doing", "each", "else", "even", "ever", "every",
    "for", "from", "get", "gets", "got", "had", "happen", "happens", "has", "have", "having",
    "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "like", "long", "make", "makes", "many", "may", "me", "mean", "means", "might",
    "mine", "more", "most", "much", "must", "my", "need", "needs", "no", "not", "now", "of",
    "off", "often", "on", "one", "only", "or", "other", "our", "out", "over", "own", "please",
    "put", "puts",
    "same", "several", "she", "should", "so", "some", "such", "tell", "than", "that", "the",
    "their",
    "them", "then", "there", "these", "they", "thing", "things", "this", "those", "through",
    "to", "too", "under", "up", "us", "use", "used", "uses", "using", "various", "very", "want",
    "wants",
    "was", "way", "ways", "we", "were", "what", "when", "where", "whether", "which", "while",
    "who", "whom", "why", "will", "with", "without", "work", "works", "would", "you", "your",
    "yours",
];

/// Conversational padding: words a chat question wraps around its subject ("hi, how do I X a
/// third time? thanks") that say nothing of what it asks. Like stopwords they are neither
/// queried nor weighed by the relevance gate, so padding cannot make a covered question look
/// uncovered (a question's "anymore" is a word most docs never use, which the gate would weigh
/// as the question's subject). Words that are also documentation vocabulary (`help`, `try`,
/// `question`, `explain`, `right`) are deliberately absent.
#[rustfmt::skip]
pub const FILLER: &[&str] = &[
    "actually", "again", "already", "anybody", "anymore", "anyone", "anything", "anyway",
    "apparently",
    "basically", "certainly", "cheers", "currently", "definitely", "everyone", "everything",
    "exactly", "fifth", "folks", "fourth", "guys", "hello", "hey", "hi", "honestly", "hopefully",
    "idea", "know", "knows", "lately", "literally", "maybe", "nobody", "nowadays", "ok", "okay",
    "once", "perhaps",
    "possible", "possibly", "pretty", "probably", "quick", "quickly", "quite", "really",
    "seriously", "simply", "somebody", "somehow", "someone", "something", "sorry", "still",
    "stuff", "sure", "thank", "thanks", "third", "though", "thx", "time", "times", "today",
    "tried", "trying", "twice", "wonder", "wondering", "yeah", "yes", "yet",
];

/// The longest word of [`STOPWORDS`] and [`FILLER`]: a longer word is neither.
const LONGEST_STOPWORD: usize = 11;

/// Whether `word` (lowercased, unstemmed) is a stopword or conversational [`FILLER`].
pub fn is_stopword(word: &str) -> bool {
    word.len() <= LONGEST_STOPWORD && NOT_CONTENT.get_or_init(not_content).contains(word)
}

/// [`STOPWORDS`] and [`FILLER`] in one set: every word of every text indexed or asked is
/// looked up here, so it is a hash set with a hash cheap for short words (FNV-1a).
type NotContent = HashSet<&'static str, std::hash::BuildHasherDefault<Fnv>>;
static NOT_CONTENT: std::sync::OnceLock<NotContent> = std::sync::OnceLock::new();

fn not_content() -> NotContent {
    STOPWORDS.iter().chain(FILLER).copied().collect()
}

/// FNV-1a, for the short keys of [`NOT_CONTENT`] (no adversary chooses them).
#[derive(Debug, Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// One analyzed term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub text: String,
    /// A whole identifier (`cargo_target_dir`) whose parts are terms of their own too.
    pub compound: bool,
    /// The word (or identifier) was a stopword before stemming.
    pub stop: bool,
}

/// Characters that join the parts of a code identifier.
fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '-' | '.' | ':')
}

/// `w` lowercased into `out` (cleared first); no allocation for ASCII.
fn lower_into(w: &str, out: &mut String) {
    out.clear();
    if w.is_ascii() {
        out.extend(w.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.push_str(&w.to_lowercase());
    }
}

/// Walk the terms of `text` in order, as [`terms`] returns them: `emit(text, compound, stop)`.
/// The buffers are reused, so a walk allocates only for the few non-ASCII words.
fn walk(text: &str, a: Analysis, mut emit: impl FnMut(&str, bool, bool)) {
    let (mut lower, mut part, mut stemmed) = (String::new(), String::new(), String::new());
    let mut parts: Vec<&str> = Vec::new();
    for chunk in text.split(|c: char| !(c.is_alphanumeric() || is_joiner(c))) {
        let chunk = chunk.trim_matches(is_joiner);
        if chunk.is_empty() {
            continue;
        }
        // Trimmed of joiners at both ends, a chunk holding one has two words or more.
        let joined = chunk.contains(is_joiner);
        // Padding pads a sentence, never an identifier: "time" of "link-time" is content.
        let is_stop = |w: &str, a| {
            is_stop(w, a) && !(joined && a >= Analysis::Derived && FILLER.contains(&w))
        };
        if joined {
            lower_into(chunk, &mut lower);
            emit(&lower, true, false);
        }
        for w in chunk.split(is_joiner).filter(|w| !w.is_empty()) {
            // camelCase and PascalCase humps are parts of their own, the whole word too.
            humps_into(w, a, &mut parts);
            lower_into(w, &mut lower);
            if parts.len() > 1 {
                emit(&lower, true, false);
                for p in &parts {
                    lower_into(p, &mut part);
                    stem_into(&part, a, &mut stemmed);
                    emit(&stemmed, false, is_stop(&part, a));
                }
            } else {
                stem_into(&lower, a, &mut stemmed);
                emit(&stemmed, false, is_stop(&lower, a));
            }
        }
    }
}

/// Whether `word` (lowercased, unstemmed) is no content to the analysis `a`: a stopword or
/// filler, or (since schema 5) an irregular form of one ("knew", "done").
fn is_stop(word: &str, a: Analysis) -> bool {
    is_stopword(word) || (a >= Analysis::Derived && irregular(word, a).is_some_and(is_stopword))
}

/// Analyze `text` into terms, in order ([`Analysis::CURRENT`]).
pub fn terms(text: &str) -> Vec<Term> {
    terms_with(text, Analysis::CURRENT)
}

/// [`terms`] with the analysis `a`.
pub fn terms_with(text: &str, a: Analysis) -> Vec<Term> {
    let mut out = Vec::new();
    walk(text, a, |t, compound, stop| {
        out.push(Term {
            text: t.to_string(),
            compound,
            stop,
        })
    });
    out
}

/// The humps of a camelCase or PascalCase word (`TokenStream` → `Token`, `Stream`) into `out`
/// (cleared first); a word without an inner lower-to-upper change is one hump. Since
/// [`Analysis::Acronyms`], an acronym's last capital starts the next hump when lowercase
/// follows it (`JSONEncoder` → `JSON`, `Encoder`), but not when that is a final `s` (`URLs`).
fn humps_into<'t>(w: &'t str, a: Analysis, out: &mut Vec<&'t str>) {
    out.clear();
    let mut start = 0;
    let (mut prev_lower, mut prev_upper) = (false, false);
    let mut chars = w.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let upper = c.is_uppercase();
        let acronym_ends = a >= Analysis::Acronyms
            && upper
            && prev_upper
            && chars.peek().is_some_and(|(_, n)| n.is_lowercase())
            && &w[i + c.len_utf8()..] != "s";
        if upper && (prev_lower || acronym_ends) {
            out.push(&w[start..i]);
            start = i;
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        prev_upper = upper;
    }
    out.push(&w[start..]);
}

/// Consonant, vowel, consonant (not `w`, `x` or `y`): the shape of a short stem that lost a
/// final `e` to `-ing` or `-ed`.
fn is_cvc(b: &[u8]) -> bool {
    let vowel = |c: u8| matches!(c, b'a' | b'e' | b'i' | b'o' | b'u' | b'y');
    b.len() == 3
        && !vowel(b[0])
        && vowel(b[1])
        && !vowel(b[2])
        && !matches!(b[2], b'w' | b'x' | b'y')
}

/// The base form of an irregular English form documentation and questions use, which no
/// suffix rule reaches ("written" and "wrote" mean "write"). Forms that are also words of their
/// own in documentation ("bound", "left", "read") are not listed.
fn irregular(w: &str, a: Analysis) -> Option<&'static str> {
    if a >= Analysis::Derived
        && let Some(base) = irregular_since_5(w)
    {
        return Some(base);
    }
    Some(match w {
        "written" | "wrote" => "write",
        "rewritten" | "rewrote" => "rewrite",
        "built" => "build",
        "rebuilt" => "rebuild",
        "ran" => "run",
        "chosen" | "chose" => "choose",
        "found" => "find",
        "made" => "make",
        "held" => "hold",
        "kept" => "keep",
        "taken" | "took" => "take",
        "given" | "gave" => "give",
        "shown" => "show",
        "thrown" | "threw" => "throw",
        "hidden" => "hide",
        "broken" | "broke" => "break",
        "sent" => "send",
        "brought" => "bring",
        "caught" => "catch",
        "taught" => "teach",
        "forgotten" | "forgot" => "forget",
        "began" | "begun" => "begin",
        "understood" => "understand",
        "overridden" => "override",
        "children" => "child",
        "indices" => "index",
        _ => return None,
    })
}

/// Irregular forms schema 5 adds (schema 4's analysis is kept as it was).
fn irregular_since_5(w: &str) -> Option<&'static str> {
    Some(match w {
        "forbidden" | "forbade" => "forbid",
        "overwritten" | "overwrote" => "overwrite",
        "went" | "gone" => "go",
        "done" | "did" => "do",
        "undone" | "undid" => "undo",
        "redone" | "redid" => "redo",
        "seen" | "saw" => "see",
        "known" | "knew" => "know",
        "meant" => "mean",
        "said" => "say",
        "told" => "tell",
        "thought" => "think",
        "bought" => "buy",
        "sought" => "seek",
        "felt" => "feel",
        "lost" => "lose",
        "spent" => "spend",
        "dealt" => "deal",
        "drawn" | "drew" => "draw",
        "driven" | "drove" => "drive",
        "grown" | "grew" => "grow",
        "fallen" | "fell" => "fall",
        "frozen" | "froze" => "freeze",
        "stolen" | "stole" => "steal",
        "spoken" | "spoke" => "speak",
        "woken" | "woke" => "wake",
        "torn" | "tore" => "tear",
        "worn" | "wore" => "wear",
        "stuck" => "stick",
        "came" => "come",
        "became" => "become",
        "halves" => "half",
        _ => return None,
    })
}

fn has_vowel(s: &str) -> bool {
    s.chars()
        .any(|c| matches!(c, 'a' | 'e' | 'i' | 'o' | 'u' | 'y'))
}

/// A light English stemmer: plural `-s`/`-es`/`-ies`, `-ing`, `-ed`, a doubled final
/// consonant, and a final `e`. Words of three letters or fewer, and anything with a digit or a
/// non-ASCII letter, are kept as they are.
pub fn stem(w: &str) -> String {
    let mut s = String::with_capacity(w.len());
    stem_into(w, Analysis::CURRENT, &mut s);
    s
}

/// [`stem`] with the analysis `a` into `s` (cleared first), without allocating once `s` has
/// the room.
fn stem_into(w: &str, a: Analysis, s: &mut String) {
    s.clear();
    if a != Analysis::Suffixes
        && let Some(base) = irregular(w, a)
    {
        return stem_into(base, a, s);
    }
    s.push_str(w);
    if w.len() <= 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return;
    }
    if a >= Analysis::Derived {
        british_ize(s);
    }
    // "refutability" meets "refutable", "visibility" meets "visible".
    for (long, short) in [("ability", "able"), ("ibility", "ible")] {
        if s.ends_with(long) && s.len() - long.len() >= 3 {
            s.truncate(s.len() - long.len());
            s.push_str(short);
        }
    }
    if s.ends_with("ies") && s.len() - 3 >= 2 {
        s.truncate(s.len() - 3);
        s.push('y');
    } else if ["sses", "xes", "ches", "shes", "zes"]
        .iter()
        .any(|x| s.ends_with(x))
    {
        s.truncate(s.len() - 2);
    } else if s.ends_with('s') && !["ss", "us", "is", "ias"].iter().any(|x| s.ends_with(x)) {
        s.truncate(s.len() - 1);
    }
    let mut cut = false;
    for suffix in ["ing", "ed"] {
        if let Some(b) = s.strip_suffix(suffix)
            && b.len() >= 3
            && has_vowel(b)
        {
            s.truncate(b.len());
            cut = true;
            break;
        }
    }
    if cut {
        let b = s.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z' | b'e') {
            s.truncate(n - 1);
        } else if a != Analysis::Suffixes && n == 3 && is_cvc(b) {
            // "naming", "named" meet "name"; "hiding" meets "hide".
            s.push('e');
        } else if a >= Analysis::Derived && n >= 4 && b[n - 1] == b'i' && w.ends_with("ied") {
            // "specified", "applied" meet "specify", "apply" ("specifies" already does).
            s.pop();
            s.push('y');
        }
    }
    if s.len() > 4 && s.ends_with('e') {
        s.truncate(s.len() - 1);
    }
    if a >= Analysis::Derived {
        derivation(w, s);
    }
}

/// Schema 5: a British `-ise` spelling as the `-ize` one ("optimise", "initialised",
/// "serialisation" as "optimize", "initialized", "serialization"), when at least four letters
/// come before it (so "raise", "noise" and "wise" keep theirs).
fn british_ize(s: &mut String) {
    for suffix in ["isations", "isation", "ising", "ised", "ises", "ise"] {
        if let Some(base) = s.strip_suffix(suffix)
            && base.len() >= 4
        {
            let at = base.len();
            s.replace_range(at..at + 2, "iz");
            return;
        }
    }
}

/// Schema 5: a noun in `-ation` and a verb in `-ate` meet at their stem when at least four
/// letters are left ("configuration" meets "configur", "deprecated" and "deprecation" meet
/// "deprec", "allocate" and "allocation" meet "alloc"); `-ification` meets `-ify`
/// ("specification" meets "specify"). Called on the stem the other rules made of `w`, so
/// "configure" is already "configur", "generating" already "generat"; `-at` is cut only where
/// `w` said `-ate` ("format" and "formatting" keep theirs).
fn derivation(w: &str, s: &mut String) {
    if let Some(base) = s.strip_suffix("ification")
        && base.len() >= 2
    {
        s.truncate(base.len());
        s.push_str("ify");
        return;
    }
    let ate = ["ate", "ates", "ated", "ating"]
        .iter()
        .any(|x| w.ends_with(x));
    for suffix in ["ation", "at"] {
        if let Some(base) = s.strip_suffix(suffix)
            && base.len() >= 4
            && has_vowel(base)
            && (suffix == "ation" || ate)
        {
            s.truncate(base.len());
            return;
        }
    }
}

/// The analyzed, deduplicated content terms of a question (no stopwords, no compounds): words
/// of two letters or more, and a capital letter written as code ([`code_letters`]).
pub fn content_terms(text: &str) -> Vec<String> {
    content_terms_with(text, Analysis::CURRENT)
}

/// [`content_terms`] with the analysis `a`.
pub fn content_terms_with(text: &str, a: Analysis) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    walk(text, a, |t, compound, stop| {
        if !stop && !compound && t.chars().count() >= 2 && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    });
    for c in code_letters(text) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The capital letters `text` writes alone as code — `repr(C)`, `extern "C"`, `` `C` `` —
/// lowercased as the index holds them. A letter alone in prose ("a C library", "plan B") is no
/// term: it would join a question to every passage naming the letter. Written as code it names
/// the thing asked about (`repr(C)` is "the C representation").
pub fn code_letters(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    for w in b.windows(3) {
        let code = matches!((w[0], w[2]), (b'(', b')') | (b'"', b'"') | (b'`', b'`'));
        if code && w[1].is_ascii_uppercase() {
            let c = char::from(w[1].to_ascii_lowercase()).to_string();
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// Which of `wanted` (analyzed terms, no compounds) `text` holds. Cheaper than [`terms`]: a
/// word is analyzed only when one of the wanted terms could be its stem (a stem is a prefix of
/// its word, but for `-ies` → `-y`).
pub fn holds<'a>(text: &str, wanted: &[&'a str]) -> HashSet<&'a str> {
    let mut out = HashSet::new();
    for_each_held(text, wanted, |k| {
        out.insert(wanted[k]);
    });
    out
}

/// How many of `wanted` `text` holds: `holds(text, wanted).len()` without building the set.
pub fn count_held(text: &str, wanted: &[&str]) -> usize {
    if wanted.len() > 64 {
        return holds(text, wanted).len();
    }
    let mut mask = 0u64;
    for_each_held(text, wanted, |k| mask |= 1 << k);
    mask.count_ones() as usize
}

/// How many groups of `wanted` `text` holds a word of, where `group[k]` (below 64) is the group
/// of `wanted[k]`: a question's terms with their synonyms ([`synonyms`]), each term counted
/// once whether the text says it or a synonym.
pub fn count_groups_held(text: &str, wanted: &[&str], group: &[usize]) -> usize {
    let mut mask = 0u64;
    for_each_held(text, wanted, |k| mask |= 1 << group[k].min(63));
    mask.count_ones() as usize
}

/// Call `found(k)` for each word of `text` whose stem is `wanted[k]` (possibly more than once
/// for one `k`, and for every `k` of a term wanted twice), stopping once every wanted term was
/// found.
fn for_each_held(text: &str, wanted: &[&str], mut found: impl FnMut(usize)) {
    // The first letters a wanted term starts with: a word starting with none is skipped unread.
    let mut firsts = [false; 128];
    let mut any_first = false;
    for w in wanted {
        match w.bytes().next() {
            Some(b) if b.is_ascii() => firsts[usize::from(b.to_ascii_lowercase())] = true,
            _ => any_first = true,
        }
    }
    let (mut lower, mut stemmed) = (String::new(), String::new());
    let mut parts: Vec<&str> = Vec::new();
    let (mut held_few, mut held_many) = ([false; 64], Vec::new());
    let held: &mut [bool] = if wanted.len() <= held_few.len() {
        &mut held_few[..wanted.len()]
    } else {
        held_many.resize(wanted.len(), false);
        &mut held_many
    };
    let mut left = wanted.len();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if left == 0 {
            return;
        }
        if word.len() < 2 {
            continue;
        }
        let first = word.as_bytes()[0];
        if !any_first && first.is_ascii() && !firsts[usize::from(first.to_ascii_lowercase())] {
            continue;
        }
        let maybe = wanted.iter().any(|w| {
            // A stem is a prefix of its word but for its last letters ("specify" of
            // "specified", "optimiz" of "optimise", "half" of "halves").
            let stem = w.strip_suffix('y').unwrap_or(w);
            let keep = stem.len().saturating_sub(2).max(stem.len().min(3));
            let stem = stem.get(..keep).unwrap_or(stem);
            word.len() >= stem.len()
                && word.is_char_boundary(stem.len())
                && word[..stem.len()].eq_ignore_ascii_case(stem)
        });
        if !maybe {
            continue;
        }
        humps_into(word, Analysis::CURRENT, &mut parts);
        for part in &parts {
            lower_into(part, &mut lower);
            stem_into(&lower, Analysis::CURRENT, &mut stemmed);
            // A term wanted twice (for two groups) is found at each place.
            for (k, _) in wanted.iter().enumerate().filter(|(_, w)| **w == stemmed) {
                if !held[k] {
                    held[k] = true;
                    left -= 1;
                }
                found(k);
            }
        }
    }
}

/// Words of general English a question may use where documentation says another: each group's
/// words stand for one another in retrieval and the relevance gate ("how do I stop X" is
/// covered by a passage on preventing X), and a programmer's shorthand for the word it stands
/// for ("deps", "UB"). Only plain English, no project vocabulary, and never a word that would
/// join an out-of-corpus question to the documentation by itself.
#[rustfmt::skip]
pub const SYNONYMS: &[&[&str]] = &[
    &["stop", "prevent"],
    &["enable", "activate"],
    &["disable", "deactivate"],
    &["delete", "remove", "erase"],
    &["begin", "start"],
    &["finish", "end"],
    &["allow", "permit"],
    &["forbid", "prohibit", "disallow"],
    &["choose", "select", "pick"],
    &["change", "modify", "alter"],
    &["create", "generate"],
    &["show", "display"],
    &["hide", "conceal"],
    &["skip", "ignore"],
    &["run", "execute"],
    &["call", "invoke"],
    &["check", "verify"],
    &["limit", "restrict", "cap"],
    &["combine", "merge", "join"],
    &["folder", "directory"],
    &["big", "large"],
    &["speed", "fast"],
    &["crash", "panic"],
    &["error", "failure"],
    // A programmer's shorthand for the word documentation spells out.
    &["deps", "dependencies"],
    &["args", "arguments"],
    &["dir", "directory"],
    &["repo", "repository"],
    &["env", "environment"],
    &["config", "configuration"],
    &["ub", "undefined"],
];

/// The other words of `term`'s [`SYNONYMS`] group, analyzed with `a` (`term` is analyzed).
pub fn synonyms(term: &str, a: Analysis) -> Vec<String> {
    let mut stemmed = String::new();
    let mut out: Vec<String> = Vec::new();
    for group in SYNONYMS {
        let stems: Vec<String> = group
            .iter()
            .map(|w| {
                stem_into(w, a, &mut stemmed);
                stemmed.clone()
            })
            .collect();
        if stems.iter().any(|x| x == term) {
            for x in stems {
                if x != term && !out.contains(&x) {
                    out.push(x);
                }
            }
        }
    }
    out
}

/// A section title's own words: its analyzed terms, stopwords and whole identifiers aside, each
/// once. What [`title_precision`] reads of a title.
pub fn title_words(title: &str, a: Analysis) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    walk(title, a, |t, compound, stop| {
        if !stop && !compound && !words.iter().any(|w| w == t) {
            words.push(t.to_string());
        }
    });
    words
}

/// The share of a section title's own words ([`title_words`]) that are among `wanted`, the
/// question's analyzed content terms: 1 when the title names nothing the question does not, 0
/// for an empty title.
pub fn title_precision(words: &[String], wanted: &[&str]) -> f32 {
    if words.is_empty() {
        return 0.0;
    }
    let held = words
        .iter()
        .filter(|w| wanted.contains(&w.as_str()))
        .count();
    held as f32 / words.len() as f32
}

/// The tokenizer of the `content` and `headings` fields: [`terms_with`] its analysis, every
/// term.
#[derive(Debug, Clone)]
pub struct ReachTokenizer(pub Analysis);

impl Default for ReachTokenizer {
    fn default() -> Self {
        ReachTokenizer(Analysis::CURRENT)
    }
}

#[derive(Debug)]
pub struct ReachTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for ReachTokenizer {
    type TokenStream<'a> = ReachTokenStream;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> ReachTokenStream {
        let tokens = terms_with(text, self.0)
            .into_iter()
            .enumerate()
            .map(|(position, t)| Token {
                offset_from: 0,
                offset_to: 0,
                position,
                text: t.text,
                position_length: 1,
            })
            .collect();
        ReachTokenStream { tokens, next: 0 }
    }
}

impl TokenStream for ReachTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// Whether a page path or a question is about unstable (nightly-only) features: it names
/// `unstable` or `nightly` as a word of its own (`reference/unstable.html`, "on nightly").
pub fn about_unstable(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("unstable") || w.eq_ignore_ascii_case("nightly"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopword_lists_are_sorted_and_all_looked_up() {
        for list in [STOPWORDS, FILLER] {
            let mut s = list.to_vec();
            s.sort_unstable();
            assert_eq!(s, list);
            for w in list {
                assert!(w.len() <= LONGEST_STOPWORD, "{w}");
                assert!(is_stopword(w), "{w}");
            }
        }
        for w in ["profile", "differencesx", "", "Thé", "workspace"] {
            assert!(!is_stopword(w), "{w}");
        }
    }

    #[test]
    fn held_terms_are_counted_once_each() {
        let q = content_terms("How are raw string literals written in TokenStream docs?");
        let q: Vec<&str> = q.iter().map(String::as_str).collect();
        let text = "Raw strings: a raw string literal, and RawStrings in a token-stream. Docs.";
        let held = holds(text, &q);
        let mut names: Vec<&str> = held.iter().copied().collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["doc", "literal", "raw", "stream", "string", "token"]
        );
        assert_eq!(count_held(text, &q), held.len());
        assert_eq!(count_held("nothing of it here", &q), 0);
        // A term wanted for two groups (an abbreviation standing for two words) holds both.
        let wanted = ["turn", "lto", "lto"];
        assert_eq!(count_groups_held("Turn LTO on.", &wanted, &[0, 1, 2]), 3);
        assert_eq!(count_groups_held("Turn it on.", &wanted, &[0, 1, 2]), 1);
    }

    #[test]
    fn title_precision_is_the_share_of_the_title_the_question_names() {
        let q = content_terms("How are raw string literals written?");
        let q: Vec<&str> = q.iter().map(String::as_str).collect();
        let table: Vec<String> = [
            "Raw string literals",
            "Raw C string literals",
            "The Tokens",
            "",
        ]
        .iter()
        .map(|t| {
            format!(
                "{t:?} {:.2}",
                title_precision(&title_words(t, Analysis::CURRENT), &q)
            )
        })
        .collect();
        assert_eq!(
            table,
            [
                "\"Raw string literals\" 1.00",
                "\"Raw C string literals\" 0.75",
                "\"The Tokens\" 0.00",
                "\"\" 0.00"
            ]
        );
    }

    #[test]
    fn padding_is_not_content() {
        assert_eq!(
            content_terms("Hi! How does a port authenticate a call, a third time? Thanks"),
            ["port", "authentic", "call"]
        );
        // Quantifiers and "anymore" say how much or since when, never what is asked.
        assert_eq!(
            content_terms("Can several if let chains be used anymore, nowadays?"),
            ["let", "chain"]
        );
        // Since schema 5, a word of an identifier is never padding.
        assert_eq!(
            content_terms_with(
                "How do I turn on link-time optimization?",
                Analysis::Derived
            ),
            ["turn", "link", "time", "optimiz"]
        );
        assert_eq!(
            content_terms_with(
                "How do I turn on link-time optimization?",
                Analysis::Irregular
            ),
            ["turn", "link", "optimization"]
        );
    }

    #[test]
    fn stems_meet() {
        let table = [
            "profiles",
            "profile",
            "profiling",
            "dependencies",
            "dependency",
            "features",
            "yanked",
            "yanking",
            "settings",
            "running",
            "string",
            "class",
            "compiles",
            "compiled",
            "caches",
            "alias",
            "aliases",
            "refutability",
            "refutable",
            "u128",
            "größe",
        ];
        let out: String = table.iter().map(|w| format!("{w} {}\n", stem(w))).collect();
        expect_test::expect![[r#"
            profiles profil
            profile profil
            profiling profil
            dependencies dependency
            dependency dependency
            features featur
            yanked yank
            yanking yank
            settings set
            running run
            string string
            class class
            compiles compil
            compiled compil
            caches cach
            alias alias
            aliases alias
            refutability refutabl
            refutable refutabl
            u128 u128
            größe größe
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn irregular_forms_and_short_stems_meet_their_base_since_schema_4() {
        let words = [
            "name", "naming", "named", "hide", "hiding", "hidden", "write", "writing", "written",
            "wrote", "build", "built", "running", "ran", "pinned", "fixed", "ended", "string",
            "index", "indices",
        ];
        let show = |a: Analysis| {
            let mut s = String::new();
            walk(&words.join(" "), a, |t, _, _| {
                s.push_str(t);
                s.push(' ');
            });
            s
        };
        assert_eq!(
            show(Analysis::Irregular),
            "name name name hide hide hide writ writ writ writ build build run run pin fix end \
             string index index "
        );
        // Schema 3's analysis is kept as it was, for the snapshots built with it.
        assert_eq!(
            show(Analysis::Suffixes),
            "name nam nam hide hid hidden writ writ written wrot build built run ran pin fix end \
             string index indic "
        );
    }

    #[test]
    fn derived_forms_meet_their_base_since_schema_5() {
        let pairs = [
            ("configuration", "configure"),
            ("configurations", "configured"),
            ("optimization", "optimize"),
            ("optimisation", "optimizing"),
            ("optimise", "optimized"),
            ("initialised", "initialization"),
            ("deprecation", "deprecated"),
            ("allocation", "allocate"),
            ("specification", "specify"),
            ("specified", "specifies"),
            ("applied", "apply"),
            ("forbidden", "forbid"),
            ("halves", "half"),
        ];
        for (a, b) in pairs {
            let s = |w| {
                let mut s = String::new();
                stem_into(w, Analysis::Derived, &mut s);
                s
            };
            assert_eq!(s(a), s(b), "{a} {b}");
            // Schema 4's analysis is kept as it was.
            let old = |w| {
                let mut s = String::new();
                stem_into(w, Analysis::Irregular, &mut s);
                s
            };
            if a != "halves" {
                assert_ne!(old(a), old(b), "{a} {b}");
            }
        }
        // Words that only look derived keep theirs apart.
        for (a, b) in [
            ("format", "form"),
            ("formatting", "form"),
            ("raise", "raze"),
            ("mutation", "mut"),
        ] {
            let s = |w| {
                let mut s = String::new();
                stem_into(w, Analysis::Derived, &mut s);
                s
            };
            assert_ne!(s(a), s(b), "{a} {b}");
        }
        // A form of a stopword is no content.
        assert_eq!(
            content_terms_with("knew it was done", Analysis::Derived),
            Vec::<String>::new()
        );
        // The answer finds a word by its stem though the word's last letters differ.
        assert_eq!(
            count_held("It was specified and optimised.", &["specify", "optimiz"]),
            2
        );
    }

    #[test]
    fn a_capital_letter_written_as_code_is_a_content_term() {
        assert_eq!(code_letters(r#"repr(C), extern "C" and `T`"#), ["c", "t"]);
        assert!(code_letters("a C library, plan B, (c) and (CC)").is_empty());
        assert_eq!(
            content_terms("What does repr(C) do to the layout?"),
            ["repr", "layout", "c"]
        );
    }

    #[test]
    fn synonyms_are_the_other_words_of_a_group_analyzed() {
        assert_eq!(synonyms("stop", Analysis::Derived), ["prevent"]);
        assert_eq!(synonyms("prevent", Analysis::Derived), ["stop"]);
        assert!(synonyms("widget", Analysis::Derived).is_empty());
        // Shorthand meets the word it stands for, in both directions.
        assert_eq!(synonyms("dep", Analysis::Derived), ["dependency"]);
        assert!(synonyms("dependency", Analysis::Derived).contains(&"dep".to_string()));
        assert_eq!(synonyms("ub", Analysis::Derived).len(), 1);
        // A sentence saying a term's synonym holds the term, once.
        let (wanted, group) = (["stop", "sprocket", "prevent"], [0, 1, 0]);
        assert_eq!(
            count_groups_held("It prevents the sprocket.", &wanted, &group),
            2
        );
        assert_eq!(
            count_groups_held("Stop! It prevents it.", &wanted, &group),
            1
        );
        // Every word of the table is content, or it could never be asked.
        for w in SYNONYMS.iter().flat_map(|g| g.iter()) {
            assert!(!is_stopword(w), "{w}");
        }
    }

    #[test]
    fn identifiers_are_kept_whole_and_split() {
        let show = |s: &str| {
            terms(s)
                .iter()
                .map(|t| format!("{}{}", t.text, if t.compound { "*" } else { "" }))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            show("Set CARGO_TARGET_DIR, opt-level and build.rs."),
            "set cargo_target_dir* cargo target dir opt-level* opt level and build.rs* build rs"
        );
        assert_eq!(show("TokenStream"), "tokenstream* token stream");
        assert_eq!(show("std::io::Read"), "std::io::read* std io read");
        // An acronym ends its hump where a capitalised word follows; a plural stays one word.
        assert_eq!(show("JSONEncoder"), "jsonencoder* json encoder");
        assert_eq!(
            show("GenericUUIDTaggedItemBase"),
            "genericuuidtaggeditembase* generic uuid tag item base"
        );
        assert_eq!(show("IOError URLs UUID"), "ioerror* io error url uuid");
        // Before schema 7 the acronym and the word after it were one hump.
        let derived: Vec<String> = terms_with("JSONEncoder", Analysis::Derived)
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(derived, ["jsonencoder"]);
        assert_eq!(
            content_terms("How do I use the profiles of a workspace?"),
            ["profil", "workspac"]
        );
    }
}
