//! Manifest refusals. Each names the manifest path it concerns (`roles[2].network`).

use std::fmt;

/// A refused manifest: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {kind}")]
pub struct ManifestError {
    pub path: String,
    pub kind: ManifestErrorKind,
}

impl ManifestError {
    pub fn new(path: impl Into<String>, kind: ManifestErrorKind) -> Self {
        Self {
            path: path.into(),
            kind,
        }
    }
    pub(crate) fn syntax(msg: String) -> Self {
        Self::new("<document>", ManifestErrorKind::Schema(msg))
    }
}

/// Why a manifest was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestErrorKind {
    /// the text does not match the schema (unknown key, wrong type, missing field)
    #[error("{0}")]
    Schema(String),
    /// the manifest file could not be read
    #[error("cannot read: {0}")]
    Io(String),
    /// the schema version is not ApplicationDeploymentManifest@1
    #[error("schema must be `ApplicationDeploymentManifest@1`, found `{0}`")]
    UnsupportedSchema(String),
    /// a name is not a valid principal name or trust domain
    #[error("invalid name: {0}")]
    BadName(String),
    /// two roles (or a role and the operator) share a principal
    #[error("duplicate principal `{0}`")]
    DuplicatePrincipal(String),
    /// a reference names a role, port, destination or method that does not exist
    #[error("dangling reference to {what} `{name}`")]
    Dangling { what: &'static str, name: String },
    /// this role may not hold this kind of credential
    #[error("role `{role}` may not hold a {kind} credential: {why}")]
    ForbiddenCredential {
        role: String,
        kind: String,
        why: &'static str,
    },
    /// this role must run with network class none
    #[error("role `{0}` must have network class `none`")]
    NetworkNotAllowed(String),
    /// a role calls its own port without a stated reason
    #[error("role `{0}` is granted a method on its own port without a `reason`")]
    SelfCallWithoutReason(String),
    /// the same method is granted twice, or a port is served twice
    #[error("duplicate entry `{0}`")]
    Duplicate(String),
    /// ordering has a cycle
    #[error("ordering cycle through role `{0}`")]
    OrderingCycle(String),
    /// a secret file name is not a plain file name
    #[error("secret file name `{0}` must be a plain file name")]
    BadSecretFile(String),
    /// `habitat.corpus` names no source the manifest's corpus-builder provides
    #[error(
        "corpus `{corpus}` is no source of corpus-builder (sources: {}); declare an operator \
         source in corpus-builder's `settings.sources`",
        known.join(", ")
    )]
    UnknownCorpus { corpus: String, known: Vec<String> },
}

impl fmt::Display for crate::schema::RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
