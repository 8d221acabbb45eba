//! Main-content extraction from static HTML (a built documentation site).
//!
//! The page is read as a flat stream of tags and text, never as a tree a browser would build:
//! nothing is fetched, no script runs and no entity beyond the common named ones and numeric
//! references is expanded. What is kept:
//!
//! - only the page's main content: inside `<main>` when the page has one, else inside the
//!   element marked `role="main"` (Sphinx's themes mark a `<div>`), else inside `<article>`,
//!   else the whole `<body>`;
//! - never navigation and boilerplate: `nav`, `header`, `footer`, `aside`, `head`, `script`,
//!   `style`, `svg`, `template`, `noscript`, `iframe`, `button`, `form`, elements whose ARIA
//!   landmark role says the same (`navigation`, `search`, `banner`, `contentinfo`,
//!   `complementary`), and elements whose class marks them as chrome (mdBook's hidden `boring`
//!   lines, the Reference's rule labels and railroad diagrams, the `¶`, `#` or `§` permalink
//!   Sphinx, MkDocs, rustdoc and others put beside every heading, DocBook's Prev/Next tables)
//!   or whose id does (a `footer`, `page-header`, `sidebar` or `toc` on a site without
//!   landmarks), and whatever its class a link in a heading to a place on the page whose whole
//!   text is such a glyph (Node.js's `mark`);
//! - headings as section boundaries, with the `id` the site gave them as the anchor: the
//!   heading's own, else its permalink's target, else the id of the container it opens with
//!   no text between (rustdoc and Sphinx put it on a `<section>`, DocBook on a `<div>`);
//! - `<pre>` blocks verbatim, as fenced code with the language their `language-*` class names;
//! - a definition list's term leading its description's first paragraph (`max_connections
//!   (integer): Determines…`, `--release: Build optimized…`), so a quoted description names
//!   what it describes;
//! - nothing of a redirect stub (a `<meta http-equiv="refresh">` with no delay, as mdBook and
//!   other site generators leave at a moved page's old path): no reader ever sees its text.
//!
//! Every block carries the 1-based source lines its text came from, so a citation to a passage
//! built from blocks points at real lines of the page.

/// Elements whose whole subtree is dropped.
const SKIP_ELEMENTS: &[&str] = &[
    "nav", "header", "footer", "aside", "head", "script", "style", "svg", "template", "noscript",
    "iframe", "button", "form", "title", "select", "textarea", "math",
];

/// Classes that mark an element as chrome rather than content.
const SKIP_CLASSES: &[&str] = &[
    // mdBook: lines hidden in rendered Rust examples.
    "boring",
    // The Rust Reference: rule identifiers and grammar diagrams.
    "rule",
    "rule-link",
    "grammar-railroad",
    "grammar-container",
    // Common site chrome.
    "sidebar",
    "breadcrumbs",
    // The permalink glyph (`¶`, `#`, `§`) beside every heading: Sphinx's and MkDocs'
    // `headerlink`, rustdoc's and GitHub's `anchor`, VuePress's `header-anchor`, Docusaurus's
    // `hash-link`, the Apache manual's `permalink`.
    "headerlink",
    "anchor",
    "header-anchor",
    "hash-link",
    "permalink",
    "toc",
    // Links to related pages: Sphinx's relation bar, the Apache manual's related-modules table.
    "related",
    // The Apache manual's language switchers.
    "toplang",
    "bottomlang",
    // DocBook XSL's Prev/Up/Home/Next tables above and below every page.
    "navheader",
    "navfooter",
    "visually-hidden",
    "sr-only",
];

/// The glyphs a heading's permalink shows: what a link in a heading to a place on the page
/// says when it is one (empty when the glyph is drawn by CSS).
const PERMALINK_GLYPHS: &[&str] = &["", "#", "¶", "§", "🔗", "🔗\u{fe0e}", "\u{200b}"];

/// Ids that mark an element as chrome on sites without landmarks: a page header or footer, a
/// sidebar, a table of contents (the Apache manual's `page-header`, `quickview`, `toc` and
/// `footer`; AsciiDoc's `footer`). Not `header` alone: AsciiDoc puts a page's title and NAME
/// section in a `<div id="header">`.
const SKIP_IDS: &[&str] = &[
    "footer",
    "page-header",
    "page-footer",
    "site-header",
    "site-footer",
    "sidebar",
    "quickview",
    "toc",
    "breadcrumb",
    "breadcrumbs",
];

