//! One case per special-purpose entry: the first and last address of every block are refused,
//! each named by its most specific entry. The rendering is the table a reviewer compares with
//! the IANA registries (`UPDATE_EXPECT=1 cargo test -p reach-destination` regenerates it).

use std::net::{IpAddr, SocketAddr};

use expect_test::expect;
use reach_destination::special::{SPECIAL_PURPOSE, classify, judge};
use reach_destination::{
    Admission, AdmissionPolicy, Destination, Host, Purpose, RecordingDialer, StaticResolver,
};

fn render_class(ip: IpAddr) -> String {
    match classify(ip) {
        Some(special) => format!("{} ({})", special.entry.prefix, special.entry.name),
        None => "ADMITTED".to_owned(),
    }
}

#[test]
fn special_purpose_table() {
    let mut out = String::new();
    for entry in SPECIAL_PURPOSE {
        out.push_str(&format!(
            "{:<22} {:<48} {:<26} first {} -> {} | last {} -> {}\n",
            entry.prefix.to_string(),
            entry.name,
            entry.rfc,
            entry.prefix.first(),
            render_class(entry.prefix.first()),
            entry.prefix.last(),
            render_class(entry.prefix.last()),
        ));
    }
    expect![[r#"
        0.0.0.0/8              "This network"                                   RFC 791 §3.2               first 0.0.0.0 -> 0.0.0.0/32 ("This host on this network") | last 0.255.255.255 -> 0.0.0.0/8 ("This network")
        0.0.0.0/32             "This host on this network"                      RFC 1122 §3.2.1.3          first 0.0.0.0 -> 0.0.0.0/32 ("This host on this network") | last 0.0.0.0 -> 0.0.0.0/32 ("This host on this network")
        10.0.0.0/8             Private-Use                                      RFC 1918                   first 10.0.0.0 -> 10.0.0.0/8 (Private-Use) | last 10.255.255.255 -> 10.0.0.0/8 (Private-Use)
        100.64.0.0/10          Shared Address Space                             RFC 6598                   first 100.64.0.0 -> 100.64.0.0/10 (Shared Address Space) | last 100.127.255.255 -> 100.64.0.0/10 (Shared Address Space)
        127.0.0.0/8            Loopback                                         RFC 1122 §3.2.1.3          first 127.0.0.0 -> 127.0.0.0/8 (Loopback) | last 127.255.255.255 -> 127.0.0.0/8 (Loopback)
        169.254.0.0/16         Link Local                                       RFC 3927                   first 169.254.0.0 -> 169.254.0.0/16 (Link Local) | last 169.254.255.255 -> 169.254.0.0/16 (Link Local)
        172.16.0.0/12          Private-Use                                      RFC 1918                   first 172.16.0.0 -> 172.16.0.0/12 (Private-Use) | last 172.31.255.255 -> 172.16.0.0/12 (Private-Use)
        192.0.0.0/24           IETF Protocol Assignments                        RFC 6890 §2.1              first 192.0.0.0 -> 192.0.0.0/29 (IPv4 Service Continuity Prefix) | last 192.0.0.255 -> 192.0.0.0/24 (IETF Protocol Assignments)
        192.0.0.0/29           IPv4 Service Continuity Prefix                   RFC 7335                   first 192.0.0.0 -> 192.0.0.0/29 (IPv4 Service Continuity Prefix) | last 192.0.0.7 -> 192.0.0.0/29 (IPv4 Service Continuity Prefix)
        192.0.0.8/32           IPv4 dummy address                               RFC 7600                   first 192.0.0.8 -> 192.0.0.8/32 (IPv4 dummy address) | last 192.0.0.8 -> 192.0.0.8/32 (IPv4 dummy address)
        192.0.0.9/32           Port Control Protocol Anycast                    RFC 7723                   first 192.0.0.9 -> 192.0.0.9/32 (Port Control Protocol Anycast) | last 192.0.0.9 -> 192.0.0.9/32 (Port Control Protocol Anycast)
        192.0.0.10/32          Traversal Using Relays around NAT Anycast        RFC 8155                   first 192.0.0.10 -> 192.0.0.10/32 (Traversal Using Relays around NAT Anycast) | last 192.0.0.10 -> 192.0.0.10/32 (Traversal Using Relays around NAT Anycast)
        192.0.0.170/32         NAT64/DNS64 Discovery                            RFC 8880, RFC 7050 §2.2    first 192.0.0.170 -> 192.0.0.170/32 (NAT64/DNS64 Discovery) | last 192.0.0.170 -> 192.0.0.170/32 (NAT64/DNS64 Discovery)
        192.0.0.171/32         NAT64/DNS64 Discovery                            RFC 8880, RFC 7050 §2.2    first 192.0.0.171 -> 192.0.0.171/32 (NAT64/DNS64 Discovery) | last 192.0.0.171 -> 192.0.0.171/32 (NAT64/DNS64 Discovery)
        192.0.2.0/24           Documentation (TEST-NET-1)                       RFC 5737                   first 192.0.2.0 -> 192.0.2.0/24 (Documentation (TEST-NET-1)) | last 192.0.2.255 -> 192.0.2.0/24 (Documentation (TEST-NET-1))
        192.31.196.0/24        AS112-v4                                         RFC 7535                   first 192.31.196.0 -> 192.31.196.0/24 (AS112-v4) | last 192.31.196.255 -> 192.31.196.0/24 (AS112-v4)
        192.52.193.0/24        AMT                                              RFC 7450                   first 192.52.193.0 -> 192.52.193.0/24 (AMT) | last 192.52.193.255 -> 192.52.193.0/24 (AMT)
        192.88.99.0/24         Deprecated (6to4 Relay Anycast)                  RFC 7526                   first 192.88.99.0 -> 192.88.99.0/24 (Deprecated (6to4 Relay Anycast)) | last 192.88.99.255 -> 192.88.99.0/24 (Deprecated (6to4 Relay Anycast))
        192.88.99.2/32         6a44-relay anycast address                       RFC 6751                   first 192.88.99.2 -> 192.88.99.2/32 (6a44-relay anycast address) | last 192.88.99.2 -> 192.88.99.2/32 (6a44-relay anycast address)
        192.168.0.0/16         Private-Use                                      RFC 1918                   first 192.168.0.0 -> 192.168.0.0/16 (Private-Use) | last 192.168.255.255 -> 192.168.0.0/16 (Private-Use)
        192.175.48.0/24        Direct Delegation AS112 Service                  RFC 7534                   first 192.175.48.0 -> 192.175.48.0/24 (Direct Delegation AS112 Service) | last 192.175.48.255 -> 192.175.48.0/24 (Direct Delegation AS112 Service)
        198.18.0.0/15          Benchmarking                                     RFC 2544                   first 198.18.0.0 -> 198.18.0.0/15 (Benchmarking) | last 198.19.255.255 -> 198.18.0.0/15 (Benchmarking)
        198.51.100.0/24        Documentation (TEST-NET-2)                       RFC 5737                   first 198.51.100.0 -> 198.51.100.0/24 (Documentation (TEST-NET-2)) | last 198.51.100.255 -> 198.51.100.0/24 (Documentation (TEST-NET-2))
        203.0.113.0/24         Documentation (TEST-NET-3)                       RFC 5737                   first 203.0.113.0 -> 203.0.113.0/24 (Documentation (TEST-NET-3)) | last 203.0.113.255 -> 203.0.113.0/24 (Documentation (TEST-NET-3))
        240.0.0.0/4            Reserved                                         RFC 1112 §4                first 240.0.0.0 -> 240.0.0.0/4 (Reserved) | last 255.255.255.255 -> 255.255.255.255/32 (Limited Broadcast)
        255.255.255.255/32     Limited Broadcast                                RFC 8190, RFC 919 §7       first 255.255.255.255 -> 255.255.255.255/32 (Limited Broadcast) | last 255.255.255.255 -> 255.255.255.255/32 (Limited Broadcast)
        ::1/128                Loopback Address                                 RFC 4291                   first ::1 -> ::1/128 (Loopback Address) | last ::1 -> ::1/128 (Loopback Address)
        ::/128                 Unspecified Address                              RFC 4291                   first :: -> ::/128 (Unspecified Address) | last :: -> ::/128 (Unspecified Address)
        ::ffff:0.0.0.0/96      IPv4-mapped Address                              RFC 4291                   first ::ffff:0.0.0.0 -> ::ffff:0.0.0.0/96 (IPv4-mapped Address) | last ::ffff:255.255.255.255 -> ::ffff:0.0.0.0/96 (IPv4-mapped Address)
        64:ff9b::/96           IPv4-IPv6 Translat.                              RFC 6052                   first 64:ff9b:: -> 64:ff9b::/96 (IPv4-IPv6 Translat.) | last 64:ff9b::ffff:ffff -> 64:ff9b::/96 (IPv4-IPv6 Translat.)
        64:ff9b:1::/48         IPv4-IPv6 Translat.                              RFC 8215                   first 64:ff9b:1:: -> 64:ff9b:1::/48 (IPv4-IPv6 Translat.) | last 64:ff9b:1:ffff:ffff:ffff:ffff:ffff -> 64:ff9b:1::/48 (IPv4-IPv6 Translat.)
        100::/64               Discard-Only Address Block                       RFC 6666                   first 100:: -> 100::/64 (Discard-Only Address Block) | last 100::ffff:ffff:ffff:ffff -> 100::/64 (Discard-Only Address Block)
        100:0:0:1::/64         Dummy IPv6 Prefix                                RFC 9780                   first 100:0:0:1:: -> 100:0:0:1::/64 (Dummy IPv6 Prefix) | last 100::1:ffff:ffff:ffff:ffff -> 100:0:0:1::/64 (Dummy IPv6 Prefix)
        2001::/23              IETF Protocol Assignments                        RFC 2928                   first 2001:: -> 2001::/32 (TEREDO) | last 2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff -> 2001::/23 (IETF Protocol Assignments)
        2001::/32              TEREDO                                           RFC 4380, RFC 8190         first 2001:: -> 2001::/32 (TEREDO) | last 2001:0:ffff:ffff:ffff:ffff:ffff:ffff -> 2001::/32 (TEREDO)
        2001:1::1/128          Port Control Protocol Anycast                    RFC 7723                   first 2001:1::1 -> 2001:1::1/128 (Port Control Protocol Anycast) | last 2001:1::1 -> 2001:1::1/128 (Port Control Protocol Anycast)
        2001:1::2/128          Traversal Using Relays around NAT Anycast        RFC 8155                   first 2001:1::2 -> 2001:1::2/128 (Traversal Using Relays around NAT Anycast) | last 2001:1::2 -> 2001:1::2/128 (Traversal Using Relays around NAT Anycast)
        2001:1::3/128          DNS-SD Service Registration Protocol Anycast     RFC 9665                   first 2001:1::3 -> 2001:1::3/128 (DNS-SD Service Registration Protocol Anycast) | last 2001:1::3 -> 2001:1::3/128 (DNS-SD Service Registration Protocol Anycast)
        2001:2::/48            Benchmarking                                     RFC 5180, RFC Errata 1752  first 2001:2:: -> 2001:2::/48 (Benchmarking) | last 2001:2:0:ffff:ffff:ffff:ffff:ffff -> 2001:2::/48 (Benchmarking)
        2001:3::/32            AMT                                              RFC 7450                   first 2001:3:: -> 2001:3::/32 (AMT) | last 2001:3:ffff:ffff:ffff:ffff:ffff:ffff -> 2001:3::/32 (AMT)
        2001:4:112::/48        AS112-v6                                         RFC 7535                   first 2001:4:112:: -> 2001:4:112::/48 (AS112-v6) | last 2001:4:112:ffff:ffff:ffff:ffff:ffff -> 2001:4:112::/48 (AS112-v6)
        2001:10::/28           Deprecated (previously ORCHID)                   RFC 4843                   first 2001:10:: -> 2001:10::/28 (Deprecated (previously ORCHID)) | last 2001:1f:ffff:ffff:ffff:ffff:ffff:ffff -> 2001:10::/28 (Deprecated (previously ORCHID))
        2001:20::/28           ORCHIDv2                                         RFC 7343                   first 2001:20:: -> 2001:20::/28 (ORCHIDv2) | last 2001:2f:ffff:ffff:ffff:ffff:ffff:ffff -> 2001:20::/28 (ORCHIDv2)
        2001:30::/28           Drone Remote ID Protocol Entity Tags (DETs) Prefix RFC 9374                   first 2001:30:: -> 2001:30::/28 (Drone Remote ID Protocol Entity Tags (DETs) Prefix) | last 2001:3f:ffff:ffff:ffff:ffff:ffff:ffff -> 2001:30::/28 (Drone Remote ID Protocol Entity Tags (DETs) Prefix)
        2001:db8::/32          Documentation                                    RFC 3849                   first 2001:db8:: -> 2001:db8::/32 (Documentation) | last 2001:db8:ffff:ffff:ffff:ffff:ffff:ffff -> 2001:db8::/32 (Documentation)
        2002::/16              6to4                                             RFC 3056                   first 2002:: -> 2002::/16 (6to4) | last 2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> 2002::/16 (6to4)
        2620:4f:8000::/48      Direct Delegation AS112 Service                  RFC 7534                   first 2620:4f:8000:: -> 2620:4f:8000::/48 (Direct Delegation AS112 Service) | last 2620:4f:8000:ffff:ffff:ffff:ffff:ffff -> 2620:4f:8000::/48 (Direct Delegation AS112 Service)
        3fff::/20              Documentation                                    RFC 9637                   first 3fff:: -> 3fff::/20 (Documentation) | last 3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff -> 3fff::/20 (Documentation)
        5f00::/16              Segment Routing (SRv6) SIDs                      RFC 9602                   first 5f00:: -> 5f00::/16 (Segment Routing (SRv6) SIDs) | last 5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> 5f00::/16 (Segment Routing (SRv6) SIDs)
        fc00::/7               Unique-Local                                     RFC 4193, RFC 8190         first fc00:: -> fc00::/7 (Unique-Local) | last fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> fc00::/7 (Unique-Local)
        fe80::/10              Link-Local Unicast                               RFC 4291                   first fe80:: -> fe80::/10 (Link-Local Unicast) | last febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> fe80::/10 (Link-Local Unicast)
        224.0.0.0/4            Multicast                                        RFC 5771                   first 224.0.0.0 -> 224.0.0.0/4 (Multicast) | last 239.255.255.255 -> 224.0.0.0/4 (Multicast)
        ff00::/8               Multicast                                        RFC 4291 §2.7              first ff00:: -> ff00::/8 (Multicast) | last ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> ff00::/8 (Multicast)
        169.254.169.254/32     Instance metadata service                        cloud provider convention  first 169.254.169.254 -> 169.254.169.254/32 (Instance metadata service) | last 169.254.169.254 -> 169.254.169.254/32 (Instance metadata service)
        fd00:ec2::254/128      Instance metadata service                        cloud provider convention  first fd00:ec2::254 -> fd00:ec2::254/128 (Instance metadata service) | last fd00:ec2::254 -> fd00:ec2::254/128 (Instance metadata service)
        ::/96                  IPv4-compatible Address (deprecated)             RFC 4291 §2.5.5.1          first :: -> ::/128 (Unspecified Address) | last ::ffff:ffff -> ::/96 (IPv4-compatible Address (deprecated))
        ::ffff:0:0:0/96        IPv4-translated Address (SIIT)                   RFC 2765 §2.1, RFC 6145    first ::ffff:0:0:0 -> ::ffff:0:0:0/96 (IPv4-translated Address (SIIT)) | last ::ffff:0:ffff:ffff -> ::ffff:0:0:0/96 (IPv4-translated Address (SIIT))
        fec0::/10              Site-Local (deprecated)                          RFC 3879                   first fec0:: -> fec0::/10 (Site-Local (deprecated)) | last feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff -> fec0::/10 (Site-Local (deprecated))
    "#]].assert_eq(&out);
}

#[test]
fn every_entry_is_named_by_itself_at_one_end() {
    for entry in SPECIAL_PURPOSE {
        let first = classify(entry.prefix.first()).expect("first refused");
        let last = classify(entry.prefix.last()).expect("last refused");
        assert!(
            first.entry == entry || last.entry == entry,
            "{} is shadowed at both ends",
            entry.prefix
        );
    }
}

/// Embedded IPv4 forms are refused by their outer block and report the embedded address.
#[test]
fn ipv4_embedding_forms() {
    let cases = [
        "::ffff:127.0.0.1",
        "::ffff:8.8.8.8",
        "::10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1:c0a8:1:100::",
        "2002:a00:1::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "::ffff:0:7f00:1",
        "::ffff:0:a9fe:a9fe",
        // ISATAP interface identifiers are not read: the global prefix routes (module docs).
        "2606:4700::5efe:a00:1",
        "2606:4700::1111",
        "8.8.8.8",
        "1.1.1.1",
    ];
    let out: String = cases
        .iter()
        .map(|c| {
            let ip: IpAddr = c.parse().expect("address");
            match judge(ip) {
                Some(refusal) => format!("{c} -> {refusal}\n"),
                None => format!("{c} -> ADMITTED\n"),
            }
        })
        .collect();
    expect![[r#"
        ::ffff:127.0.0.1 -> ::ffff:0.0.0.0/96 IPv4-mapped Address (RFC 4291), embeds 127.0.0.1 in 127.0.0.0/8 Loopback (RFC 1122 §3.2.1.3)
        ::ffff:8.8.8.8 -> ::ffff:0.0.0.0/96 IPv4-mapped Address (RFC 4291), embeds 8.8.8.8
        ::10.0.0.1 -> ::/96 IPv4-compatible Address (deprecated) (RFC 4291 §2.5.5.1), embeds 10.0.0.1 in 10.0.0.0/8 Private-Use (RFC 1918)
        64:ff9b::a9fe:a9fe -> 64:ff9b::/96 IPv4-IPv6 Translat. (RFC 6052), embeds 169.254.169.254 in 169.254.169.254/32 Instance metadata service (cloud provider convention)
        64:ff9b:1:c0a8:1:100:: -> 64:ff9b:1::/48 IPv4-IPv6 Translat. (RFC 8215), embeds 192.168.1.1 in 192.168.0.0/16 Private-Use (RFC 1918)
        2002:a00:1::1 -> 2002::/16 6to4 (RFC 3056), embeds 10.0.0.1 in 10.0.0.0/8 Private-Use (RFC 1918)
        2001:0:4136:e378:8000:63bf:3fff:fdd2 -> 2001::/32 TEREDO (RFC 4380, RFC 8190), embeds 192.0.2.45 in 192.0.2.0/24 Documentation (TEST-NET-1) (RFC 5737)
        ::ffff:0:7f00:1 -> ::ffff:0:0:0/96 IPv4-translated Address (SIIT) (RFC 2765 §2.1, RFC 6145), embeds 127.0.0.1 in 127.0.0.0/8 Loopback (RFC 1122 §3.2.1.3)
        ::ffff:0:a9fe:a9fe -> ::ffff:0:0:0/96 IPv4-translated Address (SIIT) (RFC 2765 §2.1, RFC 6145), embeds 169.254.169.254 in 169.254.169.254/32 Instance metadata service (cloud provider convention)
        2606:4700::5efe:a00:1 -> ADMITTED
        2606:4700::1111 -> ADMITTED
        8.8.8.8 -> ADMITTED
        1.1.1.1 -> ADMITTED
    "#]].assert_eq(&out);
}

/// Every entry, as an IP-literal destination and as a resolved answer, is refused before any
/// dial. (Admission does not dial; the connector is never reached, and the recording dialer
/// stays empty.)
#[tokio::test]
async fn every_entry_refused_by_admission() {
    let dialer = RecordingDialer::new();
    for entry in SPECIAL_PURPOSE {
        for ip in [entry.prefix.first(), entry.prefix.last()] {
            let resolver = StaticResolver::new().with("svc.example.com", [ip]);
            let admission = Admission::new(AdmissionPolicy::default(), resolver);
            let dest =
                Destination::parse("https://svc.example.com/v1", Purpose::new("test").unwrap())
                    .unwrap();
            let err = admission
                .admit(dest)
                .await
                .expect_err("special address admitted");
            assert_eq!(
                err.code(),
                "destination/special-purpose-address",
                "{ip}: {err}"
            );

            // The literal in its one canonical spelling, as the crate writes it.
            let literal = format!("https://{}/", Host::Ip(ip));
            let dest = Destination::parse(&literal, Purpose::new("test").unwrap()).unwrap();
            let err = admission
                .admit(dest)
                .await
                .expect_err("special literal admitted");
            assert_eq!(
                err.code(),
                "destination/special-purpose-address",
                "{literal}: {err}"
            );
        }
    }
    assert_eq!(dialer.dials(), Vec::<SocketAddr>::new());
    // A local road admits exactly its own socket address for its own name.
    let road: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    let policy = AdmissionPolicy::default().with_local_road(Host::Name("model.test".into()), road);
    let resolver = StaticResolver::new()
        .with("model.test", [road.ip()])
        .with("other.test", [road.ip()]);
    let admission = Admission::new(policy, resolver);
    let purpose = Purpose::new("model-portal").unwrap();
    let ok = admission
        .admit(Destination::parse("https://model.test:8443/v1", purpose.clone()).unwrap())
        .await
        .unwrap();
    assert_eq!(ok.pinned_addr(), road);
    assert!(ok.is_local_road());
    let err = admission
        .admit(Destination::parse("https://other.test:8443/v1", purpose.clone()).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "destination/port-not-admitted");
    let err = admission
        .admit(Destination::parse("https://model.test/v1", purpose).unwrap())
        .await
        .unwrap_err();
    // Still refused, and the refusal says why: the road is only at its own port (issue #34).
    assert_eq!(err.code(), "destination/road-port-mismatch");
}
