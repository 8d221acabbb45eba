//! Task packs: the durable lifecycle of each installed pack and its one local binding (issue 27,
//! items 4 and 5; `docs/taskpacks.md` and `../shared/design/TASKPACKS.md` for the whole story).
//!
//! Core verifies a pack (`crates/taskpack`: signature, recomputed facts, refusal corpus) and then
//! records it here; the Phylactery keeps what was decided and refuses what the lifecycle does not
//! allow. Nothing here reads an archive, checks a signature or judges a binding's *values*: a
//! binding's network or HIL strictness against the pack is core's check before it calls
//! [`Phylactery::bind`]. What is checked here: the version order, the state machine, the
//! generation, the binding's pin, and that no text field is empty.
//!
//! # Records
//!
//! - `task_pack_version`: every installed version ([`PackRecord`]), inert and immutable.
//! - `task_pack`: one row per name: its [`PackState`], its **generation** and the highest
//!   version ever installed.
//! - `task_pack_event`: every transition and binding change ([`PackEvent`]), append-only, in
//!   order; each event carries the generation the pack has once it is written.
//! - `task_binding`: the pack's one local binding ([`BindingRecord`]), pinned to the generation,
//!   version and task-profile digest the operator bound or accepted.
//!
//! # Lifecycle
//!
//! [`Phylactery::pack_install`] stores a version and refuses `package/rollback` unless it is
//! greater than every version ever installed under that name (versions are never deleted, so a
//! revoked or superseded one still counts). Installing never activates, binds or changes a
//! binding; its `installed` event carries the generation the pack already has (0 before the
//! first activation). Two concurrent installs of one version: exactly one wins, the other is
//! `package/rollback` (an upsert of the `task_pack` row that only raises the highest version
//! serializes them: SQLite's one writer, PostgreSQL's row lock).
//!
//! [`PackState`] moves only along this table ([`PackState::activate`], [`PackState::revoke`],
//! and again the trigger `task_pack_transition`); every transition bumps the generation by
//! exactly one, so the first activation is generation 1:
//!
//! | from | to | event |
//! |---|---|---|
//! | `inactive` (installed, never activated) | `active` v (any installed v) | `activated` |
//! | `active` v | `active` v' > v | `upgraded` |
//! | `active` v | `revoked` v | `revoked` |
//! | `revoked` v | `active` v' ≥ v | `reactivated` |
//!
//! Refusals: a version not installed `package/not-installed`; the active one again
//! `package/already-active`; an older one than the active (or revoked) version
//! `package/downgrade`; revoking a pack that is not active `package/not-active`.
//! [`Phylactery::pack_activate`] without a version takes the highest installed one.
//!
//! # Bindings
//!
//! [`Phylactery::bind`] needs an active pack (`package/not-active` names the state otherwise) and
//! pins the binding to the pack's current generation, its active version and that version's
//! task-profile digest. Binding again replaces every choice and re-pins to the active version —
//! a re-bind is also an acceptance of the current profile, so core shows the profile diff first
//! when the binding was behind — but keeps a pause (only `resume` lifts one) and the creation
//! time. [`Phylactery::bind_pause`] and [`Phylactery::bind_resume`] refuse
//! `local-binding/paused` / `local-binding/not-paused` when the binding is already in that state,
//! `local-binding/missing` when there is none. [`Phylactery::bind_accept`] re-pins to the active
//! version (refused unless the pack is active); accepting a binding that is already current
//! changes nothing and writes no event.
//!
//! What a transition does to the binding, in the transition's transaction:
//!
//! - **upgrade**: when the new version's profile digest equals the binding's pinned one (for a
//!   current binding: the old version's), the binding is carried forward (generation and version
//!   re-pinned, event `binding-carried`); otherwise it keeps its old pin, and its standing is
//!   `local-binding/profile-changed` until accepted. Comparing with the binding's own pin means a
//!   binding left behind by an upgrade to profile B is carried again by a later upgrade back to
//!   its profile A.
//! - **revoke**, **reactivate**: nothing is carried. After reactivation the binding's standing is
//!   `package/generation-stale` until the operator accepts (a revocation is re-acknowledged, even
//!   when the profile is unchanged), and no later upgrade carries it either.
//!
//! [`BindingStanding`] is that judgement, computed at every read from the records: `current`, or
//! why not, in this order — the pack is not active (`package/not-active`), revoked
//! (`package/revoked`), the binding predates a revocation (`package/generation-stale`), or only
//! upgrades with a changed profile happened since its pin (`local-binding/profile-changed`). A
//! pause is [`BindingRecord::paused`], beside it. Readiness (the full decisive-blocker order,
//! prepared systems, effect modes, the model runtime) is core's; this is the durable part of it.
//! [`Phylactery::profile_digests`] gives the bound and current digests for `reach bind accept`'s
//! diff.
//!
//! # Guards
//!
//! The database holds the rules against raw SQL too (migration `task_packs`, tested in
//! `tests/taskpack.rs`): the transition table (`package/invalid-transition`); generations and the
//! highest version never decrease (`package/generation-regressed`, `package/rollback`); an
//! inserted version exceeds every earlier one (`package/rollback`); versions never change
//! (`package/immutable`), events never change (`ledger/append-only`) and each one carries its
//! pack's generation (`package/event-generation`); a binding's pin names an installed version's
//! profile digest at a generation the pack reached and never moves back
//! (`local-binding/pin-mismatch`, `local-binding/generation-regressed`); no row of these tables
//! is ever deleted. Every event advances the vault's commit sequence, so a vault restored from an
//! older copy (where a revoked pack would be active again) is a detected rollback
//! ([`crate::highwater`]).
//!
//! These operations do not wait for the vault to serve ([`crate::vault`]): they cause no effect
//! outside the host, and an operator must be able to revoke a pack on a vault that awaits
//! reconciliation. Every write is one synced transaction; on PostgreSQL it first locks the
//! pack's row, so concurrent transitions of one pack are serialized as on SQLite. Time comes from
//! the injected clock.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Row, Tx, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::state::PackEventKind;