/// Classes of an admonition (a boxed note inside a section): a heading inside one is the
/// box's label, not a section of its own. DocBook titles its boxes with an `<h3>`.
const ADMONITION_CLASSES: &[&str] = &[
    "note",
    "warning",
    "tip",
    "caution",
    "important",
    "admonition",
];

/// ARIA landmark roles of chrome: an element carrying one is dropped like `nav`, `header`,
/// `footer` or `aside` (a Sphinx sidebar is a `<div role="navigation">`).
const SKIP_ROLES: &[&str] = &[
    "navigation",
    "search",
    "banner",
    "contentinfo",
    "complementary",
];

/// Elements that end a block of text when they open or close.
const BLOCK_ELEMENTS: &[&str] = &[
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "thead",
    "tbody",
    "tr",
    "blockquote",
    "section",
    "article",
    "main",
    "body",
    "br",
    "hr",
    "figure",
    "figcaption",
    "details",
    "summary",
    "center",
];

/// Void elements: never closed, so never nest.
const VOID_ELEMENTS: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Elements whose content is raw text (no tags inside until their end tag).
const RAW_TEXT_ELEMENTS: &[&str] = &["script", "style", "textarea", "title"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockKind {
    /// A heading `<h1>`…`<h6>`, with the anchor the page gave it (its `id`, else empty).
    Heading { level: u8, anchor: String },
    /// Running text (a paragraph, a list item, a table row).
    Text,
    /// A `<pre>` block, verbatim; `lang` from a `language-*` class, else empty.
    Code { lang: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    pub text: String,
    /// 1-based first and last source line of the block's text.
    pub line_start: u32,
    pub line_end: u32,
}

impl Block {
    /// The block as passage text: `# Title` for a heading (hashes by level), fenced code, or
    /// the text itself.
    pub fn render(&self) -> String {
        match &self.kind {
            BlockKind::Heading { level, .. } => {
                format!("{} {}", "#".repeat(usize::from(*level)), self.text)
            }
            BlockKind::Text => self.text.clone(),
            BlockKind::Code { lang } => format!("```{lang}\n{}\n```", self.text),
        }
    }
}

struct Tag<'a> {
    name: String,
    closing: bool,
    self_closing: bool,
    attrs: &'a str,
}

/// The value of attribute `name` in a tag's attribute text.
fn attr(attrs: &str, name: &str) -> Option<String> {
    let b = attrs.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let key = &attrs[start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                i = vs;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                value = attrs[vs..i.min(b.len())].to_string();
                i += 1;
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = attrs[vs..i].to_string();
            }
        }
        if key.eq_ignore_ascii_case(name) {
            return Some(decode_entities(&value));
        }
        if start == i {
            i += 1;
        }
    }
    None
}

/// Whether a tag's class, ARIA role or id marks its element as chrome.
fn is_chrome(attrs: &str) -> bool {
    attr(attrs, "class").is_some_and(|c| {
        c.split_ascii_whitespace()
            .any(|c| SKIP_CLASSES.contains(&c))
    }) || attr(attrs, "role").is_some_and(|r| SKIP_ROLES.contains(&r.trim()))
        || attr(attrs, "id").is_some_and(|id| SKIP_IDS.contains(&id.trim()))
}

/// Whether a tag's attributes mark its element as the page's main content (`role="main"`).
fn is_main_role(attrs: &str) -> bool {
    attr(attrs, "role").is_some_and(|r| r.trim() == "main")
}

/// Decode character references: numeric ones and the common named ones. An unknown name is
/// kept as written.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '#'))
            .map(|j| j + 1);
        let decoded = end
            .filter(|&j| rest.as_bytes().get(j) == Some(&b';'))
            .and_then(|j| {
                let name = &rest[1..j];
                let c = if let Some(n) = name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                    u32::from_str_radix(n, 16).ok().and_then(char::from_u32)
                } else if let Some(n) = name.strip_prefix('#') {
                    n.parse().ok().and_then(char::from_u32)
                } else {
                    named_entity(name)
                };
                c.map(|c| (c, j + 1))
            });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "rsquo" => '’',
        "lsquo" => '‘',
        "ldquo" => '“',
        "rdquo" => '”',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "rarr" => '→',
        "larr" => '←',
        "times" => '×',
        "middot" => '·',
        _ => return None,
    })
}

/// An element followed to its matching end tag: its name and how deep that name is nested.
struct Open {
    name: String,
    depth: u32,
}

impl Open {
    fn new(name: &str) -> Open {
        Open {
            name: name.to_string(),
            depth: 1,
        }
    }

