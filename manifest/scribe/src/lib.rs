//! Scribe: the only component that materializes an ApplicationDeploymentManifest@1.
//!
//! * [`identities`] mints the deployment's identities: one trust root (kept in Scribe's own
//!   directory) and one short-lived SPIFFE leaf per role and for the operator, each written
//!   0600 into that principal's secret directory, plus the generated (non-external) role keys.
//! * [`image_build`] builds one image per role from `scratch` (stripped binary, its libraries,
//!   the loader, a non-root user); [`images`] pins every role's image by digest; [`quadlet`] derives the rootless Quadlet
//!   units, volumes, networks, container-side configs and the Podman secrets script;
//!   [`renewal`] the user timer that renews a Quadlet body's leaves every hour.
//! * [`refusal`] holds the rules every unit must pass (no privileges, no host namespaces, no
//!   volume or secret outside the manifest, no credential in the environment), with stable codes.
//! * [`nftables`] renders the body's egress ruleset; [`live_ruleset`] compares the table the
//!   kernel holds with a ruleset file; [`check`] re-derives everything and reports drift from
//!   what is on disk; [`deployed`] finds a deployed body's port volumes and
//!   role processes through Podman, for the operator's CLI.
//!
//! **Architecture Invariant:** the trust root key is read and written only in [`identities`].
//! Roles hold their own leaf and the trust bundle; nobody else's.
//!
//! **Architecture Invariant:** Scribe never invents a digest, an address or a credential. What
//! it cannot pin from the manifest or the host it refuses, naming the manifest path.

pub mod check;
pub mod deployed;
pub mod identities;
pub mod image_build;
pub mod images;
pub mod live_ruleset;
pub mod nftables;
pub mod quadlet;
pub mod refusal;
pub mod renewal;

pub use identities::{IdentityReport, Rotation, ScribeError, materialize_identities};
pub use refusal::{Refusal, RefusalKind};
