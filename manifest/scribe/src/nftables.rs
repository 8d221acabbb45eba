//! The body's egress ruleset, as `nft -f` text.
//!
//! One `inet` table with an output chain. A socket of the body is recognised by its
//! [`Identity`] (the owning uid, or the cgroup of the role's unit) and jumps to its role's
//! chain, which, in order:
//!
//! 1. accepts the exact local roads bound to the role (address, port; TCP and UDP);
//! 2. drops every IANA special-purpose IPv4/IPv6 block, multicast and the metadata addresses
//!    (the table of `reach_destination::special`, containment-merged);
//! 3. for an egress role, accepts TCP to the addresses its admitted destinations resolved to at
//!    materialization, on the destination's port only;
//! 4. drops everything else. A role without egress therefore reaches nothing at all; it talks
//!    to the others only over Unix sockets, which no IP rule sees.
//!
//! Sockets that are not the body's are not this table's business and pass.
//!
//! **Architecture Invariant:** Scribe refuses an admitted destination that resolved to a
//! special-purpose address: the only way such an address is reachable is a local road.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use reach_destination::special::{self, Prefix, SPECIAL_PURPOSE};
use reach_manifest::{Manifest, NetworkClass};

/// The table Scribe owns. Loading the ruleset replaces it whole.
pub const TABLE: &str = "reach_egress";

/// How the kernel recognises one role's sockets.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Identity {
    /// The uid the role's processes (or its rootless network helper) run as.
    Uid(u32),
    /// The cgroup v2 path of the role's unit, relative to the cgroup root, and its level.
    Cgroup { level: u8, path: String },
}

impl Identity {
    fn matcher(&self) -> String {
        match self {
            Self::Uid(uid) => format!("meta skuid {uid}"),
            Self::Cgroup { level, path } => format!("socket cgroupv2 level {level} \"{path}\""),
        }
    }
}

/// What the host supplies when the ruleset is materialized.
#[derive(Clone, Debug, Default)]
pub struct FirewallBinding {
    /// Every role's identity. A role without one is refused: the body has no unnamed member.
    pub identities: BTreeMap<String, Identity>,
    /// The addresses each admitted destination resolved to (by destination name).
    pub addresses: BTreeMap<String, Vec<IpAddr>>,
    /// Exact local roads: (role, socket address), e.g. the resolver an egress role asks.
    pub local_roads: BTreeSet<(String, SocketAddr)>,
}

/// Why Scribe refused to render the ruleset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FirewallError {
    /// a role has no identity the kernel can match
    #[error(
        "scribe/firewall-unbound-role: roles[{index}]: role `{role}` has no identity (uid or cgroup)"
    )]
    UnboundRole { index: usize, role: String },
    /// an identity is bound to two roles
    #[error(
        "scribe/firewall-shared-identity: roles `{0}` and `{1}` share one identity; the kernel could not tell them apart"
    )]
    SharedIdentity(String, String),
    /// an admitted destination has no resolved address
    #[error("scribe/firewall-unresolved: destinations[{index}]: `{name}` has no resolved address")]
    Unresolved { index: usize, name: String },
    /// an admitted destination resolved to a special-purpose address
    #[error(
        "scribe/firewall-special-address: destinations[{index}]: `{name}` resolved to {addr}, which is {why}"
    )]
    SpecialAddress {
        index: usize,
        name: String,
        addr: IpAddr,
        why: String,
    },
    /// a destination URL the destination crate refuses
    #[error("scribe/firewall-bad-destination: destinations[{index}].url: {why}")]
    BadDestination { index: usize, why: String },
    /// a local road names a role that does not exist
    #[error("scribe/firewall-bad-road: local road for unknown role `{0}`")]
    UnknownRoadRole(String),
    /// a role named in the binding is not in the manifest
    #[error("scribe/firewall-unknown-role: identity for unknown role `{0}`")]
    UnknownRole(String),
}

/// The special-purpose prefixes with every prefix contained in another removed, so the sets
/// have no overlapping intervals. Sorted by address.
pub fn merged_special(v6: bool) -> Vec<Prefix> {
    let all: Vec<Prefix> = SPECIAL_PURPOSE
        .iter()
        .map(|e| e.prefix)
        .filter(|p| matches!(p, Prefix::V6(..)) == v6)
        .collect();
    let mut kept: Vec<Prefix> = all
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            !all.iter().enumerate().any(|(j, q)| {
                let inside = q.contains(p.first()) && q.contains(p.last());
                // Strictly larger, or an identical duplicate listed earlier.
                inside && (q.len() < p.len() || (q.len() == p.len() && j < *i))
            })
        })
        .map(|(_, p)| *p)
        .collect();
    kept.sort_by_key(|p| match p.first() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    });
    kept
}

/// The TCP port of an `https://host[:port]/…` URL (443 unless spelled out). The full
/// canonical-form rules are the destination crate's, applied by the egress roles themselves;
/// the firewall needs only the port.
fn https_port(url: &str) -> Option<u16> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let host_end = if authority.starts_with('[') {
        authority.find(']')? + 1
    } else {
        authority.find(':').unwrap_or(authority.len())
    };
    match &authority[host_end..] {
        "" => Some(443),
        p => p.strip_prefix(':')?.parse().ok().filter(|p| *p != 0),
    }
}

