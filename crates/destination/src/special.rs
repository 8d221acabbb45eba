//! The IANA IPv4 and IPv6 Special-Purpose Address Registries, plus the ranges the registries leave
//! to other documents (multicast, cloud instance metadata, the deprecated IPv4-compatible and
//! IPv4-translated blocks), and the one IPv6 block admission may admit from.
//!
//! **Architecture Invariant:** every entry here is refused as a destination address unless the
//! caller's policy names the exact socket address as a local road. There is no "globally
//! reachable" exception: an egress role has no business with AS112, AMT or anycast relays.
//!
//! **Architecture Invariant:** IPv6 admission is an allow-list: an IPv6 address is public only
//! inside [`IPV6_GLOBAL_UNICAST`] (`2000::/3`, the only block of the IANA IPv6 Address Space
//! registry allocated for global unicast) *and* outside every entry of the table. Unassigned
//! space (`1::1`, `4000::1`, `e000::1`, `fe00::1`, `::1:0:0:1`…) is refused by construction
//! ([`judge`]), not because an entry names it; a block IANA assigns later is refused until this
//! crate admits it on purpose.
//!
//! The IPv4 side stays a deny table because there it *is* the allow-list: the whole IPv4
//! space is allocated (the IANA IPv4 Address Space registry has no unallocated unicast /8 since
//! 2011), and everything that is not public unicast — private, shared, loopback, link-local,
//! documentation, benchmarking, multicast, the reserved 240/4, broadcast — is an entry here. So
//! "0.0.0.0/0 minus the table" and "public IPv4" are the same set, and a second list would only
//! be a second copy to keep in step. IPv6 has 7/8 of its space unassigned, which a deny table
//! could only enumerate.
//!
//! IPv6 forms that carry an IPv4 address are judged by their outer block, and the embedded
//! address is reported ([`embedded_ipv4`]): IPv4-mapped, IPv4-compatible, IPv4-translated
//! (SIIT), NAT64 (both well-known prefixes), 6to4 and Teredo. Each of those blocks is an entry,
//! so all of them are refused whatever they embed. Forms that embed an IPv4 address under an
//! ordinary global prefix are deliberately *not* read: ISATAP interface identifiers
//! (`…:0:5efe:a.b.c.d`, RFC 5214), 6rd (RFC 5969) and MAP-E/MAP-T (RFC 7597, RFC 7599) are
//! routed by their global prefix to the site that owns it, whose border relay alone turns the
//! embedded bits into an IPv4 destination inside *that* site; nothing on this host reads them
//! (an egress role's network has no ISATAP, 6rd or MAP interface), and the bits are
//! indistinguishable from an ordinary interface identifier. Network-specific NAT64 prefixes
//! (RFC 6052 §2.2 under an operator's own prefix) are likewise invisible in the address; the
//! controlled resolver (no DNS64 server is named) is what keeps them out.
//!
//! The table is data, rendered in full by the `special_purpose_table` expect test, so a reviewer
//! can compare it line by line with the registries.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address prefix (network address and prefix length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    /// An IPv4 prefix.
    V4(Ipv4Addr, u8),
    /// An IPv6 prefix.
    V6(Ipv6Addr, u8),
}

impl Prefix {
    /// Whether `ip` lies inside this prefix (an IPv4 address never lies in an IPv6 prefix).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (Prefix::V4(net, len), IpAddr::V4(ip)) => {
                let mask = mask32(*len);
                u32::from(ip) & mask == u32::from(*net) & mask
            }
            (Prefix::V6(net, len), IpAddr::V6(ip)) => {
                let mask = mask128(*len);
                u128::from(ip) & mask == u128::from(*net) & mask
            }
            _ => false,
        }
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        match self {
            Prefix::V4(_, len) | Prefix::V6(_, len) => *len,
        }
    }

    /// Always false: a prefix of length zero would cover a whole address family, and the table
    /// has none. Present because clippy pairs `len` with `is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The first address of the prefix.
    pub fn first(&self) -> IpAddr {
        match self {
            Prefix::V4(net, len) => IpAddr::V4(Ipv4Addr::from(u32::from(*net) & mask32(*len))),
            Prefix::V6(net, len) => IpAddr::V6(Ipv6Addr::from(u128::from(*net) & mask128(*len))),
        }
    }

    /// The last address of the prefix.
    pub fn last(&self) -> IpAddr {
        match self {
            Prefix::V4(net, len) => IpAddr::V4(Ipv4Addr::from(u32::from(*net) | !mask32(*len))),
            Prefix::V6(net, len) => IpAddr::V6(Ipv6Addr::from(u128::from(*net) | !mask128(*len))),
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefix::V4(net, len) => write!(f, "{net}/{len}"),
            Prefix::V6(net, len) => write!(f, "{net}/{len}"),
        }
    }
}

fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// Where an entry of the table comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The IANA IPv4 Special-Purpose Address Registry.
    IanaIpv4,
    /// The IANA IPv6 Special-Purpose Address Registry.
    IanaIpv6,
    /// A multicast block (its own IANA registry).
    Multicast,
    /// A cloud instance-metadata address (a provider convention, not an RFC).
    Metadata,
    /// A deprecated block the registries no longer list but hosts may still route.
    Deprecated,
}

/// One entry of the special-purpose table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialPurpose {
    /// The block.
    pub prefix: Prefix,
    /// The registry's name for the block.
    pub name: &'static str,
    /// The defining document(s).
    pub rfc: &'static str,
    /// Where the entry comes from.
    pub source: Source,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Prefix {
    Prefix::V4(Ipv4Addr::new(a, b, c, d), len)
}

#[allow(clippy::too_many_arguments)]
const fn v6(s: [u16; 8], len: u8) -> Prefix {
    Prefix::V6(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

const fn e4(prefix: Prefix, name: &'static str, rfc: &'static str) -> SpecialPurpose {
    SpecialPurpose {
        prefix,
        name,
        rfc,
        source: Source::IanaIpv4,
    }
}

const fn e6(prefix: Prefix, name: &'static str, rfc: &'static str) -> SpecialPurpose {
    SpecialPurpose {
        prefix,
        name,
        rfc,
        source: Source::IanaIpv6,
    }
}

/// The full table, in registry order (IPv4 registry, IPv6 registry, then the extra blocks).
pub static SPECIAL_PURPOSE: &[SpecialPurpose] = &[
    // IANA IPv4 Special-Purpose Address Registry.
    e4(v4(0, 0, 0, 0, 8), "\"This network\"", "RFC 791 §3.2"),
    e4(
        v4(0, 0, 0, 0, 32),
        "\"This host on this network\"",
        "RFC 1122 §3.2.1.3",
    ),
    e4(v4(10, 0, 0, 0, 8), "Private-Use", "RFC 1918"),
    e4(v4(100, 64, 0, 0, 10), "Shared Address Space", "RFC 6598"),
    e4(v4(127, 0, 0, 0, 8), "Loopback", "RFC 1122 §3.2.1.3"),
    e4(v4(169, 254, 0, 0, 16), "Link Local", "RFC 3927"),
    e4(v4(172, 16, 0, 0, 12), "Private-Use", "RFC 1918"),
    e4(
        v4(192, 0, 0, 0, 24),
        "IETF Protocol Assignments",
        "RFC 6890 §2.1",
    ),
    e4(
        v4(192, 0, 0, 0, 29),
        "IPv4 Service Continuity Prefix",
        "RFC 7335",
    ),
    e4(v4(192, 0, 0, 8, 32), "IPv4 dummy address", "RFC 7600"),
    e4(
        v4(192, 0, 0, 9, 32),
        "Port Control Protocol Anycast",
        "RFC 7723",
    ),
    e4(
        v4(192, 0, 0, 10, 32),
        "Traversal Using Relays around NAT Anycast",
        "RFC 8155",
    ),
    e4(
        v4(192, 0, 0, 170, 32),
        "NAT64/DNS64 Discovery",
        "RFC 8880, RFC 7050 §2.2",
    ),
    e4(
        v4(192, 0, 0, 171, 32),
        "NAT64/DNS64 Discovery",
        "RFC 8880, RFC 7050 §2.2",
    ),
    e4(
        v4(192, 0, 2, 0, 24),
        "Documentation (TEST-NET-1)",
        "RFC 5737",
    ),
    e4(v4(192, 31, 196, 0, 24), "AS112-v4", "RFC 7535"),
    e4(v4(192, 52, 193, 0, 24), "AMT", "RFC 7450"),
    e4(
        v4(192, 88, 99, 0, 24),
        "Deprecated (6to4 Relay Anycast)",
        "RFC 7526",
    ),
    e4(
        v4(192, 88, 99, 2, 32),
        "6a44-relay anycast address",
        "RFC 6751",
    ),
    e4(v4(192, 168, 0, 0, 16), "Private-Use", "RFC 1918"),
    e4(
        v4(192, 175, 48, 0, 24),
        "Direct Delegation AS112 Service",
        "RFC 7534",
    ),
    e4(v4(198, 18, 0, 0, 15), "Benchmarking", "RFC 2544"),
    e4(
        v4(198, 51, 100, 0, 24),
        "Documentation (TEST-NET-2)",
        "RFC 5737",
    ),
    e4(
        v4(203, 0, 113, 0, 24),
        "Documentation (TEST-NET-3)",
        "RFC 5737",
    ),
    e4(v4(240, 0, 0, 0, 4), "Reserved", "RFC 1112 §4"),
    e4(
        v4(255, 255, 255, 255, 32),
        "Limited Broadcast",
        "RFC 8190, RFC 919 §7",
    ),
    // IANA IPv6 Special-Purpose Address Registry.
    e6(
        v6([0, 0, 0, 0, 0, 0, 0, 1], 128),
        "Loopback Address",
        "RFC 4291",
    ),
    e6(
        v6([0, 0, 0, 0, 0, 0, 0, 0], 128),
        "Unspecified Address",
        "RFC 4291",
    ),
    e6(
        v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
        "IPv4-mapped Address",
        "RFC 4291",
    ),
    e6(
        v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
        "IPv4-IPv6 Translat.",
        "RFC 6052",
    ),
    e6(
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "IPv4-IPv6 Translat.",
        "RFC 8215",
    ),
    e6(
        v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64),
        "Discard-Only Address Block",
        "RFC 6666",
    ),
    e6(
        v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64),
        "Dummy IPv6 Prefix",
        "RFC 9780",
    ),
    e6(
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF Protocol Assignments",
        "RFC 2928",
    ),
    e6(
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),
        "TEREDO",
        "RFC 4380, RFC 8190",
    ),
    e6(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128),
        "Port Control Protocol Anycast",
        "RFC 7723",
    ),
    e6(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128),
        "Traversal Using Relays around NAT Anycast",
        "RFC 8155",
    ),
    e6(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128),
        "DNS-SD Service Registration Protocol Anycast",
        "RFC 9665",
    ),
    e6(
        v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48),
        "Benchmarking",
        "RFC 5180, RFC Errata 1752",
    ),
    e6(v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32), "AMT", "RFC 7450"),
    e6(
        v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48),
        "AS112-v6",
        "RFC 7535",
    ),
    e6(
        v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28),
        "Deprecated (previously ORCHID)",
        "RFC 4843",
    ),
    e6(
        v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28),
        "ORCHIDv2",
        "RFC 7343",
    ),
    e6(
        v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28),
        "Drone Remote ID Protocol Entity Tags (DETs) Prefix",
        "RFC 9374",
    ),
    e6(
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        "Documentation",
        "RFC 3849",
    ),
    e6(v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "6to4", "RFC 3056"),
    e6(
        v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48),
        "Direct Delegation AS112 Service",
        "RFC 7534",
    ),
    e6(
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        "Documentation",
        "RFC 9637",
    ),
    e6(
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        "Segment Routing (SRv6) SIDs",
        "RFC 9602",
    ),
    e6(
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        "Unique-Local",
        "RFC 4193, RFC 8190",
    ),
    e6(
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        "Link-Local Unicast",
        "RFC 4291",
    ),
    // Blocks outside the special-purpose registries that are never a public destination.
    SpecialPurpose {
        prefix: v4(224, 0, 0, 0, 4),
        name: "Multicast",
        rfc: "RFC 5771",
        source: Source::Multicast,
    },
    SpecialPurpose {
        prefix: v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),
        name: "Multicast",
        rfc: "RFC 4291 §2.7",
        source: Source::Multicast,
    },
    SpecialPurpose {
        prefix: v4(169, 254, 169, 254, 32),
        name: "Instance metadata service",
        rfc: "cloud provider convention",
        source: Source::Metadata,
    },
    SpecialPurpose {
        prefix: v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128),
        name: "Instance metadata service",
        rfc: "cloud provider convention",
        source: Source::Metadata,
    },
    SpecialPurpose {
        prefix: v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        name: "IPv4-compatible Address (deprecated)",
        rfc: "RFC 4291 §2.5.5.1",
        source: Source::Deprecated,
    },
    SpecialPurpose {
        prefix: v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        name: "IPv4-translated Address (SIIT)",
        rfc: "RFC 2765 §2.1, RFC 6145",
        source: Source::Deprecated,
    },
    SpecialPurpose {
        prefix: v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        name: "Site-Local (deprecated)",
        rfc: "RFC 3879",
        source: Source::Deprecated,
    },
];

