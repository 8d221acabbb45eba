//! Parsing a destination URL into its one canonical form.
//!
//! The parser is deliberately strict instead of normalising: a destination must already be
//! written as `https://host[:port]/path[?query]` with a lowercase ASCII host, no trailing dot, no
//! percent-encoded host, no default port spelled out, no dot segments and upper-case
//! percent-escapes. Normalising would let two spellings name one destination (and let a
//! spelling that a later component normalises differently slip past this one); refusing keeps
//! one spelling per destination, which is what the manifest and the decision digests bind.
//!
//! The canonical spelling of an IPv6 literal is decided in one place, [`canonical_ipv6`]: RFC
//! 5952 §4 (lowercase hex, no leading zeros, the longest run of two or more zero groups
//! compressed, the first one on a tie) and never the §5 dotted tail, which is exactly what the
//! WHATWG URL serialiser writes. So a URL library that normalises on the way here (the corpus
//! path's `url::Url`) hands over the canonical form, and `[::ffff:7f00:1]` is judged as the
//! IPv4-mapped loopback it is instead of being refused as a spelling.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::DestinationError;

/// The port an `https` destination uses when it spells none.
pub const DEFAULT_HTTPS_PORT: u16 = 443;
/// Longest DNS name accepted (RFC 1035 §2.3.4, without the root dot).
const MAX_NAME_LEN: usize = 253;
/// Longest DNS label (RFC 1035 §2.3.4).
const MAX_LABEL_LEN: usize = 63;
/// Longest purpose label; purposes are short manifest names such as `model-portal`.
const MAX_PURPOSE_LEN: usize = 64;
/// Longest URL accepted; destinations come from manifests and redirects, not user content.
const MAX_URL_LEN: usize = 2048;

/// What a destination is admitted for (`model-portal`, `a2a-peer`, `corpus-source`…): a short
/// lowercase label bound into decisions and logs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Purpose(String);

impl Purpose {
    /// Validate a purpose label: 1 to 64 characters of `[a-z0-9.-]`.
    pub fn new(purpose: &str) -> Result<Self, DestinationError> {
        let ok = !purpose.is_empty()
            && purpose.len() <= MAX_PURPOSE_LEN
            && purpose
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if ok {
            Ok(Purpose(purpose.to_owned()))
        } else {
            Err(DestinationError::InvalidPurpose {
                purpose: purpose.to_owned(),
            })
        }
    }

    /// The label.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A destination host: a canonical DNS name or an IP literal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// A lowercase ASCII DNS name without a trailing dot.
    Name(String),
    /// An IP literal (`1.2.3.4` or `[2001:db8::1]` in the URL).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{}]", canonical_ipv6(*ip)),
        }
    }
}

/// A parsed, canonical, not yet admitted destination.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Destination {
    host: Host,
    port: u16,
    path_and_query: String,
    purpose: Purpose,
    /// How many redirects led here (0 for a destination named by configuration).
    redirect_hops: u8,
}

impl Destination {
    /// Parse a canonical `https` URL for `purpose`.
    pub fn parse(url: &str, purpose: Purpose) -> Result<Self, DestinationError> {
        if url.len() > MAX_URL_LEN {
            return Err(DestinationError::NonCanonical {
                reason: "url longer than 2048 bytes",
            });
        }
        if url.starts_with(|c: char| c <= ' ') || url.ends_with(|c: char| c <= ' ') {
            // WHATWG strips these before parsing, so a normaliser would read another URL.
            return Err(DestinationError::NonCanonical {
                reason: "leading or trailing whitespace or control character",
            });
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(not_absolute(url));
        };
        if scheme != "https" {
            if scheme.eq_ignore_ascii_case("https") {
                return Err(DestinationError::NonCanonical {
                    reason: "scheme must be lowercase",
                });
            }
            return Err(DestinationError::NotHttps {
                scheme: scheme.to_owned(),
            });
        }
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(DestinationError::Userinfo);
        }
        let (host, port) = parse_authority(authority)?;
        let path_and_query = parse_path_and_query(tail)?;
        Ok(Destination {
            host,
            port,
            path_and_query,
            purpose,
            redirect_hops: 0,
        })
    }

    /// Resolve a redirect `Location` against this destination into a brand-new destination,
    /// which must be admitted again before anything dials it.
    pub(crate) fn redirect(&self, location: &str) -> Result<Self, DestinationError> {
        let mut next = if location.starts_with('/') && !location.starts_with("//") {
            let path_and_query = parse_path_and_query(location)?;
            Destination {
                path_and_query,
                ..self.clone()
            }
        } else {
            Destination::parse(location, self.purpose.clone())?
        };
        next.redirect_hops = self.redirect_hops.saturating_add(1);
        Ok(next)
    }

    /// The host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The path and query, starting with `/`.
    pub fn path_and_query(&self) -> &str {
        &self.path_and_query
    }

    /// The purpose.
    pub fn purpose(&self) -> &Purpose {
        &self.purpose
    }

    /// How many redirects led to this destination.
    pub fn redirect_hops(&self) -> u8 {
        self.redirect_hops
    }

    /// The authority as it appears in the URL and in the Host header: `host` or `host:port`.
    pub fn authority(&self) -> String {
        if self.port == DEFAULT_HTTPS_PORT {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The origin, `https://authority`.
    pub fn origin(&self) -> String {
        format!("https://{}", self.authority())
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.path_and_query)
    }
}

