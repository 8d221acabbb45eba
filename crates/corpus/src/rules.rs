//! Processing rules and the policy that decides, per rule, whether a violation skips the one path
//! (recorded in the snapshot) or refuses the whole build.
//!
//! **Architecture Invariant:** every rejection names a path and a [`Rule`]; there is no silent drop.

use serde::{Deserialize, Serialize};

/// One processing rule. The `code` is stable and appears in records, status and refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Rule {
    /// An archive entry or tree path contains `..`.
    PathTraversal,
    /// An archive entry or tree path is absolute.
    AbsolutePath,
    /// A symbolic link whose target leaves the pinned paths.
    SymlinkEscape,
    /// A symbolic link inside the pinned paths; links are never followed.
    Symlink,
    /// Hard links, devices, fifos and other entries that are not plain files.
    UnsupportedEntry,
    /// A `.gitmodules` file or a submodule (gitlink) entry; submodules are never fetched.
    Submodule,
    /// A git hook or anything under a `.git` directory; hooks are never run.
    Hook,
    /// A `.gitattributes` line declaring a `filter=` (smudge/clean); filters are never run.
    GitattributesFilter,
    /// A Git LFS pointer file; LFS objects are never fetched.
    LfsPointer,
    /// A file whose extension or content is not Markdown, plain text or HTML.
    UnsupportedMedia,
    /// A file that is not valid UTF-8.
    MalformedUtf8,
    /// A file containing NUL bytes.
    NulByte,
    /// A line longer than the line ceiling (parser bomb).
    LineTooLong,
    /// Nesting (lists, block quotes, HTML elements) deeper than the nesting ceiling (parser bomb).
    NestingTooDeep,
    /// A file larger than the per-file ceiling.
    FileTooLarge,
    /// A path with more directory levels than the depth ceiling.
    PathTooDeep,
    /// More files than the file ceiling.
    TooManyFiles,
    /// More bytes than the byte ceiling.
    TooManyBytes,
    /// Expanded bytes over compressed bytes above the expansion-ratio ceiling (decompression bomb).
    ExpansionRatio,
    /// The build took longer than the work-time ceiling.
    WorkTime,
}

impl Rule {
    pub const ALL: [Rule; 20] = [
        Rule::PathTraversal,
        Rule::AbsolutePath,
        Rule::SymlinkEscape,
        Rule::Symlink,
        Rule::UnsupportedEntry,
        Rule::Submodule,
        Rule::Hook,
        Rule::GitattributesFilter,
        Rule::LfsPointer,
        Rule::UnsupportedMedia,
        Rule::MalformedUtf8,
        Rule::NulByte,
        Rule::LineTooLong,
        Rule::NestingTooDeep,
        Rule::FileTooLarge,
        Rule::PathTooDeep,
        Rule::TooManyFiles,
        Rule::TooManyBytes,
        Rule::ExpansionRatio,
        Rule::WorkTime,
    ];

    /// The stable string code.
    pub const fn code(self) -> &'static str {
        match self {
            Rule::PathTraversal => "corpus/path-traversal",
            Rule::AbsolutePath => "corpus/absolute-path",
            Rule::SymlinkEscape => "corpus/symlink-escape",
            Rule::Symlink => "corpus/symlink-not-followed",
            Rule::UnsupportedEntry => "corpus/unsupported-entry",
            Rule::Submodule => "corpus/submodule",
            Rule::Hook => "corpus/hook",
            Rule::GitattributesFilter => "corpus/gitattributes-filter",
            Rule::LfsPointer => "corpus/lfs-pointer",
            Rule::UnsupportedMedia => "corpus/unsupported-media",
            Rule::MalformedUtf8 => "corpus/malformed-utf8",
            Rule::NulByte => "corpus/nul-byte",
            Rule::LineTooLong => "corpus/line-too-long",
            Rule::NestingTooDeep => "corpus/nesting-too-deep",
            Rule::FileTooLarge => "corpus/file-too-large",
            Rule::PathTooDeep => "corpus/path-too-deep",
            Rule::TooManyFiles => "corpus/too-many-files",
            Rule::TooManyBytes => "corpus/too-many-bytes",
            Rule::ExpansionRatio => "corpus/expansion-ratio",
            Rule::WorkTime => "corpus/work-time",
        }
    }

    pub fn from_code(code: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.code() == code)
    }

    /// Whether a violation of this rule can only ever refuse the build (no single path to skip).
    pub const fn is_build_wide(self) -> bool {
        matches!(
            self,
            Rule::TooManyBytes | Rule::ExpansionRatio | Rule::WorkTime
        )
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl From<Rule> for &'static str {
    fn from(r: Rule) -> Self {
        r.code()
    }
}

