//! Splitting accepted files into passages at headings.
//!
//! A passage is a run of whole source lines `[line_start, line_end]` (1-based, inclusive). For
//! Markdown and text its `text` is exactly those lines, so a citation's line range always
//! contains the passage; for HTML the text is the same lines with tags removed.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

use crate::process::{AcceptedFile, Media};

/// Revision of the splitting rules; recorded in every snapshot. Bump when passages change.
pub const PARSER_REVISION: &str = "reach-corpus-passages/1";

/// A passage closes at the first blank line after this many bytes…
const PASSAGE_SOFT_BYTES: usize = 1536;
/// …and at any line boundary after this many, so one passage stays a bounded citation.
const PASSAGE_HARD_BYTES: usize = 6144;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Stable id: a digest of path, anchor, line range and text.
    pub id: String,
    pub path: String,
    pub section: String,
    /// GitHub-style heading anchor, empty for text before the first heading.
    pub anchor: String,
    pub line_start: u32,
    pub line_end: u32,
    pub text: String,
    pub digest: Sha256Digest,
}

impl Passage {
    fn new(path: &str, section: &str, anchor: &str, start: u32, end: u32, text: String) -> Self {
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
            section: section.to_string(),
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
}

/// Split one accepted file into passages.
pub fn split(file: &AcceptedFile) -> Vec<Passage> {
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
    };
    let mut start: usize = 0; // index into lines of the current passage's first line
    let mut bytes = 0usize;
    let mut fence: Option<&str> = None;
    let flush = |out: &mut Vec<Passage>, section: &Section, start: usize, end: usize| {
        // Trim blank lines at both ends so the range is tight.
        let (mut s, mut e) = (start, end);
        while s < e && lines[s].trim().is_empty() {
            s += 1;
        }
        while e > s && lines[e - 1].trim().is_empty() {
            e -= 1;
        }
        if s == e {
            return;
        }
        let raw = lines[s..e].join("\n");
        let text = match file.media {
            Media::Html => strip_tags(&raw),
            _ => raw,
        };
        if text.trim().is_empty() {
            return;
        }
        out.push(Passage::new(
            &file.path,
            &section.title,
            &section.anchor,
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
                } else if t.starts_with("```") || t.starts_with("~~~") {
                    fence = Some(&t[..3]);
                    None
                } else {
                    markdown_heading(line)
                }
            }
            Media::Html => html_heading(line),
            Media::Text => None,
        };
        if let Some(title) = heading {
            flush(&mut out, &section, start, i);
            let base = slug(&title);
            let n = anchors.entry(base.clone()).or_insert(0);
            let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
            *n += 1;
            section = Section { title, anchor };
            start = i;
            bytes = 0;
        }
        bytes += line.len() + 1;
        let blank = line.trim().is_empty();
        if fence.is_none()
            && ((bytes >= PASSAGE_SOFT_BYTES && blank) || bytes >= PASSAGE_HARD_BYTES)
        {
            flush(&mut out, &section, start, i + 1);
            start = i + 1;
            bytes = 0;
        }
    }
    flush(&mut out, &section, start, lines.len());
    out
}

fn markdown_heading(line: &str) -> Option<String> {
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
    (!title.is_empty()).then(|| title.to_string())
}

fn html_heading(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let i = lower.find("<h")?;
    let c = lower.as_bytes().get(i + 2)?;
    if !(b'1'..=b'6').contains(c) {
        return None;
    }
    let title = strip_tags(&line[i..]);
    let title = title.trim();
    (!title.is_empty()).then(|| title.to_string())
}

/// Remove tags and decode the five XML entities. Scripts and styles are not special-cased: their
/// text is data like any other and is fenced as untrusted downstream.
pub fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
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
    fn html_strips_tags() {
        let html =
            "<html><body>\n<h1>Title &amp; more</h1>\n<p>Hello <b>world</b></p>\n</body></html>";
        expect_test::expect![[r#"
            2-4 [Title & more] #title--more "Title & more\nHello world\n"
        "#]]
        .assert_eq(&show(&split(&file("a.html", Media::Html, html))));
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
