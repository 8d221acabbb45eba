//! mdBook's include directives, resolved from the acquired tree as the site's build does.
//!
//! A book keeps its listings in files of their own and writes, inside a fence,
//! `{{#include ../listings/ch02/src/main.rs}}` or `{{#rustdoc_include …:anchor}}`: the
//! rendered page shows the code, the Markdown only the directive. A Markdown passage's
//! directive lines are replaced by what a reader of the page sees:
//!
//! - `path` the whole file; `path:N` line N; `path:N:` from line N; `path::M` up to line M;
//!   `path:N:M` lines N to M (1-based, inclusive);
//! - `path:name` the lines between `ANCHOR: name` and `ANCHOR_END: name`;
//! - `rustdoc_include` the same lines (mdBook hides the rest of the file in the page);
//! - never a line naming an anchor (`// ANCHOR: name`), which mdBook drops, and the lines'
//!   common indentation removed (a part cut from inside a function reads from its margin).
//!
//! The path is relative to the including file's directory. A directive is left as written
//! (and the passage's view shows nothing for it) when its file is not a regular file of the
//! tree, leaves the tree, is no UTF-8 text or is past the ceilings a pinned file is held to.
//! Nothing outside the acquired tree is ever read: the tree is already the pinned revision.
//!
//! **Invariant:** an included file is read as text only, once however often it is named; it
//! never becomes a passage of its own, and what the directives add counts toward the build's
//! byte ceiling: past it, directives stay unresolved and the build is refused.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use crate::process::{Media, judge_content};
use crate::source::Ceilings;
use crate::tree::{AcquiredTree, EntryKind};

/// The files of an acquired tree an include directive may name, by their tree path, each read
/// once however many directives name it.
#[derive(Debug)]
pub struct Includes<'t> {
    files: HashMap<String, &'t [u8]>,
    ceilings: &'t Ceilings,
    /// Each file read so far (`None`: not includable).
    listings: RefCell<HashMap<String, Option<Rc<Listing<'t>>>>>,
    /// Bytes the directives may add in all.
    budget: u64,
    added: Cell<u64>,
    /// A directive was left unresolved because it would have passed the budget.
    over: Cell<bool>,
}

/// One includable file: its lines and where each of its anchors' lines are.
#[derive(Debug)]
struct Listing<'t> {
    lines: Vec<&'t str>,
    /// An anchor's lines as `first..end` indices of `lines` (to the file's end when unclosed).
    anchors: HashMap<&'t str, (usize, usize)>,
}

impl<'t> Includes<'t> {
    /// The includable files of `tree`, held to `ceilings` as a pinned file is; the directives
    /// may add at most `budget` bytes in all.
    pub fn of(tree: &'t AcquiredTree, ceilings: &'t Ceilings, budget: u64) -> Self {
        // By the path processing gives a pinned file (`./src/x.md` is `src/x.md`); never
        // repository internals.
        let files = tree
            .entries
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::File { bytes, .. } => {
                    let path = crate::process::normalize(&e.path).ok()?;
                    (!path.split('/').any(|c| c == ".git")).then_some((path, bytes.as_slice()))
                }
                _ => None,
            })
            .collect();
        Includes {
            files,
            ceilings,
            listings: RefCell::new(HashMap::new()),
            budget,
            added: Cell::new(0),
            over: Cell::new(false),
        }
    }

    /// Whether a directive was left unresolved because what it names would have passed the
    /// budget: the build is refused at its byte ceiling.
    pub fn over_budget(&self) -> bool {
        self.over.get()
    }

    /// `text` (lines of the Markdown file at `path`) with each directive line that resolves
    /// replaced by the lines it includes; `None` when no line does.
    pub fn expand(&self, path: &str, text: &str) -> Option<String> {
        if !text.contains("{{#") {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
            }
            match Directive::parse(line).and_then(|d| self.resolve(path, &d)) {
                Some(lines) => {
                    out.push_str(&lines);
                    changed = true;
                }
                None => out.push_str(line),
            }
        }
        changed.then_some(out)
    }

    /// The file at the tree path `target`, read and judged the first time it is named.
    fn listing(&self, target: String) -> Option<Rc<Listing<'t>>> {
        if let Some(l) = self.listings.borrow().get(&target) {
            return l.clone();
        }
        let read = self.files.get(&target).and_then(|&bytes| {
            if bytes.starts_with(crate::process::LFS_POINTER_PREFIX) {
                return None;
            }
            judge_content(bytes, Media::Text, self.ceilings).ok()?;
            let text = std::str::from_utf8(bytes).ok()?;
            let lines: Vec<&str> = text.lines().collect();
            let mut anchors: HashMap<&str, (usize, usize)> = HashMap::new();
            let mut open: HashMap<&str, usize> = HashMap::new();
            for (i, l) in lines.iter().enumerate() {
                if let Some(name) = anchor_mark(l, "ANCHOR:") {
                    open.entry(name).or_insert(i + 1);
                } else if let Some(name) = anchor_mark(l, "ANCHOR_END:")
                    && let Some(&first) = open.get(name)
                {
                    anchors.entry(name).or_insert((first, i));
                }
            }
            for (name, first) in open {
                anchors.entry(name).or_insert((first, lines.len()));
            }
            Some(Rc::new(Listing { lines, anchors }))
        });
        self.listings.borrow_mut().insert(target, read.clone());
        read
    }

    /// The lines `d` includes from the file `d.path` names relative to `from`'s directory.
    fn resolve(&self, from: &str, d: &Directive<'_>) -> Option<String> {
        if self.over.get() {
            return None;
        }
        let listing = self.listing(relative_to(from, d.path)?)?;
        let lines = &listing.lines;
        let chosen: &[&str] = match &d.part {
            Part::Whole => lines,
            Part::Lines(start, end) => {
                let from = start.unwrap_or(1).max(1) - 1;
                let to = end.unwrap_or(lines.len()).min(lines.len());
                lines.get(from..to.max(from))?
            }
            Part::Anchor(name) => {
                let &(first, end) = listing.anchors.get(name)?;
                &lines[first..end.max(first)]
            }
        };
        let kept: Vec<&str> = chosen
            .iter()
            .copied()
            .filter(|l| {
                anchor_mark(l, "ANCHOR:").is_none() && anchor_mark(l, "ANCHOR_END:").is_none()
            })
            .collect();
        // A part cut from inside a function reads from its own margin.
        let margin = kept
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
            .min()
            .unwrap_or(0);
        let bytes: u64 = kept
            .iter()
            .map(|l| l.len().saturating_sub(margin) as u64 + 1)
            .sum();
        if self.added.get() + bytes > self.budget {
            self.over.set(true);
            return None;
        }
        self.added.set(self.added.get() + bytes);
        let kept: Vec<&str> = kept.iter().map(|l| l.get(margin..).unwrap_or("")).collect();
        Some(kept.join("\n"))
    }
}

