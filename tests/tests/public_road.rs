//! The production road to Discord, run for real but isolated from the host's network.
//!
//! Every other body test reaches the emulator through exact local roads. Here both Discord roles
//! are configured exactly as for public Discord — `rest_base_url = "https://discord.com/api/v10"`,
//! `gateway_url = "wss://gateway.discord.gg"`, `roads.name_servers` and `roads.ca_file` — inside
//! a network namespace this test creates. The namespace has only its loopback interface,
//! carrying Discord's public addresses; a DNS server written here (hickory-proto) answers on
//! 127.0.0.1:53 from a table the test controls and records every query; the emulator's REST
//! server listens on 162.159.128.233:443 and its gateway (identify and resume) on two more
//! Discord addresses, with a certificate issued for the real names only. So one reply proves the
//! whole road: resolution only through the named server, admission of a public answer, the
//! connection pinned to it, SNI and certificate name the real name, trust from `ca_file`; a
//! dropped connection resumes at READY's `resume_gateway_url`, resolved and admitted the same way.
//! Then the DNS answer for discord.com turns hostile (a private address, a mixed answer, an
//! IPv4-mapped IPv6 address, a NAT64 address) and nothing may be delivered, nor any refused
//! address dialed.
//!
//! The emulator does not record the SNI it was sent; its certificate names only the real names,
//! so a completed handshake shows the client verified `discord.com`.
//!
//! Needs root (to create the namespace); skips with a printed reason otherwise, unless
//! `REACH_REQUIRE_NETNS=1` makes that a failure.

// Tests may read the environment: the re-exec marker and REACH_REQUIRE_NETNS.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::op::Message;
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use reach_destination::roads::Roads;
use reach_destination::{AdmissionPolicy, Destination, Purpose};
use reach_discord_emulator::{EmulatorConfig, User};
use reach_tests::{TestBody, trail_until};
use tokio::net::UdpSocket;

/// The test's own name, for the re-execution inside the namespace.
const TEST_NAME: &str = "public_discord_road_through_controlled_dns";
/// Set (to the namespace name) in the re-executed child: it is inside.
const INSIDE: &str = "REACH_PUBLIC_ROAD_NETNS";
/// One of discord.com's real addresses; inside the namespace it is on `lo` only.
const DISCORD_COM: Ipv4Addr = Ipv4Addr::new(162, 159, 128, 233);
/// One of gateway.discord.gg's real addresses, and a resume gateway's (Discord's range).
const GATEWAY: Ipv4Addr = Ipv4Addr::new(162, 159, 135, 232);
const RESUME_GATEWAY: Ipv4Addr = Ipv4Addr::new(162, 159, 136, 232);
const GATEWAY_HOST: &str = "gateway.discord.gg";
const RESUME_HOST: &str = "gateway-us-east1-b.discord.gg";
/// The private address of the first hostile answer; also on `lo`, with a trap listening.
const PRIVATE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
/// The one name server egress-discord may ask.
const NAME_SERVER: &str = "127.0.0.1:53";
const REST_BASE_URL: &str = "https://discord.com/api/v10";
const CHANNEL: u64 = 1_100_000_000_000_000_200;
/// A bound on waiting for an effect, so a failure is a clear message rather than a hang.
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn public_discord_road_through_controlled_dns() {
    if std::env::var_os(INSIDE).is_some() {
        return inside();
    }
    if !nix::unistd::geteuid().is_root() {
        let reason = "public_road: skipped, creating a network namespace needs root";
        assert!(
            std::env::var("REACH_REQUIRE_NETNS").as_deref() != Ok("1"),
            "{reason} and REACH_REQUIRE_NETNS=1"
        );
        println!("{reason}");
        return;
    }
    let ns = Netns::create(&format!("reach-road-{}", std::process::id()));
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&["addr", "add", &format!("{DISCORD_COM}/32"), "dev", "lo"]);
    for addr in [GATEWAY, RESUME_GATEWAY, PRIVATE] {
        ns.ip(&["addr", "add", &format!("{addr}/32"), "dev", "lo"]);
    }
    let exe = std::env::current_exe().expect("test binary");
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(exe)
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(INSIDE, &ns.name)
        .status()
        .expect("ip netns exec");
    assert!(status.success(), "the test inside {} failed", ns.name);
}

/// A network namespace deleted when dropped, also when the test fails.
struct Netns {
    name: String,
}

impl Netns {
    fn create(name: &str) -> Netns {
        let status = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .expect("ip netns add");
        assert!(status.success(), "ip netns add {name}");
        Netns { name: name.into() }
    }

