//! Property (issue 33): no address admission admits lies outside IPv6 `2000::/3` or the public
//! IPv4 space. "Public" is written out here a second time, independently of the crate's table
//! (from the IANA registries and std's own predicates), so a typo in either copy shows up as a
//! counterexample. Addresses are drawn uniformly, inside every table entry, around every entry's
//! edges, and in every IPv4-embedding form with a special IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use reach_destination::special::{IPV6_GLOBAL_UNICAST, SPECIAL_PURPOSE, embedded_ipv4, judge};
use reach_destination::{Admission, AdmissionPolicy, Destination, Host, Purpose, StaticResolver};

/// Non-public IPv4 blocks, transcribed from the IANA IPv4 Special-Purpose Address Registry and
/// RFC 5771 (multicast), RFC 1112 (240/4).
const NOT_PUBLIC_V4: &[(u32, u8)] = &[
    (0x0000_0000, 8),  // 0.0.0.0/8
    (0x0a00_0000, 8),  // 10.0.0.0/8
    (0x6440_0000, 10), // 100.64.0.0/10
    (0x7f00_0000, 8),  // 127.0.0.0/8
    (0xa9fe_0000, 16), // 169.254.0.0/16
    (0xac10_0000, 12), // 172.16.0.0/12
    (0xc000_0000, 24), // 192.0.0.0/24
    (0xc000_0200, 24), // 192.0.2.0/24
    (0xc01f_c400, 24), // 192.31.196.0/24
    (0xc034_c100, 24), // 192.52.193.0/24
    (0xc058_6300, 24), // 192.88.99.0/24
    (0xc0a8_0000, 16), // 192.168.0.0/16
    (0xc0af_3000, 24), // 192.175.48.0/24
    (0xc612_0000, 15), // 198.18.0.0/15
    (0xc633_6400, 24), // 198.51.100.0/24
    (0xcb00_7100, 24), // 203.0.113.0/24
    (0xe000_0000, 4),  // 224.0.0.0/4
    (0xf000_0000, 4),  // 240.0.0.0/4 (and 255.255.255.255)
];

/// Special-purpose blocks inside 2000::/3, from the IANA IPv6 Special-Purpose Address Registry.
const NOT_PUBLIC_V6_IN_2000: &[(u128, u8)] = &[
    (0x2001_0000 << 96, 23),      // 2001::/23
    (0x2001_0db8 << 96, 32),      // 2001:db8::/32
    (0x2002 << 112, 16),          // 2002::/16
    (0x2620_004f_8000 << 80, 48), // 2620:4f:8000::/48
    (0x3fff << 112, 20),          // 3fff::/20
];

fn in_v4(ip: Ipv4Addr, (net, len): (u32, u8)) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == net & mask
}

fn in_v6(ip: Ipv6Addr, (net, len): (u128, u8)) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    u128::from(ip) & mask == net & mask
}

/// The independent definition of a public destination address.
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let std_says_special = v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified();
            !std_says_special && !NOT_PUBLIC_V4.iter().any(|block| in_v4(v4, *block))
        }
        IpAddr::V6(v6) => {
            u128::from(v6) >> 125 == 0b001
                && !v6.is_multicast()
                && !v6.is_loopback()
                && !v6.is_unspecified()
                && !NOT_PUBLIC_V6_IN_2000.iter().any(|block| in_v6(v6, *block))
        }
    }
}

