//! Safe processing: judge every entry of an acquired tree against the rules, under the policy.
//!
//! **Architecture Invariant:** processing is pure. It follows no link, fetches no URL named in
//! content, runs no filter or hook, and reads nothing outside the tree it is given.

use std::time::Instant;

use globset::{Glob, GlobSet, GlobSetBuilder};
use reach_digest::Sha256Digest;

use crate::error::BuildError;
use crate::rules::{Action, Policy, Rejection, Rule};
use crate::source::Ceilings;
use crate::tree::{AcquiredTree, EntryKind};

/// The first line of every Git LFS pointer file.
pub(crate) const LFS_POINTER_PREFIX: &[u8] = b"version https://git-lfs.github.com/spec/";

/// How often (in entries) the work-time ceiling is checked.
const DEADLINE_CHECK_EVERY: usize = 64;

/// The media the index understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Media {
    Markdown,
    Text,
    Html,
}

impl Media {
    pub fn of_path(path: &str) -> Option<Media> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("md" | "markdown" | "mdown" | "mkd") => Some(Media::Markdown),
            Some("txt" | "text" | "rst" | "adoc") => Some(Media::Text),
            Some("html" | "htm") => Some(Media::Html),
            None if matches!(name, "README" | "LICENSE" | "NOTICE" | "CHANGELOG") => {
                Some(Media::Text)
            }
            _ => None,
        }
    }
}

/// A file that passed every rule.
#[derive(Debug, Clone)]
pub struct AcceptedFile {
    pub path: String,
    pub media: Media,
    pub text: String,
    pub digest: Sha256Digest,
}

/// The outcome of processing: accepted files and skipped paths (each with its rule).
#[derive(Debug, Clone, Default)]
pub struct Processed {
    pub accepted: Vec<AcceptedFile>,
    pub skipped: Vec<Rejection>,
    /// Entries outside the pinned paths (not judged beyond the tree-wide control-file rules).
    pub not_pinned: u64,
    pub bytes_accepted: u64,
}

/// A callback told about each judged entry, so a CLI can drive a bar.
pub type OnEntry<'a> = &'a mut dyn FnMut(u64);

/// Judge `tree` under `include` globs, `ceilings` and `policy`. Stops at the first violation
/// whose action is [`Action::Refuse`], or at the work-time `deadline`.
pub fn process_tree(
    tree: &AcquiredTree,
    include: &[String],
    ceilings: &Ceilings,
    policy: &Policy,
    deadline: Instant,
    on_entry: OnEntry<'_>,
) -> Result<Processed, BuildError> {
    let globs = build_globs(include)?;
    let mut out = Processed::default();
    let mut files_pinned: u64 = 0;
    let reject =
        |out: &mut Processed, path: &str, rule: Rule, detail: String| match policy.action(rule) {
            Action::Refuse => Err(BuildError::refused(rule, path, detail)),
            Action::Skip => {
                out.skipped.push(Rejection {
                    path: path.to_string(),
                    rule,
                    detail,
                });
                Ok(())
            }
        };
    for (i, entry) in tree.entries.iter().enumerate() {
        if i % DEADLINE_CHECK_EVERY == 0 && Instant::now() >= deadline {
            return Err(BuildError::refused(
                Rule::WorkTime,
                "<build>",
                "work-time ceiling reached",
            ));
        }
        on_entry(1);
        let raw = entry.path.as_str();
        // 1. The path itself.
        let path = match normalize(raw) {
            Ok(p) => p,
            Err(rule) => {
                reject(&mut out, raw, rule, "unsafe entry path".into())?;
                continue;
            }
        };
        let name = path.rsplit('/').next().unwrap_or(&path);
        // 2. Repository internals and control files, judged wherever they are in the tree
        //    because they would change how other paths are materialised.
        if path.split('/').any(|c| c == ".git") {
            reject(
                &mut out,
                &path,
                Rule::Hook,
                "repository internals (hooks) are never read".into(),
            )?;
            continue;
        }
        if name == ".gitmodules" || matches!(entry.kind, EntryKind::Submodule { .. }) {
            reject(
                &mut out,
                &path,
                Rule::Submodule,
                "submodules are never fetched".into(),
            )?;
            continue;
        }
        if name == ".gitattributes" {
            if let EntryKind::File { bytes, .. } = &entry.kind
                && let Some(line) = gitattributes_filter_line(bytes)
            {
                reject(
                    &mut out,
                    &path,
                    Rule::GitattributesFilter,
                    format!("declares a filter on line {line}; filters are never run"),
                )?;
            }
            continue;
        }
        // 3. Pinned paths.
        if !globs.is_match(&path) {
            out.not_pinned += 1;
            continue;
        }
        let depth = path.matches('/').count() as u32;
        if depth > ceilings.max_depth {
            reject(
                &mut out,
                &path,
                Rule::PathTooDeep,
                format!("{depth} directory levels, ceiling {}", ceilings.max_depth),
            )?;
            continue;
        }
        files_pinned += 1;
        if files_pinned > ceilings.max_files {
            reject(
                &mut out,
                &path,
                Rule::TooManyFiles,
                format!("more than {} files", ceilings.max_files),
            )?;
            continue;
        }
        // 4. Entry kind.
        let (bytes, executable) = match &entry.kind {
            EntryKind::File { bytes, executable } => (bytes, *executable),
            EntryKind::Symlink { target } => {
                let escapes = match resolve_link(&path, target) {
                    Some(resolved) => !globs.is_match(&resolved),
                    None => true,
                };
                if escapes {
                    reject(
                        &mut out,
                        &path,
                        Rule::SymlinkEscape,
                        "link target leaves the pinned paths".into(),
                    )?;
                } else {
                    reject(
                        &mut out,
                        &path,
                        Rule::Symlink,
                        "links are never followed".into(),
                    )?;
                }
                continue;
            }
            EntryKind::Submodule { .. } => {
                // Already judged in step 2; kept so the match stays exhaustive.
                reject(
                    &mut out,
                    &path,
                    Rule::Submodule,
                    "submodules are never fetched".into(),
                )?;
                continue;
            }
            EntryKind::Other(kind) => {
                reject(
                    &mut out,
                    &path,
                    Rule::UnsupportedEntry,
                    format!("{kind} entry"),
                )?;
                continue;
            }
        };
        // 5. Content.
        if bytes.starts_with(LFS_POINTER_PREFIX) {
            reject(
                &mut out,
                &path,
                Rule::LfsPointer,
                "Git LFS pointer; LFS is never fetched".into(),
            )?;
            continue;
        }
        let Some(media) = Media::of_path(&path) else {
            reject(
                &mut out,
                &path,
                Rule::UnsupportedMedia,
                "not Markdown, text or HTML".into(),
            )?;
            continue;
        };
        if executable {
            reject(&mut out, &path, Rule::Hook, "executable file".into())?;
            continue;
        }
        match judge_content(bytes, media, ceilings) {
            Ok(text) => {
                out.bytes_accepted += bytes.len() as u64;
                if out.bytes_accepted > ceilings.max_bytes {
                    return Err(BuildError::refused(
                        Rule::TooManyBytes,
                        path,
                        format!("accepted bytes exceed {}", ceilings.max_bytes),
                    ));
                }
                out.accepted.push(AcceptedFile {
                    digest: Sha256Digest::of(bytes),
                    path,
                    media,
                    text,
                });
            }
            Err((rule, detail)) => reject(&mut out, &path, rule, detail)?,
        }
    }
    out.accepted.sort_by(|a, b| a.path.cmp(&b.path));
    out.skipped
        .sort_by(|a, b| a.path.cmp(&b.path).then(a.rule.cmp(&b.rule)));
    Ok(out)
}

