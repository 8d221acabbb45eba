//! The forms table (issue 33): the address and URL forms an SSRF review throws at destination
//! admission, each with the code every entry point gives it. Regenerate with
//! `UPDATE_EXPECT=1 cargo test -p reach-destination --test forms` and read the diff.
//!
//! Entry points, one column each:
//! - `literal`: [`Destination::parse`] then [`Admission::admit`] (the library);
//! - `answer`: the address as the only DNS answer of a name (address table only);
//! - `redirect`: the form as a `Location` from an admitted `https://origin.example.com/base/`
//!   under [`RedirectPolicy::Readmit`], then admission again;
//! - `corpus`: the corpus source path as corpus-builder runs it (`reach_corpus::admit_url`, its
//!   `url::Url` normaliser, then parse and admission of the normalised text); `<- url` shows
//!   what the normaliser handed over when it rewrote the input.
//!
//! `ok` is admitted; every other cell is a code (`destination/` left off); an address row shows
//! one cell where all its entry points agree. Nothing here dials:
//! admission never does, and the resolver is a fixed map.

use std::net::{IpAddr, Ipv4Addr};

use expect_test::expect;
use reach_corpus::admit_url;
use reach_destination::special::{Refusal, SPECIAL_PURPOSE, judge};
use reach_destination::{
    Admission, AdmissionPolicy, AdmittedDestination, Destination, DestinationError, Host,
    MAX_REDIRECT_HOPS, Purpose, RedirectPolicy, StaticResolver,
};

const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));

fn purpose() -> Purpose {
    Purpose::new("corpus-acquisition").unwrap()
}

fn policy() -> AdmissionPolicy {
    let mut policy = AdmissionPolicy::default();
    policy.ports.insert(8443);
    policy.redirects = RedirectPolicy::Readmit {
        max_hops: MAX_REDIRECT_HOPS,
    };
    policy
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

/// The names the URL table resolves; any other name does not exist.
fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("origin.example.com", [PUBLIC])
        .with("api.example.com", [PUBLIC])
        .with("xn--bcher-kva.example", [PUBLIC])
        .with("v6.example.com", ips(&["2606:4700::1111"]))
        .with(
            "dual.example.com",
            ips(&["93.184.216.34", "2606:4700::1111"]),
        )
        .with("localhost", ips(&["127.0.0.1", "::1"]))
        .with("loopback.example.com", ips(&["127.0.0.1"]))
        .with("metadata.example.com", ips(&["169.254.169.254"]))
        .with("private.example.com", ips(&["10.0.0.1"]))
        .with("mapped.example.com", ips(&["::ffff:127.0.0.1"]))
        .with("translated.example.com", ips(&["::ffff:0:a9fe:a9fe"]))
        .with("nat64.example.com", ips(&["64:ff9b::a9fe:a9fe"]))
        .with("unassigned.example.com", ips(&["4000::1"]))
        .with("mixed.example.com", ips(&["93.184.216.34", "::1"]))
        .with(
            "mixed-unassigned.example.com",
            ips(&["2606:4700::1111", "e000::1"]),
        )
        .with("empty.example.com", [])
}

fn short(code: &str) -> String {
    code.strip_prefix("destination/").unwrap_or(code).to_owned()
}

async fn admit_code(
    admission: &Admission<StaticResolver>,
    parsed: Result<Destination, DestinationError>,
) -> String {
    match parsed {
        Err(e) => short(e.code()),
        Ok(d) => match admission.admit(d).await {
            Ok(_) => "ok".to_owned(),
            Err(e) => short(e.code()),
        },
    }
}

/// The three entry points every form goes through.
struct Gate {
    admission: Admission<StaticResolver>,
    base: AdmittedDestination,
}

impl Gate {
    async fn new(resolver: StaticResolver) -> Gate {
        let admission = Admission::new(policy(), resolver.with("origin.example.com", [PUBLIC]));
        let base = admission
            .admit(Destination::parse("https://origin.example.com/base/", purpose()).unwrap())
            .await
            .expect("the redirect base is admitted");
        Gate { admission, base }
    }

    async fn literal(&self, input: &str) -> String {
        admit_code(&self.admission, Destination::parse(input, purpose())).await
    }

    async fn redirect(&self, location: &str) -> String {
        let next = self.base.redirect(location, self.admission.policy());
        admit_code(&self.admission, next).await
    }

    async fn corpus(&self, input: &str) -> String {
        match admit_url(input) {
            Err(refusal) => refusal.code().to_owned(),
            Ok(url) => {
                let code =
                    admit_code(&self.admission, Destination::parse(url.as_str(), purpose())).await;
                if url.as_str() == input {
                    code
                } else {
                    format!("{code} <- {url}")
                }
            }
        }
    }
}

/// Which entry refused an address, short: `prefix name[, embeds a.b.c.d (prefix name)]`.
fn why(ip: IpAddr) -> String {
    match judge(ip) {
        None => String::new(),
        Some(Refusal::NotGlobalUnicast) => "outside 2000::/3".to_owned(),
        Some(Refusal::Special(special)) => {
            let mut out = format!("{} {}", special.entry.prefix, special.entry.name);
            if let Some(embedded) = special.embedded {
                out.push_str(&format!(", embeds {}", embedded.addr));
                if let Some(entry) = embedded.entry {
                    out.push_str(&format!(" ({} {})", entry.prefix, entry.name));
                }
            }
            out
        }
    }
}