impl TryFrom<String> for Rule {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Rule::from_code(&s).ok_or_else(|| format!("unknown corpus rule `{s}`"))
    }
}

/// What a rule violation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Skip the path, record it with the rule, continue the build.
    Skip,
    /// Refuse the whole build; the previous snapshot stays active.
    Refuse,
}

/// The builder's policy: one [`Action`] per [`Rule`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    overrides: Vec<(Rule, Action)>,
}

impl Policy {
    /// The default action for a rule.
    ///
    /// Refuse what signals a hostile or misconfigured source (escapes, traversal, smudge filters,
    /// LFS, bombs, ceilings); skip what is merely not documentation (media, encodings, links inside
    /// the tree, oversized lines that a parser should not see).
    pub const fn default_action(rule: Rule) -> Action {
        match rule {
            Rule::PathTraversal
            | Rule::AbsolutePath
            | Rule::SymlinkEscape
            | Rule::GitattributesFilter
            | Rule::LfsPointer
            | Rule::TooManyFiles
            | Rule::TooManyBytes
            | Rule::ExpansionRatio
            | Rule::WorkTime => Action::Refuse,
            Rule::Symlink
            | Rule::UnsupportedEntry
            | Rule::Submodule
            | Rule::Hook
            | Rule::UnsupportedMedia
            | Rule::MalformedUtf8
            | Rule::NulByte
            | Rule::LineTooLong
            | Rule::NestingTooDeep
            | Rule::FileTooLarge
            | Rule::PathTooDeep => Action::Skip,
        }
    }

    /// Override one rule's action. Build-wide rules always refuse.
    pub fn with(mut self, rule: Rule, action: Action) -> Self {
        self.overrides.retain(|(r, _)| *r != rule);
        self.overrides.push((rule, action));
        self
    }

    pub fn action(&self, rule: Rule) -> Action {
        if rule.is_build_wide() {
            return Action::Refuse;
        }
        self.overrides
            .iter()
            .find(|(r, _)| *r == rule)
            .map(|(_, a)| *a)
            .unwrap_or(Self::default_action(rule))
    }
}

/// A path rejected under a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub path: String,
    pub rule: Rule,
    /// A short human explanation (never file content).
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Rule::ALL {
            assert!(seen.insert(r.code()), "duplicate {r}");
            assert_eq!(Rule::from_code(r.code()), Some(r));
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Rule>(&json).unwrap(), r);
        }
    }

    #[test]
    fn default_policy_table() {
        let table: String = Rule::ALL
            .iter()
            .map(|r| format!("{:<30} {:?}\n", r.code(), Policy::default().action(*r)))
            .collect();
        expect_test::expect![[r#"
            corpus/path-traversal          Refuse
            corpus/absolute-path           Refuse
            corpus/symlink-escape          Refuse
            corpus/symlink-not-followed    Skip
            corpus/unsupported-entry       Skip
            corpus/submodule               Skip
            corpus/hook                    Skip
            corpus/gitattributes-filter    Refuse
            corpus/lfs-pointer             Refuse
            corpus/unsupported-media       Skip
            corpus/malformed-utf8          Skip
            corpus/nul-byte                Skip
            corpus/line-too-long           Skip
            corpus/nesting-too-deep        Skip
            corpus/file-too-large          Skip
            corpus/path-too-deep           Skip
            corpus/too-many-files          Refuse
            corpus/too-many-bytes          Refuse
            corpus/expansion-ratio         Refuse
            corpus/work-time               Refuse
        "#]]
        .assert_eq(&table);
    }

    #[test]
    fn build_wide_rules_cannot_be_skipped() {
        let p = Policy::default().with(Rule::ExpansionRatio, Action::Skip);
        assert_eq!(p.action(Rule::ExpansionRatio), Action::Refuse);
    }
}
