//! Provider custody: what the provider does with a payload once it has it. The seed admits the
//! provider's storage, training, region, subcontractor and deletion policy before any egress
//! ("local deletion cannot erase its copies"), so core refuses to configure a Portal whose
//! declared custody is not admissible, and binds the admitted declaration's digest into every
//! model decision's policy revision.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// Longest retention admitted, in days: a provider's abuse-monitoring window is typically 30
/// days; anything longer needs a declared decision of its own (seed: "longer retention needs a
/// declared decision").
pub const MAX_RETENTION_DAYS: u32 = 30;

/// Whether the provider stores payloads at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Storage {
    /// Nothing is stored after the response (zero data retention).
    None,
    /// Stored for abuse monitoring only, then deleted.
    Transient,
    /// Stored for the provider's own purposes.
    Retained,
}

/// How stored payloads are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Deletion {
    /// Deleted when the retention ends, without a request.
    Automatic,
    /// Deleted when the operator asks.
    OnRequest,
    /// Never deleted.
    None,
}

/// The operator's declaration of the provider's custody policy (`settings.portal.custody`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderCustody {
    pub storage: Storage,
    /// Days payloads are kept (0 with storage `none`).
    pub retention_days: u32,
    /// Whether the provider trains on payloads.
    pub training: bool,
    /// Where payloads are processed and stored.
    pub region: String,
    /// Subcontractors that may see payloads (may be empty, never implicit).
    pub subcontractors: Vec<String>,
    pub deletion: Deletion,
}

/// Why the declared custody is not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CustodyRefusal {
    /// the provider trains on payloads
    #[error("custody/training")]
    Training,
    /// payloads are kept longer than MAX_RETENTION_DAYS, or retained for the provider's own use
    #[error("custody/retention-too-long")]
    RetentionTooLong,
    /// storage `none` with a retention, or a retention without storage
    #[error("custody/storage-inconsistent")]
    StorageInconsistent,
    /// stored payloads are never deleted
    #[error("custody/no-deletion")]
    NoDeletion,
    /// no processing region is declared
    #[error("custody/region-undeclared")]
    RegionUndeclared,
}

/// A declaration that passed admission, with its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedCustody {
    pub custody: ProviderCustody,
    pub digest: Sha256Digest,
}

impl AdmittedCustody {
    /// The policy revision a model decision binds: the answer policy plus this declaration.
    pub fn policy_revision(&self, answer_policy: &str) -> String {
        format!("{answer_policy};custody={}", self.digest)
    }
}

/// Admits `c` or names the first rule it breaks.
pub fn admit_custody(c: &ProviderCustody) -> Result<AdmittedCustody, CustodyRefusal> {
    if c.training {
        return Err(CustodyRefusal::Training);
    }
    match c.storage {
        Storage::None if c.retention_days != 0 => return Err(CustodyRefusal::StorageInconsistent),
        Storage::Transient | Storage::Retained if c.retention_days == 0 => {
            return Err(CustodyRefusal::StorageInconsistent);
        }
        Storage::Retained => return Err(CustodyRefusal::RetentionTooLong),
        _ if c.retention_days > MAX_RETENTION_DAYS => {
            return Err(CustodyRefusal::RetentionTooLong);
        }
        Storage::Transient if c.deletion == Deletion::None => {
            return Err(CustodyRefusal::NoDeletion);
        }
        _ => {}
    }
    if c.region.trim().is_empty() {
        return Err(CustodyRefusal::RegionUndeclared);
    }
    Ok(AdmittedCustody {
        custody: c.clone(),
        digest: Sha256Digest::of(serde_json::to_vec(c).expect("custody serializes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zdr() -> ProviderCustody {
        ProviderCustody {
            storage: Storage::None,
            retention_days: 0,
            training: false,
            region: "eu".into(),
            subcontractors: vec![],
            deletion: Deletion::Automatic,
        }
    }

    #[test]
    fn zero_retention_and_short_transient_storage_are_admitted() {
        let a = admit_custody(&zdr()).unwrap();
        assert!(
            a.policy_revision("reach.public-answer/1")
                .starts_with("reach.public-answer/1;custody=sha256:")
        );
        assert!(a.policy_revision("reach.public-answer/1").len() <= 128);
        let transient = ProviderCustody {
            storage: Storage::Transient,
            retention_days: 30,
            deletion: Deletion::OnRequest,
            ..zdr()
        };
        let b = admit_custody(&transient).unwrap();
        assert_ne!(a.digest, b.digest);
    }

    #[test]
    fn each_custody_refusal() {
        let cases = [
            (
                ProviderCustody {
                    training: true,
                    ..zdr()
                },
                "custody/training",
            ),
            (
                ProviderCustody {
                    storage: Storage::Transient,
                    retention_days: 31,
                    ..zdr()
                },
                "custody/retention-too-long",
            ),
            (
                ProviderCustody {
                    storage: Storage::Retained,
                    retention_days: 1,
                    ..zdr()
                },
                "custody/retention-too-long",
            ),
            (
                ProviderCustody {
                    retention_days: 3,
                    ..zdr()
                },
                "custody/storage-inconsistent",
            ),
            (
                ProviderCustody {
                    storage: Storage::Transient,
                    ..zdr()
                },
                "custody/storage-inconsistent",
            ),
            (
                ProviderCustody {
                    storage: Storage::Transient,
                    retention_days: 7,
                    deletion: Deletion::None,
                    ..zdr()
                },
                "custody/no-deletion",
            ),
            (
                ProviderCustody {
                    region: " ".into(),
                    ..zdr()
                },
                "custody/region-undeclared",
            ),
        ];
        for (c, want) in cases {
            assert_eq!(admit_custody(&c).unwrap_err().to_string(), want, "{c:?}");
        }
    }

    #[test]
    fn the_declaration_is_strict() {
        let text = r#"{"storage":"none","retention_days":0,"training":false,"region":"eu",
            "subcontractors":[],"deletion":"automatic","notes":"x"}"#;
        assert!(serde_json::from_str::<ProviderCustody>(text).is_err());
    }
}