    /// Count a (non-void, not self-closing) tag; whether it ends the element.
    fn ends_at(&mut self, name: &str, closing: bool) -> bool {
        if name == self.name {
            if closing {
                self.depth -= 1;
            } else {
                self.depth += 1;
            }
        }
        self.depth == 0
    }
}

/// What bounds the main content of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    /// Every `<main>` (or `<article>`) element.
    Element(&'static str),
    /// The first element marked `role="main"`, to its matching end tag.
    MainRole,
    /// The whole body.
    Body,
}

/// Which element bounds the main content of `html`.
fn content_root(html: &str) -> Root {
    let lower = html.to_ascii_lowercase();
    let opens = |name: &str| {
        lower.match_indices(&format!("<{name}")).any(|(i, _)| {
            lower
                .as_bytes()
                .get(i + 1 + name.len())
                .is_some_and(|b| *b == b'>' || b.is_ascii_whitespace())
        })
    };
    let main_role = lower.contains("role=\"main\"") || lower.contains("role='main'");
    if opens("main") {
        Root::Element("main")
    } else if main_role {
        Root::MainRole
    } else if opens("article") {
        Root::Element("article")
    } else {
        Root::Body
    }
}

struct Builder {
    blocks: Vec<Block>,
    text: String,
    start: u32,
    end: u32,
    heading: Option<(u8, String)>,
    /// The anchor of the open heading when neither it nor its permalink names one: the id of
    /// the container it opens.
    heading_fallback: Option<String>,
    /// Where the open heading's text stood when a link to a place on the page opened in it:
    /// the link is a permalink if all it adds is a glyph ([`PERMALINK_GLYPHS`]).
    permalink_at: Option<usize>,
    code: Option<String>,
    /// The last block is a definition list's term (`<dt>`) awaiting its description's first
    /// paragraph, which it leads: `max_connections (integer): Determines the maximum…`.
    term: bool,
    /// How many inline `<code>` elements are open: only the outermost is marked with
    /// backticks (DocBook nests a placeholder's `<code>` in a command's).
    inline_code: u32,
}

impl Builder {
    fn push_text(&mut self, s: &str, line_start: u32, line_end: u32) {
        if self.code.is_some() {
            if self.text.is_empty() {
                self.start = line_start;
            }
            self.text.push_str(s);
            self.end = line_end;
            return;
        }
        if s.trim().is_empty() {
            if !self.text.is_empty() && !self.text.ends_with(' ') {
                self.text.push(' ');
            }
            return;
        }
        let leading = s.starts_with(char::is_whitespace);
        if leading && !self.text.is_empty() && !self.text.ends_with(' ') {
            self.text.push(' ');
        }
        let words: Vec<&str> = s.split_whitespace().collect();
        if self.text.trim().is_empty() {
            // The block starts at the first line that holds its text.
            let skipped = s[..s.len() - s.trim_start().len()].matches('\n').count() as u32;
            self.start = line_start + skipped;
        }
        self.text.push_str(&words.join(" "));
        if s.ends_with(char::is_whitespace) {
            self.text.push(' ');
        }
        let trailing = s[s.trim_end().len()..].matches('\n').count() as u32;
        self.end = line_end - trailing;
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        self.inline_code = 0;
        if self.heading.is_some() || self.code.is_some() {
            self.term = false;
        }
        self.permalink_at = None;
        if let Some((level, mut anchor)) = self.heading.take() {
            if let Some(id) = self.heading_fallback.take()
                && anchor.is_empty()
            {
                anchor = id;
            }
            let t = text.trim();
            if !t.is_empty() {
                self.blocks.push(Block {
                    kind: BlockKind::Heading { level, anchor },
                    text: t.to_string(),
                    line_start: self.start,
                    line_end: self.end,
                });
            }
            return;
        }
        if let Some(lang) = self.code.take() {
            // A page written with CRLF line ends (AsciiDoc's, on Windows) quotes code with LF.
            let text = text.replace("\r\n", "\n");
            let t = text.trim_matches('\n').trim_end();
            if !t.trim().is_empty() {
                self.blocks.push(Block {
                    kind: BlockKind::Code { lang },
                    text: t.to_string(),
                    line_start: self.start,
                    line_end: self.end,
                });
            }
            return;
        }
        let t = text.trim();
        if self.term
            && !t.is_empty()
            && let Some(term) = self.blocks.last_mut()
        {
            self.term = false;
            term.text = format!("{}: {t}", term.text.trim_end_matches(':'));
            term.line_end = self.end;
            return;
        }
        if !t.is_empty() && t != "-" {
            self.blocks.push(Block {
                kind: BlockKind::Text,
                text: t.to_string(),
                line_start: self.start,
                line_end: self.end,
            });
        }
    }
}