fn parse_authority(authority: &str) -> Result<(Host, u16), DestinationError> {
    let (host_part, port_part) = if let Some(inner) = authority.strip_prefix('[') {
        let Some(end) = inner.find(']') else {
            return Err(DestinationError::InvalidHost {
                reason: "unterminated IPv6 literal",
            });
        };
        let literal = &inner[..end];
        let after = &inner[end + 1..];
        let ip: Ipv6Addr = literal.parse().map_err(|_| DestinationError::InvalidHost {
            reason: "invalid IPv6 literal",
        })?;
        if canonical_ipv6(ip) != literal {
            return Err(DestinationError::NonCanonical {
                reason: "IPv6 literal not in canonical form (RFC 5952 §4, hex only)",
            });
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(DestinationError::InvalidHost {
                reason: "junk after IPv6 literal",
            })?),
        };
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let bare_v6 = |a: &str| a.parse::<Ipv6Addr>().is_ok();
        if authority.matches(':').count() > 1
            && (bare_v6(authority) || authority.rsplit_once(':').is_some_and(|(a, _)| bare_v6(a)))
        {
            return Err(DestinationError::InvalidHost {
                reason: "IPv6 literal without brackets",
            });
        }
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        (parse_host(host)?, port)
    };
    let port = match port_part {
        None => DEFAULT_HTTPS_PORT,
        Some(p) => parse_port(p)?,
    };
    Ok((host_part, port))
}

fn parse_port(p: &str) -> Result<u16, DestinationError> {
    if p.is_empty() {
        return Err(DestinationError::NonCanonical {
            reason: "empty port",
        });
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DestinationError::BadPort {
            reason: "port is not a number",
        });
    }
    let digits = p.trim_start_matches('0');
    if digits.is_empty() {
        return Err(DestinationError::BadPort {
            reason: "port 0 is no destination",
        });
    }
    let port: u16 = digits.parse().map_err(|_| DestinationError::BadPort {
        reason: "port above 65535",
    })?;
    if digits.len() != p.len() {
        return Err(DestinationError::NonCanonical {
            reason: "port has leading zeros",
        });
    }
    if port == DEFAULT_HTTPS_PORT {
        return Err(DestinationError::NonCanonical {
            reason: "default port 443 spelled out",
        });
    }
    Ok(port)
}

/// Why an input without `://` is refused: a relative or scheme-relative reference, a scheme
/// other than https (`mailto:`, `javascript:`), or an https URL missing `//host`. A host and
/// port without a scheme (`api.example.com:8443/v1`, `localhost:8443/`) reads as a scheme in
/// RFC 3986 but is a missing `https://`, so a "scheme" with a dot or followed by a port is one.
fn not_absolute(url: &str) -> DestinationError {
    let reason = if url.starts_with("//") {
        "scheme-relative reference"
    } else if url.is_empty() || url.starts_with(['/', '?', '#', '.']) {
        "relative reference"
    } else {
        match url.split_once(':') {
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
                "scheme without '//' and a host"
            }
            Some((scheme, rest))
                if is_scheme(scheme) && !scheme.contains('.') && !is_port(rest) =>
            {
                return DestinationError::NotHttps {
                    scheme: scheme.to_owned(),
                };
            }
            _ => "no 'https://' before the host",
        }
    };
    DestinationError::NotAbsolute { reason }
}

/// Whether `rest` (after `host:`) starts with a port: digits up to the end or a `/`.
fn is_port(rest: &str) -> bool {
    let port = rest.split(['/', '?', '#']).next().unwrap_or("");
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
}

/// RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_scheme(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The address a host ending in a number means to a WHATWG URL parser (one to four parts, each
/// decimal, `0x` hex or `0` octal, the last filling the remaining bytes), or `None` where that
/// parser fails too. Only used to tell a non-canonical spelling of an address from no address.
fn whatwg_ipv4(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (*part, 10)
        };
        let number = match digits {
            "" if !part.is_empty() => 0,
            _ if !digits.bytes().all(|b| b.is_ascii_hexdigit()) => return None,
            _ => u64::from_str_radix(digits, radix).ok()?,
        };
        numbers.push(number);
    }
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|n| *n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return None;
    }
    let value = init
        .iter()
        .enumerate()
        .fold(*last, |acc, (i, n)| acc + (n << (8 * (3 - i))));
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// The one canonical text of an IPv6 address in a destination (see the module docs): RFC 5952
/// §4 hex, identical to the WHATWG URL serialiser, never the dotted IPv4 tail.
pub(crate) fn canonical_ipv6(ip: Ipv6Addr) -> String {
    let segments = ip.segments();
    // The first longest run of zero groups, if it is at least two groups long.
    let (mut best_start, mut best_len) = (0usize, 0usize);
    let mut i = 0;
    while i < segments.len() {
        if segments[i] == 0 {
            let start = i;
            while i < segments.len() && segments[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best_start, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    let hex = |groups: &[u16]| {
        groups
            .iter()
            .map(|g| format!("{g:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len < 2 {
        return hex(&segments);
    }
    format!(
        "{}::{}",
        hex(&segments[..best_start]),
        hex(&segments[best_start + best_len..])
    )
}

fn parse_host(host: &str) -> Result<Host, DestinationError> {
    if host.is_empty() {
        return Err(DestinationError::InvalidHost {
            reason: "empty host",
        });
    }
    if host.contains('%') {
        return Err(DestinationError::NonCanonical {
            reason: "percent-encoded host",
        });
    }
    if host.ends_with('.') {
        return Err(DestinationError::NonCanonical {
            reason: "trailing dot in host",
        });
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(DestinationError::NonCanonical {
            reason: "uppercase host",
        });
    }
    if !host.is_ascii() {
        return Err(DestinationError::NonCanonical {
            reason: "non-ASCII host (use the A-label form)",
        });
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Err(DestinationError::InvalidHost {
            reason: "character outside [a-z0-9.-]",
        });
    }
    let last = host.rsplit('.').next().unwrap_or(host);
    let numeric_last =
        !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"));
    if numeric_last {
        // A numeric final label is an IPv4 literal (WHATWG would read `0x7f.1` or `2130706433`
        // as 127.0.0.1); only the dotted-quad form without leading zeros is canonical.
        return match whatwg_ipv4(host) {
            Some(ip) if ip.to_string() == host => Ok(Host::Ip(IpAddr::V4(ip))),
            Some(_) => Err(DestinationError::NonCanonical {
                reason: "IPv4 literal not in dotted-decimal form",
            }),
            None => Err(DestinationError::InvalidHost {
                reason: "invalid IPv4 literal",
            }),
        };
    }
    if host.len() > MAX_NAME_LEN {
        return Err(DestinationError::InvalidHost {
            reason: "name longer than 253 bytes",
        });
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err(DestinationError::InvalidHost {
                reason: "empty label",
            });
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(DestinationError::InvalidHost {
                reason: "label longer than 63 bytes",
            });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(DestinationError::InvalidHost {
                reason: "label starts or ends with '-'",
            });
        }
    }
    Ok(Host::Name(host.to_owned()))
}

fn parse_path_and_query(tail: &str) -> Result<String, DestinationError> {
    if tail.contains('#') {
        return Err(DestinationError::Fragment);
    }
    if !tail.starts_with('/') {
        return Err(DestinationError::NonCanonical {
            reason: "path must start with '/'",
        });
    }
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    check_component(path, true)?;
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return Err(DestinationError::NonCanonical {
            reason: "dot segment in path",
        });
    }
    if let Some(query) = query {
        check_component(query, false)?;
    }
    Ok(tail.to_owned())
}

/// Characters allowed unescaped (RFC 3986 `pchar` plus `/`, and `?` in queries), and
/// percent-escapes only in upper-case hex and only for characters that need escaping.
fn check_component(s: &str, is_path: bool) -> Result<(), DestinationError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .ok_or(DestinationError::NonCanonical {
                    reason: "truncated percent-escape",
                })?;
            if !hex
                .iter()
                .all(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(h))
            {
                return Err(DestinationError::NonCanonical {
                    reason: "percent-escape not in upper-case hex",
                });
            }
            let value =
                u8::from_str_radix(std::str::from_utf8(hex).unwrap_or("00"), 16).unwrap_or(0);
            if is_unreserved(value) {
                return Err(DestinationError::NonCanonical {
                    reason: "percent-escaped unreserved character",
                });
            }
            i += 3;
            continue;
        }
        let allowed = is_unreserved(b) || b"!$&'()*+,;=:@/".contains(&b) || (!is_path && b == b'?');
        if !allowed {
            return Err(DestinationError::NonCanonical {
                reason: "character must be percent-escaped",
            });
        }
        i += 1;
    }
    Ok(())
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}