fn build_globs(include: &[String]) -> Result<GlobSet, BuildError> {
    glob_set(include).map_err(|e| {
        BuildError::Source(crate::source::SourceRefusal::Malformed(format!(
            "include {e}"
        )))
    })
}

/// Path globs as a source's `include` (and a question set's `exclude`) are compiled: `*`
/// crosses `/`. The error names the glob that does not compile.
pub(crate) fn glob_set(globs: &[String]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(Glob::new(g).map_err(|e| format!("`{g}`: {e}"))?);
    }
    b.build().map_err(|e| e.to_string())
}

/// Normalise a raw entry path: strip `./` and empty components; refuse absolute paths and any
/// `..` component (even one that would stay inside the tree: archives have no business with it).
pub fn normalize(raw: &str) -> Result<String, Rule> {
    if raw.starts_with('/') || raw.starts_with('\\') || raw.as_bytes().get(1) == Some(&b':') {
        return Err(Rule::AbsolutePath);
    }
    let mut parts = Vec::new();
    for c in raw.split(['/', '\\']) {
        match c {
            "" | "." => {}
            ".." => return Err(Rule::PathTraversal),
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return Err(Rule::PathTraversal);
    }
    // A drive letter hidden behind `./` or an empty component (`./C:/x`) is still one: the
    // normalized path must pass the same rule, so normalizing twice changes nothing.
    if parts[0].as_bytes().get(1) == Some(&b':') {
        return Err(Rule::AbsolutePath);
    }
    Ok(parts.join("/"))
}

/// Resolve a link target relative to the link's directory; `None` if it leaves the tree.
pub(crate) fn resolve_link(link_path: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link_path.split('/').collect();
    parts.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The 1-based line of a `.gitattributes` `filter=` declaration, if any.
fn gitattributes_filter_line(bytes: &[u8]) -> Option<usize> {
    String::from_utf8_lossy(bytes)
        .lines()
        .enumerate()
        .find_map(|(i, l)| {
            let l = l.trim();
            (!l.starts_with('#')
                && l.split_whitespace()
                    .skip(1)
                    .any(|a| a.starts_with("filter=")))
            .then_some(i + 1)
        })
}

/// Content rules, in order: NUL, UTF-8, line length, nesting, size.
pub(crate) fn judge_content(
    bytes: &[u8],
    media: Media,
    c: &Ceilings,
) -> Result<String, (Rule, String)> {
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        return Err((Rule::NulByte, format!("NUL byte at offset {at}")));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        (
            Rule::MalformedUtf8,
            format!("invalid UTF-8 at offset {}", e.valid_up_to()),
        )
    })?;
    let mut fence: Option<&str> = None;
    let mut html_depth: i64 = 0;
    for (i, line) in text.split('\n').enumerate() {
        if line.len() as u64 > c.max_line_bytes {
            return Err((
                Rule::LineTooLong,
                format!(
                    "line {} has {} bytes, ceiling {}",
                    i + 1,
                    line.len(),
                    c.max_line_bytes
                ),
            ));
        }
        let depth = match media {
            Media::Markdown => {
                let t = line.trim_start();
                if let Some(f) = fence {
                    if t.starts_with(f) {
                        fence = None;
                    }
                    0
                } else if t.starts_with("```") || t.starts_with("~~~") {
                    fence = Some(&t[..3]);
                    0
                } else {
                    markdown_nesting(line)
                }
            }
            Media::Html => {
                html_depth += html_depth_delta(line);
                html_depth.max(0) as u64
            }
            Media::Text => 0,
        };
        if depth > u64::from(c.max_nesting) {
            return Err((
                Rule::NestingTooDeep,
                format!(
                    "nesting {depth} on line {}, ceiling {}",
                    i + 1,
                    c.max_nesting
                ),
            ));
        }
    }
    if bytes.len() as u64 > c.max_file_bytes {
        return Err((
            Rule::FileTooLarge,
            format!("{} bytes, ceiling {}", bytes.len(), c.max_file_bytes),
        ));
    }
    Ok(text.to_string())
}

