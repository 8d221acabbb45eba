//! Which files belong to a pack: every regular file under its directory, by relative path.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// At most this many files in a pack. The reference packs have about fifty; a pack is
/// configuration and fixtures, not a file tree.
pub const MAX_FILES: usize = 256;

/// At most this many bytes in one pack file. Large enough for an operator's `.deb` kept beside
/// the image spec (a few hundred KiB), small enough that a pack stays reviewable.
pub const MAX_FILE_BYTES: usize = 2 << 20;

/// At most this many bytes in all of a pack's files together: with the headers and facts
/// they stay under [`crate::archive::MAX_ARCHIVE_BYTES`].
pub const MAX_TOTAL_BYTES: usize = 6 << 20;

/// At most this many bytes in a relative path, so that `src/<path>` fits ustar's 100-byte
/// name field and the archive needs no prefix field and no extension header.
pub const MAX_PATH_BYTES: usize = 96;

/// A pack's files: relative UTF-8 paths (`/`-separated, no empty, `.` or `..` component, no
/// component starting with `.`), sorted, each with its bytes, within the bounds above.
/// Directories carry no meaning: an empty one is not part of a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackFiles(BTreeMap<String, Vec<u8>>);

/// Why a set of files is not a pack's: the path (or `.` for the whole set) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct FilesError {
    pub path: String,
    pub reason: String,
}

impl FilesError {
    fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Why reading a pack directory failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadDirError {
    /// the directory holds something a pack may not (a symlink, a dotfile, a device, a
    /// non-UTF-8 name, too many or too large files)
    #[error(transparent)]
    Files(#[from] FilesError),
    /// reading `{path}` failed
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Checks one relative path: see [`PackFiles`].
pub fn check_path(path: &str) -> Result<(), FilesError> {
    let refuse = |reason: &str| Err(FilesError::new(path, reason));
    if path.is_empty() {
        return refuse("an empty path");
    }
    if path.len() > MAX_PATH_BYTES {
        return refuse(&format!("longer than {MAX_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') {
        return refuse("an absolute path");
    }
    for component in path.split('/') {
        match component {
            "" => return refuse("an empty path component"),
            "." | ".." => return refuse("a `.` or `..` component"),
            c if c.starts_with('.') => {
                return refuse("a dotfile (no pack file's name starts with `.`)");
            }
            c if c.chars().any(|ch| ch.is_control() || ch == '\\') => {
                return refuse("a control character or backslash in a name");
            }
            _ => {}
        }
    }
    Ok(())
}

impl PackFiles {
    /// Takes a set of files, checking every path and the bounds.
    pub fn new(files: BTreeMap<String, Vec<u8>>) -> Result<Self, FilesError> {
        if files.len() > MAX_FILES {
            return Err(FilesError::new(
                ".",
                format!("{} files; a pack has at most {MAX_FILES}", files.len()),
            ));
        }
        let mut total = 0usize;
        for (path, bytes) in &files {
            check_path(path)?;
            if bytes.len() > MAX_FILE_BYTES {
                return Err(FilesError::new(
                    path,
                    format!(
                        "{} bytes; a pack file has at most {MAX_FILE_BYTES}",
                        bytes.len()
                    ),
                ));
            }
            total += bytes.len();
        }
        if total > MAX_TOTAL_BYTES {
            return Err(FilesError::new(
                ".",
                format!("{total} bytes in all; a pack has at most {MAX_TOTAL_BYTES}"),
            ));
        }
        // A file and a directory of the same name cannot both exist in a tree: `a` and `a/b`.
        let mut previous: Option<&str> = None;
        for path in files.keys() {
            if let Some(p) = previous
                && path.starts_with(p)
                && path.as_bytes().get(p.len()) == Some(&b'/')
            {
                return Err(FilesError::new(
                    path,
                    format!("`{p}` is a file, not a directory"),
                ));
            }
            previous = Some(path);
        }
        Ok(Self(files))
    }

    /// Reads every regular file under `dir`, refusing a symlink, a dotfile, anything but a
    /// regular file or a directory, and the bounds of [`PackFiles::new`] (checked while
    /// reading, so a huge file is not read whole).
    pub fn read_dir(dir: &Path) -> Result<Self, ReadDirError> {
        let mut files = BTreeMap::new();
        let mut total = 0usize;
        walk(dir, "", &mut files, &mut total)?;
        Ok(Self::new(files)?)
    }

    /// The bytes of `path`, if it is a file of the pack.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.0.get(path).map(Vec::as_slice)
    }

    /// Whether some file lies under directory `dir` (`dir/...`).
    pub fn has_dir(&self, dir: &str) -> bool {
        self.under(dir).next().is_some()
    }

    /// Every file under directory `dir`, as (full path, bytes), sorted.
    pub fn under<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        self.iter().filter(move |(p, _)| {
            p.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Every file, sorted by path.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.0.iter().map(|(p, b)| (p.as_str(), b.as_slice()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The files as a map (to change one and check the set again with [`PackFiles::new`]).
    pub fn into_map(self) -> BTreeMap<String, Vec<u8>> {
        self.0
    }
}

fn walk(
    dir: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
    total: &mut usize,
) -> Result<(), ReadDirError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ReadDirError::Io { path, source }
    };
    let mut entries = fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(FilesError::new(
                format!("{prefix}{}", name.to_string_lossy()),
                "not a UTF-8 name",
            )
            .into());
        };
        let rel = format!("{prefix}{name}");
        // `symlink_metadata`: a symlink is refused, never followed.
        let kind = fs::symlink_metadata(&path).map_err(io(&path))?.file_type();
        if kind.is_symlink() {
            return Err(FilesError::new(rel, "a symlink (a pack holds regular files only)").into());
        }
        if name.starts_with('.') {
            return Err(
                FilesError::new(rel, "a dotfile (no pack file's name starts with `.`)").into(),
            );
        }
        if kind.is_dir() {
            walk(&path, &format!("{rel}/"), files, total)?;
        } else if kind.is_file() {
            check_path(&rel)?;
            if files.len() == MAX_FILES {
                return Err(FilesError::new(".", format!("more than {MAX_FILES} files")).into());
            }
            let mut bytes = Vec::new();
            fs::File::open(&path)
                .map_err(io(&path))?
                .take(MAX_FILE_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(io(&path))?;
            if bytes.len() > MAX_FILE_BYTES {
                return Err(
                    FilesError::new(rel, format!("more than {MAX_FILE_BYTES} bytes")).into(),
                );
            }
            *total += bytes.len();
            if *total > MAX_TOTAL_BYTES {
                return Err(FilesError::new(
                    ".",
                    format!("more than {MAX_TOTAL_BYTES} bytes in all"),
                )
                .into());
            }
            files.insert(rel, bytes);
        } else {
            return Err(FilesError::new(rel, "neither a regular file nor a directory").into());
        }
    }
    Ok(())
}
