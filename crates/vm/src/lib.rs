//! reach-vm: the substrate of the vm-broker role (issue #8).
//!
//! - [`spec`] and [`image`]: a strict declarative spec built by mmdebstrap into a kernel, an
//!   initrd and an ext4 rootfs, described by an [`manifest::ImageManifest`] whose digest is
//!   the image digest.
//! - [`instance`]: the [`instance::Broker`]: contained QEMU instances (no network device,
//!   copy-on-write overlay over the pinned rootfs, QMP and guest agent on unix sockets),
//!   guest operations through [`agent`], confirmed destruction, start-up reaping.
//! - [`prepared`]: the pinned prepared-system layer (a qcow2 layer and the captured guest
//!   state), so instances are restored in a second or two instead of booted; [`machine`] is
//!   the one QEMU machine definition captures and restores share.
//! - [`journal`]: every instance's lifecycle, durable in SQLite, with checked transitions.
//! - [`probe`]: KVM only when a real boot under it succeeds; TCG otherwise.
//! - [`settings`]: the vm-broker role's settings (pinned digests, ceilings).
//! - [`cache`]: the layout of `--cache` directories, and pruning what the operator no longer
//!   pins.
//!
//! **Architecture Invariant:** this crate decides no policy. It builds what a spec says, boots
//! what a pinned digest names and runs what an allow-listed profile admits; which profile a
//! binding may use is the caller's decision. It links no HTTP client and opens no network.

pub mod agent;
pub mod cache;
mod host;
pub mod image;
pub mod instance;
pub mod journal;
pub mod machine;
pub mod manifest;
pub mod observe;
pub mod prepared;
pub mod probe;
pub mod profile;
pub mod qmp;
pub mod refusal;
pub mod settings;
pub mod spec;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
