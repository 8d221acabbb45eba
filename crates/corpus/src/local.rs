//! Documents that come from this machine rather than a fetched source: the project's own
//! documentation (embedded at build time, the default corpus) and an operator's directory of
//! Markdown or HTML (`reach demo --docs DIR`, `reach corpus eval --docs DIR`). corpus-builder
//! packs either as a release archive; the answer-quality harness builds from the same files,
//! so an evaluation measures the corpus the demo answers from.
//!
//! **Architecture Invariant:** a directory is read once, its links never followed and nothing
//! it names fetched; beside its pages, only the regular files under it that a Markdown page's
//! include directive names ([`crate::include`]) are read.

use std::path::Path;

/// The project's documentation, by its path in the repository: the default corpus.
pub const PROJECT_DOCS: &[(&str, &str)] = &[
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

/// The include globs of the project's documentation.
pub const PROJECT_INCLUDE: &[&str] = &["**/*.md"];

/// What an operator's directory contributes: Markdown and static HTML.
pub const DIR_INCLUDE: &[&str] = &["**/*.md", "**/*.markdown", "**/*.html", "**/*.htm"];

/// Pages a static-site generator writes as aggregates of the others (mdBook's one-page print
/// view, its table of contents, its not-found page): packing them would repeat every section.
pub const AGGREGATE_PAGES: &[&str] = &["print.html", "toc.html", "404.html"];

/// The Markdown and HTML files under `dir` as `(path relative to dir, bytes)`, sorted by path.
/// Links are not followed; dot-directories (`.git`) and aggregate pages are left out.
pub fn dir_files(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    collect(dir, dir, &mut out)?;
    // The listings a book's pages include (`{{#include ../listings/…}}`), which are not pages:
    // regular files of the directory only, never through a link.
    let mut named: Vec<String> = Vec::new();
    for (path, bytes) in &out {
        if path.ends_with(".md") || path.ends_with(".markdown") {
            named.extend(crate::include::named_files(
                path,
                &String::from_utf8_lossy(bytes),
            ));
        }
    }
    named.sort();
    named.dedup();
    for path in named {
        if out.iter().any(|(p, _)| *p == path) {
            continue;
        }
        // Every directory on the way a real one, the file a regular one.
        let mut on_disk = dir.to_path_buf();
        let mut parts = path.split('/').peekable();
        let mut plain = true;
        while let Some(part) = parts.next() {
            on_disk.push(part);
            let Ok(m) = std::fs::symlink_metadata(&on_disk) else {
                plain = false;
                break;
            };
            let last = parts.peek().is_none();
            if (last && !m.is_file()) || (!last && !m.is_dir()) {
                plain = false;
                break;
            }
        }
        if plain {
            out.push((path, std::fs::read(&on_disk)?));
        }
    }
    out.sort();
    Ok(out)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
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
    fn a_directory_gives_its_markdown_and_html_only() {
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
        let files = dir_files(d.path()).unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["README.md", "book/ch1.html"]);
        assert!(dir_files(&d.path().join("missing")).is_err());
    }

    #[test]
    fn a_directory_gives_the_listings_its_pages_include_and_no_other_file() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.rs"), "secret").unwrap();
        std::fs::create_dir_all(d.path().join("src")).unwrap();
        std::fs::create_dir_all(d.path().join("listings/ch02")).unwrap();
        for (p, t) in [
            (
                "src/ch02.md",
                "# Two\n\n```rust\n{{#rustdoc_include ../listings/ch02/main.rs:all}}\n```\n\
                 {{#include ../listings/ch02/gone.rs}}\n{{#include ../linked/secret.rs}}\n\
                 {{#include ../../outside.rs}}\n",
            ),
            ("listings/ch02/main.rs", "fn main() {}"),
            ("listings/ch02/unused.rs", "fn unused() {}"),
        ] {
            std::fs::write(d.path().join(p), t).unwrap();
        }
        std::os::unix::fs::symlink(outside.path(), d.path().join("linked")).unwrap();
        let files = dir_files(d.path()).unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["listings/ch02/main.rs", "src/ch02.md"]);
    }
}
