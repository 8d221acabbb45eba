//! The URL parser's refusal table: each input with its code or canonical rendering.

use expect_test::expect;
use reach_destination::{Destination, Purpose};

#[test]
fn parse_table() {
    let inputs = [
        "https://api.example.com/v1/chat/completions",
        "https://api.example.com:8443/v1",
        "https://[2606:4700::1111]/",
        "https://1.1.1.1/dns-query?name=x",
        "https://api.example.com/v1?a=b&c=%2F",
        "http://api.example.com/",
        "ftp://api.example.com/",
        "HTTPS://api.example.com/",
        "api.example.com/",
        "https://user:pass@api.example.com/",
        "https://user@api.example.com/",
        "https://api.example.com./",
        "https://API.example.com/",
        "https://api%2eexample.com/",
        "https://bücher.example/",
        "https://xn--bcher-kva.example/",
        "https://api.example.com:443/",
        "https://api.example.com:0443/",
        "https://api.example.com:/",
        "https://api.example.com:99999/",
        "https://api.example.com",
        "https://api.example.com/a/../b",
        "https://api.example.com/a/./b",
        "https://api.example.com/%7euser",
        "https://api.example.com/%2f",
        "https://api.example.com/a b",
        "https://api.example.com/a\\b",
        "https://api.example.com/#frag",
        "https://0x7f.1/",
        "https://2130706433/",
        "https://127.000.000.001/",
        "https://[::FFFF:127.0.0.1]/",
        "https://[0:0:0:0:0:0:0:1]/",
        "https://-bad.example.com/",
        "https://a..b/",
        "https://under_score.example/",
    ];
    let purpose = Purpose::new("test").unwrap();
    let out: String = inputs
        .iter()
        .map(|input| match Destination::parse(input, purpose.clone()) {
            Ok(d) => format!("{input:<46} ok {d} (authority {})\n", d.authority()),
            Err(e) => format!("{input:<46} {} — {e}\n", e.code()),
        })
        .collect();
    expect![[r#"
        https://api.example.com/v1/chat/completions    ok https://api.example.com/v1/chat/completions (authority api.example.com)
        https://api.example.com:8443/v1                ok https://api.example.com:8443/v1 (authority api.example.com:8443)
        https://[2606:4700::1111]/                     ok https://[2606:4700::1111]/ (authority [2606:4700::1111])
        https://1.1.1.1/dns-query?name=x               ok https://1.1.1.1/dns-query?name=x (authority 1.1.1.1)
        https://api.example.com/v1?a=b&c=%2F           ok https://api.example.com/v1?a=b&c=%2F (authority api.example.com)
        http://api.example.com/                        destination/not-https — destination scheme "http" is not https
        ftp://api.example.com/                         destination/not-https — destination scheme "ftp" is not https
        HTTPS://api.example.com/                       destination/non-canonical — destination is not canonical: scheme must be lowercase
        api.example.com/                               destination/not-absolute — destination is not an absolute https URL: no 'https://' before the host
        https://user:pass@api.example.com/             destination/userinfo — destination carries userinfo
        https://user@api.example.com/                  destination/userinfo — destination carries userinfo
        https://api.example.com./                      destination/non-canonical — destination is not canonical: trailing dot in host
        https://API.example.com/                       destination/non-canonical — destination is not canonical: uppercase host
        https://api%2eexample.com/                     destination/non-canonical — destination is not canonical: percent-encoded host
        https://bücher.example/                        destination/non-canonical — destination is not canonical: non-ASCII host (use the A-label form)
        https://xn--bcher-kva.example/                 ok https://xn--bcher-kva.example/ (authority xn--bcher-kva.example)
        https://api.example.com:443/                   destination/non-canonical — destination is not canonical: default port 443 spelled out
        https://api.example.com:0443/                  destination/non-canonical — destination is not canonical: port has leading zeros
        https://api.example.com:/                      destination/non-canonical — destination is not canonical: empty port
        https://api.example.com:99999/                 destination/bad-port — destination port is invalid: port above 65535
        https://api.example.com                        destination/non-canonical — destination is not canonical: path must start with '/'
        https://api.example.com/a/../b                 destination/non-canonical — destination is not canonical: dot segment in path
        https://api.example.com/a/./b                  destination/non-canonical — destination is not canonical: dot segment in path
        https://api.example.com/%7euser                destination/non-canonical — destination is not canonical: percent-escape not in upper-case hex
        https://api.example.com/%2f                    destination/non-canonical — destination is not canonical: percent-escape not in upper-case hex
        https://api.example.com/a b                    destination/non-canonical — destination is not canonical: character must be percent-escaped
        https://api.example.com/a\b                    destination/non-canonical — destination is not canonical: character must be percent-escaped
        https://api.example.com/#frag                  destination/fragment — destination carries a fragment
        https://0x7f.1/                                destination/non-canonical — destination is not canonical: IPv4 literal not in dotted-decimal form
        https://2130706433/                            destination/non-canonical — destination is not canonical: IPv4 literal not in dotted-decimal form
        https://127.000.000.001/                       destination/non-canonical — destination is not canonical: IPv4 literal not in dotted-decimal form
        https://[::FFFF:127.0.0.1]/                    destination/non-canonical — destination is not canonical: IPv6 literal not in canonical form (RFC 5952 §4, hex only)
        https://[0:0:0:0:0:0:0:1]/                     destination/non-canonical — destination is not canonical: IPv6 literal not in canonical form (RFC 5952 §4, hex only)
        https://-bad.example.com/                      destination/invalid-host — destination host is invalid: label starts or ends with '-'
        https://a..b/                                  destination/invalid-host — destination host is invalid: empty label
        https://under_score.example/                   destination/invalid-host — destination host is invalid: character outside [a-z0-9.-]
    "#]].assert_eq(&out);
}

#[test]
fn purposes() {
    assert!(Purpose::new("model-portal").is_ok());
    for bad in ["", "Model", "a b", "x".repeat(65).as_str()] {
        assert_eq!(
            Purpose::new(bad).unwrap_err().code(),
            "destination/invalid-purpose"
        );
    }
}

/// Architecture Invariant check: the crate's source never reads the process environment, so
/// no ambient proxy or credential can influence a destination.
#[test]
fn no_ambient_environment() {
    let sources = [
        include_str!("../src/lib.rs"),
        include_str!("../src/url.rs"),
        include_str!("../src/admission.rs"),
        include_str!("../src/resolver.rs"),
        include_str!("../src/connector.rs"),
        include_str!("../src/special.rs"),
        include_str!("../src/error.rs"),
    ];
    for source in sources {
        for banned in [
            "env::var",
            "env::vars",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "var_os",
        ] {
            assert!(!source.contains(banned), "source mentions {banned}");
        }
    }
}

/// Production trust is a parameter; the shipped default is the webpki-roots bundle.
#[test]
fn webpki_roots_are_available() {
    assert!(reach_destination::webpki_root_store().len() > 50);
}
