//! Task packs (`reach.taskpack.v1`): pack sources, derived facts, deterministic signed
//! archives, conformance at install, and readiness.
//!
//! A pack is a directory of sources (`docs/taskpacks.md`, the formats' contract). Build
//! ([`build`]) reads them strictly ([`source`]), derives the [`Facts`] from them alone
//! ([`facts`]), runs the refusal corpus through the plan compiler, signs the facts with an
//! ed25519 [`PackKey`] ([`sign`]) and writes a deterministic ustar archive ([`archive`]).
//! Install ([`conform`]) takes the archive bytes, verifies the signer against the operator's
//! [`TrustedKeys`], derives the facts again from the archive's own sources with the same code
//! and compares them byte for byte, refuses a rollback or an expired pack, and runs the
//! refusal corpus again: the result is a [`VerifiedPack`] that gives the plan compiler its
//! [`reach_plan::Vocabulary`]. [`readiness`] decides from plain inputs whether a binding is
//! runnable or which one blocker is decisive.
//!
//! **Architecture Invariant:** [`conform`] and [`Readiness::of`] are pure: they write no
//! file, read no clock (the time is a parameter) and look nothing up. Core calls them on
//! bytes and values it holds, and stores the archive inertly.
//!
//! **Architecture Invariant:** nothing in the facts is typed by hand. Every digest and
//! capability list is derived by [`Facts::derive`] from the sources; install derives them
//! again and a difference refuses the pack (`package/facts-mismatch`).
//!
//! **Architecture Invariant:** the image and prepared-spec digests are `reach-vm`'s own
//! ([`reach_vm::spec::ImageSpec::digest`], [`reach_vm::prepared::PreparedSpec::digest`]),
//! so a pack pins exactly what `reach image build/prepare` record as `spec_digest`.
//!
//! **Architecture Invariant:** this crate names no particular service, program or mail
//! transfer agent: everything a pack means lives in its files (the structural test
//! `tests/no_mta.rs` holds every shared crate to this). Its test pack is made up: a service
//! `svc` and its `etc/app.conf`.
//!
//! **API Boundary:** [`build`], [`conform`] and [`Readiness::of`]; the refusal enums
//! [`BuildRefusal`], [`InstallRefusal`] and [`Blocker`] carry the `area/reason` codes.

#![forbid(unsafe_code)]

pub mod archive;
pub mod conform;
pub mod facts;
pub mod pack_build;
pub mod readiness;
pub mod sign;
pub mod source;

pub use archive::MAX_ARCHIVE_BYTES;
pub use conform::{InstallRefusal, VerifiedPack, archive_name, conform, vocabulary};
pub use facts::{FACTS_FORMAT, Facts};
pub use pack_build::{BuildRefusal, BuiltPack, build, build_files};
pub use readiness::{
    BindingView, Blocker, ModelRuntime, PackLifecycle, PreparedLookup, Readiness, ReadinessInputs,
    ReadinessReport,
};
pub use sign::{FactsSignature, PackKey, PublicKey, Signer, TrustedKeys};
pub use source::{PackFiles, SourceError, Sources};

/// The first pack directory under `root` (in name order) whose image needs no
/// operator-supplied package: one any machine with the Debian archive can build and prepare
/// (what `reach demo task-pack` and the guest tests run).
pub fn preparable_pack(root: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(source::TASK_PROFILE_FILE).is_file())
        .collect();
    dirs.sort();
    dirs.into_iter().find(|d| {
        std::fs::read_to_string(d.join("image.toml"))
            .ok()
            .and_then(|t| reach_vm::spec::ImageSpec::parse(&t).ok())
            .is_some_and(|spec| spec.local_debs.is_empty())
    })
}