/// The longest pack name the records accept (bytes).
pub const MAX_PACK_NAME: usize = 256;

/// A verified pack version to record (core has checked its signature, facts and corpus).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackInstall {
    pub name: String,
    /// Strictly greater than every version ever installed under `name`; at most `i64::MAX`.
    pub version: u64,
    pub archive_digest: Sha256Digest,
    pub facts_digest: Sha256Digest,
    /// The task profile's digest: what a binding is pinned to.
    pub profile_digest: Sha256Digest,
    /// The trusted pack key that signed the facts (its name or fingerprint; never key material).
    pub signer: String,
    /// When the pack expires (Unix seconds).
    pub expires_at_s: u64,
    /// Where core stored the archive.
    pub archive_path: String,
}

/// One installed version, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackRecord {
    pub name: String,
    pub version: u64,
    pub archive_digest: Sha256Digest,
    pub facts_digest: Sha256Digest,
    pub profile_digest: Sha256Digest,
    pub signer: String,
    pub expires_at_s: u64,
    pub archive_path: String,
    pub installed_at: UnixMillis,
}

impl PackRecord {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            name: r.text("name")?,
            version: unsigned(r, "version")?,
            archive_digest: digest(r, "archive_digest")?,
            facts_digest: digest(r, "facts_digest")?,
            profile_digest: digest(r, "profile_digest")?,
            signer: r.text("signer")?,
            expires_at_s: unsigned(r, "expires_at_s")?,
            archive_path: r.text("archive_path")?,
            installed_at: UnixMillis(r.int("installed_at")?),
        })
    }
}

/// A pack's lifecycle state (one per name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackState {
    /// Installed, never activated.
    Inactive,
    /// `version` is the active one.
    Active { version: u64 },
    /// `version` was active and is revoked.
    Revoked { version: u64 },
}

impl PackState {
    /// `inactive`, `active` or `revoked`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inactive => "inactive",
            Self::Active { .. } => "active",
            Self::Revoked { .. } => "revoked",
        }
    }

    /// The active version, or the revoked one; `None` before the first activation.
    pub fn version(self) -> Option<u64> {
        match self {
            Self::Inactive => None,
            Self::Active { version } | Self::Revoked { version } => Some(version),
        }
    }

    pub fn is_active(self) -> bool {
        matches!(self, Self::Active { .. })
    }

    /// The checked activation of installed `version` of pack `name`: the state it leads to and
    /// its event, or the refusal (`package/already-active`, `package/downgrade`).
    pub fn activate(
        self,
        name: &str,
        version: u64,
    ) -> Result<(PackState, PackEventKind), TaskPackRefusal> {
        let to = PackState::Active { version };
        match self {
            Self::Inactive => Ok((to, PackEventKind::Activated)),
            Self::Active { version: current } if version > current => {
                Ok((to, PackEventKind::Upgraded))
            }
            Self::Active { version: current } if version == current => {
                Err(TaskPackRefusal::AlreadyActive {
                    name: name.to_owned(),
                    version,
                })
            }
            Self::Revoked { version: current } if version >= current => {
                Ok((to, PackEventKind::Reactivated))
            }
            Self::Active { version: current } | Self::Revoked { version: current } => {
                Err(TaskPackRefusal::Downgrade {
                    name: name.to_owned(),
                    version,
                    current,
                })
            }
        }
    }

    /// The checked revocation: only an active pack is revoked (`package/not-active`).
    pub fn revoke(self, name: &str) -> Result<(PackState, PackEventKind), TaskPackRefusal> {
        match self {
            Self::Active { version } => {
                Ok((PackState::Revoked { version }, PackEventKind::Revoked))
            }
            state => Err(TaskPackRefusal::NotActive {
                name: name.to_owned(),
                state,
            }),
        }
    }

    fn column(self) -> &'static str {
        match self {
            Self::Inactive => "INACTIVE",
            Self::Active { .. } => "ACTIVE",
            Self::Revoked { .. } => "REVOKED",
        }
    }

    fn from_columns(state: &str, version: Option<i64>) -> Result<Self> {
        let version = version
            .map(|v| u64::try_from(v).map_err(|_| corrupt("negative active_version")))
            .transpose()?;
        match (state, version) {
            ("INACTIVE", None) => Ok(Self::Inactive),
            ("ACTIVE", Some(version)) => Ok(Self::Active { version }),
            ("REVOKED", Some(version)) => Ok(Self::Revoked { version }),
            (s, v) => Err(corrupt(&format!(
                "task pack state {s:?} with active version {v:?}"
            ))),
        }
    }
}

impl std::fmt::Display for PackState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inactive => f.write_str("inactive"),
            Self::Active { version } => write!(f, "active (version {version})"),
            Self::Revoked { version } => write!(f, "revoked (version {version})"),
        }
    }
}

