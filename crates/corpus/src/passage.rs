//! Splitting accepted files into passages at headings.
//!
//! A passage is a run of whole source lines `[line_start, line_end]` (1-based, inclusive). For
//! Markdown and text its `text` is exactly those lines, so a citation's line range always
//! contains the passage; for HTML it is the main content those lines hold ([`crate::html`]):
//! navigation and boilerplate dropped, code blocks fenced, the page's own heading ids as
//! anchors. Every passage knows its section path (`context`): the headings above its own.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

use crate::include::Includes;
use crate::process::{AcceptedFile, Media};

/// Revision of the splitting rules; recorded in every snapshot. Bump when passages change.
pub const PARSER_REVISION: &str = "reach-corpus-passages/7";

/// Joins the headings of a passage's section path (`context`): written here, split by readers.
pub const CONTEXT_SEPARATOR: &str = " › ";

/// A passage closes at the first blank line after this many bytes…
const PASSAGE_SOFT_BYTES: usize = 1536;
/// …and at any line boundary after this many, so one passage stays a bounded citation.
const PASSAGE_HARD_BYTES: usize = 6144;

/// The longest purpose a manual page's NAME line is read for ([`Outline::read_name_line`]).
const NAME_LINE_BYTES: usize = 160;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Stable id: a digest of path, anchor, line range and text.
    pub id: String,
    pub path: String,
    pub section: String,
    /// The headings above `section`, outermost first, joined by ` › ` (empty at the top).
    #[serde(default)]
    pub context: String,
    /// Heading anchor (GitHub-style for Markdown, the page's own id for HTML), empty for text
    /// before the first heading.
    pub anchor: String,
    pub line_start: u32,
    pub line_end: u32,
    pub text: String,
    pub digest: Sha256Digest,
}

impl Passage {
    fn new(path: &str, section: &Section, start: u32, end: u32, text: String) -> Self {
        let anchor = section.anchor.as_str();
        let digest = Sha256Digest::of(text.as_bytes());
        let id_digest = Sha256Digest::of_parts([
            path.as_bytes(),
            anchor.as_bytes(),
            &start.to_be_bytes(),
            &end.to_be_bytes(),
            digest.as_bytes(),
        ]);
        Passage {
            id: format!("p-{}", &id_digest.hex()[..20]),
            path: path.to_string(),
            section: section.title.clone(),
            context: section.context.clone(),
            anchor: anchor.to_string(),
            line_start: start,
            line_end: end,
            text,
            digest,
        }
    }

    /// `{base}/blob/{rev}/{path}#L{start}-L{end}` — the citation URL.
    pub fn line_url(&self, base: &str, rev: &str) -> String {
        format!(
            "{base}/blob/{rev}/{}#L{}-L{}",
            self.path, self.line_start, self.line_end
        )
    }

    /// `{base}/blob/{rev}/{path}#{anchor}` — the section URL.
    pub fn section_url(&self, base: &str, rev: &str) -> String {
        if self.anchor.is_empty() {
            format!("{base}/blob/{rev}/{}", self.path)
        } else {
            format!("{base}/blob/{rev}/{}#{}", self.path, self.anchor)
        }
    }
}

/// How a snapshot's passages are cited: source lines pinned to the revision, or, for the pages
/// of a published static site, the page and its section anchor.
#[derive(Debug, Clone, Copy)]
pub struct Citer<'a> {
    pub base: &'a str,
    pub rev: &'a str,
    /// `(site_base, site_root)` of the source's published site.
    pub site: Option<(&'a str, &'a str)>,
}

impl Citer<'_> {
    /// The published URL of `p`'s page, when `p` is an HTML page of the site.
    fn published(&self, p: &Passage) -> Option<String> {
        let (base, root) = self.site?;
        if !matches!(
            crate::process::Media::of_path(&p.path),
            Some(crate::process::Media::Html)
        ) {
            return None;
        }
        let page = if root.is_empty() {
            p.path.as_str()
        } else {
            p.path.strip_prefix(root)?.strip_prefix('/')?
        };
        Some(if p.anchor.is_empty() {
            format!("{base}/{page}")
        } else {
            format!("{base}/{page}#{}", p.anchor)
        })
    }

    /// The citation URL: the published section, else the pinned line range.
    pub fn url(&self, p: &Passage) -> String {
        self.published(p)
            .unwrap_or_else(|| p.line_url(self.base, self.rev))
    }

    /// The section URL: the published section, else the pinned file and anchor.
    pub fn section_url(&self, p: &Passage) -> String {
        self.published(p)
            .unwrap_or_else(|| p.section_url(self.base, self.rev))
    }
}