/// Addresses an SSRF list tries, by family and form. The first and last address of every
/// table entry follow, generated.
const ADDRESSES: &[&str] = &[
    // Public IPv4, including the neighbours of special blocks.
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "9.9.9.9",
    "208.67.222.222",
    "1.0.0.0",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.0",
    "192.0.3.0",
    "192.31.195.255",
    "192.52.194.0",
    "192.88.98.255",
    "192.167.255.255",
    "192.169.0.0",
    "192.175.49.0",
    "198.17.255.255",
    "198.20.0.0",
    "198.51.99.255",
    "203.0.112.255",
    "203.0.114.0",
    "223.255.255.255",
    // Special IPv4.
    "0.0.0.1",
    "127.0.0.1",
    "127.1.2.3",
    "127.255.255.254",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "169.254.170.2",
    "169.254.0.1",
    "100.64.0.1",
    "100.100.100.200",
    "192.0.0.1",
    "192.0.0.8",
    "192.0.0.9",
    "192.0.0.10",
    "192.0.0.170",
    "192.0.2.1",
    "192.31.196.1",
    "192.52.193.1",
    "192.88.99.1",
    "192.175.48.1",
    "198.18.0.1",
    "198.51.100.1",
    "203.0.113.1",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.254",
    // Public IPv6, including the neighbours of special blocks inside 2000::/3.
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "2620:fe::fe",
    "2a00:1450:4001::1",
    "2000::",
    "2000::1",
    "2001:200::1",
    "2001:db7:ffff::1",
    "2001:db9::1",
    "2003::1",
    "2620:4f:7fff::1",
    "2620:4f:8001::1",
    "3ffe::1",
    "3fff:1000::",
    "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    // ISATAP interface identifiers under a global prefix are routed by the prefix and not
    // read (see `special`'s module docs): admitted.
    "2606:4700::5efe:7f00:1",
    "2606:4700::200:5efe:a9fe:a9fe",
    "fe80::5efe:a00:1",
    // IPv4-embedding forms, each with a loopback, metadata, private and public address.
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::ffff:8.8.8.8",
    "::127.0.0.1",
    "::169.254.169.254",
    "::10.0.0.1",
    "::8.8.8.8",
    "::2",
    "::ffff:0:127.0.0.1",
    "::ffff:0:169.254.169.254",
    "::ffff:0:10.0.0.1",
    "::ffff:0:8.8.8.8",
    "64:ff9b::127.0.0.1",
    "64:ff9b::169.254.169.254",
    "64:ff9b::10.0.0.1",
    "64:ff9b::8.8.8.8",
    "64:ff9b:1:7f00:0:100::",
    "64:ff9b:1:a9fe:a9:fe00::",
    "64:ff9b:1::1",
    "2002:7f00:1::1",
    "2002:a9fe:a9fe::1",
    "2002:a00:1::1",
    "2002:808:808::1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",
    "2001:0:4136:e378:8000:63bf:5601:5601",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
    "2001::1",
    // Other special IPv6.
    "::1",
    "fe80::1",
    "fe80::a9fe:a9fe",
    "febf::1",
    "fec0::1",
    "fc00::1",
    "fd00::1",
    "fd00:ec2::254",
    "fd00:ec2::23",
    "ff02::1",
    "ff05::1:3",
    "ff0e::1",
    "100::1",
    "100:0:0:1::1",
    "2001:1::1",
    "2001:1::2",
    "2001:1::3",
    "2001:1::4",
    "2001:2::1",
    "2001:3::1",
    "2001:4:112::1",
    "2001:10::1",
    "2001:20::1",
    "2001:30::1",
    "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
    "2001:db8::1",
    "2001:db8:ffff::1",
    "2620:4f:8000::1",
    "3fff::1",
    "3fff:fff::1",
    "5f00::1",
    // Unassigned IPv6: outside 2000::/3 and in no entry.
    "1::",
    "1::1",
    "::1:0:0:1",
    "::1:0:0:0:1",
    "::1:7f00:1",
    "::fffe:7f00:1",
    "::ffff:1:0:0",
    "0:0:1::1",
    "100:0:0:2::1",
    "200::1",
    "400::1",
    "800::1",
    "1000::1",
    "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "4000::",
    "4000::1",
    "5eff::1",
    "5f01::1",
    "6000::1",
    "7fff::1",
    "8000::1",
    "a000::1",
    "c000::1",
    "e000::1",
    "f000::1",
    "f800::1",
    "fbff::1",
    "fe00::1",
    "fe7f::1",
];