/// Whether `html` is a redirect stub: before its `<body>`, a `<meta http-equiv="refresh">`
/// whose delay is zero sends every reader elsewhere at once.
pub fn is_redirect(html: &str) -> bool {
    let head = match html.to_ascii_lowercase().find("<body") {
        Some(end) => &html[..end],
        None => html,
    };
    head.match_indices('<').any(|(i, _)| {
        read_tag(&head[i..]).is_some_and(|(tag, _)| {
            tag.name == "meta"
                && !tag.closing
                && attr(tag.attrs, "http-equiv").is_some_and(|v| v.eq_ignore_ascii_case("refresh"))
                && attr(tag.attrs, "content").is_some_and(|c| {
                    let delay = c.split([';', ',']).next().unwrap_or("").trim();
                    delay.parse::<f32>().is_ok_and(|d| d == 0.0)
                })
        })
    })
}

/// Extract the main content of `html` as blocks, in page order (none of a redirect stub).
pub fn extract(html: &str) -> Vec<Block> {
    if is_redirect(html) {
        return Vec::new();
    }
    let root = content_root(html);
    let mut b = Builder {
        blocks: Vec::new(),
        text: String::new(),
        start: 1,
        end: 1,
        heading: None,
        heading_fallback: None,
        permalink_at: None,
        code: None,
        term: false,
        inline_code: 0,
    };
    // Inside the content root (always, when the page has none).
    let mut inside = root == Root::Body;
    // The `role="main"` element, while inside it.
    let mut main_role: Option<Open> = None;
    // The id of the container (`section`, `div`, `article`) opened last with no text since, for
    // the heading it opens when that has no id of its own: rustdoc and Sphinx put it on a
    // `<section>`, DocBook on a `<div class="sect1">`.
    let mut container_id: Option<String> = None;
    // The element being skipped.
    let mut skipping: Option<Open> = None;
    // The admonition being read, whose headings are labels.
    let mut admonition: Option<Open> = None;
    let mut line: u32 = 1;
    let bytes = html.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            let j = html[i..].find('<').map_or(bytes.len(), |j| i + j);
            let chunk = &html[i..j];
            let nl = chunk.matches('\n').count() as u32;
            if inside && skipping.is_none() {
                if !chunk.trim().is_empty() {
                    container_id = None;
                }
                b.push_text(&decode_entities(chunk), line, line + nl);
            }
            line += nl;
            i = j;
            continue;
        }
        // A comment, a declaration or a processing instruction: skipped whole.
        let rest = &html[i..];
        if rest.starts_with("<!--") {
            let end = rest.find("-->").map_or(rest.len(), |k| k + 3);
            line += rest[..end].matches('\n').count() as u32;
            i += end;
            continue;
        }
        if rest.starts_with("<!") || rest.starts_with("<?") {
            let end = rest.find('>').map_or(rest.len(), |k| k + 1);
            line += rest[..end].matches('\n').count() as u32;
            i += end;
            continue;
        }
        let Some((tag, len)) = read_tag(rest) else {
            // A lone `<` is text.
            if inside && skipping.is_none() {
                b.push_text("<", line, line);
            }
            i += 1;
            continue;
        };
        let tag_line = line;
        line += rest[..len].matches('\n').count() as u32;
        i += len;
        let name = tag.name.as_str();
        // Raw text elements: jump to their end tag.
        if !tag.closing && !tag.self_closing && RAW_TEXT_ELEMENTS.contains(&name) {
            let close = format!("</{name}");
            let lower = html[i..].to_ascii_lowercase();
            let end = lower.find(&close).unwrap_or(lower.len());
            line += html[i..i + end].matches('\n').count() as u32;
            i += end;
            continue;
        }
        // The `role="main"` element's own name is counted even inside a skipped element (a
        // `<div role="navigation">` inside a `<div role="main">`), so its end is found.
        let nests = !VOID_ELEMENTS.contains(&name) && !tag.self_closing;
        if root == Root::MainRole && nests {
            match main_role
                .as_mut()
                .map(|open| open.ends_at(name, tag.closing))
            {
                None if !tag.closing && is_main_role(tag.attrs) => {
                    b.flush();
                    inside = true;
                    main_role = Some(Open::new(name));
                    continue;
                }
                Some(true) => {
                    b.flush();
                    inside = false;
                    main_role = None;
                    continue;
                }
                _ => {}
            }
        }
        if let Some(open) = &mut skipping {
            if nests && open.ends_at(name, tag.closing) {
                skipping = None;
            }
            continue;
        }
        if matches!(root, Root::Element(r) if r == name) {
            b.flush();
            inside = !tag.closing;
            continue;
        }
        if !inside {
            continue;
        }
        // mdBook's and Sphinx's heading links carry the id when the heading has none (Sphinx
        // puts it on the enclosing section), even the permalink dropped below.
        if name == "a"
            && !tag.closing
            && let Some((_, anchor)) = b.heading.as_mut()
            && anchor.is_empty()
            && let Some(href) = attr(tag.attrs, "href")
            && let Some(a) = href.strip_prefix('#')
        {
            *anchor = a.to_string();
        }
        // A link in a heading to a place on the page whose whole text is a glyph is a
        // permalink whatever its class says (Node.js's `mark`): its glyph is no title's word.
        if name == "a" && b.heading.is_some() {
            if !tag.closing {
                b.permalink_at = attr(tag.attrs, "href")
                    .is_some_and(|h| h.starts_with('#'))
                    .then_some(b.text.len());
            } else if let Some(at) = b.permalink_at.take()
                && b.text
                    .get(at..)
                    .is_some_and(|t| PERMALINK_GLYPHS.contains(&t.trim()))
            {
                b.text.truncate(at);
            }
        }
        if !tag.closing
            && !tag.self_closing
            && !VOID_ELEMENTS.contains(&name)
            && (SKIP_ELEMENTS.contains(&name) || is_chrome(tag.attrs))
        {
            skipping = Some(Open::new(name));
            continue;
        }
        if let Some(open) = &mut admonition {
            if nests && open.ends_at(name, tag.closing) {
                admonition = None;
            }
        } else if nests
            && !tag.closing
            && attr(tag.attrs, "class").is_some_and(|class| {
                class
                    .split_ascii_whitespace()
                    .any(|c| ADMONITION_CLASSES.contains(&c))
            })
        {
            admonition = Some(Open::new(name));
        }
        let heading_level = name
            .strip_prefix('h')
            .and_then(|d| d.parse::<u8>().ok())
            .filter(|d| (1..=6).contains(d));
        if matches!(name, "section" | "div" | "article")
            && !tag.closing
            && let Some(id) = attr(tag.attrs, "id").filter(|id| !id.is_empty())
        {
            container_id = Some(id);
        }
        if heading_level.is_some() && admonition.is_some() {
            b.flush();
            continue;
        }
        if let Some(level) = heading_level {
            b.flush();
            if !tag.closing {
                b.heading = Some((level, attr(tag.attrs, "id").unwrap_or_default()));
                b.heading_fallback = container_id.take();
                b.start = tag_line;
                b.end = tag_line;
            }
            continue;
        }
        match name {
            "pre" => {
                b.flush();
                if !tag.closing {
                    b.code = Some(String::new());
                }
            }
            "code" if b.code.is_some() => {
                if !tag.closing
                    && let Some(class) = attr(tag.attrs, "class")
                    && let Some(lang) = class
                        .split_ascii_whitespace()
                        .find_map(|c| c.strip_prefix("language-"))
                    && let Some(code) = b.code.as_mut()
                    && code.is_empty()
                {
                    *code = lang.to_string();
                }
            }
            "code" if b.heading.is_none() => {
                // A block opening with inline code starts on the code's line.
                if b.text.trim().is_empty() {
                    b.start = tag_line;
                }
                if tag.closing {
                    b.inline_code = b.inline_code.saturating_sub(1);
                }
                if b.inline_code == 0 {
                    b.text.push('`');
                }
                if !tag.closing {
                    b.inline_code += 1;
                }
            }
            "td" | "th" => b.push_text(" ", line, line),
            "li" if !tag.closing => {
                b.term = false;
                b.flush();
                b.text.push_str("- ");
                b.start = tag_line;
            }
            // A term is closed: it waits for its description. A new term, or anything but a
            // description after it, ends the wait.
            "dt" if tag.closing && b.code.is_none() => {
                let before = b.blocks.len();
                b.flush();
                // Only a term that said something waits (an empty one leaves the block before
                // it last).
                b.term = b.blocks.len() > before
                    && b.blocks.last().is_some_and(|t| t.kind == BlockKind::Text);
            }
            "dd" if b.code.is_none() => {
                let waiting = b.term;
                b.flush();
                b.term = waiting && !tag.closing;
            }
            n if BLOCK_ELEMENTS.contains(&n) && b.code.is_none() => {
                if n == "dt" || n == "dl" {
                    b.term = false;
                }
                b.flush();
            }
            _ => {}
        }
    }
    b.flush();
    b.blocks
}

