//! Markup stripping for Markdown passages: what a reader of the rendered page would not see is
//! not indexed and never quoted in an answer.
//!
//! Removed: front matter (`---` or `+++` at the top of a file), HTML comments, HTML and mdBook
//! tags (`<Listing number="1-1">`, `</Listing>`, `<span>`; a bare `Vec<T>` in prose stays; a
//! listing's caption shown where it closes, as the book renders it),
//! link reference definitions, mdBook directives the build left unresolved (`{{#include …}}`
//! naming no file of the tree, see [`crate::include`]), image links, and link
//! syntax (`[text](url)`, `[text][ref]`, `[text][]` keep their text). Fenced code blocks and
//! inline code spans are kept exactly.
//!
//! The passage itself keeps its source lines (with the listings they include), so a citation
//! still points at what the file says; this is a view of it.

/// HTML element names stripped even without attributes (a bare `<T>` in prose is a generic).
const HTML_NAMES: &[&str] = &[
    "a", "b", "br", "code", "details", "div", "em", "hr", "i", "img", "kbd", "li", "ol", "p",
    "pre", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th",
    "thead", "tr", "u", "ul",
];

/// The visible text of a Markdown passage, code fences kept verbatim.
pub fn clean_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split('\n').peekable();
    // Front matter only at the very top of a file's first passage.
    if let Some(first) = lines.peek().map(|l| l.trim_end())
        && (first == "---" || first == "+++")
    {
        let fence = first.to_string();
        lines.next();
        let mut closed = false;
        for l in lines.by_ref() {
            if l.trim_end() == fence {
                closed = true;
                break;
            }
        }
        if !closed {
            return String::new();
        }
    }
    let mut fence: Option<String> = None;
    // Whether the open fence is Rust's, whose hidden lines mdBook does not show.
    let mut rust = false;
    // The caption of the open `<Listing>`, shown where it closes.
    let mut caption: Option<String> = None;
    let mut in_comment = false;
    for line in lines {
        let t = line.trim_start();
        if let Some(f) = &fence {
            // An mdBook include the build could not resolve from the tree ([`crate::include`])
            // is nothing a reader sees.
            if t.starts_with("{{#") && t.trim_end().ends_with("}}") {
                continue;
            }
            let closes =
                t.starts_with(f.as_str()) && t.trim_end().chars().all(|c| c == '`' || c == '~');
            if rust && !closes {
                // `# fn main() {` is compiled but hidden; `##` writes a `#` that is shown.
                if t.trim_end() == "#" || t.starts_with("# ") {
                    continue;
                }
                if let Some(shown) = t.strip_prefix("##") {
                    out.push_str(&line[..line.len() - t.len()]);
                    out.push('#');
                    out.push_str(shown);
                    out.push('\n');
                    continue;
                }
            }
            out.push_str(line);
            out.push('\n');
            if closes {
                fence = None;
            }
            continue;
        }
        if !in_comment && (t.starts_with("```") || t.starts_with("~~~")) {
            let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
            fence = Some(marker);
            // Keep the language, drop mdBook attributes (`rust,ignore` → `rust`).
            let lang = t[fence.as_ref().map_or(0, String::len)..]
                .split([',', ' ', '{'])
                .next()
                .unwrap_or("");
            rust = lang == "rust";
            out.push_str(&format!("{}{lang}\n", fence.as_deref().unwrap_or("```")));
            continue;
        }
        let (visible, still_in_comment) = strip_comments(line, in_comment);
        in_comment = still_in_comment;
        if is_reference_definition(&visible) {
            continue;
        }
        // The Rust book's `<Listing number="2-1" caption="…">` shows its caption under the
        // code it wraps: "Listing 2-1: Code that gets a guess from the user".
        let tag = visible.trim();
        if tag.starts_with("<Listing ") && tag.ends_with('>') {
            caption = attribute(tag, "caption").map(|c| match attribute(tag, "number") {
                Some(n) => format!("Listing {n}: {c}"),
                None => c.to_string(),
            });
        } else if tag == "</Listing>"
            && let Some(c) = caption.take()
        {
            out.push_str(&c);
            out.push('\n');
            continue;
        }
        let cleaned = strip_inline(&visible);
        if visible.trim().is_empty() || !cleaned.trim().is_empty() {
            out.push_str(cleaned.trim_end());
            out.push('\n');
        }
    }
    while out.ends_with('\n') {
        out.pop();
    }
    out
}