/// The tree paths the include directives of the Markdown file at `path` name (those that stay
/// in the tree), so a reader of a directory can take the listings a book includes beside its
/// pages.
pub fn named_files(path: &str, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| l.contains("{{#")) {
        if let Some(target) = Directive::parse(line).and_then(|d| relative_to(path, d.path))
            && !out.contains(&target)
        {
            out.push(target);
        }
    }
    out
}

/// One include directive, the whole of its line.
#[derive(Debug, PartialEq, Eq)]
struct Directive<'a> {
    path: &'a str,
    part: Part<'a>,
}

#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    Whole,
    /// 1-based, inclusive; an open end is the file's.
    Lines(Option<usize>, Option<usize>),
    Anchor(&'a str),
}

impl<'a> Directive<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let inner = line.trim().strip_prefix("{{#")?.strip_suffix("}}")?.trim();
        let (name, arg) = inner.split_once(char::is_whitespace)?;
        if name != "include" && name != "rustdoc_include" {
            return None;
        }
        let arg = arg.trim();
        let (path, part) = match arg.split_once(':') {
            None => (arg, Part::Whole),
            Some((path, rest)) => (path, Part::of(rest)?),
        };
        (!path.is_empty()).then_some(Directive { path, part })
    }
}

impl<'a> Part<'a> {
    fn of(rest: &'a str) -> Option<Self> {
        let number = |s: &str| -> Option<Option<usize>> {
            if s.is_empty() {
                Some(None)
            } else {
                s.parse().ok().map(Some)
            }
        };
        match rest.split_once(':') {
            Some((a, b)) => Some(Part::Lines(number(a)?, number(b)?)),
            None => match rest.parse::<usize>() {
                Ok(n) => Some(Part::Lines(Some(n), Some(n))),
                Err(_) if !rest.is_empty() => Some(Part::Anchor(rest)),
                Err(_) => None,
            },
        }
    }
}

/// The anchor a line marks with `mark` (`ANCHOR:` or `ANCHOR_END:`), as mdBook reads one
/// anywhere in a comment: `// ANCHOR: name`, `# ANCHOR_END: name`.
fn anchor_mark<'l>(line: &'l str, mark: &str) -> Option<&'l str> {
    let at = line.find(mark)?;
    let rest = &line[at + mark.len()..];
    rest.split_whitespace().next()
}

