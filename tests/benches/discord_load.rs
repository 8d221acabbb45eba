//! The Discord pipeline under load (issue #7's benchmark): every role as a separate release
//! process, the loopback Discord emulator on both sides, the local extractive cognition.
//!
//! ```text
//! cargo build --release --bins && cargo bench -p reach-tests --bench discord_load
//! ```
//!
//! Phases, each printed:
//! 1. latency: questions one at a time, emulator MESSAGE_CREATE dispatch → Create Message
//!    received (p50/p99);
//! 2. sustained: `RATE` questions/s for `SECS` s across `CHANNELS` channels — replies, duplicates
//!    (two visible replies to one question), resends (two Create Message requests) and lost
//!    turns (no reply and no committed refusal);
//! 3. overload: 5× ward's admitted application rate for `OVERLOAD_SECS` s — refused by ward
//!    (typed, counted from the trail), heartbeat lateness, delivery latency of what was admitted;
//! 4. RSS of every role idle and at its peak under load.
//!
//! Knobs (environment, bench only): REACH_LOAD_RATE (200), REACH_LOAD_SECS (60),
//! REACH_LOAD_CHANNELS (50), REACH_LOAD_OVERLOAD_SECS (5), REACH_LOAD_LATENCY_N (200).
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reach_discord_emulator::{Emulator, EmulatorConfig, User};
use reach_proto::core::v1::GetTrailRequest;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_tests::TestBody;

const QUESTIONS: [&str; 6] = [
    "How does a port authenticate a call?",
    "How do I rotate the trust root?",
    "What happens when a vault is lost?",
    "How does reach demo work?",
    "What does the phylactery record for a turn?",
    "How are secrets stored?",
];
const FIRST_CHANNEL: u64 = 1_100_000_000_000_010_000;
const USERS: u64 = 5_000;
/// How long a phase waits for its last replies.
const DRAIN: Duration = Duration::from_secs(30);

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One question as posted.
struct Asked {
    id: u64,
    at: Instant,
    /// Wall time of the dispatch, to compare with the ledger's commit times (same host clock).
    wall_ms: u64,
}

/// Posts `n` questions at `rate`/s, round-robin over channels and users.
async fn post(em: &Emulator, channels: u64, rate: u64, n: u64, seq: &mut u64) -> Vec<Asked> {
    let bot = em.config().bot_user_id;
    let start = Instant::now();
    let mut asked = Vec::with_capacity(n as usize);
    for i in 0..n {
        // Pace by schedule, not by sleeping a fixed step: late ticks catch up.
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        *seq += 1;
        let channel = FIRST_CHANNEL + *seq % channels;
        let user = User::human(1_100_000_000_000_100_000 + *seq % USERS, "asker");
        let q = QUESTIONS[(*seq % QUESTIONS.len() as u64) as usize];
        let at = Instant::now();
        let wall_ms = unix_ms();
        let id = em.post_user_message(channel, &user, &format!("<@{bot}> {q}"));
        asked.push(Asked { id, at, wall_ms });
    }
    asked
}

/// What the emulator received for each question: Create Message times, visible replies.
struct Replies {
    creates: HashMap<u64, Vec<Instant>>,
    visible: HashMap<u64, usize>,
}

fn replies(em: &Emulator, channels: u64) -> Replies {
    let mut creates: HashMap<u64, Vec<Instant>> = HashMap::new();
    for c in em.create_requests() {
        let target = c.body["message_reference"]["message_id"]
            .as_str()
            .and_then(|s| s.parse().ok());
        if let Some(t) = target {
            creates.entry(t).or_default().push(c.received_at);
        }
    }
    let mut visible: HashMap<u64, usize> = HashMap::new();
    for ch in 0..channels {
        for m in em.bot_messages(FIRST_CHANNEL + ch) {
            if let Some(r) = m.reply_to {
                *visible.entry(r).or_default() += 1;
            }
        }
    }
    Replies { creates, visible }
}

