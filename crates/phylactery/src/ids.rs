//! Record identities. Admission, turn and intent ids are derived from the admission key, so a
//! redelivered event names the same rows on every run and a nonce can be recomputed by anyone
//! holding the key.

use reach_digest::Sha256Digest;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub String);
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// Identity of a `DiscordEventAdmission@1`.
    AdmissionId
);
id_type!(
    /// Identity of a `ReachTurn@1` (one per admission).
    TurnId
);
id_type!(
    /// Identity of a Run: one execution of a Pattern revision for a turn.
    RunId
);
id_type!(
    /// Identity of a `ServiceJobAttempt@1` or Intercom task/outbox attempt.
    AttemptId
);
id_type!(
    /// Identity of a `DiscordDeliveryIntent@1`.
    IntentId
);
id_type!(
    /// Identity of an `EgressDecision` issued by Ward.
    DecisionId
);

/// The maximum nonce length Discord accepts on Create Message.
pub const MAX_NONCE_LEN: usize = 25;

/// 24 hex characters (96 bits) of a digest: collision-safe for ids, and short enough that `r` +
/// 24 characters fits Discord's 25-character nonce.
fn short(d: Sha256Digest) -> String {
    d.hex()[..24].to_owned()
}

pub(crate) fn admission_id(key_digest: Sha256Digest) -> AdmissionId {
    AdmissionId(format!("adm_{}", short(key_digest)))
}

pub(crate) fn turn_id(admission: &AdmissionId) -> TurnId {
    TurnId(format!("turn_{}", &admission.0["adm_".len()..]))
}

/// The Run id of a turn under one Pattern revision (deterministic, so a redelivery finds it).
pub fn run_id(turn: &TurnId, pattern_id: &str, revision: &str) -> RunId {
    let d = Sha256Digest::of_parts([
        turn.0.as_bytes(),
        pattern_id.as_bytes(),
        revision.as_bytes(),
    ]);
    RunId(format!("run_{}", short(d)))
}

pub(crate) fn attempt_id(run: &RunId, attempt_no: i64) -> AttemptId {
    let d = Sha256Digest::of_parts([run.0.as_bytes(), &attempt_no.to_be_bytes()]);
    AttemptId(format!("att_{}", short(d)))
}

/// The id of the `n`th intent (1 = its first, then each successor after proved absence) that
/// delivers part `part` of a turn's answer. Part 1 keeps the derivation of the single-part
/// ledger, where `n` was the intent's `seq`, so vaults written before multi-part answers name
/// the same ids; later parts hash a distinct, tagged input.
pub(crate) fn intent_id(turn: &TurnId, part: i64, n: i64) -> IntentId {
    let d = if part == 1 {
        Sha256Digest::of_parts([turn.0.as_bytes(), &n.to_be_bytes()])
    } else {
        Sha256Digest::of_parts([
            b"reach-intent-part/1".as_slice(),
            turn.0.as_bytes(),
            &part.to_be_bytes(),
            &n.to_be_bytes(),
        ])
    };
    IntentId(format!("int_{}", short(d)))
}

/// The deterministic Discord nonce of an intent: derived from the intent identity and its
/// effect, so a re-run of the same intent always presents the same nonce to the platform.
pub(crate) fn nonce(intent: &IntentId, effect: &str) -> String {
    let d = Sha256Digest::of_parts([
        b"reach-nonce/1".as_slice(),
        intent.0.as_bytes(),
        effect.as_bytes(),
    ]);
    let n = format!("r{}", short(d));
    debug_assert!(n.len() <= MAX_NONCE_LEN);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_one_keeps_the_single_part_ids_and_later_parts_differ() {
        let turn = TurnId("turn_0123456789abcdef01234567".into());
        // The derivation every vault written before multi-part answers used for `seq` n.
        let legacy = |n: i64| {
            let d = Sha256Digest::of_parts([turn.0.as_bytes(), &n.to_be_bytes()]);
            IntentId(format!("int_{}", short(d)))
        };
        assert_eq!(intent_id(&turn, 1, 1), legacy(1));
        assert_eq!(intent_id(&turn, 1, 2), legacy(2));
        let mut all = std::collections::HashSet::new();
        for part in 1..=16 {
            for n in 1..=3 {
                let id = intent_id(&turn, part, n);
                let nonce = nonce(&id, "effect");
                assert!(nonce.len() <= MAX_NONCE_LEN);
                assert!(all.insert(id), "part {part} attempt {n} collides");
            }
        }
    }
}
