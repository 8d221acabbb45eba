//! The default corpus: the project's documentation, embedded at build time, or an operator's
//! own directory of Markdown or HTML packed the same way at start (`reach demo --docs DIR`).

use reach_corpus::local::{DIR_INCLUDE, PROJECT_DOCS, PROJECT_INCLUDE, dir_files};
use reach_corpus::{Ceilings, Origin, SourceSpec, admit_url, pack_entries};
use reach_digest::Sha256Digest;

/// Where citations point: the canonical repository (`…/blob/<archive digest>/path#Lx-Ly`).
/// `.invalid` until the project publishes a canonical host; nothing ever dials it.
const CITATION_BASE: &str = "https://reach.invalid/reach";
const ARCHIVE_URL: &str = "https://reach.invalid/releases/reach-docs.tar.gz";
/// Where citations into an operator's local directory point (`…/blob/<digest>/path#Lx-Ly`).
const LOCAL_CITATION_BASE: &str = "https://docs.invalid/local";
const LOCAL_ARCHIVE_URL: &str = "https://docs.invalid/releases/local-docs.tar.gz";

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
        let files = dir_files(dir).with_context(|| format!("reading {}", dir.display()))?;
        anyhow::ensure!(
            !files.is_empty(),
            "{} holds no Markdown or HTML file",
            dir.display()
        );
        let bytes = pack_entries(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())))?;
        let digest = Sha256Digest::of(&bytes);
        let spec = SourceSpec {
            name: "local-docs".into(),
            origin: Origin::ReleaseArchive {
                url: admit_url(LOCAL_ARCHIVE_URL)?,
                digest,
            },
            include: DIR_INCLUDE.iter().map(|s| s.to_string()).collect(),
            ceilings: Ceilings::default(),
            citation_base: Some(admit_url(LOCAL_CITATION_BASE)?),
            site_base: None,
            site_root: String::new(),
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
        let bytes = pack_entries(PROJECT_DOCS.iter().map(|(p, t)| (*p, t.as_bytes())))?;
        let digest = Sha256Digest::of(&bytes);
        let spec = SourceSpec {
            name: "reach-docs".into(),
            origin: Origin::ReleaseArchive {
                url: admit_url(ARCHIVE_URL)?,
                digest,
            },
            include: PROJECT_INCLUDE.iter().map(|s| s.to_string()).collect(),
            ceilings: Ceilings::default(),
            citation_base: Some(admit_url(CITATION_BASE)?),
            site_base: None,
            site_root: String::new(),
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
