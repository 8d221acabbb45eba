//! corpus-builder's own sources file (`sources.toml` in its data directory): every source the
//! operator added with `reach corpus add`, strict and written atomically.
//!
//! **Architecture Invariant:** a source enters the file only through [`SourceSpec::from_json`],
//! the same admission that refuses `git://`, SSH, local paths, credentials and proxies; the file
//! is re-admitted the same way when read, so an edited file cannot smuggle one in.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reach_corpus::{SourceRefusal, SourceSpec};

/// The schema line of the file.
pub const SOURCES_SCHEMA: &str = "CorpusSources@1";
/// The file name inside the data directory.
pub const SOURCES_FILE: &str = "sources.toml";
/// Most sources one builder keeps (each is fetched and indexed on the operator's request).
pub const MAX_SOURCES: usize = 64;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    schema: String,
    #[serde(default)]
    sources: Vec<toml::Value>,
}

/// Why the sources file refused a change or could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    #[error(transparent)]
    Source(#[from] SourceRefusal),
    /// a source of that name exists
    #[error("a source named `{0}` exists")]
    Exists(String),
    /// no source of that name
    #[error("no source named `{0}`")]
    Unknown(String),
    /// the file holds the most sources it may
    #[error("at most {MAX_SOURCES} sources")]
    TooMany,
    /// the file is not a CorpusSources@1 document
    #[error("sources file: {0}")]
    Malformed(String),
    #[error("sources file: {0}")]
    Io(#[from] std::io::Error),
}

impl SourcesError {
    pub fn code(&self) -> &'static str {
        match self {
            SourcesError::Source(r) => r.code(),
            SourcesError::Exists(_) => "corpus/source-exists",
            SourcesError::Unknown(_) => "corpus/unknown-source",
            SourcesError::TooMany => "corpus/too-many-sources",
            SourcesError::Malformed(_) => "corpus/sources-file",
            SourcesError::Io(_) => "corpus/io",
        }
    }
}

/// The sources file at `dir/sources.toml`.
#[derive(Debug, Clone)]
pub struct Sources {
    path: PathBuf,
    /// Serializes read-modify-write, so two concurrent `AddSource` calls cannot lose one.
    write: Arc<Mutex<()>>,
}

impl Sources {
    pub fn at(dir: &Path) -> Self {
        Sources {
            path: dir.join(SOURCES_FILE),
            write: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every source, each re-admitted. A missing file is an empty list.
    pub fn load(&self) -> Result<Vec<SourceSpec>, SourcesError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let file: File =
            toml::from_str(&text).map_err(|e| SourcesError::Malformed(e.to_string()))?;
        if file.schema != SOURCES_SCHEMA {
            return Err(SourcesError::Malformed(format!(
                "schema `{}` is not {SOURCES_SCHEMA}",
                file.schema
            )));
        }
        file.sources.into_iter().map(readmit).collect()
    }

    pub fn get(&self, name: &str) -> Result<SourceSpec, SourcesError> {
        self.load()?
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| SourcesError::Unknown(name.into()))
    }

    /// Add a new source (refused if the name exists).
    pub fn add(&self, spec: SourceSpec, reserved: &[&str]) -> Result<(), SourcesError> {
        let _guard = self.lock();
        let mut all = self.load()?;
        if reserved.contains(&spec.name.as_str()) || all.iter().any(|s| s.name == spec.name) {
            return Err(SourcesError::Exists(spec.name));
        }
        if all.len() >= MAX_SOURCES {
            return Err(SourcesError::TooMany);
        }
        all.push(spec);
        self.store(&all)
    }

    /// Replace the source of the same name (e.g. a newly admitted commit).
    pub fn replace(&self, spec: SourceSpec) -> Result<(), SourcesError> {
        let _guard = self.lock();
        let mut all = self.load()?;
        let slot = all
            .iter_mut()
            .find(|s| s.name == spec.name)
            .ok_or_else(|| SourcesError::Unknown(spec.name.clone()))?;
        *slot = spec;
        self.store(&all)
    }

    fn store(&self, all: &[SourceSpec]) -> Result<(), SourcesError> {
        let file = File {
            schema: SOURCES_SCHEMA.into(),
            sources: all
                .iter()
                .map(|s| {
                    toml::Value::try_from(s.to_stored())
                        .map_err(|e| SourcesError::Malformed(e.to_string()))
                })
                .collect::<Result<_, _>>()?,
        };
        let text = toml::to_string(&file).map_err(|e| SourcesError::Malformed(e.to_string()))?;
        reach_durable_file::replace(&self.path, text.as_bytes(), 0o644)?;
        Ok(())
    }
}

/// Re-admit one stored source through the one admission path.
fn readmit(v: toml::Value) -> Result<SourceSpec, SourcesError> {
    Ok(SourceSpec::from_stored(&v)?)
}
