//! Scribe: the only component that materializes an ApplicationDeploymentManifest@1.
//!
//! This module mints the deployment's identities: one trust root (kept in Scribe's own
//! directory) and one short-lived SPIFFE leaf per role and for the operator, each written 0600
//! into that principal's secret directory, plus the generated (non-external) role keys.
//!
//! **Architecture Invariant:** the trust root key is read and written only here. Roles hold
//! their own leaf and the trust bundle; nobody else's.

pub mod identities;

pub use identities::{IdentityReport, Rotation, ScribeError, materialize_identities};