/// Remove HTML comments from one line, given whether a comment is open at its start.
fn strip_comments(line: &str, mut in_comment: bool) -> (String, bool) {
    let mut out = String::new();
    let mut rest = line;
    loop {
        if in_comment {
            match rest.find("-->") {
                Some(i) => {
                    rest = &rest[i + 3..];
                    in_comment = false;
                }
                None => return (out, true),
            }
        } else {
            match rest.find("<!--") {
                Some(i) => {
                    out.push_str(&rest[..i]);
                    rest = &rest[i + 4..];
                    in_comment = true;
                }
                None => {
                    out.push_str(rest);
                    return (out, false);
                }
            }
        }
    }
}

/// `[label]: destination` on a line of its own.
fn is_reference_definition(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('[')
        && t.find("]:").is_some_and(|i| {
            !t[1..i].contains(']') && !t[i + 2..].trim().is_empty() && !t[1..i].is_empty()
        })
}

/// Strip tags, directives and link syntax from one line outside inline code spans.
fn strip_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&strip_links(&strip_tags(&strip_directives(part))));
        }
    }
    out
}

/// Remove `{{#…}}` mdBook directives.
fn strip_directives(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{{#") {
        out.push_str(&rest[..i]);
        match rest[i..].find("}}") {
            Some(j) => rest = &rest[i + j + 2..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of the attribute `name="…"` in a tag.
fn attribute<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[at..].find('"')?;
    Some(&tag[at..at + len])
}

/// Remove HTML-like tags: closing tags, tags with attributes or self-closing, and known HTML
/// element names. `Vec<T>` and `a < b` are prose and stay.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (closing, body) = match after.strip_prefix('/') {
            Some(b) => (true, b),
            None => (false, after),
        };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let end = after.find('>');
        let is_tag = !name.is_empty()
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && end.is_some()
            && {
                let inner =
                    &body[name.len()..end.unwrap_or(0).saturating_sub(usize::from(closing))];
                closing
                    || HTML_NAMES.contains(&name.to_ascii_lowercase().as_str())
                    || inner.starts_with(char::is_whitespace) && inner.contains('=')
                    || inner.trim() == "/"
            };
        match (is_tag, end) {
            (true, Some(e)) => rest = &after[e + 1..],
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `![alt](src)` → nothing; `[text](url)`, `[text][ref]`, `[text][]` → `text`.
fn strip_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let image = b[i] == b'!' && b.get(i + 1) == Some(&b'[');
        let open = if image { i + 1 } else { i };
        if b[open] == b'['
            && let Some(close) = s[open + 1..].find(']').map(|j| open + 1 + j)
        {
            let text = &s[open + 1..close];
            let tail = &s[close + 1..];
            let dest_end = if tail.starts_with('(') {
                tail.find(')').map(|j| close + 1 + j + 1)
            } else if tail.starts_with('[') {
                tail.find(']').map(|j| close + 1 + j + 1)
            } else {
                None
            };
            if let Some(e) = dest_end
                && !text.contains('[')
            {
                if !image {
                    out.push_str(text);
                }
                i = e;
                continue;
            }
        }
        let c = s[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_what_a_reader_does_not_see() {
        let md = r#"---
title: Ownership
---
# Ownership

<Listing number="4-1" file-name="src/main.rs" caption="A variable">

```rust,ignore
{{#rustdoc_include ../listings/ch04/main.rs}}
# fn main() {
let s = "<b>kept</b>"; // [not](a link)
##[derive(Debug)]
#
# }
```

```toml
# a TOML comment is shown
```

</Listing>

Read [the book][book]<!-- ignore --> and [docs](https://x.y) or [this][] for `Vec<T>` and Vec<T>.
![diagram](img/a.svg) An <span class="caption">inline</span> tag, a < b.
<!-- a comment
spanning lines -->
[book]: https://doc.rust-lang.org/book/
"#;
        expect_test::expect![[r##"
            # Ownership


            ```rust
            let s = "<b>kept</b>"; // [not](a link)
            #[derive(Debug)]
            ```

            ```toml
            # a TOML comment is shown
            ```

            Listing 4-1: A variable

            Read the book and docs or this for `Vec<T>` and Vec<T>.
             An inline tag, a < b."##]]
        .assert_eq(&clean_markdown(md));
    }

    #[test]
    fn unclosed_front_matter_is_all_front_matter() {
        assert_eq!(clean_markdown("---\ntitle: x\nno end"), "");
        assert_eq!(clean_markdown("text\n---\nmore"), "text\n---\nmore");
    }
}