/// Why a task-pack operation was refused; [`TaskPackRefusal::code`] is its stable code. Nothing
/// changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskPackRefusal {
    /// `package/rollback`: the version is not greater than the highest ever installed.
    #[error(
        "pack {name} version {version} is not newer than version {highest}, the highest ever installed"
    )]
    Rollback {
        name: String,
        version: u64,
        highest: u64,
    },
    /// `package/not-installed`: no such pack (`version` None), or no such version of it.
    #[error("{}", match version {
        Some(v) => format!("pack {name} version {v} is not installed"),
        None => format!("pack {name} is not installed"),
    })]
    NotInstalled { name: String, version: Option<u64> },
    /// `package/not-active`: the operation needs an active pack.
    #[error("pack {name} is {state}, not active")]
    NotActive { name: String, state: PackState },
    /// `package/already-active`: activating the active version changes nothing.
    #[error("pack {name} version {version} is already active")]
    AlreadyActive { name: String, version: u64 },
    /// `package/downgrade`: older than the version that is (or was, before revocation) active.
    #[error("pack {name} version {version} is older than version {current}")]
    Downgrade {
        name: String,
        version: u64,
        current: u64,
    },
    /// `local-binding/missing`: the pack has no local binding.
    #[error("pack {pack} has no local binding")]
    BindingMissing { pack: String },
    /// `local-binding/paused`: pausing a binding that is paused.
    #[error("the binding of pack {pack} is already paused")]
    BindingPaused { pack: String },
    /// `local-binding/not-paused`: resuming a binding that is not paused.
    #[error("the binding of pack {pack} is not paused")]
    BindingNotPaused { pack: String },
}

impl TaskPackRefusal {
    /// The stable refusal code (`area/reason`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Rollback { .. } => "package/rollback",
            Self::NotInstalled { .. } => "package/not-installed",
            Self::NotActive { .. } => "package/not-active",
            Self::AlreadyActive { .. } => "package/already-active",
            Self::Downgrade { .. } => "package/downgrade",
            Self::BindingMissing { .. } => "local-binding/missing",
            Self::BindingPaused { .. } => "local-binding/paused",
            Self::BindingNotPaused { .. } => "local-binding/not-paused",
        }
    }
}

/// One row of a pack's event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackEvent {
    /// The log's order (increasing across all packs).
    pub event_id: i64,
    pub name: String,
    /// The version installed, activated, revoked, or the binding's pinned version.
    pub version: u64,
    pub event: PackEventKind,
    /// The pack's generation once the event was written.
    pub generation: u64,
    pub at: UnixMillis,
}

impl PackEvent {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            event_id: r.int("event_id")?,
            name: r.text("name")?,
            version: unsigned(r, "version")?,
            event: PackEventKind::parse(&r.text("event")?)?,
            generation: unsigned(r, "generation")?,
            at: UnixMillis(r.int("at_ms")?),
        })
    }
}

/// Everything recorded about one pack name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackStatus {
    pub name: String,
    pub state: PackState,
    /// The active version (`None` unless the state is active).
    pub active_version: Option<u64>,
    /// Bumped by every activation, upgrade, revocation and reactivation; 0 before the first.
    pub generation: u64,
    /// The highest version ever installed: the next install must exceed it.
    pub highest_version: u64,
    /// Every installed version, oldest first.
    pub versions: Vec<PackRecord>,
    /// Every event, in order.
    pub events: Vec<PackEvent>,
}

/// What [`Phylactery::pack_activate`] or [`Phylactery::pack_revoke`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    pub name: String,
    /// `activated`, `upgraded`, `revoked` or `reactivated`.
    pub event: PackEventKind,
    pub from: PackState,
    pub state: PackState,
    /// The new generation.
    pub generation: u64,
    /// The pack's binding's standing after the transition (`None`: not bound).
    pub binding: Option<BindingStanding>,
}

/// A local binding as the operator chose it (core fills the safe defaults and checks that it is
/// no looser than the pack before calling [`Phylactery::bind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBinding {
    pub pack: String,
    /// The workspace root.
    pub workspace: String,
    /// The VM backend (`qemu`).
    pub vm_backend: String,
    /// The model runtime; `None` for the deterministic fixture.
    pub model: Option<String>,
    /// The runtime network (`none` by default).
    pub network: String,
    /// `each-step` (the default) or `each-mutation`.
    pub hil: String,
    /// At least 1.
    pub max_concurrent_runs: u32,
    pub publication: bool,
}

/// Whether a binding may be used as it stands, and if not the first reason (see the module
/// documentation for the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingStanding {
    /// Pinned to the active version at the current generation.
    Current,
    /// `package/not-active`: the pack was never activated.
    PackInactive,
    /// `package/revoked`: the pack's `version` is revoked.
    PackRevoked { version: u64 },
    /// `package/generation-stale`: the pack was revoked (and reactivated) since the pin; the
    /// operator accepts again.
    GenerationStale {
        bound_generation: u64,
        generation: u64,
    },
    /// `local-binding/profile-changed`: upgraded since the pin to a different task profile.
    ProfileChanged {
        bound_version: u64,
        bound: Sha256Digest,
        current_version: u64,
        current: Sha256Digest,
    },
}

impl BindingStanding {
    /// The blocker's code, `None` when current.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::Current => None,
            Self::PackInactive => Some("package/not-active"),
            Self::PackRevoked { .. } => Some("package/revoked"),
            Self::GenerationStale { .. } => Some("package/generation-stale"),
            Self::ProfileChanged { .. } => Some("local-binding/profile-changed"),
        }
    }

    pub fn is_current(&self) -> bool {
        *self == Self::Current
    }
}

