//! Building one OCI image per role from the workspace binaries, locally, from `scratch`.
//!
//! Each image holds exactly: the role binary with its debug information stripped (a debug build
//! is 60–170 MB, the stripped copy a tenth of that), every shared library `ldd` lists, the
//! dynamic loader, and nothing else: no shell, no package manager, no `/etc`. It runs as
//! [`ROLE_UID`]:[`BODY_GID`], never root. The Containerfile is generated deterministically and
//! built with `--timestamp 0`, so the same binaries give the same digest on any run.
//!
//! Run it as the user who owns the image store (`reach scribe images` writes its contexts as
//! that user): a rootless build hashes its context as its user namespace sees it, and files of
//! an id outside that namespace (a context written by root) hash differently.
//!
//! The digest Podman reports after the build is what Scribe pins (see
//! [`crate::images::DigestSource`]): [`digests_file`] writes it in the digests-file form.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use reach_manifest::Manifest;

use crate::images::{Digest, ImageRef, PinnedImage};
use crate::quadlet::{BODY_GID, ROLE_UID};

/// Where the role binary lives inside its image.
pub const BINARY_DIR: &str = "/usr/bin";

/// How Scribe runs Podman: the program and any words before its own arguments (the container
/// test runs `runuser -u reach-ci -- env XDG_RUNTIME_DIR=… podman`).
#[derive(Clone, Debug)]
pub struct Podman {
    argv: Vec<OsString>,
}

impl Podman {
    /// `program` alone, e.g. `podman`.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            argv: vec![program.into()],
        }
    }
    /// `argv[0]` with `argv[1..]` before Podman's own arguments.
    pub fn with_prefix(argv: Vec<OsString>) -> Self {
        assert!(!argv.is_empty(), "a program");
        Self { argv }
    }
    /// A command ready for Podman's arguments.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]);
        c
    }
}

/// Why an image could not be built. Each is a refusal of the input or a tool's failure, with
/// what to look at.
#[derive(Debug, thiserror::Error)]
pub enum ImageBuildError {
    /// The role's binary is not in the binaries directory.
    #[error(
        "image/binary-missing: role `{role}`: {path} is not a file (build it with `cargo build --bins`)"
    )]
    BinaryMissing { role: String, path: PathBuf },
    /// The manifest already pins a digest: a build cannot produce that exact image.
    #[error(
        "image/already-pinned: role `{role}`: the manifest pins `{image}`; remove the digest to build"
    )]
    AlreadyPinned { role: String, image: String },
    /// `ldd` named a library by something other than an absolute path.
    #[error("image/unresolved-library: role `{role}`: `ldd` could not resolve `{line}`")]
    UnresolvedLibrary { role: String, line: String },
    /// A tool (objcopy, ldd, podman) failed.
    #[error("image/tool-failed: role `{role}`: `{tool}` failed: {detail}")]
    ToolFailed {
        role: String,
        tool: &'static str,
        detail: String,
    },
    /// Copying into the build context failed.
    #[error("image/context: role `{role}`: {detail}")]
    Context { role: String, detail: String },
}

impl ImageBuildError {
    /// The stable code (`image/…`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::BinaryMissing { .. } => "image/binary-missing",
            Self::AlreadyPinned { .. } => "image/already-pinned",
            Self::UnresolvedLibrary { .. } => "image/unresolved-library",
            Self::ToolFailed { .. } => "image/tool-failed",
            Self::Context { .. } => "image/context",
        }
    }
}

/// One built image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltImage {
    pub role: String,
    pub pinned: PinnedImage,
    /// The bytes of the files in the image (the stripped binary, libraries and loader).
    pub size_bytes: u64,
    /// The files copied in: the binary, then the libraries and the loader (image paths).
    pub files: Vec<String>,
}

impl fmt::Display for BuiltImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<16} {} {:>6.1} MiB ({} files)",
            self.role,
            self.pinned,
            self.size_bytes as f64 / (1024.0 * 1024.0),
            self.files.len()
        )
    }
}

/// The Containerfile of a role's image: deterministic, from `scratch`, non-root, no shell.
/// Files belong to root (`--chown=0:0`) whoever wrote the build context: a rootless build
/// would otherwise record a context file of an id outside its namespace as 65534, which both
/// changes the digest and makes `UserNS=auto` size the namespace to 65535 ids.
pub fn containerfile(binary: &str) -> String {
    format!(
        "# Generated by Scribe. The role binary, its libraries and the loader; nothing else.\n\
         FROM scratch\n\
         COPY --chown=0:0 rootfs/ /\n\
         USER {ROLE_UID}:{BODY_GID}\n\
         ENTRYPOINT [\"{BINARY_DIR}/{binary}\"]\n"
    )
}

/// The absolute paths `ldd` prints for `binary`: every resolved library and the loader. A
/// static binary has none.
pub fn shared_libraries(role: &str, binary: &Path) -> Result<Vec<PathBuf>, ImageBuildError> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| tool(role, "ldd", e.to_string()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(tool(
            role,
            "ldd",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    parse_ldd(role, &text)
}

/// Parses `ldd` output: `name => /path (addr)`, `/loader (addr)`, and the vDSO (no file).
pub fn parse_ldd(role: &str, text: &str) -> Result<Vec<PathBuf>, ImageBuildError> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let target = match line.split_once("=>") {
            Some((_, rhs)) => rhs.trim(),
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        } else if line.starts_with("linux-vdso") || line.starts_with("linux-gate") {
            continue;
        } else {
            return Err(ImageBuildError::UnresolvedLibrary {
                role: role.to_owned(),
                line: line.to_owned(),
            });
        }
    }
    libs.sort();
    libs.dedup();
    Ok(libs)
}