/// Uniform addresses, addresses inside or at the edges of each table entry and of 2000::/3, and
/// IPv4-embedding forms carrying a non-public IPv4 address.
fn address() -> impl Strategy<Value = IpAddr> {
    let uniform_v4 = any::<u32>().prop_map(|n| IpAddr::V4(Ipv4Addr::from(n)));
    let uniform_v6 = any::<u128>().prop_map(|n| IpAddr::V6(Ipv6Addr::from(n)));
    let in_entry = (0..SPECIAL_PURPOSE.len(), any::<u128>()).prop_map(|(i, noise)| {
        let prefix = SPECIAL_PURPOSE[i].prefix;
        match (prefix.first(), prefix.last()) {
            (IpAddr::V4(first), IpAddr::V4(last)) => {
                let span = u32::from(last) - u32::from(first);
                let offset = (noise as u32)
                    .checked_rem(span.wrapping_add(1))
                    .unwrap_or(noise as u32);
                IpAddr::V4(Ipv4Addr::from(u32::from(first).wrapping_add(offset)))
            }
            (IpAddr::V6(first), IpAddr::V6(last)) => {
                let span = u128::from(last) - u128::from(first);
                let offset = noise.checked_rem(span.wrapping_add(1)).unwrap_or(noise);
                IpAddr::V6(Ipv6Addr::from(u128::from(first).wrapping_add(offset)))
            }
            _ => unreachable!("a prefix's ends are one family"),
        }
    });
    let edge =
        (0..SPECIAL_PURPOSE.len() + 1, any::<bool>(), -4i64..=4).prop_map(|(i, at_last, step)| {
            let prefix = SPECIAL_PURPOSE
                .get(i)
                .map_or(IPV6_GLOBAL_UNICAST, |e| e.prefix);
            let end = if at_last {
                prefix.last()
            } else {
                prefix.first()
            };
            match end {
                IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(
                    u32::from(a).wrapping_add_signed(step as i32),
                )),
                IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(
                    u128::from(a).wrapping_add_signed(i128::from(step)),
                )),
            }
        });
    let special_v4 = (0..NOT_PUBLIC_V4.len(), any::<u32>()).prop_map(|(i, noise)| {
        let (net, len) = NOT_PUBLIC_V4[i];
        let host_bits = if len == 0 {
            u32::MAX
        } else {
            !(u32::MAX << (32 - len))
        };
        net | (noise & host_bits)
    });
    let embedded = (special_v4, 0..6u8, any::<u64>()).prop_map(|(v4, form, noise)| {
        let v4 = u128::from(v4);
        let bits = match form {
            0 => 0xffff << 32 | v4,                                             // mapped
            1 => v4,                                                            // compatible
            2 => 0xffff_0000 << 32 | v4,                                        // translated
            3 => 0x0064_ff9b << 96 | v4,                                        // NAT64 /96
            4 => 0x2002 << 112 | v4 << 80 | u128::from(noise),                  // 6to4
            _ => 0x2001 << 112 | u128::from(noise) << 32 | (!v4 & 0xffff_ffff), // Teredo
        };
        IpAddr::V6(Ipv6Addr::from(bits))
    });
    prop_oneof![uniform_v4, uniform_v6, in_entry, edge, embedded]
}

/// Whether admission admits `ip` as a literal and as the only DNS answer of a name.
fn admitted(runtime: &tokio::runtime::Runtime, ip: IpAddr) -> (bool, bool) {
    let purpose = Purpose::new("test").unwrap();
    let admission = Admission::new(
        AdmissionPolicy::default(),
        StaticResolver::new().with("answer.example.com", [ip]),
    );
    let literal = Destination::parse(&format!("https://{}/", Host::Ip(ip)), purpose.clone())
        .expect("the crate's own spelling of an address parses");
    let name = Destination::parse("https://answer.example.com/", purpose).unwrap();
    runtime.block_on(async {
        (
            admission.admit(literal).await.is_ok(),
            admission.admit(name).await.is_ok(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn nothing_outside_the_public_space_is_admitted(ip in address()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (literal, answer) = admitted(&runtime, ip);
        prop_assert_eq!(literal, answer, "{} literal vs answer", ip);
        prop_assert_eq!(literal, judge(ip).is_none(), "{} admission vs judge", ip);
        // Both copies of "public" agree both ways; the safety half is admitted => public.
        prop_assert_eq!(literal, public(ip), "{} admitted {} vs public {}", ip, literal, public(ip));
        if let (true, IpAddr::V6(v6)) = (literal, ip) {
            prop_assert!(IPV6_GLOBAL_UNICAST.contains(ip), "{} outside 2000::/3", ip);
            prop_assert!(embedded_ipv4(v6).is_none(), "{} embeds IPv4", ip);
        }
    }
}

/// The converse, on the hand-picked public addresses: the independent definition and the
/// crate agree that they are public, so the property above is not vacuous.
#[test]
fn public_addresses_are_admitted() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for ip in [
        "93.184.216.34",
        "8.8.8.8",
        "223.255.255.255",
        "2606:4700::1111",
        "2000::",
        "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    ] {
        let ip: IpAddr = ip.parse().unwrap();
        assert!(public(ip), "{ip}");
        assert_eq!(admitted(&runtime, ip), (true, true), "{ip}");
    }
}