/// One pack's local binding, as stored, with its standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingRecord {
    pub pack: String,
    pub workspace: String,
    pub vm_backend: String,
    pub model: Option<String>,
    pub network: String,
    pub hil: String,
    pub max_concurrent_runs: u32,
    pub publication: bool,
    pub paused: bool,
    /// The pack's generation when the binding was pinned (bound, accepted or carried forward).
    pub bound_generation: u64,
    /// The version pinned.
    pub bound_version: u64,
    /// That version's task-profile digest: what the operator accepted.
    pub bound_profile_digest: Sha256Digest,
    /// When the operator last bound or accepted (a carried-forward pin keeps it).
    pub bound_at: UnixMillis,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// Computed from the pack's records at this read.
    pub standing: BindingStanding,
}

impl BindingRecord {
    /// From a [`SELECT_BINDING`] row.
    fn from_row(r: &Row) -> Result<Self> {
        let bound_generation = unsigned(r, "bound_generation")?;
        let bound_version = unsigned(r, "bound_version")?;
        let bound_profile_digest = digest(r, "bound_profile_digest")?;
        let state = PackState::from_columns(&r.text("pack_state")?, r.opt_int("active_version")?)?;
        let generation = unsigned(r, "generation")?;
        let standing = match state {
            PackState::Inactive => BindingStanding::PackInactive,
            PackState::Revoked { version } => BindingStanding::PackRevoked { version },
            PackState::Active { .. } if bound_generation == generation => BindingStanding::Current,
            PackState::Active { version } => {
                let current = digest(r, "current_profile_digest")?;
                if r.int("revoked_since")? > 0 || current == bound_profile_digest {
                    BindingStanding::GenerationStale {
                        bound_generation,
                        generation,
                    }
                } else {
                    BindingStanding::ProfileChanged {
                        bound_version,
                        bound: bound_profile_digest,
                        current_version: version,
                        current,
                    }
                }
            }
        };
        Ok(Self {
            pack: r.text("pack")?,
            workspace: r.text("workspace")?,
            vm_backend: r.text("vm_backend")?,
            model: r.opt_text("model")?,
            network: r.text("network")?,
            hil: r.text("hil")?,
            max_concurrent_runs: u32::try_from(r.int("max_concurrent_runs")?)
                .map_err(|_| corrupt("max_concurrent_runs out of range"))?,
            publication: flag(r, "publication")?,
            paused: flag(r, "paused")?,
            bound_generation,
            bound_version,
            bound_profile_digest,
            bound_at: UnixMillis(r.int("bound_at")?),
            created_at: UnixMillis(r.int("created_at")?),
            updated_at: UnixMillis(r.int("updated_at")?),
            standing,
        })
    }
}

/// The task-profile digests `reach bind accept` diffs: what the binding is pinned to and what
/// the active version carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileDigests {
    pub bound_version: u64,
    pub bound: Sha256Digest,
    pub current_version: u64,
    pub current: Sha256Digest,
}

impl ProfileDigests {
    pub fn changed(&self) -> bool {
        self.bound != self.current
    }
}

/// The `task_pack` row.
#[derive(Debug, Clone, Copy)]
struct PackRow {
    state: PackState,
    generation: u64,
    highest_version: u64,
}

impl PackRow {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            state: PackState::from_columns(&r.text("state")?, r.opt_int("active_version")?)?,
            generation: unsigned(r, "generation")?,
            highest_version: unsigned(r, "highest_version")?,
        })
    }
}

const SELECT_PACK: &str =
    "SELECT state, active_version, generation, highest_version FROM task_pack WHERE name = $1";
/// PostgreSQL: the pack's row is locked for the transaction (SQLite's `BEGIN IMMEDIATE` already
/// holds the one write lock).
const SELECT_PACK_LOCKED: &str = "SELECT state, active_version, generation, highest_version
     FROM task_pack WHERE name = $1 FOR UPDATE";

const SELECT_VERSIONS: &str = "SELECT name, version, archive_digest, facts_digest, profile_digest,
        signer, expires_at_s, archive_path, installed_at
     FROM task_pack_version WHERE name = $1 ORDER BY version";

const SELECT_PROFILE: &str =
    "SELECT profile_digest FROM task_pack_version WHERE name = $1 AND version = $2";

const SELECT_EVENTS: &str = "SELECT event_id, name, version, event, generation, at_ms
     FROM task_pack_event WHERE name = $1 ORDER BY event_id";

const INSERT_EVENT: &str = "INSERT INTO task_pack_event (name, version, event, generation, at_ms)
     VALUES ($1, $2, $3, $4, $5)";

/// A binding with what its standing is computed from: the pack's state and generation, the
/// active version's profile digest, and whether a revocation happened since the pin.
const SELECT_BINDING: &str = "SELECT b.pack AS pack, b.workspace AS workspace,
        b.vm_backend AS vm_backend, b.model AS model, b.network AS network, b.hil AS hil,
        b.max_concurrent_runs AS max_concurrent_runs, b.publication AS publication,
        b.paused AS paused, b.bound_generation AS bound_generation,
        b.bound_version AS bound_version, b.bound_profile_digest AS bound_profile_digest,
        b.bound_at AS bound_at, b.created_at AS created_at, b.updated_at AS updated_at,
        p.state AS pack_state, p.active_version AS active_version, p.generation AS generation,
        v.profile_digest AS current_profile_digest,
        (SELECT count(*) FROM task_pack_event e WHERE e.name = b.pack AND e.event = 'revoked'
            AND e.generation > b.bound_generation) AS revoked_since
     FROM task_binding b
     JOIN task_pack p ON p.name = b.pack
     LEFT JOIN task_pack_version v ON v.name = p.name AND v.version = p.active_version
     WHERE b.pack = $1";