/// Read one tag at the start of `s` (which starts with `<`): its name, whether it closes or
/// closes itself, its attribute text, and its length. `None` when `s` is no tag.
fn read_tag(s: &str) -> Option<(Tag<'_>, usize)> {
    let b = s.as_bytes();
    let mut i = 1;
    let closing = b.get(1) == Some(&b'/');
    if closing {
        i += 1;
    }
    let name_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'-' || b[i] == b':') {
        i += 1;
    }
    if i == name_start || !b[name_start].is_ascii_alphabetic() {
        return None;
    }
    let name = s[name_start..i].to_ascii_lowercase();
    let attrs_start = i;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b[i]),
            (None, b'>') => break,
            _ => {}
        }
        i += 1;
    }
    if i >= b.len() {
        return None;
    }
    let attrs = &s[attrs_start..i];
    Some((
        Tag {
            name,
            closing,
            self_closing: attrs.trim_end().ends_with('/'),
            attrs,
        },
        i + 1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(html: &str) -> String {
        extract(html)
            .iter()
            .map(|b| {
                format!(
                    "{}-{} {:?} {:?}\n",
                    b.line_start, b.line_end, b.kind, b.text
                )
            })
            .collect()
    }

    #[test]
    fn a_redirect_stub_has_no_content() {
        let stub = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n\
            <META HTTP-EQUIV=\"Refresh\" content=\"0; URL=../new/page.html\">\n</head>\n\
            <body><p>Redirecting to... <a href=\"../new/page.html\">page</a>.</p></body></html>";
        assert!(is_redirect(stub));
        assert!(extract(stub).is_empty());
        // A page that refreshes itself later (a live dashboard) is read; so is one merely
        // mentioning the tag in its text.
        let later = "<html><head><meta http-equiv=\"refresh\" content=\"30\"></head>\n\
            <body><p>Status</p></body></html>";
        let told = "<html><body><p>Write &lt;meta http-equiv=\"refresh\" content=\"0\"&gt;</p>\n\
            <pre><code><meta http-equiv=\"refresh\" content=\"0\"></code></pre></body></html>";
        assert!(!is_redirect(later) && !is_redirect(told));
        assert!(!extract(later).is_empty() && !extract(told).is_empty());
    }

    #[test]
    fn keeps_main_content_and_drops_chrome() {
        let html = r##"<!DOCTYPE html>
<html><head><title>Profiles</title><script>var x = "<main>";</script></head>
<body>
<nav id="sidebar"><ol><li>Chapter 1</li><li><a href="x.html">Chapter 2</a></li></ol></nav>
<div class="menu-bar"><h1 class="menu-title">The Book</h1></div>
<main>
<h1 id="profiles"><a class="header" href="#profiles">Profiles</a></h1>
<p>Profiles alter the <code>rustc</code> settings,
like &quot;optimizations&quot; &amp; debug&#x27;s.</p>
<!-- <p>commented out</p> -->
<div class="rule" id="r-x"><a class="rule-link" href="#r-x"><span>[x.y]</span></a></div>
<ul>
<li>one</li>
<li>two <em>items</em></li>
</ul>
<pre><code class="language-toml">[profile.dev]
opt-level = 1 # &lt;fast&gt;
<span class="boring">hidden = true
</span></code></pre>
<h3>Untitled <a class="header" href="#untitled">#</a></h3>
<svg><text>diagram</text><svg>inner</svg></svg>
<p>after</p>
</main>
<footer>Built with mdBook</footer>
</body></html>"##;
        expect_test::expect![[r#"
            7-7 Heading { level: 1, anchor: "profiles" } "Profiles"
            8-9 Text "Profiles alter the `rustc` settings, like \"optimizations\" & debug's."
            13-13 Text "- one"
            14-14 Text "- two items"
            16-18 Code { lang: "toml" } "[profile.dev]\nopt-level = 1 # <fast>"
            20-20 Heading { level: 3, anchor: "untitled" } "Untitled"
            22-22 Text "after"
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn a_sphinx_page_is_read_inside_its_main_role_without_sidebar_or_permalinks() {
        // Sphinx's Alabaster theme: no `<main>`, the content a `<div role="main">`, the
        // sidebar (with its own `<h1>`) a `<div role="navigation">` after it, and a `¶`
        // permalink in every heading, which also carries the section's anchor.
        let html = r##"<html><body>
<div class="document"><div class="body" role="main">
<section id="getting-started">
<h1>Getting Started<a class="headerlink" href="#getting-started" title="Permalink">¶</a></h1>
<div class="admonition note"><div><p>Install it.</p></div></div>
<div role="navigation" aria-label="breadcrumbs"><div><a href="index.html">Home</a></div></div>
<p>Then tag.</p>
</section>
</div></div>
<div class="sphinxsidebar" role="navigation"><h1 class="logo">taggit</h1>
<h3>Navigation</h3><ul><li>Getting Started</li></ul>
<div id="searchbox" role="search"><h3>Quick search</h3></div></div>
<div class="footer">Powered by Sphinx</div>
</body></html>"##;
        expect_test::expect![[r#"
            4-4 Heading { level: 1, anchor: "getting-started" } "Getting Started"
            5-5 Text "Install it."
            7-7 Text "Then tag."
        "#]]
        .assert_eq(&show(html));
        // An MkDocs heading's `#` permalink is dropped the same way.
        let mkdocs =
            "<main><h2 id=\"usage\">Usage<a class=\"headerlink\" href=\"#usage\">#</a></h2></main>";
        expect_test::expect![[r#"
            1-1 Heading { level: 2, anchor: "usage" } "Usage"
        "#]]
        .assert_eq(&show(mkdocs));
    }

    #[test]
    fn a_heading_without_an_id_takes_its_sections_and_permalinks_are_dropped() {
        // rustdoc: the id is on the `<section>`, the `§` permalink before the heading, and a
        // section without a heading lends its id to none after it. Node.js marks its `#`
        // with a class of its own; a heading that is itself a link keeps its words.
        let html = r##"<main>
<h2 id="variants">Variants<a href="#variants" class="anchor">§</a></h2>
<section id="variant.None" class="variant"><a href="#variant.None" class="anchor">§</a><h3 class="code-header">None</h3></section>
<p>No value.</p>
<section id="aside"><p>x</p></section>
<h3>Plain</h3>
<h2 id="vp">Next<a class="header-anchor" href="#vp">#</a><a class="hash-link" href="#vp">&#8203;</a></h2>
<h3>Class: <code>Timeout</code><span><a class="mark" href="#class-timeout" id="class-timeout">#</a></span></h3>
<h3 id="cs"><a href="#cs">Using C#</a></h3>
</main>"##;
        expect_test::expect![[r#"
            2-2 Heading { level: 2, anchor: "variants" } "Variants"
            3-3 Heading { level: 3, anchor: "variant.None" } "None"
            4-4 Text "No value."
            5-5 Text "x"
            6-6 Heading { level: 3, anchor: "" } "Plain"
            7-7 Heading { level: 2, anchor: "vp" } "Next"
            8-8 Heading { level: 3, anchor: "class-timeout" } "Class: Timeout"
            9-9 Heading { level: 3, anchor: "cs" } "Using C#"
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn a_docbook_page_takes_its_headings_ids_from_their_divs_and_drops_its_nav_tables() {
        // DocBook XSL (PostgreSQL's manual): no landmarks, a Prev/Up/Next table above and
        // below, each heading's id on the `<div>` it opens, through title-page wrappers and an
        // index-term anchor, and a note's title an `<h3>` that opens no section; a `<div>`
        // with text before its heading lends it nothing.
        let html = r##"<html><body id="docContent">
<div class="navheader"><table><tr><th>Routine Vacuuming</th></tr><tr><td><a href="x.html">Prev</a></td></tr></table><hr /></div>
<div class="sect1" id="ROUTINE-VACUUMING"><div class="titlepage"><div><div><h2 class="title">25.1. Routine Vacuuming</h2></div></div></div>
<div class="sect2" id="VACUUM-BASICS"><div class="titlepage"><div><div><h3 class="title">25.1.1. Vacuuming Basics</h3></div></div></div><a id="id-1.6" class="indexterm"></a><p>Reclaim space.</p>
<div class="note"><h3 class="title">Note</h3><div><p>Careful.</p></div></div><p>Still basics.</p>
<div class="sect3" id="n1"><p>Said first.</p><h4>Later</h4></div></div></div>
<div class="navfooter"><hr /><table><tr><td>Home</td></tr></table></div>
</body></html>"##;
        expect_test::expect![[r#"
            3-3 Heading { level: 2, anchor: "ROUTINE-VACUUMING" } "25.1. Routine Vacuuming"
            4-4 Heading { level: 3, anchor: "VACUUM-BASICS" } "25.1.1. Vacuuming Basics"
            4-4 Text "Reclaim space."
            5-5 Text "Note"
            5-5 Text "Careful."
            5-5 Text "Still basics."
            6-6 Text "Said first."
            6-6 Heading { level: 4, anchor: "" } "Later"
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn a_definition_term_leads_its_descriptions_first_paragraph() {
        // DocBook's settings, Cargo's options (two terms, one description), a description
        // opening with a list, a term with no description, and an empty term.
        let html = r##"<main><dl>
<dt id="GUC-MAX-CONNECTIONS"><span class="term"><code>max_connections</code> (<code>integer</code>)
<a id="i1" class="indexterm"></a></span></dt><dd><p>
Determines the maximum number of connections.</p><p>Set it at start.</p></dd>
<dt><code>-p</code> spec</dt><dt><code>--package</code> spec:</dt><dd>Package to build.</dd>
<dt>modes</dt><dd><ul><li>fast</li></ul></dd>
<dt>alone</dt></dl><p>After the list.</p>
<dl><dt id="empty"></dt><dd><p>Described.</p></dd></dl></main>"##;
        expect_test::expect![[r#"
            2-4 Text "`max_connections` (`integer`): Determines the maximum number of connections."
            4-4 Text "Set it at start."
            5-5 Text "`-p` spec"
            5-5 Text "`--package` spec: Package to build."
            6-6 Text "modes"
            6-6 Text "- fast"
            7-7 Text "alone"
            7-7 Text "After the list."
            8-8 Text "Described."
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn code_nested_in_code_is_one_span() {
        // DocBook's psql page: a placeholder's `<code>` inside the command's.
        let html = r##"<main><dl><dt><code class="literal">\warn <em class="replaceable"><code>text</code></em> [ ... ]</code></dt>
<dd><p>Like <code>\echo</code>, to <code>stderr</code>.</p></dd></dl></main>"##;
        expect_test::expect![[r#"
            1-2 Text "`\\warn text [ ... ]`: Like `\\echo`, to `stderr`."
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn chrome_is_known_by_its_id_on_a_page_without_landmarks() {
        // The Apache manual: a page header, a sidebar table of contents, language switchers,
        // a related-modules table, `¶` permalinks and a footer, all plain `<div>`s; AsciiDoc's
        // `<div id="header">` holds the page's title and is kept.
        let html = r##"<body id="manual-page"><div id="page-header"><p class="menu"><a href="m.html">Modules</a> | <a href="f.html">FAQ</a></p></div>
<div id="page-content"><div id="preamble"><h1>Log Files</h1>
<div class="toplang"><p><span>Available Languages: </span><a href="en">en</a> | <a href="fr">fr</a></p></div>
<p>Keep an eye on them.</p></div><div id="quickview"><ul id="toc"><li><a href="#rotation">Log Rotation</a></li></ul></div>
<div class="section"><h2 id="rotation">Log Rotation <a title="Permanent link" href="#rotation" class="permalink">&para;</a></h2>
<table class="related"><tr><th>Related Modules</th></tr><tr><td><a href="x">mod_log_config</a></td></tr></table><p>Rotate them.</p></div></div>
<div class="bottomlang"><p>Available Languages: en</p></div><div id="footer"><p>Copyright 2026</p></div>
<div id="header"><h1>git-stash(1)</h1></div></body>"##;
        expect_test::expect![[r#"
            2-2 Heading { level: 1, anchor: "preamble" } "Log Files"
            4-4 Text "Keep an eye on them."
            5-5 Heading { level: 2, anchor: "rotation" } "Log Rotation"
            6-6 Text "Rotate them."
            8-8 Heading { level: 1, anchor: "header" } "git-stash(1)"
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn without_main_the_body_is_read_less_its_chrome() {
        let html = "<html><body><header>Site</header>\n<h2 id=\"a\">A</h2>\n<p>x <b>y</b></p>\n<footer>c</footer></body></html>";
        expect_test::expect![[r#"
            2-2 Heading { level: 2, anchor: "a" } "A"
            3-3 Text "x y"
        "#]]
        .assert_eq(&show(html));
    }

    #[test]
    fn malformed_input_never_panics_and_keeps_text() {
        for html in [
            "<",
            "<p",
            "a < b and c > d",
            "<main><pre>unclosed",
            "<p class=\"unterminated>text",
            "&#xFFFFFFFF; &#0; &bogus; &",
            "</main></main><main>x",
            "<svg><svg></svg>",
        ] {
            let _ = extract(html);
        }
        assert_eq!(extract("a < b")[0].text, "a < b");
        assert_eq!(decode_entities("&#x41;&#66;&lt;&bogus;&"), "AB<&bogus;&");
        // Code from a page with CRLF line ends is quoted with LF.
        assert_eq!(extract("<pre>a\r\n  b\r\n</pre>")[0].text, "a\n  b");
    }
}
