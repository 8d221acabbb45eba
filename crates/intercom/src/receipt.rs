//! The peer's enrollment receipt: what an enrolled peer guarantees, as the operator admitted it.
//!
//! Seed 001: "A2A 1.0 makes Send Message idempotency optional; messageId alone does not prove
//! deduplication. Before retrying an ambiguous initial POST, the receipt must admit the selected
//! peer's guarantee that the exact same message and payload resolve to the original Task
//! without duplicate work for that redelivery." An Agent Card proves none of this; only the
//! receipt does, and it names the one peer (destination) it was issued for.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// How the peer treats a repeated SendMessage with the same message id and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(
    rename_all = "kebab-case",
    tag = "kind",
    deny_unknown_fields,
    remote = "Self"
)]
pub enum ResendGuarantee {
    /// No guarantee: an ambiguous send stays UNCERTAIN and is never resent (the default).
    #[default]
    None,
    /// The exact same envelope resolves to the original task without duplicate work; at most
    /// `max_resends` admitted resends per task.
    SameMessageResolvesToOriginalTask { max_resends: u32 },
}

/// An enrollment receipt for one peer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct EnrollmentReceipt {
    /// The peer's exact A2A endpoint URL (`https://authority/path`) this receipt covers.
    pub peer: String,
    /// Protocol binding and version, `a2a/1.0 jsonrpc`.
    pub binding: String,
    #[serde(default)]
    pub resend: ResendGuarantee,
}

// Both are read only from a table (a JSON object, a TOML table). serde's derive (here the
// inherent `deserialize` that `remote = "Self"` generates) also reads a struct, and an
// internally tagged enum, from a sequence of its fields in order (`["peer", "binding"]`),
// which is no receipt an operator writes; the fuzz target `intercom_receipt` found it.

/// A type read from a table by its derived reading.
trait Tabled<'de>: Sized {
    const EXPECTING: &'static str;
    fn derived<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

impl<'de> Tabled<'de> for EnrollmentReceipt {
    const EXPECTING: &'static str = "a receipt table (peer, binding, resend)";
    fn derived<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EnrollmentReceipt::deserialize(d)
    }
}

impl<'de> Tabled<'de> for ResendGuarantee {
    const EXPECTING: &'static str = "a resend table (kind, max_resends)";
    fn derived<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ResendGuarantee::deserialize(d)
    }
}

/// Visits a map only; anything else is refused as not `T`'s table.
struct Table<T>(PhantomData<T>);

impl<'de, T: Tabled<'de>> Visitor<'de> for Table<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::derived(de::value::MapAccessDeserializer::new(map))
    }
}

impl<'de> Deserialize<'de> for EnrollmentReceipt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Table(PhantomData))
    }
}

impl<'de> Deserialize<'de> for ResendGuarantee {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Table(PhantomData))
    }
}

/// The binding a receipt must name for Intercom to use it.
pub const RECEIPT_BINDING: &str = "a2a/1.0 jsonrpc";

impl EnrollmentReceipt {
    /// A receipt granting no resend.
    pub fn without_resend(peer: impl Into<String>) -> Self {
        EnrollmentReceipt {
            peer: peer.into(),
            binding: RECEIPT_BINDING.into(),
            resend: ResendGuarantee::None,
        }
    }

    /// A receipt admitting up to `max_resends` resends of an ambiguous send.
    pub fn with_resend(peer: impl Into<String>, max_resends: u32) -> Self {
        EnrollmentReceipt {
            peer: peer.into(),
            binding: RECEIPT_BINDING.into(),
            resend: ResendGuarantee::SameMessageResolvesToOriginalTask { max_resends },
        }
    }

    /// Resends admitted for an ambiguous send to `peer` (0 when none, or when the receipt names
    /// another peer or binding).
    pub fn resends_admitted(&self, peer: &str) -> u32 {
        if self.peer != peer || self.binding != RECEIPT_BINDING {
            return 0;
        }
        match self.resend {
            ResendGuarantee::None => 0,
            ResendGuarantee::SameMessageResolvesToOriginalTask { max_resends } => max_resends,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_admits_only_its_own_peer_and_binding() {
        let r = EnrollmentReceipt::with_resend("https://peer.test/a2a", 2);
        assert_eq!(r.resends_admitted("https://peer.test/a2a"), 2);
        assert_eq!(r.resends_admitted("https://other.test/a2a"), 0);
        let wrong = EnrollmentReceipt {
            binding: "a2a/0.3 jsonrpc".into(),
            ..r
        };
        assert_eq!(wrong.resends_admitted("https://peer.test/a2a"), 0);
        assert_eq!(
            EnrollmentReceipt::without_resend("https://peer.test/a2a")
                .resends_admitted("https://peer.test/a2a"),
            0
        );
    }

    #[test]
    fn a_receipt_parses_strictly() {
        let r: EnrollmentReceipt = serde_json::from_str(
            r#"{"peer":"https://p.test/a2a","binding":"a2a/1.0 jsonrpc",
                "resend":{"kind":"same-message-resolves-to-original-task","max_resends":1}}"#,
        )
        .unwrap();
        assert_eq!(r.resends_admitted("https://p.test/a2a"), 1);
        assert!(
            serde_json::from_str::<EnrollmentReceipt>(
                r#"{"peer":"https://p.test/a2a","binding":"a2a/1.0 jsonrpc","dedup":true}"#
            )
            .is_err()
        );
        // Only tables: not a sequence of the fields in order (the fuzz target's find), for
        // the receipt or its resend.
        for doc in [
            r#"["", "a"]"#,
            r#"["https://p.test/a2a", "a2a/1.0 jsonrpc"]"#,
            r#"{"peer":"https://p.test/a2a","binding":"a2a/1.0 jsonrpc","resend":["none"]}"#,
            r#"{"peer":"https://p.test/a2a","binding":"a2a/1.0 jsonrpc",
                "resend":["same-message-resolves-to-original-task", 2]}"#,
        ] {
            assert!(
                serde_json::from_str::<EnrollmentReceipt>(doc).is_err(),
                "accepted {doc}"
            );
        }
        let toml: EnrollmentReceipt = toml::from_str(
            "peer = \"https://p.test/a2a\"\nbinding = \"a2a/1.0 jsonrpc\"\n\
             [resend]\nkind = \"none\"\n",
        )
        .unwrap();
        assert_eq!(
            toml,
            EnrollmentReceipt::without_resend("https://p.test/a2a")
        );
    }
}