impl Phylactery {
    /// Records a verified pack version, inertly: refused `package/rollback` unless `version` is
    /// greater than every version ever installed under the name. Writes event `installed`.
    pub async fn pack_install(&self, pack: &PackInstall) -> Result<PackRecord> {
        check_name(&pack.name)?;
        non_empty(&pack.signer, "a pack install names its signer")?;
        non_empty(&pack.archive_path, "a pack install names its archive path")?;
        let version = signed(pack.version)?;
        let expires = i64::try_from(pack.expires_at_s)
            .map_err(|_| LedgerError::InvalidInput("a pack's expiry is at most 2^63 - 1 s"))?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        // Creates the pack's row, or raises its highest version: the one statement that decides
        // between concurrent installs of the name (the loser changes no row).
        let raised = tx
            .execute(
                "INSERT INTO task_pack (name, state, active_version, generation, highest_version,
                    created_at, updated_at)
                 VALUES ($1, 'INACTIVE', NULL, 0, $2, $3, $3)
                 ON CONFLICT (name) DO UPDATE SET highest_version = excluded.highest_version,
                    updated_at = excluded.updated_at
                 WHERE task_pack.highest_version < excluded.highest_version",
                &args![&pack.name, version, now.0],
            )
            .await?;
        let row = pack_row(&mut tx, &pack.name).await?;
        if raised != 1 {
            return Err(TaskPackRefusal::Rollback {
                name: pack.name.clone(),
                version: pack.version,
                highest: row.map_or(0, |r| r.highest_version),
            }
            .into());
        }
        let row = row.ok_or_else(|| corrupt("task pack row missing after its upsert"))?;
        let inserted = tx
            .execute(
                "INSERT INTO task_pack_version (name, version, archive_digest, facts_digest,
                    profile_digest, signer, expires_at_s, archive_path, installed_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &args![
                    &pack.name,
                    version,
                    pack.archive_digest.to_string(),
                    pack.facts_digest.to_string(),
                    pack.profile_digest.to_string(),
                    &pack.signer,
                    expires,
                    &pack.archive_path,
                    now.0
                ],
            )
            .await;
        match inserted {
            Err(e) if e.is_database_refusal("package/rollback") => {
                return Err(TaskPackRefusal::Rollback {
                    name: pack.name.clone(),
                    version: pack.version,
                    highest: row.highest_version,
                }
                .into());
            }
            other => other?,
        };
        event(
            &mut tx,
            &pack.name,
            pack.version,
            PackEventKind::Installed,
            row.generation,
            now,
        )
        .await?;
        tx.commit().await?;
        tracing::info!(pack = %pack.name, version = pack.version, "task pack installed");
        Ok(PackRecord {
            name: pack.name.clone(),
            version: pack.version,
            archive_digest: pack.archive_digest,
            facts_digest: pack.facts_digest,
            profile_digest: pack.profile_digest,
            signer: pack.signer.clone(),
            expires_at_s: pack.expires_at_s,
            archive_path: pack.archive_path.clone(),
            installed_at: now,
        })
    }

    /// Activates installed `version` (default: the highest installed): `activated`, `upgraded`
    /// or `reactivated`, bumping the generation. An upgrade carries the binding forward when the
    /// profile digest is unchanged, in the same transaction (see the module documentation).
    pub async fn pack_activate(&self, name: &str, version: Option<u64>) -> Result<Lifecycle> {
        check_name(name)?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let pack = locked_pack(&mut tx, name).await?;
        let target = version.unwrap_or(pack.highest_version);
        let profile = tx
            .fetch_optional(SELECT_PROFILE, &args![name, signed(target)?])
            .await?
            .ok_or_else(|| TaskPackRefusal::NotInstalled {
                name: name.to_owned(),
                version: Some(target),
            })?;
        let profile = digest(&profile, "profile_digest")?;
        let (to, kind) = pack.state.activate(name, target)?;
        let generation = pack.generation + 1;
        move_pack(&mut tx, name, &pack, to, generation, now).await?;
        event(&mut tx, name, target, kind, generation, now).await?;
        let carried = if kind == PackEventKind::Upgraded {
            carry_forward(&mut tx, name, target, profile, generation, now).await?
        } else {
            false
        };
        let binding = binding_in(&mut tx, name).await?.map(|b| b.standing);
        tx.commit().await?;
        tracing::info!(
            pack = name,
            version = target,
            generation,
            event = %kind,
            carried,
            "task pack transition"
        );
        Ok(Lifecycle {
            name: name.to_owned(),
            event: kind,
            from: pack.state,
            state: to,
            generation,
            binding,
        })
    }

    /// Revokes the active version (`package/not-active` otherwise), bumping the generation.
    pub async fn pack_revoke(&self, name: &str) -> Result<Lifecycle> {
        check_name(name)?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let pack = locked_pack(&mut tx, name).await?;
        let (to, kind) = pack.state.revoke(name)?;
        let generation = pack.generation + 1;
        let version = to
            .version()
            .ok_or_else(|| corrupt("revoked without a version"))?;
        move_pack(&mut tx, name, &pack, to, generation, now).await?;
        event(&mut tx, name, version, kind, generation, now).await?;
        let binding = binding_in(&mut tx, name).await?.map(|b| b.standing);
        tx.commit().await?;
        tracing::info!(pack = name, version, generation, "task pack revoked");
        Ok(Lifecycle {
            name: name.to_owned(),
            event: kind,
            from: pack.state,
            state: to,
            generation,
            binding,
        })
    }

    /// Everything recorded about one pack, `None` if no version was ever installed. Its parts
    /// are read by separate statements: a transition committed meanwhile may show in one part
    /// and not another.
    pub async fn pack_status(&self, name: &str) -> Result<Option<PackStatus>> {
        let Some(row) = self
            .pool()
            .fetch_optional(SELECT_PACK, &args![name])
            .await?
        else {
            return Ok(None);
        };
        let pack = PackRow::from_row(&row)?;
        let versions = self
            .pool()
            .fetch_all(SELECT_VERSIONS, &args![name])
            .await?
            .iter()
            .map(PackRecord::from_row)
            .collect::<Result<_>>()?;
        let events = self
            .pool()
            .fetch_all(SELECT_EVENTS, &args![name])
            .await?
            .iter()
            .map(PackEvent::from_row)
            .collect::<Result<_>>()?;
        Ok(Some(PackStatus {
            name: name.to_owned(),
            state: pack.state,
            active_version: match pack.state {
                PackState::Active { version } => Some(version),
                _ => None,
            },
            generation: pack.generation,
            highest_version: pack.highest_version,
            versions,
            events,
        }))
    }

    /// Every pack, by name.
    pub async fn pack_list(&self) -> Result<Vec<PackStatus>> {
        let names = self
            .pool()
            .fetch_all("SELECT name FROM task_pack ORDER BY name", &[])
            .await?;
        let mut out = Vec::with_capacity(names.len());
        for r in &names {
            if let Some(s) = self.pack_status(&r.text("name")?).await? {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Binds the active pack (or re-binds it: every choice replaced, re-pinned to the active
    /// version, a pause kept). Refused `package/not-active` unless the pack is active.
    pub async fn bind(&self, binding: &NewBinding) -> Result<BindingRecord> {
        check_name(&binding.pack)?;
        non_empty(&binding.workspace, "a binding names its workspace")?;
        non_empty(&binding.vm_backend, "a binding names its VM backend")?;
        non_empty(&binding.network, "a binding names its runtime network")?;
        if binding
            .model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err(LedgerError::InvalidInput(
                "a binding's model is a name or absent",
            ));
        }
        if !matches!(binding.hil.as_str(), "each-step" | "each-mutation") {
            return Err(LedgerError::InvalidInput(
                "a binding's HIL is each-step or each-mutation",
            ));
        }
        if binding.max_concurrent_runs == 0 {
            return Err(LedgerError::InvalidInput(
                "a binding allows at least one concurrent run",
            ));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let pack = locked_pack(&mut tx, &binding.pack).await?;
        let PackState::Active { version } = pack.state else {
            return Err(TaskPackRefusal::NotActive {
                name: binding.pack.clone(),
                state: pack.state,
            }
            .into());
        };
        let profile = active_profile(&mut tx, &binding.pack, version).await?;
        tx.execute(
            "INSERT INTO task_binding (pack, workspace, vm_backend, model, network, hil,
                max_concurrent_runs, publication, paused, bound_generation, bound_version,
                bound_profile_digest, bound_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10, $11, $12, $12, $12)
             ON CONFLICT (pack) DO UPDATE SET workspace = excluded.workspace,
                vm_backend = excluded.vm_backend, model = excluded.model,
                network = excluded.network, hil = excluded.hil,
                max_concurrent_runs = excluded.max_concurrent_runs,
                publication = excluded.publication,
                bound_generation = excluded.bound_generation,
                bound_version = excluded.bound_version,
                bound_profile_digest = excluded.bound_profile_digest,
                bound_at = excluded.bound_at, updated_at = excluded.updated_at",
            &args![
                &binding.pack,
                &binding.workspace,
                &binding.vm_backend,
                binding.model.clone(),
                &binding.network,
                &binding.hil,
                i64::from(binding.max_concurrent_runs),
                i64::from(binding.publication),
                signed(pack.generation)?,
                signed(version)?,
                profile.to_string(),
                now.0
            ],
        )
        .await?;
        event(
            &mut tx,
            &binding.pack,
            version,
            PackEventKind::Bound,
            pack.generation,
            now,
        )
        .await?;
        let record = binding_in(&mut tx, &binding.pack)
            .await?
            .ok_or_else(|| corrupt("binding missing after its upsert"))?;
        tx.commit().await?;
        Ok(record)
    }

    /// The pack's binding, `None` when it has none (or no such pack).
    pub async fn binding(&self, pack: &str) -> Result<Option<BindingRecord>> {
        self.pool()
            .fetch_optional(SELECT_BINDING, &args![pack])
            .await?
            .as_ref()
            .map(BindingRecord::from_row)
            .transpose()
    }

    /// Pauses the binding (`local-binding/paused` if it already is).
    pub async fn bind_pause(&self, pack: &str) -> Result<BindingRecord> {
        self.set_paused(pack, true).await
    }

    /// Resumes a paused binding (`local-binding/not-paused` if it is not paused).
    pub async fn bind_resume(&self, pack: &str) -> Result<BindingRecord> {
        self.set_paused(pack, false).await
    }

    async fn set_paused(&self, pack: &str, paused: bool) -> Result<BindingRecord> {
        check_name(pack)?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let row = locked_pack(&mut tx, pack).await?;
        let b =
            binding_in(&mut tx, pack)
                .await?
                .ok_or_else(|| TaskPackRefusal::BindingMissing {
                    pack: pack.to_owned(),
                })?;
        if b.paused == paused {
            let pack = pack.to_owned();
            return Err(if paused {
                TaskPackRefusal::BindingPaused { pack }
            } else {
                TaskPackRefusal::BindingNotPaused { pack }
            }
            .into());
        }
        tx.execute(
            "UPDATE task_binding SET paused = $1, updated_at = $2 WHERE pack = $3 AND paused = $4",
            &args![i64::from(paused), now.0, pack, i64::from(!paused)],
        )
        .await?;
        let kind = if paused {
            PackEventKind::BindingPaused
        } else {
            PackEventKind::BindingResumed
        };
        event(&mut tx, pack, b.bound_version, kind, row.generation, now).await?;
        let record = binding_in(&mut tx, pack)
            .await?
            .ok_or_else(|| corrupt("binding vanished"))?;
        tx.commit().await?;
        Ok(record)
    }

    /// Re-pins the binding to the active version's generation and profile digest (the operator
    /// accepted the diff). Refused `package/not-active` unless the pack is active,
    /// `local-binding/missing` without a binding; a current binding is returned unchanged.
    pub async fn bind_accept(&self, pack: &str) -> Result<BindingRecord> {
        check_name(pack)?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let row = locked_pack(&mut tx, pack).await?;
        let PackState::Active { version } = row.state else {
            return Err(TaskPackRefusal::NotActive {
                name: pack.to_owned(),
                state: row.state,
            }
            .into());
        };
        let b =
            binding_in(&mut tx, pack)
                .await?
                .ok_or_else(|| TaskPackRefusal::BindingMissing {
                    pack: pack.to_owned(),
                })?;
        if b.standing.is_current() {
            return Ok(b);
        }
        let profile = active_profile(&mut tx, pack, version).await?;
        tx.execute(
            "UPDATE task_binding SET bound_generation = $1, bound_version = $2,
                bound_profile_digest = $3, bound_at = $4, updated_at = $4 WHERE pack = $5",
            &args![
                signed(row.generation)?,
                signed(version)?,
                profile.to_string(),
                now.0,
                pack
            ],
        )
        .await?;
        event(
            &mut tx,
            pack,
            version,
            PackEventKind::BindingAccepted,
            row.generation,
            now,
        )
        .await?;
        let record = binding_in(&mut tx, pack)
            .await?
            .ok_or_else(|| corrupt("binding vanished"))?;
        tx.commit().await?;
        Ok(record)
    }

    /// The binding's pinned task-profile digest and the active version's, for the diff
    /// `reach bind accept` prints. Refused `package/not-installed`, `local-binding/missing`, or
    /// `package/not-active` (no active version to diff against).
    pub async fn profile_digests(&self, pack: &str) -> Result<ProfileDigests> {
        let row = self
            .pool()
            .fetch_optional(SELECT_PACK, &args![pack])
            .await?
            .ok_or_else(|| TaskPackRefusal::NotInstalled {
                name: pack.to_owned(),
                version: None,
            })?;
        let state = PackRow::from_row(&row)?.state;
        let b = self
            .binding(pack)
            .await?
            .ok_or_else(|| TaskPackRefusal::BindingMissing {
                pack: pack.to_owned(),
            })?;
        let PackState::Active { version } = state else {
            return Err(TaskPackRefusal::NotActive {
                name: pack.to_owned(),
                state,
            }
            .into());
        };
        let current = self
            .pool()
            .fetch_optional(SELECT_PROFILE, &args![pack, signed(version)?])
            .await?
            .ok_or_else(|| corrupt("the active version is not installed"))?;
        Ok(ProfileDigests {
            bound_version: b.bound_version,
            bound: b.bound_profile_digest,
            current_version: version,
            current: digest(&current, "profile_digest")?,
        })
    }
}

/// The pack's row in a write transaction, if any (locked on PostgreSQL).
async fn pack_row(tx: &mut Tx, name: &str) -> Result<Option<PackRow>> {
    let sql = match tx {
        Tx::Postgres(_) => SELECT_PACK_LOCKED,
        Tx::Sqlite(..) => SELECT_PACK,
    };
    tx.fetch_optional(sql, &args![name])
        .await?
        .as_ref()
        .map(PackRow::from_row)
        .transpose()
}

/// The pack's row, locked; `package/not-installed` if there is none.
async fn locked_pack(tx: &mut Tx, name: &str) -> Result<PackRow> {
    pack_row(tx, name).await?.ok_or_else(|| {
        TaskPackRefusal::NotInstalled {
            name: name.to_owned(),
            version: None,
        }
        .into()
    })
}

async fn active_profile(tx: &mut Tx, name: &str, version: u64) -> Result<Sha256Digest> {
    let row = tx
        .fetch_optional(SELECT_PROFILE, &args![name, signed(version)?])
        .await?
        .ok_or_else(|| corrupt("the active version is not installed"))?;
    digest(&row, "profile_digest")
}

async fn binding_in(tx: &mut Tx, pack: &str) -> Result<Option<BindingRecord>> {
    tx.fetch_optional(SELECT_BINDING, &args![pack])
        .await?
        .as_ref()
        .map(BindingRecord::from_row)
        .transpose()
}

/// Applies a checked transition to the locked row (the trigger checks it again).
async fn move_pack(
    tx: &mut Tx,
    name: &str,
    from: &PackRow,
    to: PackState,
    generation: u64,
    now: UnixMillis,
) -> Result<()> {
    let version = to.version().map(signed).transpose()?;
    let changed = tx
        .execute(
            "UPDATE task_pack SET state = $1, active_version = $2, generation = $3, updated_at = $4
             WHERE name = $5 AND generation = $6",
            &args![
                to.column(),
                version,
                signed(generation)?,
                now.0,
                name,
                signed(from.generation)?
            ],
        )
        .await?;
    if changed != 1 {
        return Err(corrupt(&format!(
            "task pack {name} moved under its row lock"
        )));
    }
    Ok(())
}

/// On an upgrade to `version` with `profile`: carries the binding forward when it is pinned to
/// the same profile and no revocation happened since its pin. Returns whether it did.
async fn carry_forward(
    tx: &mut Tx,
    name: &str,
    version: u64,
    profile: Sha256Digest,
    generation: u64,
    now: UnixMillis,
) -> Result<bool> {
    let Some(row) = tx.fetch_optional(SELECT_BINDING, &args![name]).await? else {
        return Ok(false);
    };
    if row.int("revoked_since")? > 0 || digest(&row, "bound_profile_digest")? != profile {
        return Ok(false);
    }
    tx.execute(
        "UPDATE task_binding SET bound_generation = $1, bound_version = $2, updated_at = $3
         WHERE pack = $4",
        &args![signed(generation)?, signed(version)?, now.0, name],
    )
    .await?;
    event(
        tx,
        name,
        version,
        PackEventKind::BindingCarried,
        generation,
        now,
    )
    .await?;
    Ok(true)
}

async fn event(
    tx: &mut Tx,
    name: &str,
    version: u64,
    kind: PackEventKind,
    generation: u64,
    now: UnixMillis,
) -> Result<()> {
    tx.execute(
        INSERT_EVENT,
        &args![
            name,
            signed(version)?,
            kind.as_str(),
            signed(generation)?,
            now.0
        ],
    )
    .await?;
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    if name.trim().is_empty() || name.len() > MAX_PACK_NAME {
        return Err(LedgerError::InvalidInput(
            "a pack name is 1 to 256 bytes, not blank",
        ));
    }
    Ok(())
}

fn non_empty(value: &str, why: &'static str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(LedgerError::InvalidInput(why));
    }
    Ok(())
}

fn signed(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| LedgerError::InvalidInput("a pack version is at most 2^63 - 1"))
}

