//! Scribe: the only component that materializes an ApplicationDeploymentManifest@1.
//!
//! * [`identities`] mints the deployment's identities: one trust root (kept in Scribe's own
//!   directory) and one short-lived SPIFFE leaf per role and for the operator, each written
//!   0600 into that principal's secret directory, plus the generated (non-external) role keys
//!   (ward's, the interaction-seal pair). Bundles are written before leaves, so a new root is
//!   trusted before anyone presents it.
//! * [`image_build`] builds one image per role from `scratch` (the stripped binary, exactly the
//!   libraries `ldd` lists and the loader, `USER 1000:2000`, no shell; `--timestamp 0`, so the
//!   digest depends on the binaries alone) and hands the digest to the pinning path; [`images`]
//!   pins every role's image by digest.
//! * [`quadlet`] derives the rootless Quadlet units, volumes, networks, container-side configs
//!   and the Podman secrets script (the configurations): one `.container` unit per role, image
//!   by digest, read-only, no capabilities, no new privileges, network none unless egress,
//!   per-port socket volumes for the server and its allowed callers only, the role's own secret
//!   directory only (bind-mounted read-only: 0640 files of the body's group, so a renewed leaf
//!   or a rotated root reaches a running role with no restart), and the pids ceiling
//!   both as `PidsLimit` and as the role user's `RLIMIT_NPROC` (the config's `process_ceiling`,
//!   set by the role on itself), which holds where rootless cgroup v1 ignores cgroup limits. Every role runs as 1000:2000 in a sized
//!   `UserNS=auto` namespace (disjoint host ids per container) that maps the body's group 2000
//!   onto the rootless user's own group, with umask 0007: a port's socket is group-writable, so
//!   any role whose container mounts the port's volume can connect, and only the server and its
//!   allowed callers mount it. Writable managed volumes mount with `:U` (a restarted container
//!   gets new host ids). `deploy/README.md` shows the reference output.
//! * [`renewal`] writes the user timer that renews a Quadlet body's leaves every hour
//!   (`systemd/reach-renew.{service,timer}` beside the units, naming the binary, state directory
//!   and manifest by absolute path): a container cannot renew its own leaf, so without it a
//!   Quadlet body stops talking a day after its leaves were issued. A relative path is refused
//!   `scribe/relative-path`.
//! * [`refusal`] holds the rules every unit must pass (no privileges, no host namespaces, no
//!   smuggled podman flags, no shared writable state, no volume or secret outside the manifest,
//!   no credential in the environment), with stable codes. Every piece of manifest text that
//!   reaches a unit line (`Exec=` and `PodmanArgs=` words, `Environment=` entries, `UserNS=`,
//!   `Volume=`, `Image=`, the profile in `Description=`) passes `refusal::vet_unit_word`, which
//!   refuses a control character (`scribe/bad-argument`), so a manifest cannot add unit keys or
//!   sections.
//! * [`nftables`] renders the body's egress ruleset from the destination crate's special-purpose
//!   table; [`live_ruleset`] compares the table the kernel holds with a ruleset file (both as
//!   `nft` lists them, the file's loaded into a throwaway network namespace); [`check`]
//!   re-derives everything and reports drift from what is on disk (`reach scribe check`).
//! * [`deployed`] finds a deployed body's port volumes and role containers through Podman (for
//!   `reach status --podman` and `reach audit --podman`) and decides the rollout of a changed
//!   state directory (`reach scribe renew`): leaves need none; every running role started before
//!   a credential it reads at start was written is restarted, decided from Podman's and the
//!   files' times, so an interrupted run is finished by the next.
//!
//! `tests/containers.rs` runs all eight roles from their generated units' exact `podman run`
//! lines as the rootless user `reach-ci` (`scripts/podman-setup.sh`).
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
pub mod shutdown;

pub use identities::{IdentityReport, Rotation, ScribeError, materialize_identities};
pub use refusal::{Refusal, RefusalKind};