fn tool(role: &str, tool: &'static str, detail: String) -> ImageBuildError {
    ImageBuildError::ToolFailed {
        role: role.to_owned(),
        tool,
        detail,
    }
}

/// Writes the build context of `role` into `dir` (which must be empty or absent): a stripped
/// copy of `binary`, its libraries and the loader under `rootfs/`, and the Containerfile.
/// Returns the image paths copied.
pub fn write_context(
    role: &str,
    binary: &Path,
    dir: &Path,
) -> Result<Vec<String>, ImageBuildError> {
    let ctx = |e: std::io::Error| ImageBuildError::Context {
        role: role.to_owned(),
        detail: format!("{}: {e}", dir.display()),
    };
    let name = binary.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        ImageBuildError::BinaryMissing {
            role: role.to_owned(),
            path: binary.to_owned(),
        }
    })?;
    let rootfs = dir.join("rootfs");
    let bin_dir = rootfs.join(BINARY_DIR.trim_start_matches('/'));
    std::fs::create_dir_all(&bin_dir).map_err(ctx)?;
    let stripped = bin_dir.join(name);
    let out = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(binary)
        .arg(&stripped)
        .output()
        .map_err(|e| tool(role, "objcopy", e.to_string()))?;
    if !out.status.success() {
        return Err(tool(
            role,
            "objcopy",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let mut files = vec![format!("{BINARY_DIR}/{name}")];
    for lib in shared_libraries(role, binary)? {
        let inside = rootfs.join(lib.strip_prefix("/").unwrap_or(&lib));
        if let Some(parent) = inside.parent() {
            std::fs::create_dir_all(parent).map_err(ctx)?;
        }
        // `copy` follows the symlinks ldd names (libc.so.6 → the real file).
        std::fs::copy(&lib, &inside).map_err(ctx)?;
        files.push(lib.display().to_string());
    }
    std::fs::write(dir.join("Containerfile"), containerfile(name)).map_err(ctx)?;
    Ok(files)
}

/// The bytes of every file under `dir` (a build context's `rootfs/`).
pub fn content_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => content_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Builds the image of `role` from the context in `dir` and tags it `name`; returns the digest
/// and the bytes of the files it holds.
pub fn build_context(
    podman: &Podman,
    role: &str,
    name: &str,
    dir: &Path,
) -> Result<(Digest, u64), ImageBuildError> {
    let out = podman
        .command()
        // No cache: a cached step can carry another build's history, and the digest must
        // depend on the context alone.
        .args([
            "build",
            "--quiet",
            "--no-cache",
            "--timestamp",
            "0",
            "--pull=never",
            "--tag",
            name,
        ])
        .arg("--file")
        .arg(dir.join("Containerfile"))
        .arg(dir)
        .output()
        .map_err(|e| tool(role, "podman build", e.to_string()))?;
    if !out.status.success() {
        return Err(tool(
            role,
            "podman build",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let out = podman
        .command()
        .args(["image", "inspect", "--format", "{{.Digest}}", name])
        .output()
        .map_err(|e| tool(role, "podman image inspect", e.to_string()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let digest = Digest::parse(text.trim()).ok().ok_or_else(|| {
        tool(
            role,
            "podman image inspect",
            format!("no digest in `{}`", text.trim()),
        )
    })?;
    Ok((digest, content_bytes(&dir.join("rootfs"))))
}

/// Builds every role's image from the binaries in `bins`, using `work` for the build contexts
/// (one subdirectory per role, removed afterwards). Manifest order.
pub fn build_all(
    manifest: &Manifest,
    bins: &Path,
    podman: &Podman,
    work: &Path,
) -> Result<Vec<BuiltImage>, ImageBuildError> {
    let mut built = Vec::new();
    for role in &manifest.roles {
        let name = role.name.as_str();
        let image = ImageRef::parse(&role.image).map_err(|_| ImageBuildError::AlreadyPinned {
            role: name.to_owned(),
            image: role.image.clone(),
        })?;
        if image.digest.is_some() {
            return Err(ImageBuildError::AlreadyPinned {
                role: name.to_owned(),
                image: role.image.clone(),
            });
        }
        let binary = bins.join(&role.binary);
        if !binary.is_file() {
            return Err(ImageBuildError::BinaryMissing {
                role: name.to_owned(),
                path: binary,
            });
        }
        let dir = work.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let files = write_context(name, &binary, &dir)?;
        let result = build_context(podman, name, &image.name, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        let (digest, size_bytes) = result?;
        built.push(BuiltImage {
            role: name.to_owned(),
            pinned: PinnedImage {
                name: image.name,
                digest,
            },
            size_bytes,
            files,
        });
    }
    Ok(built)
}

/// The digests file (`role = "sha256:…"`, manifest order) that `--digests` reads back.
pub fn digests_file(built: &[BuiltImage]) -> String {
    let mut s = String::from(
        "# Written by `reach scribe images`: the digests of the locally built role images.\n",
    );
    for b in built {
        s.push_str(&format!(
            "{} = \"{}\"\n",
            toml_key(&b.role),
            b.pinned.digest
        ));
    }
    s
}

fn toml_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        k.to_owned()
    } else {
        format!("\"{k}\"")
    }
}

/// The digests of `built` by role, for [`crate::quadlet::QuadletInput`].
pub fn pinned_by_role(built: &[BuiltImage]) -> BTreeMap<String, PinnedImage> {
    built
        .iter()
        .map(|b| (b.role.clone(), b.pinned.clone()))
        .collect()
}