#[tokio::test]
async fn address_forms() {
    let mut list: Vec<IpAddr> = ips(ADDRESSES);
    for entry in SPECIAL_PURPOSE {
        for ip in [entry.prefix.first(), entry.prefix.last()] {
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
    }
    let mut out = format!(
        "{} addresses: one code where literal, answer, redirect and corpus agree — refusal\n",
        list.len()
    );
    for ip in &list {
        let url = format!("https://{}/", Host::Ip(*ip));
        let gate = Gate::new(StaticResolver::new().with("answer.example.com", [*ip])).await;
        let literal = gate.literal(&url).await;
        let answer = gate.literal("https://answer.example.com/").await;
        let redirect = gate.redirect(&url).await;
        let corpus = gate.corpus(&url).await;
        // Beside an admitted answer, a refused one refuses the whole name.
        let mixed = Gate::new(StaticResolver::new().with("answer.example.com", [PUBLIC, *ip]))
            .await
            .literal("https://answer.example.com/")
            .await;
        let expected_mixed = if answer == "ok" {
            "ok"
        } else {
            "mixed-resolution"
        };
        assert_eq!(mixed, expected_mixed, "{ip} beside a public answer");
        let why = match why(*ip) {
            why if why.is_empty() => why,
            why => format!(" — {why}"),
        };
        let cells = if [&answer, &redirect, &corpus].iter().all(|c| **c == literal) {
            literal
        } else {
            format!("{literal} {answer} {redirect} {corpus}")
        };
        out.push_str(&format!("{:<40} {cells}{why}\n", ip.to_string()));
    }
    assert!(list.len() >= 200, "{} addresses", list.len());
    expect![[r#"
        250 addresses: one code where literal, answer, redirect and corpus agree — refusal
        93.184.216.34                            ok
        8.8.8.8                                  ok
        1.1.1.1                                  ok
        9.9.9.9                                  ok
        208.67.222.222                           ok
        1.0.0.0                                  ok
        9.255.255.255                            ok
        11.0.0.0                                 ok
        100.63.255.255                           ok
        100.128.0.0                              ok
        126.255.255.255                          ok
        128.0.0.0                                ok
        169.253.255.255                          ok
        169.255.0.0                              ok
        172.15.255.255                           ok
        172.32.0.0                               ok
        192.0.1.0                                ok
        192.0.3.0                                ok
        192.31.195.255                           ok
        192.52.194.0                             ok
        192.88.98.255                            ok
        192.167.255.255                          ok
        192.169.0.0                              ok
        192.175.49.0                             ok
        198.17.255.255                           ok
        198.20.0.0                               ok
        198.51.99.255                            ok
        203.0.112.255                            ok
        203.0.114.0                              ok
        223.255.255.255                          ok
        0.0.0.1                                  special-purpose-address — 0.0.0.0/8 "This network"
        127.0.0.1                                special-purpose-address — 127.0.0.0/8 Loopback
        127.1.2.3                                special-purpose-address — 127.0.0.0/8 Loopback
        127.255.255.254                          special-purpose-address — 127.0.0.0/8 Loopback
        10.0.0.1                                 special-purpose-address — 10.0.0.0/8 Private-Use
        172.16.0.1                               special-purpose-address — 172.16.0.0/12 Private-Use
        192.168.1.1                              special-purpose-address — 192.168.0.0/16 Private-Use
        169.254.169.254                          special-purpose-address — 169.254.169.254/32 Instance metadata service
        169.254.170.2                            special-purpose-address — 169.254.0.0/16 Link Local
        169.254.0.1                              special-purpose-address — 169.254.0.0/16 Link Local
        100.64.0.1                               special-purpose-address — 100.64.0.0/10 Shared Address Space
        100.100.100.200                          special-purpose-address — 100.64.0.0/10 Shared Address Space
        192.0.0.1                                special-purpose-address — 192.0.0.0/29 IPv4 Service Continuity Prefix
        192.0.0.8                                special-purpose-address — 192.0.0.8/32 IPv4 dummy address
        192.0.0.9                                special-purpose-address — 192.0.0.9/32 Port Control Protocol Anycast
        192.0.0.10                               special-purpose-address — 192.0.0.10/32 Traversal Using Relays around NAT Anycast
        192.0.0.170                              special-purpose-address — 192.0.0.170/32 NAT64/DNS64 Discovery
        192.0.2.1                                special-purpose-address — 192.0.2.0/24 Documentation (TEST-NET-1)
        192.31.196.1                             special-purpose-address — 192.31.196.0/24 AS112-v4
        192.52.193.1                             special-purpose-address — 192.52.193.0/24 AMT
        192.88.99.1                              special-purpose-address — 192.88.99.0/24 Deprecated (6to4 Relay Anycast)
        192.175.48.1                             special-purpose-address — 192.175.48.0/24 Direct Delegation AS112 Service
        198.18.0.1                               special-purpose-address — 198.18.0.0/15 Benchmarking
        198.51.100.1                             special-purpose-address — 198.51.100.0/24 Documentation (TEST-NET-2)
        203.0.113.1                              special-purpose-address — 203.0.113.0/24 Documentation (TEST-NET-3)
        224.0.0.1                                special-purpose-address — 224.0.0.0/4 Multicast
        239.255.255.250                          special-purpose-address — 224.0.0.0/4 Multicast
        240.0.0.1                                special-purpose-address — 240.0.0.0/4 Reserved
        255.255.255.254                          special-purpose-address — 240.0.0.0/4 Reserved
        2606:4700::1111                          ok
        2001:4860:4860::8888                     ok
        2620:fe::fe                              ok
        2a00:1450:4001::1                        ok
        2000::                                   ok
        2000::1                                  ok
        2001:200::1                              ok
        2001:db7:ffff::1                         ok
        2001:db9::1                              ok
        2003::1                                  ok
        2620:4f:7fff::1                          ok
        2620:4f:8001::1                          ok
        3ffe::1                                  ok
        3fff:1000::                              ok
        3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff  ok
        2606:4700::5efe:7f00:1                   ok
        2606:4700::200:5efe:a9fe:a9fe            ok
        fe80::5efe:a00:1                         special-purpose-address — fe80::/10 Link-Local Unicast
        ::ffff:127.0.0.1                         special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        ::ffff:169.254.169.254                   special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        ::ffff:10.0.0.1                          special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 10.0.0.1 (10.0.0.0/8 Private-Use)
        ::ffff:8.8.8.8                           special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 8.8.8.8
        ::7f00:1                                 special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        ::a9fe:a9fe                              special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        ::a00:1                                  special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 10.0.0.1 (10.0.0.0/8 Private-Use)
        ::808:808                                special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 8.8.8.8
        ::2                                      special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 0.0.0.2 (0.0.0.0/8 "This network")
        ::ffff:0:7f00:1                          special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        ::ffff:0:a9fe:a9fe                       special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        ::ffff:0:a00:1                           special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 10.0.0.1 (10.0.0.0/8 Private-Use)
        ::ffff:0:808:808                         special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 8.8.8.8
        64:ff9b::7f00:1                          special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        64:ff9b::a9fe:a9fe                       special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        64:ff9b::a00:1                           special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 10.0.0.1 (10.0.0.0/8 Private-Use)
        64:ff9b::808:808                         special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 8.8.8.8
        64:ff9b:1:7f00:0:100::                   special-purpose-address — 64:ff9b:1::/48 IPv4-IPv6 Translat., embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        64:ff9b:1:a9fe:a9:fe00::                 special-purpose-address — 64:ff9b:1::/48 IPv4-IPv6 Translat., embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        64:ff9b:1::1                             special-purpose-address — 64:ff9b:1::/48 IPv4-IPv6 Translat., embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        2002:7f00:1::1                           special-purpose-address — 2002::/16 6to4, embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        2002:a9fe:a9fe::1                        special-purpose-address — 2002::/16 6to4, embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        2002:a00:1::1                            special-purpose-address — 2002::/16 6to4, embeds 10.0.0.1 (10.0.0.0/8 Private-Use)
        2002:808:808::1                          special-purpose-address — 2002::/16 6to4, embeds 8.8.8.8
        2001:0:4136:e378:8000:63bf:80ff:fffe     special-purpose-address — 2001::/32 TEREDO, embeds 127.0.0.1 (127.0.0.0/8 Loopback)
        2001:0:4136:e378:8000:63bf:5601:5601     special-purpose-address — 2001::/32 TEREDO, embeds 169.254.169.254 (169.254.169.254/32 Instance metadata service)
        2001:0:4136:e378:8000:63bf:f7f7:f7f7     special-purpose-address — 2001::/32 TEREDO, embeds 8.8.8.8
        2001::1                                  special-purpose-address — 2001::/32 TEREDO, embeds 255.255.255.254 (240.0.0.0/4 Reserved)
        ::1                                      special-purpose-address — ::1/128 Loopback Address
        fe80::1                                  special-purpose-address — fe80::/10 Link-Local Unicast
        fe80::a9fe:a9fe                          special-purpose-address — fe80::/10 Link-Local Unicast
        febf::1                                  special-purpose-address — fe80::/10 Link-Local Unicast
        fec0::1                                  special-purpose-address — fec0::/10 Site-Local (deprecated)
        fc00::1                                  special-purpose-address — fc00::/7 Unique-Local
        fd00::1                                  special-purpose-address — fc00::/7 Unique-Local
        fd00:ec2::254                            special-purpose-address — fd00:ec2::254/128 Instance metadata service
        fd00:ec2::23                             special-purpose-address — fc00::/7 Unique-Local
        ff02::1                                  special-purpose-address — ff00::/8 Multicast
        ff05::1:3                                special-purpose-address — ff00::/8 Multicast
        ff0e::1                                  special-purpose-address — ff00::/8 Multicast
        100::1                                   special-purpose-address — 100::/64 Discard-Only Address Block
        100:0:0:1::1                             special-purpose-address — 100:0:0:1::/64 Dummy IPv6 Prefix
        2001:1::1                                special-purpose-address — 2001:1::1/128 Port Control Protocol Anycast
        2001:1::2                                special-purpose-address — 2001:1::2/128 Traversal Using Relays around NAT Anycast
        2001:1::3                                special-purpose-address — 2001:1::3/128 DNS-SD Service Registration Protocol Anycast
        2001:1::4                                special-purpose-address — 2001::/23 IETF Protocol Assignments
        2001:2::1                                special-purpose-address — 2001:2::/48 Benchmarking
        2001:3::1                                special-purpose-address — 2001:3::/32 AMT
        2001:4:112::1                            special-purpose-address — 2001:4:112::/48 AS112-v6
        2001:10::1                               special-purpose-address — 2001:10::/28 Deprecated (previously ORCHID)
        2001:20::1                               special-purpose-address — 2001:20::/28 ORCHIDv2
        2001:30::1                               special-purpose-address — 2001:30::/28 Drone Remote ID Protocol Entity Tags (DETs) Prefix
        2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff   special-purpose-address — 2001::/23 IETF Protocol Assignments
        2001:db8::1                              special-purpose-address — 2001:db8::/32 Documentation
        2001:db8:ffff::1                         special-purpose-address — 2001:db8::/32 Documentation
        2620:4f:8000::1                          special-purpose-address — 2620:4f:8000::/48 Direct Delegation AS112 Service
        3fff::1                                  special-purpose-address — 3fff::/20 Documentation
        3fff:fff::1                              special-purpose-address — 3fff::/20 Documentation
        5f00::1                                  special-purpose-address — 5f00::/16 Segment Routing (SRv6) SIDs
        1::                                      not-global-unicast — outside 2000::/3
        1::1                                     not-global-unicast — outside 2000::/3
        ::1:0:0:1                                not-global-unicast — outside 2000::/3
        ::1:0:0:0:1                              not-global-unicast — outside 2000::/3
        ::1:7f00:1                               not-global-unicast — outside 2000::/3
        ::fffe:7f00:1                            not-global-unicast — outside 2000::/3
        ::ffff:1:0:0                             not-global-unicast — outside 2000::/3
        0:0:1::1                                 not-global-unicast — outside 2000::/3
        100:0:0:2::1                             not-global-unicast — outside 2000::/3
        200::1                                   not-global-unicast — outside 2000::/3
        400::1                                   not-global-unicast — outside 2000::/3
        800::1                                   not-global-unicast — outside 2000::/3
        1000::1                                  not-global-unicast — outside 2000::/3
        1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff  not-global-unicast — outside 2000::/3
        4000::                                   not-global-unicast — outside 2000::/3
        4000::1                                  not-global-unicast — outside 2000::/3
        5eff::1                                  not-global-unicast — outside 2000::/3
        5f01::1                                  not-global-unicast — outside 2000::/3
        6000::1                                  not-global-unicast — outside 2000::/3
        7fff::1                                  not-global-unicast — outside 2000::/3
        8000::1                                  not-global-unicast — outside 2000::/3
        a000::1                                  not-global-unicast — outside 2000::/3
        c000::1                                  not-global-unicast — outside 2000::/3
        e000::1                                  not-global-unicast — outside 2000::/3
        f000::1                                  not-global-unicast — outside 2000::/3
        f800::1                                  not-global-unicast — outside 2000::/3
        fbff::1                                  not-global-unicast — outside 2000::/3
        fe00::1                                  not-global-unicast — outside 2000::/3
        fe7f::1                                  not-global-unicast — outside 2000::/3
        0.0.0.0                                  special-purpose-address — 0.0.0.0/32 "This host on this network"
        0.255.255.255                            special-purpose-address — 0.0.0.0/8 "This network"
        10.0.0.0                                 special-purpose-address — 10.0.0.0/8 Private-Use
        10.255.255.255                           special-purpose-address — 10.0.0.0/8 Private-Use
        100.64.0.0                               special-purpose-address — 100.64.0.0/10 Shared Address Space
        100.127.255.255                          special-purpose-address — 100.64.0.0/10 Shared Address Space
        127.0.0.0                                special-purpose-address — 127.0.0.0/8 Loopback
        127.255.255.255                          special-purpose-address — 127.0.0.0/8 Loopback
        169.254.0.0                              special-purpose-address — 169.254.0.0/16 Link Local
        169.254.255.255                          special-purpose-address — 169.254.0.0/16 Link Local
        172.16.0.0                               special-purpose-address — 172.16.0.0/12 Private-Use
        172.31.255.255                           special-purpose-address — 172.16.0.0/12 Private-Use
        192.0.0.0                                special-purpose-address — 192.0.0.0/29 IPv4 Service Continuity Prefix
        192.0.0.255                              special-purpose-address — 192.0.0.0/24 IETF Protocol Assignments
        192.0.0.7                                special-purpose-address — 192.0.0.0/29 IPv4 Service Continuity Prefix
        192.0.0.171                              special-purpose-address — 192.0.0.171/32 NAT64/DNS64 Discovery
        192.0.2.0                                special-purpose-address — 192.0.2.0/24 Documentation (TEST-NET-1)
        192.0.2.255                              special-purpose-address — 192.0.2.0/24 Documentation (TEST-NET-1)
        192.31.196.0                             special-purpose-address — 192.31.196.0/24 AS112-v4
        192.31.196.255                           special-purpose-address — 192.31.196.0/24 AS112-v4
        192.52.193.0                             special-purpose-address — 192.52.193.0/24 AMT
        192.52.193.255                           special-purpose-address — 192.52.193.0/24 AMT
        192.88.99.0                              special-purpose-address — 192.88.99.0/24 Deprecated (6to4 Relay Anycast)
        192.88.99.255                            special-purpose-address — 192.88.99.0/24 Deprecated (6to4 Relay Anycast)
        192.88.99.2                              special-purpose-address — 192.88.99.2/32 6a44-relay anycast address
        192.168.0.0                              special-purpose-address — 192.168.0.0/16 Private-Use
        192.168.255.255                          special-purpose-address — 192.168.0.0/16 Private-Use
        192.175.48.0                             special-purpose-address — 192.175.48.0/24 Direct Delegation AS112 Service
        192.175.48.255                           special-purpose-address — 192.175.48.0/24 Direct Delegation AS112 Service
        198.18.0.0                               special-purpose-address — 198.18.0.0/15 Benchmarking
        198.19.255.255                           special-purpose-address — 198.18.0.0/15 Benchmarking
        198.51.100.0                             special-purpose-address — 198.51.100.0/24 Documentation (TEST-NET-2)
        198.51.100.255                           special-purpose-address — 198.51.100.0/24 Documentation (TEST-NET-2)
        203.0.113.0                              special-purpose-address — 203.0.113.0/24 Documentation (TEST-NET-3)
        203.0.113.255                            special-purpose-address — 203.0.113.0/24 Documentation (TEST-NET-3)
        240.0.0.0                                special-purpose-address — 240.0.0.0/4 Reserved
        255.255.255.255                          special-purpose-address — 255.255.255.255/32 Limited Broadcast
        ::                                       special-purpose-address — ::/128 Unspecified Address
        ::ffff:0.0.0.0                           special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        ::ffff:255.255.255.255                   special-purpose-address — ::ffff:0.0.0.0/96 IPv4-mapped Address, embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        64:ff9b::                                special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        64:ff9b::ffff:ffff                       special-purpose-address — 64:ff9b::/96 IPv4-IPv6 Translat., embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        64:ff9b:1::                              special-purpose-address — 64:ff9b:1::/48 IPv4-IPv6 Translat., embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        64:ff9b:1:ffff:ffff:ffff:ffff:ffff       special-purpose-address — 64:ff9b:1::/48 IPv4-IPv6 Translat., embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        100::                                    special-purpose-address — 100::/64 Discard-Only Address Block
        100::ffff:ffff:ffff:ffff                 special-purpose-address — 100::/64 Discard-Only Address Block
        100:0:0:1::                              special-purpose-address — 100:0:0:1::/64 Dummy IPv6 Prefix
        100::1:ffff:ffff:ffff:ffff               special-purpose-address — 100:0:0:1::/64 Dummy IPv6 Prefix
        2001::                                   special-purpose-address — 2001::/32 TEREDO, embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        2001:0:ffff:ffff:ffff:ffff:ffff:ffff     special-purpose-address — 2001::/32 TEREDO, embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        2001:2::                                 special-purpose-address — 2001:2::/48 Benchmarking
        2001:2:0:ffff:ffff:ffff:ffff:ffff        special-purpose-address — 2001:2::/48 Benchmarking
        2001:3::                                 special-purpose-address — 2001:3::/32 AMT
        2001:3:ffff:ffff:ffff:ffff:ffff:ffff     special-purpose-address — 2001:3::/32 AMT
        2001:4:112::                             special-purpose-address — 2001:4:112::/48 AS112-v6
        2001:4:112:ffff:ffff:ffff:ffff:ffff      special-purpose-address — 2001:4:112::/48 AS112-v6
        2001:10::                                special-purpose-address — 2001:10::/28 Deprecated (previously ORCHID)
        2001:1f:ffff:ffff:ffff:ffff:ffff:ffff    special-purpose-address — 2001:10::/28 Deprecated (previously ORCHID)
        2001:20::                                special-purpose-address — 2001:20::/28 ORCHIDv2
        2001:2f:ffff:ffff:ffff:ffff:ffff:ffff    special-purpose-address — 2001:20::/28 ORCHIDv2
        2001:30::                                special-purpose-address — 2001:30::/28 Drone Remote ID Protocol Entity Tags (DETs) Prefix
        2001:3f:ffff:ffff:ffff:ffff:ffff:ffff    special-purpose-address — 2001:30::/28 Drone Remote ID Protocol Entity Tags (DETs) Prefix
        2001:db8::                               special-purpose-address — 2001:db8::/32 Documentation
        2001:db8:ffff:ffff:ffff:ffff:ffff:ffff   special-purpose-address — 2001:db8::/32 Documentation
        2002::                                   special-purpose-address — 2002::/16 6to4, embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — 2002::/16 6to4, embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        2620:4f:8000::                           special-purpose-address — 2620:4f:8000::/48 Direct Delegation AS112 Service
        2620:4f:8000:ffff:ffff:ffff:ffff:ffff    special-purpose-address — 2620:4f:8000::/48 Direct Delegation AS112 Service
        3fff::                                   special-purpose-address — 3fff::/20 Documentation
        3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff   special-purpose-address — 3fff::/20 Documentation
        5f00::                                   special-purpose-address — 5f00::/16 Segment Routing (SRv6) SIDs
        5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — 5f00::/16 Segment Routing (SRv6) SIDs
        fc00::                                   special-purpose-address — fc00::/7 Unique-Local
        fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — fc00::/7 Unique-Local
        fe80::                                   special-purpose-address — fe80::/10 Link-Local Unicast
        febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — fe80::/10 Link-Local Unicast
        224.0.0.0                                special-purpose-address — 224.0.0.0/4 Multicast
        239.255.255.255                          special-purpose-address — 224.0.0.0/4 Multicast
        ff00::                                   special-purpose-address — ff00::/8 Multicast
        ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — ff00::/8 Multicast
        ::ffff:ffff                              special-purpose-address — ::/96 IPv4-compatible Address (deprecated), embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        ::ffff:0:0:0                             special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 0.0.0.0 (0.0.0.0/32 "This host on this network")
        ::ffff:0:ffff:ffff                       special-purpose-address — ::ffff:0:0:0/96 IPv4-translated Address (SIIT), embeds 255.255.255.255 (255.255.255.255/32 Limited Broadcast)
        fec0::                                   special-purpose-address — fec0::/10 Site-Local (deprecated)
        feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff  special-purpose-address — fec0::/10 Site-Local (deprecated)
    "#]]
    .assert_eq(&out);
}

/// URL forms: spellings of a scheme, an authority, a host, an address, a port and a path.
const URLS: &[&str] = &[
    // Admitted.
    "https://api.example.com/",
    "https://api.example.com/v1/chat/completions",
    "https://api.example.com:8443/v1",
    "https://api.example.com/v1?a=b&c=%2F",
    "https://api.example.com/a%20b",
    "https://v6.example.com/",
    "https://dual.example.com/",
    "https://xn--bcher-kva.example/",
    "https://93.184.216.34/",
    "https://[2606:4700::1111]/",
    "https://[2606:4700::1111]:8443/",
    // Scheme.
    "http://api.example.com/",
    "http://127.0.0.1/",
    "ftp://api.example.com/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:70/_x",
    "dict://127.0.0.1:11211/",
    "ldap://127.0.0.1/",
    "ws://api.example.com/",
    "wss://api.example.com/",
    "git://api.example.com/repo",
    "ssh://git@api.example.com/repo",
    "HTTPS://api.example.com/",
    "Https://api.example.com/",
    "https ://api.example.com/",
    " https://api.example.com/",
    "\thttps://api.example.com/",
    "https://api.example.com/ ",
    "https://api.example.com/\n",
    // Not absolute.
    "",
    "?x=1",
    "#top",
    "/v2",
    "/v2?x=1",
    "/v2#top",
    "v2",
    "./v2",
    "../admin",
    "//api.example.com/",
    "//127.0.0.1/",
    "https:api.example.com/",
    "https:127.0.0.1/",
    "https:/api.example.com/",
    "https:\\\\api.example.com\\",
    "api.example.com/",
    "api.example.com:8443/v1",
    "127.0.0.1/",
    "127.0.0.1:443/",
    "javascript:alert(1)",
    "data:text/html,x",
    "mailto:a@api.example.com",
    "http:127.0.0.1/",
    "localhost:8443/",
    // Userinfo.
    "https://user@api.example.com/",
    "https://user:pass@api.example.com/",
    "https://:@api.example.com/",
    "https://api.example.com@127.0.0.1/",
    "https://127.0.0.1@api.example.com/",
    "https://api.example.com%40127.0.0.1/",
    // Port.
    "https://api.example.com:0/",
    "https://api.example.com:00/",
    "https://api.example.com:443/",
    "https://api.example.com:0443/",
    "https://api.example.com:08443/",
    "https://api.example.com:/",
    "https://api.example.com:8080/",
    "https://api.example.com:65535/",
    "https://api.example.com:65536/",
    "https://api.example.com:99999/",
    "https://api.example.com:4294967739/",
    "https://api.example.com:8443a/",
    "https://api.example.com:-1/",
    "https://api.example.com:+443/",
    "https://api.example.com:443:443/",
    "https://[2606:4700::1111]:443/",
    "https://[2606:4700::1111]:0/",
    // Host spelling.
    "https:///v1",
    "https://./",
    "https://api.example.com./",
    "https://API.example.com/",
    "https://api%2eexample.com/",
    "https://%31%32%37.0.0.1/",
    "https://bücher.example/",
    "https://api.exam ple.com/",
    "https://api_example.com/",
    "https://-api.example.com/",
    "https://api-.example.com/",
    "https://a..b/",
    "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example/",
    // Names and what they resolve to.
    "https://localhost/",
    "https://localhost./",
    "https://loopback.example.com/",
    "https://metadata.example.com/latest/meta-data/",
    "https://private.example.com/",
    "https://mapped.example.com/",
    "https://translated.example.com/",
    "https://nat64.example.com/",
    "https://unassigned.example.com/",
    "https://mixed.example.com/",
    "https://mixed-unassigned.example.com/",
    "https://empty.example.com/",
    "https://unknown.example.com/",
    "https://api.example.com.attacker.example/",
    "https://127.0.0.1.nip.io/",
    // IPv4 literal spellings.
    "https://127.0.0.1/",
    "https://127.1/",
    "https://127.0.1/",
    "https://0x7f.0.0.1/",
    "https://0x7f000001/",
    "https://2130706433/",
    "https://017700000001/",
    "https://0177.0.0.1/",
    "https://127.000.000.001/",
    "https://0/",
    "https://0.0.0.0/",
    "https://0x0/",
    "https://169.254.169.254/latest/meta-data/",
    "https://2852039166/",
    "https://0xa9fea9fe/",
    "https://0251.0376.0251.0376/",
    "https://0xa9.0xfe.0xa9.0xfe/",
    "https://169.254.43518/",
    "https://10.1/",
    "https://192.168.1/",
    "https://134744072/",
    "https://1.1.1.1/",
    "https://1.1.1.1./",
    "https://8.8.8.8:8443/",
    "https://256.0.0.1/",
    "https://1.2.3.4.5/",
    "https://1..2/",
    "https://0x/",
    "https://0x100000000/",
    "https://4294967296/",
    "https://a.0x7f/",
    "https://[127.0.0.1]/",
    // IPv6 literal spellings.
    "https://[::1]/",
    "https://[::]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://[::0001]/",
    "https://[::1]:8443/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::FFFF:7F00:1]/",
    "https://[0:0:0:0:0:ffff:7f00:1]/",
    "https://[::ffff:169.254.169.254]/",
    "https://[::ffff:a9fe:a9fe]/",
    "https://[::ffff:0:127.0.0.1]/",
    "https://[::ffff:0:7f00:1]/",
    "https://[::127.0.0.1]/",
    "https://[::7f00:1]/",
    "https://[64:ff9b::169.254.169.254]/",
    "https://[64:ff9b::a9fe:a9fe]/",
    "https://[2002:7f00:1::1]/",
    "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
    "https://[fe80::1]/",
    "https://[fe80::1%25eth0]/",
    "https://[fe80::1%eth0]/",
    "https://[fd00:ec2::254]/latest/meta-data/",
    "https://[1::1]/",
    "https://[4000::1]/",
    "https://[8000::1]/",
    "https://[e000::1]/",
    "https://[fe00::1]/",
    "https://[::1:0:0:1]/",
    "https://[2606:4700:0:0:0:0:0:1111]/",
    "https://[2606:4700::1111/",
    "https://2606:4700::1111/",
    "https://2606:4700::1111:8443/",
    "https://[2606:4700::1111]x/",
    "https://[2606:4700::1111]]/",
    // Path, query and fragment.
    "https://api.example.com",
    "https://api.example.com?x=1",
    "https://api.example.com/a/../b",
    "https://api.example.com/a/./b",
    "https://api.example.com/%2e%2e/admin",
    "https://api.example.com/%2E%2E/admin",
    "https://api.example.com/a\\b",
    "https://api.example.com/#frag",
    "https://api.example.com/?x=1#f",
    "https://api.example.com/%7euser",
    "https://api.example.com/%7Euser",
    "https://api.example.com/%zz",
    "https://api.example.com/%2",
    "https://api.example.com/é",
    "https://api.example.com/a|b",
    "https://api.example.com/a b",
];

#[tokio::test]
async fn url_forms() {
    let gate = Gate::new(resolver()).await;
    let mut out = format!("{} URLs: literal redirect corpus\n", URLS.len());
    for input in URLS {
        let literal = gate.literal(input).await;
        let redirect = gate.redirect(input).await;
        let corpus = gate.corpus(input).await;
        out.push_str(&format!(
            "{:<48} {literal} {redirect} {corpus}\n",
            format!("{:?}", input)
        ));
    }
    assert!(URLS.len() >= 100, "{} URLs", URLS.len());
    assert!(
        URLS.len() + ips(ADDRESSES).len() + 2 * SPECIAL_PURPOSE.len() >= 300,
        "the table holds at least 300 forms"
    );
    expect![[r##"
        187 URLs: literal redirect corpus
        "https://api.example.com/"                       ok ok ok
        "https://api.example.com/v1/chat/completions"    ok ok ok
        "https://api.example.com:8443/v1"                ok ok ok
        "https://api.example.com/v1?a=b&c=%2F"           ok ok corpus/source-query
        "https://api.example.com/a%20b"                  ok ok ok
        "https://v6.example.com/"                        ok ok ok
        "https://dual.example.com/"                      ok ok ok
        "https://xn--bcher-kva.example/"                 ok ok ok
        "https://93.184.216.34/"                         ok ok ok
        "https://[2606:4700::1111]/"                     ok ok ok
        "https://[2606:4700::1111]:8443/"                ok ok ok
        "http://api.example.com/"                        not-https not-https corpus/source-not-https
        "http://127.0.0.1/"                              not-https not-https corpus/source-not-https
        "ftp://api.example.com/"                         not-https not-https corpus/source-not-https
        "file:///etc/passwd"                             not-https not-https corpus/source-local
        "gopher://127.0.0.1:70/_x"                       not-https not-https corpus/source-not-https
        "dict://127.0.0.1:11211/"                        not-https not-https corpus/source-not-https
        "ldap://127.0.0.1/"                              not-https not-https corpus/source-not-https
        "ws://api.example.com/"                          not-https not-https corpus/source-not-https
        "wss://api.example.com/"                         not-https not-https corpus/source-not-https
        "git://api.example.com/repo"                     not-https not-https corpus/source-git-protocol
        "ssh://git@api.example.com/repo"                 not-https not-https corpus/source-ssh
        "HTTPS://api.example.com/"                       non-canonical non-canonical ok <- https://api.example.com/
        "Https://api.example.com/"                       non-canonical non-canonical ok <- https://api.example.com/
        "https ://api.example.com/"                      not-https not-https corpus/source-not-https
        " https://api.example.com/"                      non-canonical non-canonical ok <- https://api.example.com/
        "\thttps://api.example.com/"                     non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com/ "                      non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com/\n"                     non-canonical non-canonical ok <- https://api.example.com/
        ""                                               not-absolute not-absolute corpus/source-malformed
        "?x=1"                                           not-absolute not-absolute corpus/source-local
        "#top"                                           not-absolute not-absolute corpus/source-local
        "/v2"                                            not-absolute ok corpus/source-local
        "/v2?x=1"                                        not-absolute ok corpus/source-local
        "/v2#top"                                        not-absolute fragment corpus/source-local
        "v2"                                             not-absolute not-absolute corpus/source-local
        "./v2"                                           not-absolute not-absolute corpus/source-local
        "../admin"                                       not-absolute not-absolute corpus/source-local
        "//api.example.com/"                             not-absolute not-absolute corpus/source-local
        "//127.0.0.1/"                                   not-absolute not-absolute corpus/source-local
        "https:api.example.com/"                         not-absolute not-absolute corpus/source-ssh
        "https:127.0.0.1/"                               not-absolute not-absolute corpus/source-ssh
        "https:/api.example.com/"                        not-absolute not-absolute corpus/source-ssh
        "https:\\\\api.example.com\\"                    not-absolute not-absolute corpus/source-ssh
        "api.example.com/"                               not-absolute not-absolute corpus/source-local
        "api.example.com:8443/v1"                        not-absolute not-absolute corpus/source-ssh
        "127.0.0.1/"                                     not-absolute not-absolute corpus/source-local
        "127.0.0.1:443/"                                 not-absolute not-absolute corpus/source-ssh
        "javascript:alert(1)"                            not-https not-https corpus/source-ssh
        "data:text/html,x"                               not-https not-https corpus/source-ssh
        "mailto:a@api.example.com"                       not-https not-https corpus/source-ssh
        "http:127.0.0.1/"                                not-https not-https corpus/source-ssh
        "localhost:8443/"                                not-absolute not-absolute corpus/source-ssh
        "https://user@api.example.com/"                  userinfo userinfo corpus/userinfo
        "https://user:pass@api.example.com/"             userinfo userinfo corpus/userinfo
        "https://:@api.example.com/"                     userinfo userinfo ok <- https://api.example.com/
        "https://api.example.com@127.0.0.1/"             userinfo userinfo corpus/userinfo
        "https://127.0.0.1@api.example.com/"             userinfo userinfo corpus/userinfo
        "https://api.example.com%40127.0.0.1/"           non-canonical non-canonical corpus/source-malformed
        "https://api.example.com:0/"                     bad-port bad-port bad-port
        "https://api.example.com:00/"                    bad-port bad-port bad-port <- https://api.example.com:0/
        "https://api.example.com:443/"                   non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com:0443/"                  non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com:08443/"                 non-canonical non-canonical ok <- https://api.example.com:8443/
        "https://api.example.com:/"                      non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com:8080/"                  port-not-admitted port-not-admitted port-not-admitted
        "https://api.example.com:65535/"                 port-not-admitted port-not-admitted port-not-admitted
        "https://api.example.com:65536/"                 bad-port bad-port corpus/source-malformed
        "https://api.example.com:99999/"                 bad-port bad-port corpus/source-malformed
        "https://api.example.com:4294967739/"            bad-port bad-port corpus/source-malformed
        "https://api.example.com:8443a/"                 bad-port bad-port corpus/source-malformed
        "https://api.example.com:-1/"                    bad-port bad-port corpus/source-malformed
        "https://api.example.com:+443/"                  bad-port bad-port corpus/source-malformed
        "https://api.example.com:443:443/"               bad-port bad-port corpus/source-malformed
        "https://[2606:4700::1111]:443/"                 non-canonical non-canonical ok <- https://[2606:4700::1111]/
        "https://[2606:4700::1111]:0/"                   bad-port bad-port bad-port
        "https:///v1"                                    invalid-host invalid-host no-such-name <- https://v1/
        "https://./"                                     non-canonical non-canonical non-canonical
        "https://api.example.com./"                      non-canonical non-canonical non-canonical
        "https://API.example.com/"                       non-canonical non-canonical ok <- https://api.example.com/
        "https://api%2eexample.com/"                     non-canonical non-canonical ok <- https://api.example.com/
        "https://%31%32%37.0.0.1/"                       non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://bücher.example/"                        non-canonical non-canonical ok <- https://xn--bcher-kva.example/
        "https://api.exam ple.com/"                      invalid-host invalid-host corpus/source-malformed
        "https://api_example.com/"                       invalid-host invalid-host invalid-host
        "https://-api.example.com/"                      invalid-host invalid-host invalid-host
        "https://api-.example.com/"                      invalid-host invalid-host invalid-host
        "https://a..b/"                                  invalid-host invalid-host invalid-host
        "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example/" invalid-host invalid-host invalid-host
        "https://localhost/"                             special-purpose-address special-purpose-address special-purpose-address
        "https://localhost./"                            non-canonical non-canonical non-canonical
        "https://loopback.example.com/"                  special-purpose-address special-purpose-address special-purpose-address
        "https://metadata.example.com/latest/meta-data/" special-purpose-address special-purpose-address special-purpose-address
        "https://private.example.com/"                   special-purpose-address special-purpose-address special-purpose-address
        "https://mapped.example.com/"                    special-purpose-address special-purpose-address special-purpose-address
        "https://translated.example.com/"                special-purpose-address special-purpose-address special-purpose-address
        "https://nat64.example.com/"                     special-purpose-address special-purpose-address special-purpose-address
        "https://unassigned.example.com/"                not-global-unicast not-global-unicast not-global-unicast
        "https://mixed.example.com/"                     mixed-resolution mixed-resolution mixed-resolution
        "https://mixed-unassigned.example.com/"          mixed-resolution mixed-resolution mixed-resolution
        "https://empty.example.com/"                     no-addresses no-addresses no-addresses
        "https://unknown.example.com/"                   no-such-name no-such-name no-such-name
        "https://api.example.com.attacker.example/"      no-such-name no-such-name no-such-name
        "https://127.0.0.1.nip.io/"                      no-such-name no-such-name no-such-name
        "https://127.0.0.1/"                             special-purpose-address special-purpose-address special-purpose-address
        "https://127.1/"                                 non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://127.0.1/"                               non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://0x7f.0.0.1/"                            non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://0x7f000001/"                            non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://2130706433/"                            non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://017700000001/"                          non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://0177.0.0.1/"                            non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://127.000.000.001/"                       non-canonical non-canonical special-purpose-address <- https://127.0.0.1/
        "https://0/"                                     non-canonical non-canonical special-purpose-address <- https://0.0.0.0/
        "https://0.0.0.0/"                               special-purpose-address special-purpose-address special-purpose-address
        "https://0x0/"                                   non-canonical non-canonical special-purpose-address <- https://0.0.0.0/
        "https://169.254.169.254/latest/meta-data/"      special-purpose-address special-purpose-address special-purpose-address
        "https://2852039166/"                            non-canonical non-canonical special-purpose-address <- https://169.254.169.254/
        "https://0xa9fea9fe/"                            non-canonical non-canonical special-purpose-address <- https://169.254.169.254/
        "https://0251.0376.0251.0376/"                   non-canonical non-canonical special-purpose-address <- https://169.254.169.254/
        "https://0xa9.0xfe.0xa9.0xfe/"                   non-canonical non-canonical special-purpose-address <- https://169.254.169.254/
        "https://169.254.43518/"                         non-canonical non-canonical special-purpose-address <- https://169.254.169.254/
        "https://10.1/"                                  non-canonical non-canonical special-purpose-address <- https://10.0.0.1/
        "https://192.168.1/"                             non-canonical non-canonical special-purpose-address <- https://192.168.0.1/
        "https://134744072/"                             non-canonical non-canonical ok <- https://8.8.8.8/
        "https://1.1.1.1/"                               ok ok ok
        "https://1.1.1.1./"                              non-canonical non-canonical ok <- https://1.1.1.1/
        "https://8.8.8.8:8443/"                          ok ok ok
        "https://256.0.0.1/"                             invalid-host invalid-host corpus/source-malformed
        "https://1.2.3.4.5/"                             invalid-host invalid-host corpus/source-malformed
        "https://1..2/"                                  invalid-host invalid-host corpus/source-malformed
        "https://0x/"                                    non-canonical non-canonical special-purpose-address <- https://0.0.0.0/
        "https://0x100000000/"                           invalid-host invalid-host corpus/source-malformed
        "https://4294967296/"                            invalid-host invalid-host corpus/source-malformed
        "https://a.0x7f/"                                invalid-host invalid-host corpus/source-malformed
        "https://[127.0.0.1]/"                           invalid-host invalid-host corpus/source-malformed
        "https://[::1]/"                                 special-purpose-address special-purpose-address special-purpose-address
        "https://[::]/"                                  special-purpose-address special-purpose-address special-purpose-address
        "https://[0:0:0:0:0:0:0:1]/"                     non-canonical non-canonical special-purpose-address <- https://[::1]/
        "https://[::0001]/"                              non-canonical non-canonical special-purpose-address <- https://[::1]/
        "https://[::1]:8443/"                            special-purpose-address special-purpose-address special-purpose-address
        "https://[::ffff:127.0.0.1]/"                    non-canonical non-canonical special-purpose-address <- https://[::ffff:7f00:1]/
        "https://[::ffff:7f00:1]/"                       special-purpose-address special-purpose-address special-purpose-address
        "https://[::FFFF:7F00:1]/"                       non-canonical non-canonical special-purpose-address <- https://[::ffff:7f00:1]/
        "https://[0:0:0:0:0:ffff:7f00:1]/"               non-canonical non-canonical special-purpose-address <- https://[::ffff:7f00:1]/
        "https://[::ffff:169.254.169.254]/"              non-canonical non-canonical special-purpose-address <- https://[::ffff:a9fe:a9fe]/
        "https://[::ffff:a9fe:a9fe]/"                    special-purpose-address special-purpose-address special-purpose-address
        "https://[::ffff:0:127.0.0.1]/"                  non-canonical non-canonical special-purpose-address <- https://[::ffff:0:7f00:1]/
        "https://[::ffff:0:7f00:1]/"                     special-purpose-address special-purpose-address special-purpose-address
        "https://[::127.0.0.1]/"                         non-canonical non-canonical special-purpose-address <- https://[::7f00:1]/
        "https://[::7f00:1]/"                            special-purpose-address special-purpose-address special-purpose-address
        "https://[64:ff9b::169.254.169.254]/"            non-canonical non-canonical special-purpose-address <- https://[64:ff9b::a9fe:a9fe]/
        "https://[64:ff9b::a9fe:a9fe]/"                  special-purpose-address special-purpose-address special-purpose-address
        "https://[2002:7f00:1::1]/"                      special-purpose-address special-purpose-address special-purpose-address
        "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/" special-purpose-address special-purpose-address special-purpose-address
        "https://[fe80::1]/"                             special-purpose-address special-purpose-address special-purpose-address
        "https://[fe80::1%25eth0]/"                      invalid-host invalid-host corpus/source-malformed
        "https://[fe80::1%eth0]/"                        invalid-host invalid-host corpus/source-malformed
        "https://[fd00:ec2::254]/latest/meta-data/"      special-purpose-address special-purpose-address special-purpose-address
        "https://[1::1]/"                                not-global-unicast not-global-unicast not-global-unicast
        "https://[4000::1]/"                             not-global-unicast not-global-unicast not-global-unicast
        "https://[8000::1]/"                             not-global-unicast not-global-unicast not-global-unicast
        "https://[e000::1]/"                             not-global-unicast not-global-unicast not-global-unicast
        "https://[fe00::1]/"                             not-global-unicast not-global-unicast not-global-unicast
        "https://[::1:0:0:1]/"                           not-global-unicast not-global-unicast not-global-unicast
        "https://[2606:4700:0:0:0:0:0:1111]/"            non-canonical non-canonical ok <- https://[2606:4700::1111]/
        "https://[2606:4700::1111/"                      invalid-host invalid-host corpus/source-malformed
        "https://2606:4700::1111/"                       invalid-host invalid-host corpus/source-malformed
        "https://2606:4700::1111:8443/"                  invalid-host invalid-host corpus/source-malformed
        "https://[2606:4700::1111]x/"                    invalid-host invalid-host corpus/source-malformed
        "https://[2606:4700::1111]]/"                    invalid-host invalid-host corpus/source-malformed
        "https://api.example.com"                        non-canonical non-canonical ok <- https://api.example.com/
        "https://api.example.com?x=1"                    non-canonical non-canonical corpus/source-query
        "https://api.example.com/a/../b"                 non-canonical non-canonical ok <- https://api.example.com/b
        "https://api.example.com/a/./b"                  non-canonical non-canonical ok <- https://api.example.com/a/b
        "https://api.example.com/%2e%2e/admin"           non-canonical non-canonical ok <- https://api.example.com/admin
        "https://api.example.com/%2E%2E/admin"           non-canonical non-canonical ok <- https://api.example.com/admin
        "https://api.example.com/a\\b"                   non-canonical non-canonical ok <- https://api.example.com/a/b
        "https://api.example.com/#frag"                  fragment fragment corpus/source-query
        "https://api.example.com/?x=1#f"                 fragment fragment corpus/source-query
        "https://api.example.com/%7euser"                non-canonical non-canonical non-canonical
        "https://api.example.com/%7Euser"                non-canonical non-canonical non-canonical
        "https://api.example.com/%zz"                    non-canonical non-canonical non-canonical
        "https://api.example.com/%2"                     non-canonical non-canonical non-canonical
        "https://api.example.com/é"                      non-canonical non-canonical ok <- https://api.example.com/%C3%A9
        "https://api.example.com/a|b"                    non-canonical non-canonical non-canonical
        "https://api.example.com/a b"                    non-canonical non-canonical ok <- https://api.example.com/a%20b
    "##]]
    .assert_eq(&out);
}