/// Container nesting a CommonMark parser would build for one line: indentation (two columns per
/// list level), block-quote markers and list markers stacked on the same line.
fn markdown_nesting(line: &str) -> u64 {
    let body = line.trim_start_matches([' ', '\t']);
    let cols: u64 = line[..line.len() - body.len()]
        .chars()
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    let mut depth = 0u64;
    let mut rest = body;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if let Some(r) = rest.strip_prefix('>') {
            rest = r;
        } else if let Some(r) = ["- ", "* ", "+ "].iter().find_map(|m| rest.strip_prefix(m)) {
            rest = r;
        } else if let Some(r) = ordered_marker(rest) {
            rest = r;
        } else {
            break;
        }
        depth += 1;
    }
    depth + cols / 2
}

fn ordered_marker(s: &str) -> Option<&str> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    s[digits..]
        .strip_prefix(". ")
        .or_else(|| s[digits..].strip_prefix(") "))
}

const HTML_VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn html_depth_delta(line: &str) -> i64 {
    let mut delta = 0i64;
    let mut rest = line;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let closing = rest.starts_with('/');
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() || HTML_VOID.contains(&name.as_str()) {
            continue;
        }
        let self_closing = rest.find('>').is_some_and(|j| rest[..j].ends_with('/'));
        if closing {
            delta -= 1;
        } else if !self_closing {
            delta += 1;
        }
    }
    delta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_table() {
        let cases = [
            "a/b.md",
            "./a//b.md",
            "../x.md",
            "a/../../x.md",
            "/etc/passwd",
            "C:/x",
            ".",
            "a/./b",
            // Found by the corpus_process fuzz target: accepted as `C:/f.md`, itself refused.
            "./C:/f.md",
            "//C:/f.md",
        ];
        let out: String = cases
            .iter()
            .map(|c| format!("{c:<14} {:?}\n", normalize(c)))
            .collect();
        expect_test::expect![[r#"
            a/b.md         Ok("a/b.md")
            ./a//b.md      Ok("a/b.md")
            ../x.md        Err(PathTraversal)
            a/../../x.md   Err(PathTraversal)
            /etc/passwd    Err(AbsolutePath)
            C:/x           Err(AbsolutePath)
            .              Err(PathTraversal)
            a/./b          Ok("a/b")
            ./C:/f.md      Err(AbsolutePath)
            //C:/f.md      Err(AbsolutePath)
        "#]]
        .assert_eq(&out);
        // Normalizing is idempotent: what it accepts, it accepts again unchanged.
        for c in cases {
            if let Ok(p) = normalize(c) {
                assert_eq!(normalize(&p), Ok(p.clone()), "{c}");
            }
        }
    }

    #[test]
    fn nesting_counts_containers() {
        assert_eq!(markdown_nesting("plain"), 0);
        assert_eq!(markdown_nesting("- item"), 1);
        assert_eq!(markdown_nesting("    - item"), 3);
        assert_eq!(markdown_nesting("> > - 1. x"), 4);
        assert_eq!(html_depth_delta("<div><p>x</p><br><img src=a/>"), 1);
    }
}