/// Waits until every question has a reply or the drain time passes.
async fn drain(em: &Emulator, channels: u64, asked: &[Asked]) -> Replies {
    let deadline = Instant::now() + DRAIN;
    loop {
        let r = replies(em, channels);
        let done = asked.iter().all(|a| r.creates.contains_key(&a.id));
        if done || Instant::now() >= deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn latencies(asked: &[Asked], r: &Replies) -> Vec<Duration> {
    let mut l: Vec<Duration> = asked
        .iter()
        .filter_map(|a| {
            r.creates
                .get(&a.id)
                .and_then(|t| t.first())
                .map(|t| *t - a.at)
        })
        .collect();
    l.sort();
    l
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where an answered question's time went, from the commit times in its trail (ms):
/// dispatch → admission, admission → turn and intent committed, intent committed → delivery
/// settled. The last is the committed-intent delivery latency; the first is the queue in front
/// of admission. Samples at most `MAX` questions evenly.
async fn stages(
    operator: &mut TrailClient<tonic::transport::Channel>,
    asked: &[Asked],
    r: &Replies,
) -> [Vec<Duration>; 3] {
    const MAX: usize = 400;
    let answered: Vec<&Asked> = asked
        .iter()
        .filter(|a| r.creates.contains_key(&a.id))
        .collect();
    let step = answered.len().div_ceil(MAX).max(1);
    let mut out: [Vec<Duration>; 3] = Default::default();
    for a in answered.iter().step_by(step) {
        let Ok(t) = operator
            .get_trail(GetTrailRequest {
                key: a.id.to_string(),
            })
            .await
        else {
            continue;
        };
        let edges = t.into_inner().edges;
        let at = |record: &str| {
            edges
                .iter()
                .find(|e| e.record == record)
                .map(|e| e.committed_at_ms)
        };
        let (Some(admitted), Some(turn), Some(delivered)) = (
            at("DiscordEventAdmission@1"),
            at("ReachTurn@1"),
            at("ReachDelivery@1"),
        ) else {
            continue;
        };
        let gap = |from: u64, to: u64| Duration::from_millis(to.saturating_sub(from));
        out[0].push(gap(a.wall_ms, admitted));
        out[1].push(gap(admitted, turn));
        out[2].push(gap(turn, delivered));
    }
    for s in &mut out {
        s.sort();
    }
    out
}

/// The committed turn state of each question without a reply, from the operator's trail.
async fn unanswered_states(
    operator: &mut TrailClient<tonic::transport::Channel>,
    asked: &[Asked],
    r: &Replies,
) -> HashMap<String, u64> {
    let mut states: HashMap<String, u64> = HashMap::new();
    for a in asked.iter().filter(|a| !r.creates.contains_key(&a.id)) {
        let edges = operator
            .get_trail(GetTrailRequest {
                key: a.id.to_string(),
            })
            .await
            .map(|t| t.into_inner().edges)
            .unwrap_or_default();
        let turn = edges.iter().find(|e| e.record == "ReachTurn@1");
        let key = match turn {
            None => "no committed turn (lost)".to_owned(),
            Some(t) => format!(
                "{} {}",
                t.fields.get("state").cloned().unwrap_or_default(),
                t.fields.get("reason").cloned().unwrap_or_default()
            ),
        };
        *states.entry(key).or_default() += 1;
    }
    states
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// CPU time (user + system) a process has used, in clock ticks (`/proc/<pid>/stat` fields 14
/// and 15; the command name may hold spaces, so fields are counted after its closing paren).
fn cpu_ticks(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// Every role's CPU ticks, and this process's (the emulator and the load generator).
fn cpu_snapshot(pids: &[(String, u32)]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = pids
        .iter()
        .map(|(r, p)| (r.clone(), cpu_ticks(&p.to_string())))
        .collect();
    v.push(("emulator+load".into(), cpu_ticks("self")));
    v
}

fn ward_policy(admitted_per_s: u64) -> toml::Table {
    let window = |limit: u64| {
        let mut w = toml::Table::new();
        w.insert("limit".into(), toml::Value::Integer(limit as i64));
        w.insert("window_ms".into(), toml::Value::Integer(1_000));
        w.insert("kind".into(), "sliding".into());
        w
    };
    let mut limits = toml::Table::new();
    limits.insert("application".into(), window(admitted_per_s).into());
    // Only the application dimension limits this run; the others admit everything.
    for d in ["guild", "channel", "subject"] {
        limits.insert(d.into(), window(1_000_000).into());
    }
    let mut t = toml::Table::new();
    t.insert("rate_limits".into(), limits.into());
    t
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rate = knob("REACH_LOAD_RATE", 200);
    let secs = knob("REACH_LOAD_SECS", 60);
    let channels = knob("REACH_LOAD_CHANNELS", 50);
    let overload_secs = knob("REACH_LOAD_OVERLOAD_SECS", 5);
    let latency_n = knob("REACH_LOAD_LATENCY_N", 200);
    // Ward admits 10% above the sustained rate; overload is five times that.
    let admitted = rate + rate / 10;
    let ids: Vec<u64> = (0..channels).map(|c| FIRST_CHANNEL + c).collect();
    let config = EmulatorConfig {
        heartbeat_interval: Duration::from_millis(1_000),
        ..Default::default()
    };
    let (mut body, em) = TestBody::start_with_emulator(
        config,
        &ids,
        |m| {
            let ward = m
                .roles
                .iter_mut()
                .find(|r| r.name.as_str() == "ward")
                .expect("ward");
            ward.settings.extend(ward_policy(admitted));
        },
        "warn",
    )
    .await;
    let mut operator = body.operator_after_genesis("load run").await;
    let pids = body.body.as_ref().expect("running").pids();
    println!(
        "discord_load: rate {rate}/s for {secs} s over {channels} channels; ward admits {admitted}/s; bins {}",
        reach_launcher::default_bin_dir().display()
    );

    // Idle RSS after start-up settles.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle: Vec<(String, u64)> = pids.iter().map(|(r, p)| (r.clone(), rss_kib(*p))).collect();

    // 1. Latency, one question at a time.
    let mut seq = 0u64;
    let mut lat = Vec::new();
    for _ in 0..latency_n {
        let asked = post(&em, channels, 1_000, 1, &mut seq).await;
        let r = drain(&em, channels, &asked).await;
        lat.extend(latencies(&asked, &r));
    }
    lat.sort();
    println!(
        "latency (dispatch -> Create Message, one at a time): n {} p50 {:.2} ms p99 {:.2} ms max {:.2} ms (targets p50 <= 15, p99 <= 50)",
        lat.len(),
        ms(pct(&lat, 0.5)),
        ms(pct(&lat, 0.99)),
        ms(pct(&lat, 1.0))
    );

    // 2. Sustained rate, sampling RSS.
    let peak: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let sampler = {
        let (pids, peak) = (pids.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                for (r, p) in &pids {
                    let v = rss_kib(*p);
                    let mut peak = peak.lock().unwrap();
                    let e = peak.entry(r.clone()).or_default();
                    *e = (*e).max(v);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let cpu_before = cpu_snapshot(&pids);
    let started = Instant::now();
    let asked = post(&em, channels, rate, rate * secs, &mut seq).await;
    let posting = started.elapsed();
    let r = drain(&em, channels, &asked).await;
    let elapsed = started.elapsed();
    let answered = asked
        .iter()
        .filter(|a| r.creates.contains_key(&a.id))
        .count();
    let duplicates = asked
        .iter()
        .filter(|a| r.visible.get(&a.id).copied().unwrap_or(0) > 1)
        .count();
    let resends = asked
        .iter()
        .filter(|a| r.creates.get(&a.id).map_or(0, Vec::len) > 1)
        .count();
    let sustained_lat = latencies(&asked, &r);
    // The delivery rate over the time replies took to arrive, first question to last reply: the
    // drain's wait for questions ward refused (never answered) is not delivery time.
    let last_reply = asked
        .iter()
        .filter_map(|a| r.creates.get(&a.id).and_then(|t| t.first()))
        .max()
        .copied()
        .unwrap_or(started);
    let delivering = last_reply.duration_since(started).max(posting);
    let states = unanswered_states(&mut operator, &asked, &r).await;
    let lost = states
        .iter()
        .filter(|(k, _)| k.starts_with("no committed turn") || k.starts_with("OPEN"))
        .map(|(_, n)| n)
        .sum::<u64>();
    println!(
        "sustained: asked {} in {:.1} s ({:.0}/s offered), answered {answered} by {:.1} s ({:.0}/s delivered), duplicates {duplicates}, resends {resends}, lost {lost}, latency p50 {:.2} ms p99 {:.2} ms",
        asked.len(),
        posting.as_secs_f64(),
        asked.len() as f64 / posting.as_secs_f64(),
        delivering.as_secs_f64(),
        answered as f64 / delivering.as_secs_f64(),
        ms(pct(&sustained_lat, 0.5)),
        ms(pct(&sustained_lat, 0.99)),
    );
    for (state, n) in &states {
        println!("  unanswered: {n} {state}");
    }
    // Where the machine's CPU went during the sustained phase (the cores are shared by all).
    let cpu_after = cpu_snapshot(&pids);
    let per_q = |ticks: u64| ticks as f64 * 10.0 / answered.max(1) as f64; // 100 ticks/s
    let mut cpu: Vec<(String, u64)> = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|((r, b), (_, a))| (r.clone(), a.saturating_sub(*b)))
        .collect();
    cpu.sort_by_key(|c| std::cmp::Reverse(c.1));
    let line: Vec<String> = cpu
        .iter()
        .map(|(r, t)| format!("{r} {:.2}", per_q(*t)))
        .collect();
    println!(
        "  cpu per answered question (ms), over {:.1} s: {}",
        elapsed.as_secs_f64(),
        line.join(", ")
    );
    sampler.abort();
    let peak = peak.lock().unwrap().clone();

    // 3. Overload: five times the admitted rate.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hb_before = em.gateway_counts();
    let over_cpu_before = cpu_snapshot(&pids);
    let over = post(
        &em,
        channels,
        admitted * 5,
        admitted * 5 * overload_secs,
        &mut seq,
    )
    .await;
    let r = drain(&em, channels, &over).await;
    let over_lat = latencies(&over, &r);
    let states = unanswered_states(&mut operator, &over, &r).await;
    let hb = em.gateway_counts();
    println!(
        "overload ({}/s offered for {overload_secs} s): answered {} p50 {:.2} ms p99 {:.2} ms; heartbeats {} late max {:.1} ms",
        admitted * 5,
        over_lat.len(),
        ms(pct(&over_lat, 0.5)),
        ms(pct(&over_lat, 0.99)),
        hb.heartbeats - hb_before.heartbeats,
        ms(hb.heartbeat_late_max),
    );
    // CPU per offered event over the burst and its drain, refused and answered alike.
    let over_cpu: Vec<String> = over_cpu_before
        .iter()
        .zip(&cpu_snapshot(&pids))
        .filter(|((_, b), (_, a))| a > b)
        .map(|((role, b), (_, a))| {
            format!(
                "{role} {:.2}",
                (a - b) as f64 * 10.0 / over.len().max(1) as f64
            )
        })
        .collect();
    println!(
        "  cpu per offered event under overload (ms): {}",
        over_cpu.join(", ")
    );
    let [queued, turned, delivered] = stages(&mut operator, &over, &r).await;
    println!(
        "  answered under overload, from the trail's commit times (n {}): dispatch -> admission p50 {:.0} ms p99 {:.0} ms; admission -> turn committed p50 {:.0} ms p99 {:.0} ms; committed intent -> delivery settled p50 {:.0} ms p99 {:.0} ms",
        queued.len(),
        ms(pct(&queued, 0.5)),
        ms(pct(&queued, 0.99)),
        ms(pct(&turned, 0.5)),
        ms(pct(&turned, 0.99)),
        ms(pct(&delivered, 0.5)),
        ms(pct(&delivered, 0.99)),
    );
    for (state, n) in &states {
        println!("  unanswered: {n} {state}");
    }

    // 4. RSS.
    let mut idle_total = 0;
    for (role, kib) in &idle {
        idle_total += kib;
        println!(
            "rss {role:<16} idle {:>6.1} MiB  peak under load {:>6.1} MiB",
            *kib as f64 / 1024.0,
            peak.get(role).copied().unwrap_or(0) as f64 / 1024.0
        );
    }
    println!(
        "rss all {} roles idle: {:.1} MiB (target < 150 MiB)",
        idle.len(),
        idle_total as f64 / 1024.0
    );
    body.body.take().expect("running").stop().await;

    // 5. The bare ledger chain in the same run: what the pipeline adds to the ledger's own work.
    let chain = ledger_chain_p50(latency_n).await;
    println!(
        "ledger chain (admission + turn + intent + claim + SUBMITTING + settle, SQLite, one at a time): p50 {:.2} ms; pipeline latency p50 is {:.1}x the chain",
        ms(chain),
        pct(&lat, 0.5).as_secs_f64() / chain.as_secs_f64().max(1e-9)
    );
}

/// The p50 of `n` sequential full chains on a fresh SQLite vault, as the ledger bench runs them.
async fn ledger_chain_p50(n: u64) -> Duration {
    use reach_phylactery::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = Phylactery::open(
        VaultConfig::sqlite(dir.path().join("chain.db")),
        Arc::new(SystemClock),
    )
    .await
    .expect("vault");
    p.record_operator_reconciliation(&OperatorReconciliation {
        kind: ReconciliationKind::Genesis,
        operator: "bench".into(),
        note: "load bench chain".into(),
    })
    .await
    .expect("genesis");
    let mut times = Vec::new();
    for i in 0..n.max(1) {
        let t = Instant::now();
        let a = p
            .admit(&AdmissionRequest {
                key: EventKey {
                    platform: "discord".into(),
                    adapter_revision: "gw-v10/1".into(),
                    application_id: "app".into(),
                    event_kind: "MESSAGE_CREATE".into(),
                    external_event_id: format!("chain-{i}"),
                },
                payload_digest: reach_digest::Sha256Digest::of(i.to_be_bytes()),
                habitat: "bench".into(),
            })
            .await
            .expect("admit");
        let c = p
            .commit_turn(
                &a.status().turn_id,
                &TurnCommit {
                    outcome: TurnState::Succeeded,
                    reason: None,
                    answer_digest: Some(reach_digest::Sha256Digest::of(b"answer")),
                    intent: Some(DeliveryIntentSpec {
                        effect: format!("create_message channel=c reply_to=chain-{i}"),
                        payload_digest: reach_digest::Sha256Digest::of(b"body"),
                    }),
                },
            )
            .await
            .expect("turn");
        let intent = c.intent.expect("intent").0;
        let claimed = p
            .claim(&intent, "bench", Duration::from_secs(30))
            .await
            .expect("claim");
        p.mark_submitting(&claimed.lease).await.expect("submitting");
        p.settle(
            &claimed.lease,
            &DeliveryReport::Sent {
                message_id: format!("m-{i}"),
                platform_status: 200,
            },
        )
        .await
        .expect("settle");
        times.push(t.elapsed());
    }
    p.close().await;
    times.sort();
    pct(&times, 0.5)
}
