//! `sensorium-patch-policy.v1`: the files a patch may touch and the lines it may add, and the
//! one implementation of applying a patch under it.
//!
//! The compiler runs [`PatchPolicy::apply`] on the pack's baseline pre-image; the workbench runs
//! the same function again on the real file in the guest and compares the digests. Owner and
//! mode ([`PolicyFile::uid`], [`PolicyFile::gid`], [`PolicyFile::mode`]) are carried for the
//! workbench, which checks them on the real file; this crate has no file to check them on.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use reach_digest::Sha256Digest;
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use crate::candidate::{Edit, RelativeTarget};
use crate::refusal::PatchRefusal;

/// The policy's format tag.
pub const PATCH_POLICY_FORMAT: &str = "sensorium-patch-policy.v1";

/// The compiled size limit of one line shape. A line shape describes one configuration line;
/// one that compiles to more than this is not a shape a reviewer can read.
pub const MAX_LINE_SHAPE_REGEX_BYTES: usize = 1 << 20;

/// Lines of unchanged context around each hunk of a [`PatchOutcome::diff`].
pub const DIFF_CONTEXT_LINES: usize = 3;

/// A parsed, compiled `sensorium-patch-policy.v1`.
#[derive(Debug, Clone)]
pub struct PatchPolicy {
    forbidden: Vec<String>,
    files: BTreeMap<String, PolicyFile>,
}

/// One admitted patch target.
#[derive(Debug, Clone)]
pub struct PolicyFile {
    pub target: RelativeTarget,
    /// The largest post-image admitted, in bytes.
    pub max_bytes: u64,
    /// The owner the workbench requires of the real file.
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (at most `0o7777`), written as an octal string in the policy.
    pub mode: u32,
    pub line_shapes: Vec<LineShape>,
}

/// One admitted line shape: the policy's pattern, compiled anchored at both ends.
#[derive(Debug, Clone)]
pub struct LineShape {
    source: String,
    regex: Regex,
}

impl LineShape {
    /// The pattern as the policy writes it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `line` matches the shape.
    pub fn matches(&self, line: &str) -> bool {
        self.regex.is_match(line)
    }
}

/// Why a patch policy text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// patch policy is not TOML: {0}
    #[error("patch policy is not TOML: {0}")]
    Syntax(String),
    /// patch policy refused at `{path}`: {reason}
    #[error("patch policy refused at `{path}`: {reason}")]
    Schema { path: String, reason: String },
}

impl PolicyError {
    /// `package/schema`: a pack whose patch policy does not parse is refused at build and at
    /// install as any other malformed pack file.
    pub fn code(&self) -> &'static str {
        "package/schema"
    }

    fn schema(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Schema {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    format: String,
    #[serde(default)]
    forbidden: Vec<String>,
    #[serde(default)]
    files: Vec<RawFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    target: RelativeTarget,
    max_bytes: u64,
    uid: u32,
    gid: u32,
    mode: String,
    line_shapes: Vec<String>,
}

/// What applying an admitted patch yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchOutcome {
    pub pre_digest: Sha256Digest,
    pub post_image: String,
    pub post_digest: Sha256Digest,
    /// A unified diff (`--- a/…`, `+++ b/…`, `@@` hunks with [`DIFF_CONTEXT_LINES`] of
    /// context; removed lines `-`, added lines `+`), for the reviewer and the operator. It shows
    /// lines only: a final newline gained or kept is not marked, and the digests are what bind.
    pub diff: String,
}