/// How an IPv6 address carries an IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2).
    Mapped,
    /// `::a.b.c.d` (RFC 4291 §2.5.5.1, deprecated).
    Compatible,
    /// `::ffff:0:a.b.c.d`, the IPv4-translated form of stateless IP/ICMP translation (SIIT,
    /// RFC 2765 §2.1; RFC 6145 dropped the form, but a translator may still route it).
    Translated,
    /// `64:ff9b::a.b.c.d` or `64:ff9b:1::/48` (RFC 6052, RFC 8215).
    Nat64,
    /// `2002:aabb:ccdd::/48` (RFC 3056).
    SixToFour,
    /// Teredo client address, stored inverted in the last 32 bits (RFC 4380 §4).
    Teredo,
}

/// Why an address is special: the most specific table entry and, for IPv4-embedding IPv6
/// forms, the embedded IPv4 address and its own classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialUse {
    /// The most specific entry that contains the address.
    pub entry: &'static SpecialPurpose,
    /// The embedded IPv4 address, where the IPv6 form carries one.
    pub embedded: Option<EmbeddedIpv4>,
}

/// An IPv4 address carried inside an IPv6 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddedIpv4 {
    /// The carrying form.
    pub form: Embedding,
    /// The carried address.
    pub addr: Ipv4Addr,
    /// The carried address's own most specific entry, if any.
    pub entry: Option<&'static SpecialPurpose>,
}

