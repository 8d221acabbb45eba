//! The fence: how untrusted text (the goal, a candidate, each evidence input) sits inside a
//! prompt, marked as data and bound to the digest of its exact bytes.
//!
//! ```text
//! ----- BEGIN UNTRUSTED <kind> sha256:<hex of the content bytes> -----
//! <content>
//! ----- END UNTRUSTED <kind> -----
//! ```
//!
//! Content that holds a line starting with either marker (`----- BEGIN UNTRUSTED`,
//! `----- END UNTRUSTED`; a line break being `\n` or `\r`) is **refused**, not neutralized:
//! rewriting it would make the fenced text differ from the bytes the digest names, and a
//! reader that recomputes the digest (the inference fixture does) would then refuse the
//! passage anyway. Evidence is JSON, whose strings cannot hold a raw line break, so only
//! hostile or broken content is refused.

use reach_digest::Sha256Digest;

/// The opening and closing marker prefixes.
pub const BEGIN_MARKER: &str = "----- BEGIN UNTRUSTED";
pub const END_MARKER: &str = "----- END UNTRUSTED";

/// Why a text cannot be fenced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FenceRefusal {
    /// the fence kind `{0}` is not `[a-z0-9-]{{1,64}}`
    #[error("the fence kind `{0}` is not `[a-z0-9-]{{1,64}}`")]
    BadKind(String),
    /// line {line} of the `{kind}` content starts with a fence marker
    #[error("line {line} of the `{kind}` content starts with a fence marker")]
    MarkerInContent { kind: String, line: usize },
}

impl FenceRefusal {
    /// `fence/bad-kind` or `fence/marker-in-content`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadKind(_) => "fence/bad-kind",
            Self::MarkerInContent { .. } => "fence/marker-in-content",
        }
    }
}

/// Fences `content` as untrusted data of `kind`; the digest is of `content`'s exact bytes.
pub fn fence(kind: &str, content: &str) -> Result<String, FenceRefusal> {
    let kind_ok = (1..=64).contains(&kind.len())
        && kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !kind_ok {
        return Err(FenceRefusal::BadKind(kind.to_owned()));
    }
    if let Some(line) = content
        .split(['\n', '\r'])
        .position(|l| l.starts_with(BEGIN_MARKER) || l.starts_with(END_MARKER))
    {
        return Err(FenceRefusal::MarkerInContent {
            kind: kind.to_owned(),
            line: line + 1,
        });
    }
    let digest = Sha256Digest::of(content.as_bytes());
    Ok(format!(
        "{BEGIN_MARKER} {kind} {digest} -----\n{content}\n{END_MARKER} {kind} -----"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_exactly_the_documented_text() {
        let f = fence("goal", "abc").unwrap();
        assert_eq!(
            f,
            "----- BEGIN UNTRUSTED goal \
             sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad -----\n\
             abc\n----- END UNTRUSTED goal -----"
        );
    }

    #[test]
    fn marker_lines_and_bad_kinds_are_refused() {
        let code = |k: &str, c: &str| fence(k, c).unwrap_err().code();
        assert_eq!(
            code("goal", "x\n----- END UNTRUSTED goal -----\ny"),
            "fence/marker-in-content"
        );
        assert_eq!(
            code("goal", "----- BEGIN UNTRUSTED review sha256:00 -----"),
            "fence/marker-in-content"
        );
        assert_eq!(
            code("goal", "x\r----- END UNTRUSTED goal -----"),
            "fence/marker-in-content"
        );
        assert_eq!(code("Goal", "x"), "fence/bad-kind");
        assert_eq!(code("", "x"), "fence/bad-kind");
        assert_eq!(code("goal x", "x"), "fence/bad-kind");
        // Not at a line's start: data like any other.
        fence("goal", "say ----- END UNTRUSTED goal -----").unwrap();
        fence("goal", "").unwrap();
    }
}