impl PatchPolicy {
    /// Parses a policy: strict TOML (an unknown key is refused naming its path), every line
    /// shape compiled, duplicate targets and empty forbidden substrings refused.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let de = toml::Deserializer::parse(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        let raw: RawPolicy = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            PolicyError::schema(path, e.into_inner().message().to_owned())
        })?;
        if raw.format != PATCH_POLICY_FORMAT {
            return Err(PolicyError::schema(
                "format",
                format!("expected `{PATCH_POLICY_FORMAT}`"),
            ));
        }
        if let Some(i) = raw.forbidden.iter().position(String::is_empty) {
            return Err(PolicyError::schema(
                format!("forbidden[{i}]"),
                "an empty forbidden substring would refuse every line",
            ));
        }
        let mut files = BTreeMap::new();
        for (i, file) in raw.files.into_iter().enumerate() {
            let mode = parse_mode(&file.mode).ok_or_else(|| {
                PolicyError::schema(
                    format!("files[{i}].mode"),
                    "expected an octal mode of 3 or 4 digits, e.g. `0644`",
                )
            })?;
            let line_shapes = file
                .line_shapes
                .into_iter()
                .enumerate()
                .map(|(j, source)| {
                    compile_shape(source).map_err(|reason| {
                        PolicyError::schema(format!("files[{i}].line_shapes[{j}]"), reason)
                    })
                })
                .collect::<Result<_, _>>()?;
            let key = file.target.as_str().to_owned();
            if files.contains_key(&key) {
                return Err(PolicyError::schema(
                    format!("files[{i}].target"),
                    format!("`{key}` is already admitted by an earlier entry"),
                ));
            }
            files.insert(
                key,
                PolicyFile {
                    target: file.target,
                    max_bytes: file.max_bytes,
                    uid: file.uid,
                    gid: file.gid,
                    mode,
                    line_shapes,
                },
            );
        }
        Ok(Self {
            forbidden: raw.forbidden,
            files,
        })
    }

    /// Substrings refused in any added line of any target.
    pub fn forbidden(&self) -> &[String] {
        &self.forbidden
    }

    /// The admitted file at `target`, if any.
    pub fn file(&self, target: &str) -> Option<&PolicyFile> {
        self.files.get(target)
    }

    /// Every admitted file, in target order.
    pub fn files(&self) -> impl Iterator<Item = &PolicyFile> {
        self.files.values()
    }

    /// Every admitted target, sorted.
    pub fn targets(&self) -> impl Iterator<Item = &RelativeTarget> {
        self.files.values().map(|f| &f.target)
    }

    /// Applies `edits` in order to `pre_image` of `target` and checks the result: the target
    /// is admitted, there is at least one edit, each addressed line occurs exactly once in the
    /// text the edit applies to (the pre-image with the earlier edits applied), each added
    /// line contains no forbidden substring and matches one of the file's line shapes, and the
    /// post-image fits `max_bytes`.
    ///
    /// Lines are separated by `\n`; the post-image ends with `\n` when the pre-image does (or
    /// is empty).
    pub fn apply(
        &self,
        target: &RelativeTarget,
        pre_image: &str,
        edits: &[Edit],
    ) -> Result<PatchOutcome, PatchRefusal> {
        let target_name = target.as_str();
        let file = self
            .files
            .get(target_name)
            .ok_or_else(|| PatchRefusal::TargetNotAdmitted {
                target: target_name.to_owned(),
            })?;
        if edits.is_empty() {
            return Err(PatchRefusal::NoEdits {
                target: target_name.to_owned(),
            });
        }

        let mut entries: Vec<Entry<'_>> =
            pre_image.split_terminator('\n').map(Entry::Kept).collect();
        for (n, edit) in edits.iter().enumerate() {
            if let Some(added) = edit.added() {
                self.check_added(file, n, added.as_str())?;
            }
            match edit {
                Edit::Append { with } => entries.push(Entry::Added(with.as_str())),
                Edit::Replace { line, .. } | Edit::Delete { line } => {
                    let at = find_once(&entries, line.as_str()).map_err(|found| {
                        PatchRefusal::LineNotExactlyOnce {
                            target: target_name.to_owned(),
                            edit: n,
                            line: line.as_str().to_owned(),
                            found,
                        }
                    })?;
                    let replacement = edit.added().map(|w| Entry::Added(w.as_str()));
                    match (entries[at], replacement) {
                        (Entry::Kept(old), Some(new)) => {
                            entries[at] = Entry::Removed(old);
                            entries.insert(at + 1, new);
                        }
                        (Entry::Kept(old), None) => entries[at] = Entry::Removed(old),
                        (_, Some(new)) => entries[at] = new,
                        (_, None) => {
                            entries.remove(at);
                        }
                    }
                }
            }
        }

        let mut post_image = String::with_capacity(pre_image.len() + 64);
        for line in entries.iter().filter_map(Entry::live) {
            post_image.push_str(line);
            post_image.push('\n');
        }
        let keep_final_newline = pre_image.is_empty() || pre_image.ends_with('\n');
        if !keep_final_newline {
            post_image.pop();
        }
        let bytes = post_image.len() as u64;
        if bytes > file.max_bytes {
            return Err(PatchRefusal::TooLarge {
                target: target_name.to_owned(),
                bytes,
                max: file.max_bytes,
            });
        }

        Ok(PatchOutcome {
            pre_digest: Sha256Digest::of(pre_image),
            post_digest: Sha256Digest::of(&post_image),
            diff: unified_diff(target_name, &entries),
            post_image,
        })
    }

    fn check_added(&self, file: &PolicyFile, edit: usize, line: &str) -> Result<(), PatchRefusal> {
        if let Some(f) = self.forbidden.iter().find(|f| line.contains(f.as_str())) {
            return Err(PatchRefusal::ForbiddenSubstring {
                edit,
                line: line.to_owned(),
                forbidden: f.clone(),
            });
        }
        if !file.line_shapes.iter().any(|s| s.matches(line)) {
            return Err(PatchRefusal::ShapeMismatch {
                target: file.target.as_str().to_owned(),
                edit,
                line: line.to_owned(),
            });
        }
        Ok(())
    }
}