impl fmt::Display for SpecialUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.entry.prefix, self.entry.name, self.entry.rfc
        )?;
        if let Some(embedded) = &self.embedded {
            write!(f, ", embeds {}", embedded.addr)?;
            if let Some(entry) = embedded.entry {
                write!(f, " in {} {} ({})", entry.prefix, entry.name, entry.rfc)?;
            }
        }
        Ok(())
    }
}

/// The most specific table entry containing `ip`, without looking inside IPv6 forms.
pub fn lookup(ip: IpAddr) -> Option<&'static SpecialPurpose> {
    SPECIAL_PURPOSE
        .iter()
        .filter(|entry| entry.prefix.contains(ip))
        .max_by_key(|entry| entry.prefix.len())
}

/// The IPv4 address an IPv6 address embeds, if it has one of the known embedding forms.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from(bits as u32);
    let seg = ip.segments();
    let oct = ip.octets();
    if bits >> 32 == 0xffff {
        Some((Embedding::Mapped, low32))
    } else if bits >> 32 == 0 && bits > 1 {
        Some((Embedding::Compatible, low32))
    } else if bits >> 32 == 0xffff_0000 {
        Some((Embedding::Translated, low32))
    } else if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some((Embedding::Nat64, low32))
    } else if seg[..3] == [0x64, 0xff9b, 1] {
        // RFC 6052 §2.2, /48 layout: bits 48..64 and 72..88 (the u octet, bits 64..72, skipped).
        Some((
            Embedding::Nat64,
            Ipv4Addr::new(oct[6], oct[7], oct[9], oct[10]),
        ))
    } else if seg[0] == 0x2002 {
        Some((
            Embedding::SixToFour,
            Ipv4Addr::new(oct[2], oct[3], oct[4], oct[5]),
        ))
    } else if seg[0] == 0x2001 && seg[1] == 0 {
        Some((Embedding::Teredo, Ipv4Addr::from(!(bits as u32))))
    } else {
        None
    }
}

/// Classify `ip` against the table, including the IPv4 address an IPv6 form embeds. `None`
/// means the address is in no special-purpose block.
pub fn classify(ip: IpAddr) -> Option<SpecialUse> {
    let embedded = match ip {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => embedded_ipv4(v6).map(|(form, addr)| EmbeddedIpv4 {
            form,
            addr,
            entry: lookup(IpAddr::V4(addr)),
        }),
    };
    match (lookup(ip), embedded) {
        (Some(entry), embedded) => Some(SpecialUse { entry, embedded }),
        // Every embedding form has its own entry, so this arm is reached only if the table
        // and `embedded_ipv4` disagree; refuse on the embedded address rather than admit.
        (None, Some(embedded)) => embedded.entry.map(|entry| SpecialUse {
            entry,
            embedded: Some(embedded),
        }),
        (None, None) => None,
    }
}

/// The only IPv6 block admission admits from: global unicast (IANA IPv6 Address Space registry,
/// RFC 4291 §2.4, RFC 3587), before the table's entries inside it are taken away.
pub const IPV6_GLOBAL_UNICAST: Prefix = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// Why an address is not a public destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The address lies in a table entry (checked first, so the most specific reason wins).
    Special(SpecialUse),
    /// An IPv6 address in no entry and outside [`IPV6_GLOBAL_UNICAST`]: unassigned or
    /// reserved space, refused by the allow-list.
    NotGlobalUnicast,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Special(special) => special.fmt(f),
            Refusal::NotGlobalUnicast => write!(
                f,
                "outside {IPV6_GLOBAL_UNICAST} global unicast (IANA IPv6 Address Space)"
            ),
        }
    }
}

/// The one admission rule for an address: `None` means public. IPv4: not in the table. IPv6:
/// inside [`IPV6_GLOBAL_UNICAST`] and not in the table.
pub fn judge(ip: IpAddr) -> Option<Refusal> {
    if let Some(special) = classify(ip) {
        return Some(Refusal::Special(special));
    }
    match ip {
        IpAddr::V4(_) => None,
        IpAddr::V6(_) if IPV6_GLOBAL_UNICAST.contains(ip) => None,
        IpAddr::V6(_) => Some(Refusal::NotGlobalUnicast),
    }
}
