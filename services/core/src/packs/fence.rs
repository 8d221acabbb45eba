//! Core's statement of each pack's current-use standing to ward (`FencePack`, issue #29).
//!
//! Ward mints and redeems step grants only under the standing core last stated, so core
//! states it after every lifecycle or binding change it records, and at startup. Each
//! statement is the whole standing, read fresh from the ledger while holding one lock: two
//! changes that race still leave ward holding the ledger's latest. A statement ward did not
//! take (ward down, a timeout) marks the pack *behind*; one worker restates behind packs with
//! a bounded backoff until ward takes them. The operator's change is already committed then;
//! the answer says so (`fence/behind`) instead of pretending the step boundary already holds.
//!
//! Invariants: the ledger is the truth and ward a fence over it, never the other way; a
//! statement never names a HIL mode looser than the pack's minimum or the binding's.

use std::collections::BTreeSet;
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_phylactery as ledger;
use reach_plan::HilMode;
use reach_proto::ward::v1 as ward_pb;
use tonic::Status;

use super::{PackPort, hil_text};
use crate::ports::status as ledger_status;

/// How long one statement may take before the pack is marked behind.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The worker's backoff between attempts while a pack is behind.
const RETRY_MIN: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// What the fence shares between the port's handlers and the worker.
#[derive(Debug, Default)]
pub(super) struct FenceState {
    /// Held while a standing is read and stated, so statements reach ward in ledger order.
    stating: tokio::sync::Mutex<()>,
    /// Packs whose latest standing ward has not taken.
    behind: std::sync::Mutex<BTreeSet<String>>,
    wake: tokio::sync::Notify,
}

/// The whole standing of one pack, from its ledger records. `hil_minimum` is the active
/// version's minimum (`None` with no version active).
pub(super) fn standing(
    status: &ledger::PackStatus,
    binding: Option<&ledger::BindingRecord>,
    hil_minimum: Option<HilMode>,
) -> ward_pb::FencePackRequest {
    let profile_of = |version: u64| {
        status
            .versions
            .iter()
            .find(|v| v.version == version)
            .map(|v| v.profile_digest)
    };
    let (revoked, current) = match status.state {
        ledger::PackState::Inactive => (false, None),
        ledger::PackState::Active { version } => (false, profile_of(version)),
        ledger::PackState::Revoked { version } => (true, profile_of(version)),
    };
    // No version was ever active: nothing can be current; the binding cannot exist either.
    let active = current.unwrap_or_else(|| Sha256Digest::of(b""));
    // A binding's mode that does not parse is read as the strictest.
    let bound_hil = binding
        .map(|b| match b.hil.as_str() {
            "each-mutation" => HilMode::EachMutation,
            _ => HilMode::EachStep,
        })
        .unwrap_or(HilMode::EachStep);
    ward_pb::FencePackRequest {
        pack_name: status.name.clone(),
        current_generation: status.generation,
        revoked,
        // No binding: nothing may run, which ward reads as paused.
        paused: binding.is_none_or(|b| b.paused),
        bound_profile_digest: binding
            .map(|b| b.bound_profile_digest)
            .unwrap_or(active)
            .to_string(),
        active_profile_digest: active.to_string(),
        hil: hil_text(bound_hil.max(hil_minimum.unwrap_or(HilMode::EachStep))).to_owned(),
    }
}

impl PackPort {
    /// The standing of `name` as the ledger holds it now (`None`: not installed).
    async fn standing_of(&self, name: &str) -> Result<Option<ward_pb::FencePackRequest>, Status> {
        let Some(status) = self.vault.pack_status(name).await.map_err(ledger_status)? else {
            return Ok(None);
        };
        let binding = self.vault.binding(name).await.map_err(ledger_status)?;
        let minimum = match status.active_version {
            Some(v) => Some(self.load(name, v).await?.vocabulary().hil_minimum),
            None => None,
        };
        Ok(Some(standing(&status, binding.as_ref(), minimum)))
    }

    /// States `name`'s standing to ward now; on failure marks it behind for the worker.
    /// Call after every ledger change of the pack or its binding.
    pub(super) async fn fence(&self, name: &str) -> Result<(), Status> {
        let stated = self.state_once(name).await;
        if let Err(e) = &stated {
            tracing::warn!(pack = name, error = %e.message(), "ward did not take the pack's standing; retrying");
            self.fence_state
                .behind
                .lock()
                .expect("fence set")
                .insert(name.to_owned());
            self.fence_state.wake.notify_one();
        }
        stated.map_err(|e| {
            Status::unavailable(format!(
                "fence/behind: the change is recorded, but ward has not taken the pack's new \
                 standing yet ({}); core keeps stating it",
                e.message()
            ))
        })
    }

    async fn state_once(&self, name: &str) -> Result<(), Status> {
        let _stating = self.fence_state.stating.lock().await;
        let Some(standing) = self.standing_of(name).await? else {
            return Ok(());
        };
        let mut req = tonic::Request::new(standing);
        req.set_timeout(STATEMENT_TIMEOUT);
        let r = self.ward.clone().fence_pack(req).await?.into_inner();
        self.fence_state
            .behind
            .lock()
            .expect("fence set")
            .remove(name);
        tracing::info!(
            pack = name,
            generation = r.current_generation,
            epoch = r.epoch,
            stale_grants = r.stale_grants,
            "ward took the pack's standing"
        );
        Ok(())
    }