    fn ip(&self, args: &[&str]) {
        let status = Command::new("ip")
            .args(["-n", &self.name])
            .args(args)
            .status()
            .expect("ip");
        assert!(status.success(), "ip -n {} {args:?}", self.name);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

/// The DNS server's answers (name → addresses) and every question it was asked.
#[derive(Clone, Default)]
struct Dns {
    table: Arc<Mutex<HashMap<String, Vec<IpAddr>>>>,
    queries: Arc<Mutex<Vec<(String, RecordType)>>>,
}

impl Dns {
    fn answer(&self, name: &str, addrs: &[IpAddr]) {
        self.table
            .lock()
            .unwrap()
            .insert(name.to_owned(), addrs.to_vec());
    }

    fn queries(&self) -> Vec<(String, RecordType)> {
        self.queries.lock().unwrap().clone()
    }

    /// Serve on `addr` (UDP): A and AAAA from the table with TTL 0 (so neither hickory nor
    /// admission may reuse an answer across the test's cases), an empty NOERROR otherwise.
    async fn serve(&self, addr: &str) {
        let socket = UdpSocket::bind(addr).await.expect("bind the DNS server");
        let dns = self.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                let Ok(request) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let mut response = request.clone().into_response();
                for query in &request.queries {
                    let name = query.name().to_ascii().to_ascii_lowercase();
                    let name = name.trim_end_matches('.').to_owned();
                    dns.queries
                        .lock()
                        .unwrap()
                        .push((name.clone(), query.query_type()));
                    let addrs = dns.table.lock().unwrap().get(&name).cloned();
                    for ip in addrs.unwrap_or_default() {
                        let rdata = match (query.query_type(), ip) {
                            (RecordType::A, IpAddr::V4(v4)) => RData::A(A(v4)),
                            (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(v6)),
                            _ => continue,
                        };
                        response.add_answer(Record::from_rdata(query.name().clone(), 0, rdata));
                    }
                }
                if let Ok(bytes) = response.to_vec() {
                    let _ = socket.send_to(&bytes, peer).await;
                }
            }
        });
    }
}

/// A TCP listener on an address admission must refuse, counting every connection: a refused
/// destination is refused before any dial, so a connection here is a failure even if nothing
/// was delivered.
#[derive(Clone)]
struct Trap {
    addr: SocketAddr,
    dials: Arc<std::sync::atomic::AtomicUsize>,
}

impl Trap {
    async fn listen(addr: SocketAddr) -> Trap {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind a trap");
        let trap = Trap {
            addr,
            dials: Arc::default(),
        };
        let dials = Arc::clone(&trap.dials);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                dials.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(conn);
            }
        });
        trap
    }

    fn dials(&self) -> usize {
        self.dials.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// How many times discord.com was asked for.
fn discord_queries(dns: &Dns) -> usize {
    dns.queries()
        .iter()
        .filter(|(name, _)| name == "discord.com")
        .count()
}

fn inside() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(road());
}

async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Discord roles' settings for public Discord: the real REST base URL and gateway URL
/// (which `discord::configure` already wrote from the emulator), only the test's name server,
/// and only the emulator's CA (which `discord::configure` wrote as discord-ca.pem).
fn public_road(manifest: &mut reach_manifest::Manifest, ca_file: &std::path::Path) {
    let mut roads = toml::Table::new();
    roads.insert(
        "name_servers".into(),
        toml::Value::Array(vec![NAME_SERVER.into()]),
    );
    roads.insert("ca_file".into(), ca_file.display().to_string().into());
    for role in manifest.roles.iter_mut() {
        match role.name.as_str() {
            "egress-discord" => {
                role.settings
                    .insert("rest_base_url".into(), REST_BASE_URL.into());
            }
            "ingress-edge" => {
                let url = role.settings.get("gateway_url").and_then(|u| u.as_str());
                assert_eq!(url, Some("wss://gateway.discord.gg"));
                role.settings.insert(
                    "gateway_bot_url".into(),
                    format!("{REST_BASE_URL}/gateway/bot").into(),
                );
            }
            _ => continue,
        }
        role.settings.insert("roads".into(), roads.clone().into());
    }
}

