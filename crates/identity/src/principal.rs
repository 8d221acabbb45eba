//! SPIFFE IDs as typed values.

use std::fmt;
use std::str::FromStr;

/// A SPIFFE trust domain, e.g. `reach.example`: lowercase letters, digits, `.`, `-`, `_`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrustDomain(String);

/// A workload principal: `spiffe://<trust-domain>/<name>` where `name` is a role or `operator`.
///
/// Reach uses exactly one path segment, so a principal names one role and nothing more.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    trust_domain: TrustDomain,
    name: String,
}

/// Why a trust domain or SPIFFE ID was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// trust domain must be 1-255 characters of [a-z0-9._-]
    #[error("trust domain `{0}` must be 1-255 characters of [a-z0-9._-]")]
    BadTrustDomain(String),
    /// SPIFFE ID must have the form `spiffe://<trust-domain>/<name>`
    #[error("SPIFFE ID `{0}` must have the form spiffe://<trust-domain>/<name>")]
    BadSpiffeId(String),
    /// principal name must be 1-63 characters of [a-z0-9-]
    #[error("principal name `{0}` must be 1-63 characters of [a-z0-9-]")]
    BadName(String),
}

impl TrustDomain {
    pub fn new(s: impl Into<String>) -> Result<Self, PrincipalError> {
        let s = s.into();
        let ok = !s.is_empty()
            && s.len() <= 255
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
        if ok {
            Ok(Self(s))
        } else {
            Err(PrincipalError::BadTrustDomain(s))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TrustDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Principal {
    pub fn new(trust_domain: TrustDomain, name: impl Into<String>) -> Result<Self, PrincipalError> {
        let name = name.into();
        let ok = !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(PrincipalError::BadName(name));
        }
        Ok(Self { trust_domain, name })
    }
    pub fn trust_domain(&self) -> &TrustDomain {
        &self.trust_domain
    }
    /// The role (or `operator`) this principal names.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn uri(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "spiffe://{}/{}", self.trust_domain, self.name)
    }
}

impl FromStr for Principal {
    type Err = PrincipalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || PrincipalError::BadSpiffeId(s.to_owned());
        let rest = s.strip_prefix("spiffe://").ok_or_else(bad)?;
        let (td, name) = rest.split_once('/').ok_or_else(bad)?;
        if name.contains('/') || name.contains('?') || name.contains('#') {
            return Err(bad());
        }
        Principal::new(TrustDomain::new(td).map_err(|_| bad())?, name).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let p: Principal = "spiffe://reach.local/core".parse().unwrap();
        assert_eq!(p.name(), "core");
        assert_eq!(p.trust_domain().as_str(), "reach.local");
        assert_eq!(p.to_string(), "spiffe://reach.local/core");
    }

    #[test]
    fn refuses_malformed_ids() {
        for s in [
            "https://reach.local/core",
            "spiffe://reach.local",
            "spiffe://reach.local/a/b",
            "spiffe://Reach.local/core",
            "spiffe://reach.local/Core",
            "spiffe:///core",
            "spiffe://reach.local/core?x",
        ] {
            assert!(s.parse::<Principal>().is_err(), "{s} must be refused");
        }
    }
}
