//! Identifiers minted by ward. Each kind has its own prefix and its own type, so a Sigil id can
//! never be parsed as a decision id: a Sigil shown to an egress role is refused as
//! `decision/unknown` before any lookup.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

/// Random bytes in every minted id: 128 bits, so ids cannot be guessed.
const ID_RANDOM_BYTES: usize = 16;

macro_rules! minted_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The text prefix of this kind of id.
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id from the system CSPRNG.
            pub(crate) fn mint(rng: &SystemRandom) -> Self {
                let mut b = [0u8; ID_RANDOM_BYTES];
                // The system CSPRNG failing is not recoverable; ring documents it as fatal.
                rng.fill(&mut b).expect("system random source");
                Self(format!("{}{}", $prefix, hex::encode(b)))
            }

            /// Parses the text form; `None` for anything that is not exactly this kind of id.
            pub fn parse(s: &str) -> Option<Self> {
                let hex_part = s.strip_prefix($prefix)?;
                let ok = hex_part.len() == ID_RANDOM_BYTES * 2
                    && hex_part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                ok.then(|| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

minted_id!(
    /// A task Sigil (ID Badge). Held by core only; never forwarded to an adapter, model or peer.
    SigilId,
    "sigil_"
);
minted_id!(
    /// A single-use EgressDecision.
    DecisionId,
    "egd_"
);
minted_id!(
    /// A single-use step grant (the first part of its token, which also carries its tag).
    StepGrantId,
    "stg_"
);
minted_id!(
    /// A HIL request: one stamped step put to the operator.
    HilRequestId,
    "hil_"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_do_not_parse_as_each_other() {
        let rng = SystemRandom::new();
        let s = SigilId::mint(&rng);
        let d = DecisionId::mint(&rng);
        assert_eq!(SigilId::parse(s.as_str()), Some(s.clone()));
        assert_eq!(DecisionId::parse(d.as_str()), Some(d.clone()));
        assert_eq!(DecisionId::parse(s.as_str()), None);
        assert_eq!(SigilId::parse(d.as_str()), None);
        let g = StepGrantId::mint(&rng);
        assert_eq!(StepGrantId::parse(g.as_str()), Some(g.clone()));
        assert_eq!(StepGrantId::parse(d.as_str()), None);
        assert_eq!(DecisionId::parse(g.as_str()), None);
        assert_eq!(DecisionId::parse(&d.as_str().to_uppercase()), None);
        assert_eq!(DecisionId::parse(""), None);
    }
}