impl PolicyFile {
    /// The mode as the policy writes it, e.g. `0644`.
    pub fn mode_text(&self) -> String {
        format!("{:04o}", self.mode)
    }
}

fn parse_mode(text: &str) -> Option<u32> {
    if !(3..=4).contains(&text.len()) || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(text, 8).ok()
}

fn compile_shape(source: String) -> Result<LineShape, String> {
    // Wrapped in a group so an alternation cannot escape the anchors.
    let regex = RegexBuilder::new(&format!("^(?:{source})$"))
        .size_limit(MAX_LINE_SHAPE_REGEX_BYTES)
        .build()
        .map_err(|e| format!("line shape does not compile: {e}"))?;
    Ok(LineShape { source, regex })
}

/// One line of the image being edited, with where it came from.
#[derive(Debug, Clone, Copy)]
enum Entry<'a> {
    /// A pre-image line still present.
    Kept(&'a str),
    /// A pre-image line removed (kept here for the diff).
    Removed(&'a str),
    /// A line an edit added.
    Added(&'a str),
}

impl<'a> Entry<'a> {
    fn live(&self) -> Option<&'a str> {
        match *self {
            Entry::Kept(l) | Entry::Added(l) => Some(l),
            Entry::Removed(_) => None,
        }
    }
}

/// The index of the one live entry equal to `line`, or how many there are.
fn find_once(entries: &[Entry<'_>], line: &str) -> Result<usize, usize> {
    let mut found = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.live() == Some(line))
        .map(|(i, _)| i);
    match (found.next(), found.next()) {
        (Some(i), None) => Ok(i),
        (None, _) => Err(0),
        (Some(_), Some(_)) => Err(2 + found.count()),
    }
}

/// A unified diff of two texts by lines (longest common subsequence; the texts are small pack
/// files, so the quadratic table is bounded by their size limits), rendered exactly as a
/// patch's diff is. Empty when the texts are equal.
pub fn text_diff(label: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut entries) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            entries.push(Entry::Kept(a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            entries.push(Entry::Added(b[j]));
            j += 1;
        } else {
            entries.push(Entry::Removed(a[i]));
            i += 1;
        }
    }
    unified_diff(label, &entries)
}

/// Renders the edited entries as a unified diff. Within each run of changed lines the removed
/// lines come before the added ones.
fn unified_diff(target: &str, entries: &[Entry<'_>]) -> String {
    // Normalize: each maximal run of changes lists its removals first.
    let mut ops: Vec<(char, &str)> = Vec::with_capacity(entries.len());
    let mut added: Vec<&str> = Vec::new();
    for e in entries {
        match *e {
            Entry::Kept(l) => {
                ops.extend(added.drain(..).map(|a| ('+', a)));
                ops.push((' ', l));
            }
            Entry::Removed(l) => ops.push(('-', l)),
            Entry::Added(l) => added.push(l),
        }
    }
    ops.extend(added.drain(..).map(|a| ('+', a)));

    let mut out = format!("--- a/{target}\n+++ b/{target}\n");
    let changed: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].0 != ' ').collect();
    let mut c = 0;
    while c < changed.len() {
        // Grow the hunk while the next change is within two contexts of the last one.
        let mut last = changed[c];
        let mut d = c + 1;
        while d < changed.len() && changed[d] - last <= 2 * DIFF_CONTEXT_LINES + 1 {
            last = changed[d];
            d += 1;
        }
        let start = changed[c].saturating_sub(DIFF_CONTEXT_LINES);
        let end = (last + DIFF_CONTEXT_LINES + 1).min(ops.len());
        let old_before = ops[..start].iter().filter(|o| o.0 != '+').count();
        let new_before = ops[..start].iter().filter(|o| o.0 != '-').count();
        let old_count = ops[start..end].iter().filter(|o| o.0 != '+').count();
        let new_count = ops[start..end].iter().filter(|o| o.0 != '-').count();
        let old_start = if old_count == 0 {
            old_before
        } else {
            old_before + 1
        };
        let new_start = if new_count == 0 {
            new_before
        } else {
            new_before + 1
        };
        let _ = writeln!(
            out,
            "@@ -{old_start},{old_count} +{new_start},{new_count} @@"
        );
        for (sign, line) in &ops[start..end] {
            out.push(*sign);
            out.push_str(line);
            out.push('\n');
        }
        c = d;
    }
    out
}

#[cfg(test)]
mod text_diff_tests {
    use super::text_diff;

    #[test]
    fn a_text_diff_marks_exactly_the_changed_lines() {
        assert_eq!(text_diff("f", "a\nb\n", "a\nb\n"), "");
        let d = text_diff("f", "a\nb\nc\n", "a\nB\nc\nd\n");
        expect_test::expect![[r#"
            --- a/f
            +++ b/f
            @@ -1,3 +1,4 @@
             a
            -b
            +B
             c
            +d
        "#]]
        .assert_eq(&d);
    }
}