/// `target` resolved against the directory of the tree path `from`; `None` when it leaves the
/// tree or is absolute.
fn relative_to(from: &str, target: &str) -> Option<String> {
    if target.contains('\\') {
        return None;
    }
    crate::process::normalize(&crate::process::resolve_link(from, target)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Revision, TreeEntry};

    fn tree(files: &[(&str, &str)]) -> AcquiredTree {
        AcquiredTree {
            revision: Revision {
                commit: None,
                archive_digest: None,
                citation_rev: "t".into(),
            },
            entries: files
                .iter()
                .map(|(p, t)| TreeEntry {
                    path: p.to_string(),
                    kind: EntryKind::File {
                        bytes: t.as_bytes().to_vec(),
                        executable: false,
                    },
                })
                .collect(),
            compressed_bytes: 1,
            expanded_bytes: 1,
        }
    }

    const MAIN: &str = "use std::io;\n\n// ANCHOR: print\nfn main() {\n    println!(\"Guess!\");\n}\n\
                        // ANCHOR_END: print\n";

    #[test]
    fn directives_take_the_lines_they_name() {
        let t = tree(&[("listings/ch02/main.rs", MAIN)]);
        let ceilings = Ceilings::default();
        let inc = Includes::of(&t, &ceilings, u64::MAX);
        let page = |d: &str| format!("Some text\n\n```rust\n{d}\n```");
        let got = |d: &str| inc.expand("src/ch02.md", &page(d)).unwrap();
        // The whole file, without the anchors' own lines.
        assert_eq!(
            got("{{#include ../listings/ch02/main.rs}}"),
            page("use std::io;\n\nfn main() {\n    println!(\"Guess!\");\n}")
        );
        // An anchor's lines, whichever directive names it.
        let print = page("fn main() {\n    println!(\"Guess!\");\n}");
        assert_eq!(got("{{#include ../listings/ch02/main.rs:print}}"), print);
        assert_eq!(
            got("  {{#rustdoc_include ../listings/ch02/main.rs:print}}"),
            print
        );
        // Line ranges, 1-based and inclusive, either end open.
        assert_eq!(
            got("{{#include ../listings/ch02/main.rs:1}}"),
            page("use std::io;")
        );
        assert_eq!(
            got("{{#include ../listings/ch02/main.rs:4:5}}"),
            page("fn main() {\n    println!(\"Guess!\");")
        );
        assert_eq!(
            got("{{#include ../listings/ch02/main.rs::1}}"),
            page("use std::io;")
        );
        assert_eq!(got("{{#include ../listings/ch02/main.rs:6:}}"), page("}"));
        // A part cut from inside a function reads from its own margin.
        assert_eq!(
            got("{{#include ../listings/ch02/main.rs:5}}"),
            page("println!(\"Guess!\");")
        );
        // Text with no directive, or one mdBook does not include from, is left alone.
        assert_eq!(inc.expand("src/ch02.md", "Plain {{#title x}} text"), None);
        assert_eq!(inc.expand("src/ch02.md", "{{#title Guessing}}"), None);
    }

    #[test]
    fn a_directive_naming_nothing_readable_in_the_tree_is_left_as_written() {
        let mut t = tree(&[
            ("./listings/main.rs", MAIN),
            ("listings/blob.bin", "a\0b"),
            ("secret.txt", "s"),
            (".git/config", "[core]"),
        ]);
        t.entries.push(TreeEntry {
            path: "listings/link.rs".into(),
            kind: EntryKind::Symlink {
                target: "main.rs".into(),
            },
        });
        let small = Ceilings {
            max_file_bytes: 40,
            ..Ceilings::default()
        };
        for (ceilings, directive) in [
            (Ceilings::default(), "{{#include ../listings/missing.rs}}"),
            (Ceilings::default(), "{{#include ../listings/blob.bin}}"),
            (Ceilings::default(), "{{#include ../listings/link.rs}}"),
            // Out of the tree, or absolute.
            (Ceilings::default(), "{{#include ../../secret.txt}}"),
            (Ceilings::default(), "{{#include /secret.txt}}"),
            // Past the ceiling a pinned file is held to.
            (small, "{{#include ../listings/main.rs}}"),
            // Repository internals.
            (Ceilings::default(), "{{#include ../.git/config}}"),
            // An anchor the file never opens.
            (
                Ceilings::default(),
                "{{#include ../listings/main.rs:nowhere}}",
            ),
        ] {
            let inc = Includes::of(&t, &ceilings, u64::MAX);
            assert_eq!(inc.expand("src/a.md", directive), None, "{directive}");
        }
        let ceilings = Ceilings::default();
        let inc = Includes::of(&t, &ceilings, u64::MAX);
        assert_eq!(
            inc.expand("a.md", "{{#include secret.txt}}").as_deref(),
            Some("s")
        );
        assert!(!inc.over_budget());
        // Past the bytes the directives may add in all: left as written, and said.
        let inc = Includes::of(&t, &ceilings, 40);
        let twice = "{{#include listings/main.rs:print}}\n{{#include listings/main.rs:print}}";
        let got = inc.expand("a.md", twice).unwrap();
        assert!(
            got.starts_with("fn main() {") && got.ends_with("{{#include listings/main.rs:print}}")
        );
        assert!(inc.over_budget());
    }
}