fn unsigned(r: &Row, col: &str) -> Result<u64> {
    u64::try_from(r.int(col)?).map_err(|_| corrupt(&format!("{col} is negative")))
}

fn flag(r: &Row, col: &str) -> Result<bool> {
    match r.int(col)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(corrupt(&format!("{col} is {v}, not 0 or 1"))),
    }
}

fn digest(r: &Row, col: &str) -> Result<Sha256Digest> {
    r.text(col)?
        .parse()
        .map_err(|e| corrupt(&format!("{col}: {e}")))
}

fn corrupt(what: &str) -> LedgerError {
    LedgerError::Corrupt(what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_table() {
        use PackEventKind::*;
        let ok = |s: PackState, v| s.activate("p", v);
        assert_eq!(
            ok(PackState::Inactive, 3).unwrap(),
            (PackState::Active { version: 3 }, Activated)
        );
        let active = PackState::Active { version: 3 };
        assert_eq!(
            ok(active, 4).unwrap(),
            (PackState::Active { version: 4 }, Upgraded)
        );
        assert_eq!(ok(active, 3).unwrap_err().code(), "package/already-active");
        assert_eq!(ok(active, 2).unwrap_err().code(), "package/downgrade");
        let revoked = PackState::Revoked { version: 3 };
        assert_eq!(
            ok(revoked, 3).unwrap(),
            (PackState::Active { version: 3 }, Reactivated)
        );
        assert_eq!(
            ok(revoked, 5).unwrap(),
            (PackState::Active { version: 5 }, Reactivated)
        );
        assert_eq!(ok(revoked, 2).unwrap_err().code(), "package/downgrade");
        assert_eq!(active.revoke("p").unwrap(), (revoked, Revoked));
        assert_eq!(
            revoked.revoke("p").unwrap_err().code(),
            "package/not-active"
        );
        assert_eq!(
            PackState::Inactive.revoke("p").unwrap_err().code(),
            "package/not-active"
        );
        for e in PackEventKind::ALL {
            assert_eq!(
                e.is_transition(),
                matches!(e, Activated | Upgraded | Revoked | Reactivated)
            );
        }
    }

    #[test]
    fn states_round_trip_through_their_columns() {
        for s in [
            PackState::Inactive,
            PackState::Active { version: 7 },
            PackState::Revoked { version: 7 },
        ] {
            let v = s.version().map(|v| v as i64);
            assert_eq!(PackState::from_columns(s.column(), v).unwrap(), s);
        }
        assert!(PackState::from_columns("ACTIVE", None).is_err());
        assert!(PackState::from_columns("INACTIVE", Some(1)).is_err());
    }
}