async fn road() {
    let dns = Dns::default();
    dns.serve(NAME_SERVER).await;
    dns.answer("discord.com", &[IpAddr::V4(DISCORD_COM)]);
    dns.answer(GATEWAY_HOST, &[IpAddr::V4(GATEWAY)]);
    dns.answer(RESUME_HOST, &[IpAddr::V4(RESUME_GATEWAY)]);
    let at_443 = |ip: Ipv4Addr| SocketAddr::new(IpAddr::V4(ip), 443);
    let config = EmulatorConfig {
        rest_listen: Some(at_443(DISCORD_COM)),
        gateway_tls: true,
        gateway_listen: Some([
            (GATEWAY_HOST.into(), at_443(GATEWAY)),
            (RESUME_HOST.into(), at_443(RESUME_GATEWAY)),
        ]),
        tls_names: Some(vec![
            "discord.com".into(),
            GATEWAY_HOST.into(),
            RESUME_HOST.into(),
        ]),
        ..EmulatorConfig::default()
    };
    let (body, em) = TestBody::start_with_emulator_configured(
        config,
        &[CHANNEL],
        |manifest, layout| public_road(manifest, &layout.root().join("discord-ca.pem")),
        "info",
    )
    .await;
    let ca_file = body.layout.root().join("discord-ca.pem");
    let mut operator = body.operator_after_genesis("public road").await;
    let bot = em.config().bot_user_id;

    // One question → exactly one reply, over the public road.
    let asker = User::human(1_100_000_000_000_000_500, "asker");
    let q = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    eventually("the reply over the public road", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q))
    })
    .await;
    trail_until(&mut operator, &q.to_string(), "outcome=KNOWN_SENT", WAIT).await;
    assert_eq!(em.bot_messages(CHANNEL).len(), 1);
    assert_eq!(em.create_requests().len(), 1);
    let asked = |host: &str| {
        dns.queries()
            .iter()
            .any(|(name, t)| name == host && *t == RecordType::A)
    };
    assert!(asked("discord.com"), "{:?}", dns.queries());
    assert!(asked(GATEWAY_HOST), "{:?}", dns.queries());
    // ingress-edge read Discord's session start limit over the same road before identifying.
    let gateway_bot: Vec<u16> = em
        .responses()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v10/gateway/bot")
        .map(|r| r.status)
        .collect();
    assert!(
        !gateway_bot.is_empty() && gateway_bot.iter().all(|s| *s == 200),
        "{gateway_bot:?}"
    );

    // The connection drops: ingress-edge resumes at READY's resume_gateway_url, a new name
    // resolved and admitted like the first, and the next question is answered once.
    assert!(em.drop_connection());
    let q = em.post_user_message(
        CHANNEL,
        &User::human(1_100_000_000_000_000_501, "asker"),
        &format!("<@{bot}> What happens when a vault is lost?"),
    );
    eventually("the reply after the resume", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q))
    })
    .await;
    assert!(
        em.gateway_counts().resumes >= 1,
        "{:?}",
        em.gateway_counts()
    );
    assert!(asked(RESUME_HOST), "{:?}", dns.queries());
    assert_eq!(em.bot_messages(CHANNEL).len(), 2);
    assert_eq!(em.create_requests().len(), 2);

    // Hostile answers: each refused at egress-discord's admission, before any dial (traps
    // listen on the private and loopback addresses), nothing delivered.
    let traps = [
        Trap::listen(SocketAddr::new(IpAddr::V4(PRIVATE), 443)).await,
        Trap::listen(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 443)).await,
    ];
    let mapped = Ipv4Addr::new(162, 159, 128, 233).to_ipv6_mapped();
    let cases: [(&str, Vec<IpAddr>, &str); 4] = [
        (
            "a private address",
            vec![IpAddr::V4(PRIVATE)],
            "destination/special-purpose-address",
        ),
        (
            "public and loopback mixed",
            vec![IpAddr::V4(DISCORD_COM), IpAddr::V4(Ipv4Addr::LOCALHOST)],
            "destination/mixed-resolution",
        ),
        (
            "an IPv4-mapped IPv6 address",
            vec![IpAddr::V6(mapped)],
            "destination/special-purpose-address",
        ),
        (
            "a NAT64 address embedding the metadata address",
            vec!["64:ff9b::a9fe:a9fe".parse().unwrap()],
            "destination/special-purpose-address",
        ),
    ];
    let admission = Roads {
        name_servers: vec![NAME_SERVER.parse().unwrap()],
        ca_file: Some(ca_file),
        ..Roads::default()
    }
    .admission(AdmissionPolicy::default())
    .expect("the same roads egress-discord has");
    let discord = Destination::parse(REST_BASE_URL, Purpose::new("discord-rest").unwrap()).unwrap();
    for (i, (what, answer, code)) in cases.into_iter().enumerate() {
        dns.answer("discord.com", &answer);
        // The typed reason, from the admission egress-discord builds from these roads.
        let refused = admission.admit(discord.clone()).await.expect_err(what);
        assert_eq!(refused.code(), code, "{what}: {refused}");
        let asked_before = discord_queries(&dns);
        let asker = User::human(1_100_000_000_000_000_600 + i as u64, "asker");
        let q = em.post_user_message(
            CHANNEL,
            &asker,
            &format!("<@{bot}> How do I rotate the trust root?"),
        );
        let trail = trail_until(&mut operator, &q.to_string(), "outcome=", WAIT).await;
        // Nothing was sent: settled rejected with the destination's refusal code.
        assert!(
            trail.contains("outcome=KNOWN_REJECTED") && trail.contains("detail=destination/"),
            "{what}: not settled as refused with its destination code:\n{trail}"
        );
        for trap in &traps {
            assert_eq!(
                trap.dials(),
                0,
                "{what}: egress-discord dialed {}",
                trap.addr
            );
        }
        assert!(
            discord_queries(&dns) > asked_before,
            "{what}: egress-discord never asked the name server"
        );
        assert_eq!(
            em.create_requests().len(),
            2,
            "{what}: a Create Message arrived"
        );
        assert_eq!(
            em.bot_messages(CHANNEL).len(),
            2,
            "{what}: a reply appeared"
        );
    }
    body.stop().await;
}
