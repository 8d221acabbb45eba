//! The default corpus: the project's documentation, embedded at build time, or an operator's
//! own directory of Markdown or HTML packed the same way at start (`reach demo --docs DIR`).

use reach_corpus::{Ceilings, Origin, SourceSpec, admit_url, pack_entries};
use reach_digest::Sha256Digest;

/// The embedded files, by their path in the repository.
const DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../README.md")),
    ("ARCHITECTURE.md", include_str!("../../../ARCHITECTURE.md")),
    (
        "docs/identity-and-ports.md",
        include_str!("../../../docs/identity-and-ports.md"),
    ),
    ("docs/ledger.md", include_str!("../../../docs/ledger.md")),
    (
        "docs/operator-guide.md",
        include_str!("../../../docs/operator-guide.md"),
    ),
];

/// Where citations point: the canonical repository (`…/blob/<archive digest>/path#Lx-Ly`).
/// `.invalid` until the project publishes a canonical host; nothing ever dials it.
const CITATION_BASE: &str = "https://reach.invalid/reach";
const ARCHIVE_URL: &str = "https://reach.invalid/releases/reach-docs.tar.gz";
/// Where citations into an operator's local directory point (`…/blob/<digest>/path#Lx-Ly`).
const LOCAL_CITATION_BASE: &str = "https://docs.invalid/local";
const LOCAL_ARCHIVE_URL: &str = "https://docs.invalid/releases/local-docs.tar.gz";
/// What an operator's directory contributes: Markdown and static HTML.
const LOCAL_INCLUDE: &[&str] = &["**/*.md", "**/*.markdown", "**/*.html", "**/*.htm"];
/// Pages a static-site generator writes as aggregates of the others (mdBook's one-page print
/// view, its table of contents, its not-found page): packing them would repeat every section.
const AGGREGATE_PAGES: &[&str] = &["print.html", "toc.html", "404.html"];

/// The packed archive and the spec that admits exactly its digest.
#[derive(Debug)]
pub struct Source {
    pub spec: SourceSpec,
    pub bytes: Vec<u8>,
    pub digest: Sha256Digest,
}

impl Source {
    /// Pack `dir` (its Markdown and HTML files, sorted, dot-directories and generated aggregate
    /// pages left out) as the default corpus. The directory is read once, here; nothing it names
    /// is followed.
    pub fn pack_dir(dir: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let mut files = Vec::new();
        collect(dir, dir, &mut files).with_context(|| format!("reading {}", dir.display()))?;
        anyhow::ensure!(
            !files.is_empty(),
            "{} holds no Markdown or HTML file",
            dir.display()
        );
        files.sort();
        let bytes = pack_entries(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())))?;
        let digest = Sha256Digest::of(&bytes);
        let spec = SourceSpec {
            name: "local-docs".into(),
            origin: Origin::ReleaseArchive {
                url: admit_url(LOCAL_ARCHIVE_URL)?,
                digest,
            },
            include: LOCAL_INCLUDE.iter().map(|s| s.to_string()).collect(),
            ceilings: Ceilings::default(),
            citation_base: Some(admit_url(LOCAL_CITATION_BASE)?),
            redirect_origins: vec![],
            historical: false,
        };
        Ok(Self {
            spec,
            bytes,
            digest,
        })
    }

    pub fn pack() -> anyhow::Result<Self> {
        let bytes = pack_entries(DOCS.iter().map(|(p, t)| (*p, t.as_bytes())))?;
        let digest = Sha256Digest::of(&bytes);
        let spec = SourceSpec {
            name: "reach-docs".into(),
            origin: Origin::ReleaseArchive {
                url: admit_url(ARCHIVE_URL)?,
                digest,
            },
            include: vec!["**/*.md".into()],
            ceilings: Ceilings::default(),
            citation_base: Some(admit_url(CITATION_BASE)?),
            redirect_origins: vec![],
            historical: false,
        };
        Ok(Self {
            spec,
            bytes,
            digest,
        })
    }
}

/// The Markdown and HTML files under `dir`, as `(path relative to root, bytes)`. Links are not
/// followed; dot-directories (`.git`) and aggregate pages are left out.
fn collect(
    root: &std::path::Path,
    dir: &std::path::Path,
    out: &mut Vec<(String, Vec<u8>)>,
) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ty = e.file_type()?;
        if name.starts_with('.') || ty.is_symlink() {
            continue;
        }
        let path = e.path();
        if ty.is_dir() {
            collect(root, &path, out)?;
            continue;
        }
        let lower = name.to_ascii_lowercase();
        let wanted = [".md", ".markdown", ".html", ".htm"]
            .iter()
            .any(|x| lower.ends_with(x));
        if !ty.is_file() || !wanted || AGGREGATE_PAGES.contains(&lower.as_str()) {
            continue;
        }
        let rel = path
            .strip_prefix(root)
            .map_err(std::io::Error::other)?
            .to_string_lossy()
            .replace('\\', "/");
        out.push((rel, std::fs::read(&path)?));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_packs_its_markdown_and_html_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("book/.git")).unwrap();
        for (p, t) in [
            ("README.md", "# Hi"),
            ("book/ch1.html", "<main><h1>One</h1></main>"),
            ("book/print.html", "<main>everything again</main>"),
            ("book/style.css", "body {}"),
            ("book/.git/config", "[core]"),
        ] {
            std::fs::write(d.path().join(p), t).unwrap();
        }
        let s = Source::pack_dir(d.path()).unwrap();
        let un = reach_corpus::unpack_release_archive(&s.bytes, &s.digest, &Ceilings::default())
            .unwrap();
        let paths: Vec<&str> = un.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["README.md", "book/ch1.html"]);
        let empty = tempfile::tempdir().unwrap();
        assert!(Source::pack_dir(empty.path()).is_err());
    }
}