fn chain_name(role: &str) -> String {
    format!("role_{}", role.replace('-', "_"))
}

fn addr_match(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => format!("ip daddr {a}"),
        IpAddr::V6(a) => format!("ip6 daddr {a}"),
    }
}

/// Renders the ruleset for `manifest` under `binding`.
pub fn render(manifest: &Manifest, binding: &FirewallBinding) -> Result<String, FirewallError> {
    for role in binding.identities.keys() {
        if manifest.role(role).is_none() {
            return Err(FirewallError::UnknownRole(role.clone()));
        }
    }
    let mut seen: BTreeMap<&Identity, &str> = BTreeMap::new();
    for role in &manifest.roles {
        let i = role.index;
        let id = binding.identities.get(role.name.as_str()).ok_or_else(|| {
            FirewallError::UnboundRole {
                index: i,
                role: role.name.as_str().to_owned(),
            }
        })?;
        if let Some(other) = seen.insert(id, role.name.as_str()) {
            return Err(FirewallError::SharedIdentity(
                other.to_owned(),
                role.name.as_str().to_owned(),
            ));
        }
    }
    for (role, _) in &binding.local_roads {
        if manifest.role(role).is_none() {
            return Err(FirewallError::UnknownRoadRole(role.clone()));
        }
    }
    // Admitted (address, port) per destination name, refusing special-purpose answers.
    let mut admitted: BTreeMap<&str, BTreeSet<(IpAddr, u16)>> = BTreeMap::new();
    let used: BTreeSet<&str> = manifest
        .roles
        .iter()
        .filter_map(|r| match &r.network {
            NetworkClass::Egress(ds) => Some(ds.iter().map(String::as_str).collect::<Vec<_>>()),
            NetworkClass::None => None,
        })
        .flatten()
        .collect();
    for (index, d) in manifest.destinations.iter().enumerate() {
        if !used.contains(d.name.as_str()) {
            continue;
        }
        let port = https_port(&d.url).ok_or_else(|| FirewallError::BadDestination {
            index,
            why: format!("`{}` is not an https URL with a valid port", d.url),
        })?;
        let addrs = binding
            .addresses
            .get(&d.name)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| FirewallError::Unresolved {
                index,
                name: d.name.clone(),
            })?;
        let mut set = BTreeSet::new();
        for &addr in addrs {
            if let Some(why) = special::classify(addr) {
                return Err(FirewallError::SpecialAddress {
                    index,
                    name: d.name.clone(),
                    addr,
                    why: why.to_string(),
                });
            }
            set.insert((addr, port));
        }
        admitted.insert(d.name.as_str(), set);
    }

    let mut s = format!(
        "#!/usr/sbin/nft -f\n\
         # Generated by Scribe from ApplicationDeploymentManifest@1 ({}). Do not edit:\n\
         # `reach scribe check` reports any drift between this file and the manifest.\n\
         #\n\
         # The body's egress law: special-purpose and metadata addresses are dropped except the\n\
         # exact local roads; egress roles reach only their admitted destinations; roles without\n\
         # egress reach nothing. Loading this file replaces the table whole.\n\
         table inet {TABLE}\n\
         delete table inet {TABLE}\n\
         table inet {TABLE} {{\n",
        manifest.profile
    );
    for (set, v6) in [("special_v4", false), ("special_v6", true)] {
        let ty = if v6 { "ipv6_addr" } else { "ipv4_addr" };
        s.push_str(&format!(
            "\tset {set} {{\n\t\ttype {ty}\n\t\tflags interval\n\t\telements = {{\n"
        ));
        let prefixes = merged_special(v6);
        for (k, p) in prefixes.iter().enumerate() {
            let sep = if k + 1 == prefixes.len() { "" } else { "," };
            s.push_str(&format!("\t\t\t{p}{sep}\n"));
        }
        s.push_str("\t\t}\n\t}\n\n");
    }
    s.push_str("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n");
    for role in &manifest.roles {
        let id = &binding.identities[role.name.as_str()];
        s.push_str(&format!(
            "\t\t{} jump {}\n",
            id.matcher(),
            chain_name(role.name.as_str())
        ));
    }
    s.push_str("\t}\n");
    for role in &manifest.roles {
        let name = role.name.as_str();
        s.push_str(&format!("\n\tchain {} {{\n", chain_name(name)));
        for (_, road) in binding.local_roads.iter().filter(|(r, _)| r == name) {
            s.push_str(&format!(
                "\t\t{} meta l4proto {{ tcp, udp }} th dport {} accept comment \"local road\"\n",
                addr_match(road.ip()),
                road.port()
            ));
        }
        s.push_str("\t\tip daddr @special_v4 counter drop comment \"special-purpose\"\n");
        s.push_str("\t\tip6 daddr @special_v6 counter drop comment \"special-purpose\"\n");
        if let NetworkClass::Egress(ds) = &role.network {
            let mut sorted: Vec<&String> = ds.iter().collect();
            sorted.sort();
            for d in sorted {
                for (addr, port) in admitted.get(d.as_str()).into_iter().flatten() {
                    s.push_str(&format!(
                        "\t\t{} tcp dport {port} accept comment \"{d}\"\n",
                        addr_match(*addr)
                    ));
                }
            }
        }
        s.push_str("\t\tcounter drop\n\t}\n");
    }
    s.push_str("}\n");
    Ok(s)
}