/// GitHub-style anchor: lowercase, alphanumerics, `-` and `_` kept, spaces to `-`.
pub fn slug(title: &str) -> String {
    title
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c == ' ' {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

struct Section {
    title: String,
    anchor: String,
    context: String,
}

impl Section {
    /// Whether the section only points elsewhere: a "See also" section (a manual page's last,
    /// DocBook's, Sphinx's) names other pages and answers nothing, while its title's "see"
    /// matches every question asking how to see something. It becomes no passage.
    fn points_elsewhere(&self) -> bool {
        self.title
            .trim()
            .trim_end_matches(':')
            .eq_ignore_ascii_case("see also")
    }
}

/// The open headings above the current one, as `(level, title)`.
#[derive(Default)]
struct Outline {
    open: Vec<(u8, String)>,
    /// Whether the first open heading is the page's title, above every later heading whatever
    /// its level.
    titled: bool,
}

impl Outline {
    /// A manual page's NAME line (`git-cherry-pick - Apply the changes introduced by some
    /// existing commits`, DocBook's `EXPLAIN — show the execution plan of a statement`) as the
    /// first text of a page: the page's title names a command, the line says what it
    /// does. Its purpose joins the title every later section's path holds, so a question in
    /// the purpose's words finds the page's sections, not only the one-line NAME section.
    fn read_name_line(&mut self, text: &str) {
        let Some((_, title)) = self.open.first_mut() else {
            return;
        };
        // The title is the name, or the name then its manual section or other words.
        let lowered = title.to_lowercase();
        let names_title = |name: &str| {
            lowered
                .strip_prefix(&name.to_lowercase())
                .is_some_and(|rest| {
                    rest.chars()
                        .next()
                        .is_none_or(|c| !c.is_alphanumeric() && !matches!(c, '-' | '_'))
                })
        };
        let purpose = [" - ", " — ", " – "]
            .iter()
            .filter_map(|sep| text.split_once(sep))
            .min_by_key(|(name, _)| name.len())
            .filter(|(name, purpose)| {
                !name.is_empty()
                    && names_title(name)
                    && !purpose.is_empty()
                    && purpose.len() <= NAME_LINE_BYTES
            })
            .map(|(_, purpose)| purpose.trim());
        if let Some(purpose) = purpose {
            *title = format!("{title} — {purpose}");
        }
    }

    /// Enter a heading of `level`; returns the context path above it.
    fn enter(&mut self, level: u8, title: &str) -> String {
        while self.open.len() > usize::from(self.titled)
            && self.open.last().is_some_and(|(l, _)| *l >= level)
        {
            self.open.pop();
        }
        let context = self
            .open
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(CONTEXT_SEPARATOR);
        self.open.push((level, title.to_string()));
        context
    }
}

/// Whether a Markdown file is a book's table of contents (mdBook's and GitBook's
/// `SUMMARY.md`): headings, separators and at least three lines that are each one link to a
/// page and nothing else. A reader sees it as the sidebar, as the navigation a page's HTML
/// drops, never as a page: its every chapter title would cover almost any question.
fn is_table_of_contents(text: &str) -> bool {
    let mut links = 0;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.chars().all(|c| "-*_ ".contains(c)) {
            continue;
        }
        let item = line
            .strip_prefix(['-', '*', '+'])
            .or_else(|| {
                let digits = line.find(|c: char| !c.is_ascii_digit())?;
                (digits > 0).then(|| line[digits..].strip_prefix('.'))?
            })
            .unwrap_or(line)
            .trim_start();
        let one_link = item.starts_with('[')
            && item.ends_with(')')
            && item
                .find("](")
                .is_some_and(|at| !item[at + 2..item.len() - 1].contains([' ', '(', ')']));
        if !one_link {
            return false;
        }
        links += 1;
    }
    links >= 3
}

/// Split one accepted file into passages.
pub fn split(file: &AcceptedFile) -> Vec<Passage> {
    split_including(file, None)
}

/// Split one accepted file into passages, a Markdown passage's include directives replaced by
/// what they include from the tree ([`Includes`]); its lines stay the file's own.
pub fn split_including(file: &AcceptedFile, includes: Option<&Includes<'_>>) -> Vec<Passage> {
    if file.media == Media::Html {
        return split_html(file);
    }
    if file.media == Media::Markdown && is_table_of_contents(&file.text) {
        return Vec::new();
    }
    let lines: Vec<&str> = file.text.split('\n').collect();
    let default_title = file
        .path
        .rsplit('/')
        .next()
        .unwrap_or(&file.path)
        .to_string();
    let mut anchors = std::collections::HashMap::<String, u32>::new();
    let mut out = Vec::new();
    let mut section = Section {
        title: default_title,
        anchor: String::new(),
        context: String::new(),
    };
    let mut outline = Outline::default();
    let mut start: usize = 0; // index into lines of the current passage's first line
    let mut bytes = 0usize;
    let mut fence: Option<&str> = None;
    let mut read_text = false;
    let flush = |out: &mut Vec<Passage>, section: &Section, start: usize, end: usize| {
        // Trim blank lines at both ends so the range is tight.
        let (mut s, mut e) = (start, end);
        while s < e && lines[s].trim().is_empty() {
            s += 1;
        }
        while e > s && lines[e - 1].trim().is_empty() {
            e -= 1;
        }
        if s == e || section.points_elsewhere() {
            return;
        }
        let text = lines[s..e].join("\n");
        let text = includes
            .and_then(|i| i.expand(&file.path, &text))
            .unwrap_or(text);
        out.push(Passage::new(
            &file.path,
            section,
            s as u32 + 1,
            e as u32,
            text,
        ));
    };
    for (i, line) in lines.iter().enumerate() {
        let heading = match file.media {
            Media::Markdown => {
                let t = line.trim_start();
                if let Some(f) = fence {
                    if t.starts_with(f) {
                        fence = None;
                    }
                    None
                } else if opens_fence(t) {
                    fence = Some(&t[..3]);
                    None
                } else {
                    markdown_heading(line)
                }
            }
            Media::Html | Media::Text => None,
        };
        if let Some((level, title)) = heading {
            flush(&mut out, &section, start, i);
            let base = slug(&title);
            let n = anchors.entry(base.clone()).or_insert(0);
            let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
            *n += 1;
            let context = outline.enter(level, &title);
            section = Section {
                title,
                anchor,
                context,
            };
            start = i;
            bytes = 0;
        } else if fence.is_none() && !line.trim().is_empty() && !read_text {
            read_text = true;
            outline.read_name_line(line.trim());
        }
        bytes += line.len() + 1;
        let blank = line.trim().is_empty();
        // A sentence introducing a code block (its colon) is never cut from the block.
        let introduces_code = i > 0
            && lines[i - 1].trim_end().ends_with(':')
            && lines
                .get(i + 1)
                .is_some_and(|l| opens_fence(l.trim_start()));
        if fence.is_none()
            && ((bytes >= PASSAGE_SOFT_BYTES && blank && !introduces_code)
                || bytes >= PASSAGE_HARD_BYTES)
        {
            flush(&mut out, &section, start, i + 1);
            start = i + 1;
            bytes = 0;
        }
    }
    flush(&mut out, &section, start, lines.len());
    out
}

/// Whether a Markdown line (its indent trimmed) opens a fenced code block.
fn opens_fence(t: &str) -> bool {
    t.starts_with("```") || t.starts_with("~~~")
}

fn markdown_heading(line: &str) -> Option<(u8, String)> {
    let t = line
        .strip_prefix("   ")
        .or(line.strip_prefix("  "))
        .or(line.strip_prefix(' '))
        .unwrap_or(line);
    let hashes = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &t[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then(|| (hashes as u8, title.to_string()))
}

/// Split an HTML page: its main content's blocks, a passage per section, long sections cut at
/// block boundaries (a code block is never cut).
fn split_html(file: &AcceptedFile) -> Vec<Passage> {
    let blocks = crate::html::extract(&file.text);
    let mut out = Vec::new();
    let mut section = Section {
        title: file
            .path
            .rsplit('/')
            .next()
            .unwrap_or(&file.path)
            .to_string(),
        anchor: String::new(),
        context: String::new(),
    };
    let mut outline = Outline::default();
    let mut seen_anchors = std::collections::HashMap::<String, u32>::new();
    let mut pending: Vec<&crate::html::Block> = Vec::new();
    let mut bytes = 0usize;
    let mut read_text = false;
    let flush =
        |out: &mut Vec<Passage>, section: &Section, pending: &mut Vec<&crate::html::Block>| {
            if section.points_elsewhere() {
                pending.clear();
            }
            if pending.is_empty() {
                return;
            }
            let text = pending
                .iter()
                .map(|b| b.render())
                .collect::<Vec<_>>()
                .join("\n");
            let start = pending.iter().map(|b| b.line_start).min().unwrap_or(1);
            let end = pending.iter().map(|b| b.line_end).max().unwrap_or(start);
            out.push(Passage::new(&file.path, section, start, end, text));
            pending.clear();
        };
    for block in &blocks {
        if let crate::html::BlockKind::Heading { level, anchor } = &block.kind {
            flush(&mut out, &section, &mut pending);
            bytes = 0;
            let base = if anchor.is_empty() {
                slug(&block.text)
            } else {
                anchor.clone()
            };
            // Passage ids bind the anchor; a page repeating an id gets distinct ones.
            let n = seen_anchors.entry(base.clone()).or_insert(0);
            let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
            *n += 1;
            let context = outline.enter(*level, &block.text);
            // A page that opens with a heading is titled by it: DocBook's reference pages
            // (`VACUUM`, then `Description`, `Parameters`…) give both the same level.
            outline.titled |= out.is_empty() && pending.is_empty() && context.is_empty();
            section = Section {
                title: block.text.clone(),
                anchor,
                context,
            };
        } else if bytes >= PASSAGE_SOFT_BYTES
            || bytes + block.text.len() >= PASSAGE_HARD_BYTES && !pending.is_empty()
        {
            // A paragraph introducing a code block (its colon) goes with the block.
            let introduces_code = matches!(block.kind, crate::html::BlockKind::Code { .. })
                && pending.len() > 1
                && pending.last().is_some_and(|b| {
                    b.kind == crate::html::BlockKind::Text && b.text.trim_end().ends_with(':')
                });
            let carried = if introduces_code { pending.pop() } else { None };
            flush(&mut out, &section, &mut pending);
            bytes = 0;
            if let Some(b) = carried {
                bytes += b.text.len() + 1;
                pending.push(b);
            }
        }
        if !read_text && block.kind == crate::html::BlockKind::Text {
            read_text = true;
            outline.read_name_line(&block.text);
        }
        bytes += block.text.len() + 1;
        pending.push(block);
    }
    flush(&mut out, &section, &mut pending);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, media: Media, text: &str) -> AcceptedFile {
        AcceptedFile {
            path: path.into(),
            media,
            text: text.into(),
            digest: Sha256Digest::of(text.as_bytes()),
        }
    }

    fn show(ps: &[Passage]) -> String {
        ps.iter()
            .map(|p| {
                format!(
                    "{}-{} [{}] #{} {:?}\n",
                    p.line_start, p.line_end, p.section, p.anchor, p.text
                )
            })
            .collect()
    }

    #[test]
    fn markdown_splits_at_headings_not_in_fences() {
        let md = "intro line\n\n# Install\n\nRun it.\n\n```sh\n# not a heading\n```\n## Install\nagain\n#nospace\n";
        expect_test::expect![[r###"
            1-1 [guide.md] # "intro line"
            3-9 [Install] #install "# Install\n\nRun it.\n\n```sh\n# not a heading\n```"
            10-12 [Install] #install-1 "## Install\nagain\n#nospace"
        "###]]
        .assert_eq(&show(&split(&file("docs/guide.md", Media::Markdown, md))));
    }

    #[test]
    fn html_passages_are_sections_of_the_main_content() {
        let html = "<html><body><nav><a href=\"a.html\">Nav</a></nav>\n<main>\n<h1 id=\"top\">Title &amp; more</h1>\n<p>Hello <b>world</b></p>\n<h2>Sub</h2>\n<pre><code class=\"language-sh\">cargo build\n</code></pre>\n</main></body></html>";
        let ps = split(&file("a.html", Media::Html, html));
        expect_test::expect![[r###"
            3-4 [Title & more] #top "# Title & more\nHello world"
            5-7 [Sub] #sub "## Sub\n```sh\ncargo build\n```"
        "###]]
        .assert_eq(&show(&ps));
        assert_eq!(ps[1].context, "Title & more");
    }

    #[test]
    fn a_page_opening_with_a_heading_is_titled_by_it_whatever_the_later_levels() {
        // DocBook's reference page: the command's name and its template sections, all `<h2>`.
        let html = "<body><h2>VACUUM</h2><p>VACUUM - garbage-collect</p>\n<h2>Description</h2>\
            <p>Reclaims storage.</p>\n<h3>Outputs</h3><p>None.</p>\n<h1>Notes</h1><p>n</p></body>";
        let context = |ps: &[Passage]| -> Vec<(String, String)> {
            ps.iter()
                .map(|p| (p.section.clone(), p.context.clone()))
                .collect()
        };
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            context(&split(&file("sql-vacuum.html", Media::Html, html))),
            [
                s("VACUUM", ""),
                s("Description", "VACUUM — garbage-collect"),
                s("Outputs", "VACUUM — garbage-collect › Description"),
                s("Notes", "VACUUM — garbage-collect"),
            ]
        );
        // Text before the first heading: the page has no title heading, levels alone nest.
        let untitled = format!("<body><p>Lead.</p>{}", &html[6..]);
        assert_eq!(
            context(&split(&file("x.html", Media::Html, &untitled)))[2..],
            [
                s("Description", ""),
                s("Outputs", "Description"),
                s("Notes", "")
            ]
        );
    }

    #[test]
    fn a_manual_pages_name_line_says_what_its_title_names() {
        let contexts = |path: &str, media: Media, text: &str| -> Vec<String> {
            split(&file(path, media, text))
                .into_iter()
                .map(|p| format!("{} | {}", p.section, p.context))
                .collect()
        };
        // Asciidoctor's manual page: the title, then NAME holding "name - purpose".
        let git = "<body><h1>git-blame(1) Manual Page</h1><h2 id=\"_name\">NAME</h2>\
            <p>git-blame -\n   Show what revision last modified each line of a file</p>\
            <h2 id=\"_description\">DESCRIPTION</h2><p>Annotates each line.</p></body>";
        let purpose = "git-blame(1) Manual Page — Show what revision last modified each line of \
            a file";
        assert_eq!(
            contexts("git-blame.html", Media::Html, git),
            [
                "git-blame(1) Manual Page | ".to_string(),
                "NAME | git-blame(1) Manual Page".into(),
                format!("DESCRIPTION | {purpose}"),
            ]
        );
        // DocBook's reference page, an em dash, and Markdown.
        let explain = "<body><h2>EXPLAIN</h2><p>EXPLAIN — show the execution plan of a \
            statement</p><h2>Description</h2><p>Displays the plan.</p></body>";
        assert_eq!(
            contexts("sql-explain.html", Media::Html, explain)[1],
            "Description | EXPLAIN — show the execution plan of a statement"
        );
        let md = "# tool-pick(1)\n\n## NAME\n\ntool-pick – copy records\n\n## OPTIONS\n\n-n\n";
        assert_eq!(
            contexts("tool-pick.md", Media::Markdown, md)[2],
            "OPTIONS | tool-pick(1) — copy records"
        );
        // A first paragraph naming something other than the title, a later one, a dash inside
        // a sentence, a purpose longer than a line: no title changes.
        for text in [
            "<h1>Install</h1><p>Cargo - the package manager</p><h2>Steps</h2><p>Run.</p>",
            "<h1>cargo</h1><p>Read this.</p><p>cargo - the package manager</p><h2>Steps</h2>",
            "<h1>Ranges</h1><p>Ranges are closed - both ends count.</p><h2>Steps</h2><p>R</p>",
            "<h1>git-blame(1)</h1><p>git - the content tracker</p><h2>Steps</h2><p>R</p>",
            &format!(
                "<h1>cargo</h1><p>cargo - {}</p><h2>Steps</h2>",
                "word ".repeat(40)
            ),
        ] {
            let last = contexts("page.html", Media::Html, text).pop().unwrap();
            assert!(!last.contains('—'), "{text}: {last}");
        }
    }

    #[test]
    fn a_see_also_section_becomes_no_passage() {
        let html = "<body><h1>git-blame(1)</h1><h2>DESCRIPTION</h2><p>Annotates each line.</p>\
            <h2>SEE ALSO</h2><p>git-annotate(1)</p><h2>GIT</h2><p>Part of git.</p></body>";
        let sections = |ps: Vec<Passage>| ps.into_iter().map(|p| p.section).collect::<Vec<_>>();
        assert_eq!(
            sections(split(&file("git-blame.html", Media::Html, html))),
            ["git-blame(1)", "DESCRIPTION", "GIT"]
        );
        let md = "# Paths\n\nJoin them.\n\n## See also:\n\n- [Files](files.md)\n\n## Notes\n\nN.\n";
        assert_eq!(
            sections(split(&file("paths.md", Media::Markdown, md))),
            ["Paths", "Notes"]
        );
    }

    #[test]
    fn a_long_section_is_never_cut_between_a_sentence_and_the_code_it_introduces() {
        // The section reaches the soft limit on the sentence before the block.
        let filler = "Words about the machine. ".repeat(61);
        // Which passage of `text` holds the sentence, and which the block.
        let places = |path: &str, media: Media, text: &str, sentence: &str| -> (usize, usize) {
            let ps = split(&file(path, media, text));
            let at = |s: &str| ps.iter().position(|p| p.text.contains(s)).unwrap();
            (at(sentence), at("x = 1"))
        };
        let html = format!(
            "<body><h1 id=\"s\">S</h1>\n<p>{filler}</p>\n<p>Add this:</p>\n<pre>x = 1</pre>\n\
             <p>Done.</p></body>"
        );
        assert_eq!(places("a.html", Media::Html, &html, "Add this:"), (1, 1));
        // Without the colon, the paragraph closes the first passage.
        let html = html.replace("this:", "this.");
        assert_eq!(places("a.html", Media::Html, &html, "Add this."), (0, 1));
        // Markdown: the blank line between the sentence and its fence is no place to cut.
        let md = format!("# S\n\n{filler}\nAdd this:\n\n```\nx = 1\n```\n\nDone.\n");
        assert_eq!(places("a.md", Media::Markdown, &md, "Add this:"), (0, 0));
        let md = md.replace("this:", "this.");
        assert_eq!(places("a.md", Media::Markdown, &md, "Add this."), (0, 1));
    }

    #[test]
    fn a_books_table_of_contents_is_no_passage() {
        let summary = "# Summary\n\n[Introduction](README.md)\n\n# User guide\n\n\
                       - [Installation](guide/installation.md)\n    \
                       - [Reading books](guide/reading.md)\n* [Draft]()\n\n---\n\n\
                       1. [Appendix](appendix.md)\n";
        assert!(split(&file("src/SUMMARY.md", Media::Markdown, summary)).is_empty());
        // A page that links to others and says something is a page.
        for page in [
            "# Links\n\n- [One](a.md)\n- [Two](b.md)\n- [Three](c.md)\n\nRead them in order.\n",
            "# Links\n\n- [One](a.md) explains the install\n- [Two](b.md)\n- [Three](c.md)\n",
            "# Two links\n\n- [One](a.md)\n- [Two](b.md)\n",
        ] {
            assert!(
                !split(&file("a.md", Media::Markdown, page)).is_empty(),
                "{page}"
            );
        }
    }

    #[test]
    fn markdown_sections_know_their_path() {
        let md = "# Book\n## Part\n### Chapter\nx\n## Other\ny\n";
        let ps = split(&file("b.md", Media::Markdown, md));
        let paths: Vec<_> = ps
            .iter()
            .map(|p| (p.section.as_str(), p.context.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("Book", ""),
                ("Part", "Book"),
                ("Chapter", "Book › Part"),
                ("Other", "Book")
            ]
        );
    }

    #[test]
    fn ids_are_stable_and_content_bound() {
        let a = split(&file("a.md", Media::Markdown, "# T\nx\n"));
        let b = split(&file("a.md", Media::Markdown, "# T\nx\n"));
        let c = split(&file("a.md", Media::Markdown, "# T\ny\n"));
        assert_eq!(a[0].id, b[0].id);
        assert_ne!(a[0].id, c[0].id);
    }
}
