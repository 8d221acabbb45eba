//! ApplicationDeploymentManifest@1: the single truth of a Reach deployment.
//!
//! [`schema`] is the strict TOML form an operator writes; [`load`] parses it (unknown keys are
//! an error naming their path) and `validate` refuses every unsafe or inconsistent
//! arrangement with a [`ManifestError`] naming the manifest path. What comes out is a
//! [`Manifest`], which [`plan`] compiles into per-role configurations.
//!
//! **Architecture Invariant:** no other crate decides who may call what or who holds which
//! credential. Roles read the compiled [`plan::RoleConfig`]; Scribe materializes the same plan.

pub mod error;
pub mod plan;
pub mod schema;
mod validate;

pub use error::{ManifestError, ManifestErrorKind};
pub use schema::{CredentialKind, NetworkClass, RoleName};
pub use validate::{DEFAULT_CORPUS, LOCAL_DOCS_CORPUS, Manifest, corpus_sources};

/// Parses and validates a manifest text.
pub fn load(text: &str) -> Result<Manifest, ManifestError> {
    let de = toml::Deserializer::parse(text).map_err(|e| ManifestError::syntax(e.to_string()))?;
    let raw: schema::RawManifest = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ManifestError::new(
            path,
            ManifestErrorKind::Schema(e.into_inner().message().to_owned()),
        )
    })?;
    validate::validate(raw)
}

/// Reads, parses and validates a manifest file.
pub fn load_file(path: &std::path::Path) -> Result<Manifest, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ManifestError::new(
            path.display().to_string(),
            ManifestErrorKind::Io(e.to_string()),
        )
    })?;
    load(&text)
}

/// The checked-in manifest of the `reach.vps.public@1` profile.
pub const VPS_PUBLIC: &str = include_str!("../reach.vps.public.toml");
