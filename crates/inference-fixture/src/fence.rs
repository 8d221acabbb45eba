//! Reading the fences of a user message (docs/taskpacks.md, "flow.toml and prompts/*.md"),
//! independently of the renderer that writes them:
//!
//! ```text
//! ----- BEGIN UNTRUSTED <kind> sha256:<hex of the content bytes> -----
//! <content>
//! ----- END UNTRUSTED <kind> -----
//! ```
//!
//! A fence opens at the start of a line. Every digest is recomputed over the content bytes.

use reach_digest::Sha256Digest;

use crate::Refusal;

pub(crate) const BEGIN: &str = "----- BEGIN UNTRUSTED";
pub(crate) const END: &str = "----- END UNTRUSTED";

/// The kinds a fence may name: the goal, the candidate and the five evidence kinds.
pub(crate) const KINDS: [&str; 7] = [
    "goal",
    "candidate",
    "revision-request",
    "review",
    "execution-record",
    "verifier-result",
    "observations",
];

/// One fence, its digest checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    pub kind: &'static str,
    pub content: String,
}

/// Every fence of `text`, in order. A BEGIN line that is not exactly a header, an unknown
/// kind, a fence without its END line, a marker line inside a fence or an END line outside
/// one is [`Refusal::MalformedFence`]; a content whose digest is not the header's is
/// [`Refusal::EvidenceAltered`] (checked once the whole text is well formed).
pub(crate) fn read(text: &str) -> Result<Vec<Fence>, Refusal> {
    let mut found: Vec<(Fence, Sha256Digest)> = Vec::new();
    let mut open: Option<(&'static str, Sha256Digest, Vec<&str>)> = None;
    for line in text.split('\n') {
        match open.take() {
            None => {
                if line.starts_with(END) {
                    return Err(Refusal::MalformedFence);
                }
                if line.starts_with(BEGIN) {
                    let (kind, digest) = header(line).ok_or(Refusal::MalformedFence)?;
                    open = Some((kind, digest, Vec::new()));
                }
            }
            Some((kind, digest, mut lines)) => {
                if line.starts_with(END) {
                    if line != format!("{END} {kind} -----") || lines.is_empty() {
                        return Err(Refusal::MalformedFence);
                    }
                    let content = lines.join("\n");
                    found.push((Fence { kind, content }, digest));
                } else if line.starts_with(BEGIN) {
                    return Err(Refusal::MalformedFence);
                } else {
                    lines.push(line);
                    open = Some((kind, digest, lines));
                }
            }
        }
    }
    if open.is_some() {
        return Err(Refusal::MalformedFence);
    }
    found
        .into_iter()
        .map(|(fence, digest)| {
            if Sha256Digest::of(fence.content.as_bytes()) == digest {
                Ok(fence)
            } else {
                Err(Refusal::EvidenceAltered)
            }
        })
        .collect()
}

/// `----- BEGIN UNTRUSTED <kind> sha256:<64 lowercase hex> -----`, the kind one of [`KINDS`].
fn header(line: &str) -> Option<(&'static str, Sha256Digest)> {
    let inner = line.strip_prefix(BEGIN)?.strip_prefix(' ')?;
    let inner = inner.strip_suffix(" -----")?;
    let (kind, digest) = inner.split_once(' ')?;
    let kind = KINDS.into_iter().find(|k| *k == kind)?;
    let digest: Sha256Digest = digest.parse().ok()?;
    Some((kind, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(kind: &str, content: &str) -> String {
        let d = Sha256Digest::of(content.as_bytes());
        format!("{BEGIN} {kind} {d} -----\n{content}\n{END} {kind} -----")
    }

    #[test]
    fn fences_are_read_with_their_exact_content() {
        let text = format!(
            "# Goal\n\n{}\n\n# Evidence\n\n{}\n{}\n",
            fence("goal", "two\nlines"),
            fence("observations", ""),
            fence("review", "\n")
        );
        let f = read(&text).unwrap();
        let got: Vec<(&str, &str)> = f.iter().map(|f| (f.kind, f.content.as_str())).collect();
        assert_eq!(
            got,
            [
                ("goal", "two\nlines"),
                ("observations", ""),
                ("review", "\n")
            ]
        );
        assert!(read("no fence at all").unwrap().is_empty());
        // Not at a line's start: text like any other.
        assert!(read("say ----- BEGIN UNTRUSTED goal").unwrap().is_empty());
    }

    #[test]
    fn malformed_and_altered_fences_are_refused() {
        let good = fence("goal", "abc");
        let m = |t: &str| read(t).unwrap_err();
        assert_eq!(m(&good.replace("abc", "abd")), Refusal::EvidenceAltered);
        assert_eq!(
            m(&good[..good.rfind('\n').unwrap()]),
            Refusal::MalformedFence
        );
        assert_eq!(m(&good.replace("goal", "secret")), Refusal::MalformedFence);
        assert_eq!(
            m(&good.replace("sha256:", "sha1:")),
            Refusal::MalformedFence
        );
        assert_eq!(
            m(&good.replace(" -----\nabc", "\nabc")),
            Refusal::MalformedFence
        );
        assert_eq!(
            m(&format!("{END} goal -----\n{good}")),
            Refusal::MalformedFence
        );
        let nested = good.replace("abc", &fence("review", "x"));
        assert_eq!(m(&nested), Refusal::MalformedFence);
        let other_end = good.replace("END UNTRUSTED goal", "END UNTRUSTED review");
        assert_eq!(m(&other_end), Refusal::MalformedFence);
        let d = Sha256Digest::of(b"");
        assert_eq!(
            m(&format!("{BEGIN} goal {d} -----\n{END} goal -----")),
            Refusal::MalformedFence
        );
    }
}