    /// Starts the worker that restates behind packs, with every installed pack behind: at
    /// startup ward may hold a standing older than the ledger's (a change made while ward or
    /// core was down).
    pub fn keep_ward_fenced(&self) {
        let port = self.clone();
        tokio::spawn(async move {
            let mut backoff = RETRY_MIN;
            let mut listed = false;
            loop {
                if !listed {
                    match port.vault.pack_list().await {
                        Ok(packs) => {
                            port.fence_state
                                .behind
                                .lock()
                                .expect("fence set")
                                .extend(packs.into_iter().map(|s| s.name));
                            listed = true;
                        }
                        Err(e) => tracing::warn!(error = %e, "listing packs to fence failed"),
                    }
                }
                let behind: Vec<String> = port
                    .fence_state
                    .behind
                    .lock()
                    .expect("fence set")
                    .iter()
                    .cloned()
                    .collect();
                let mut failed = !listed;
                for name in &behind {
                    if let Err(e) = port.state_once(name).await {
                        tracing::debug!(pack = %name, error = %e.message(), "still behind");
                        failed = true;
                    }
                }
                if failed {
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = port.fence_state.wake.notified() => {}
                    }
                    backoff = (backoff * 2).min(RETRY_MAX);
                } else {
                    backoff = RETRY_MIN;
                    port.fence_state.wake.notified().await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_phylactery::UnixMillis;

    fn status(state: ledger::PackState, generation: u64) -> ledger::PackStatus {
        let version = |v: u64, profile: &[u8]| ledger::PackRecord {
            name: "p".into(),
            version: v,
            archive_digest: Sha256Digest::of(b"a"),
            facts_digest: Sha256Digest::of(b"f"),
            profile_digest: Sha256Digest::of(profile),
            signer: "ed25519:k".into(),
            expires_at_s: 0,
            archive_path: String::new(),
            installed_at: UnixMillis(0),
        };
        ledger::PackStatus {
            name: "p".into(),
            state,
            active_version: match state {
                ledger::PackState::Active { version } => Some(version),
                _ => None,
            },
            generation,
            highest_version: 2,
            versions: vec![version(1, b"one"), version(2, b"two")],
            events: Vec::new(),
        }
    }

    fn bound(hil: &str, paused: bool, profile: &[u8]) -> ledger::BindingRecord {
        ledger::BindingRecord {
            pack: "p".into(),
            workspace: "/w".into(),
            vm_backend: "qemu".into(),
            model: None,
            network: "none".into(),
            hil: hil.into(),
            max_concurrent_runs: 1,
            publication: false,
            paused,
            bound_generation: 1,
            bound_version: 1,
            bound_profile_digest: Sha256Digest::of(profile),
            bound_at: UnixMillis(0),
            created_at: UnixMillis(0),
            updated_at: UnixMillis(0),
            standing: ledger::BindingStanding::Current,
        }
    }

    #[test]
    fn the_standing_is_the_whole_ledger_state_and_never_looser_than_the_pack() {
        let active = status(ledger::PackState::Active { version: 2 }, 4);
        let b = bound("each-mutation", false, b"one");
        let s = standing(&active, Some(&b), Some(HilMode::EachMutation));
        assert_eq!(
            (s.current_generation, s.revoked, s.paused),
            (4, false, false)
        );
        assert_eq!(s.bound_profile_digest, Sha256Digest::of(b"one").to_string());
        assert_eq!(
            s.active_profile_digest,
            Sha256Digest::of(b"two").to_string()
        );
        assert_eq!(s.hil, "each-mutation");
        // The pack's stricter minimum wins over the binding's mode.
        let s = standing(&active, Some(&b), Some(HilMode::EachStep));
        assert_eq!(s.hil, "each-step");
        // A mode that does not parse is read as the strictest.
        let s = standing(&active, Some(&bound("never", false, b"two")), None);
        assert_eq!(s.hil, "each-step");
        // No binding reads as paused; a paused one is paused.
        assert!(standing(&active, None, Some(HilMode::EachMutation)).paused);
        assert!(standing(&active, Some(&bound("each-step", true, b"two")), None).paused);
        // Revoked keeps the revoked version's profile; never-active names no profile.
        let revoked = standing(
            &status(ledger::PackState::Revoked { version: 1 }, 5),
            Some(&b),
            None,
        );
        assert!(revoked.revoked);
        assert_eq!(
            revoked.active_profile_digest,
            Sha256Digest::of(b"one").to_string()
        );
        let inactive = standing(&status(ledger::PackState::Inactive, 0), None, None);
        assert!(!inactive.revoked && inactive.paused);
        assert_eq!(
            inactive.active_profile_digest,
            Sha256Digest::of(b"").to_string()
        );
    }
}
