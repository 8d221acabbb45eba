//! Scribe's figures (issue #3), printed, never asserted:
//!
//! * `reach scribe` on the reference manifest: identities, units (derive and write) and the
//!   nftables ruleset, in-process (median of many runs) and as the `reach` CLI process;
//! * the image of each role built from `scratch`: size and build time, and the total;
//! * idle RSS of each role's container after readiness (target: all eight < 150 MiB),
//!   read from `/proc/<pid>/status` of the role's process (conmon and Podman excluded).
//!
//! The container figures need rootless Podman (scripts/podman-setup.sh) and the role binaries
//! (`cargo build --bins`; `REACH_BINS=DIR` picks another build, e.g. target/release). Run:
//! `cargo bench -p reach-scribe --bench scribe`.
#![allow(clippy::disallowed_methods)] // REACH_BINS and the like: benchmark knobs, never secrets.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use common::podman::{Cleanup, bins_dir, clean, materialize, rootless_or_skip, start};
use common::*;
use reach_manifest::VPS_PUBLIC;
use reach_manifest::plan::StateLayout;
use reach_scribe::nftables::{FirewallBinding, Identity, render};
use reach_scribe::quadlet::{QuadletInput, derive, write_out};

/// How long the body idles after the last role is ready before RSS is read.
const IDLE: Duration = Duration::from_secs(5);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let m = load(VPS_PUBLIC);

    // In-process: identities (first materialization and an up-to-date re-run), units, ruleset.
    let runs = 30;
    let (mut first, mut rerun, mut units, mut ruleset) = (vec![], vec![], vec![], vec![]);
    let mut binding = FirewallBinding::default();
    for (i, role) in m.roles.iter().enumerate() {
        binding.identities.insert(
            role.name.as_str().to_owned(),
            Identity::Uid(20_000 + i as u32),
        );
    }
    for d in &m.destinations {
        binding
            .addresses
            .insert(d.name.clone(), vec!["162.159.128.233".parse().unwrap()]);
    }
    for _ in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        let layout = StateLayout::new(dir.path().join("state"));
        let t = Instant::now();
        reach_scribe::materialize_identities(
            &m,
            &layout,
            reach_scribe::Rotation::IfNeeded,
            SystemTime::now(),
        )
        .unwrap();
        first.push(t.elapsed());
        let t = Instant::now();
        reach_scribe::materialize_identities(
            &m,
            &layout,
            reach_scribe::Rotation::IfNeeded,
            SystemTime::now(),
        )
        .unwrap();
        rerun.push(t.elapsed());
        let t = Instant::now();
        let input = QuadletInput::new(&m, pinned(&m), layout.clone());
        let out = derive(&input).unwrap();
        write_out(&out, &dir.path().join("out")).unwrap();
        units.push(t.elapsed());
        let t = Instant::now();
        render(&m, &binding).unwrap();
        ruleset.push(t.elapsed());
    }
    println!("reach scribe on the reference manifest (in-process, median of {runs}):");
    println!(
        "  identities, first materialization  {:8.2} ms",
        ms(median(first))
    );
    println!(
        "  identities, re-run (nothing to do) {:8.2} ms",
        ms(median(rerun))
    );
    println!(
        "  quadlet units: derive and write    {:8.2} ms",
        ms(median(units))
    );
    println!(
        "  nftables ruleset: render           {:8.2} ms",
        ms(median(ruleset))
    );

    // The CLI as an operator runs it (process start included).
    let reach = bins_dir().join("reach");
    if reach.is_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let out = dir.path().join("out");
        let digests = reference_digests();
        let time = |args: &[&str]| {
            let t = Instant::now();
            let o = Command::new(&reach).args(args).output().unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            t.elapsed()
        };
        let s = state.display().to_string();
        let o = out.display().to_string();
        let d = digests.display().to_string();
        let ids = time(&["scribe", "identities", "--state", &s]);
        // The operator's external credentials (placeholders), so `check` finds no drift.
        let layout = StateLayout::new(&state);
        for (role, file) in reach_scribe::identities::missing_credentials(&m, &layout) {
            let d = layout.secret_dir(&role);
            reach_identity::files::ensure_secret_dir(&d).unwrap();
            reach_identity::files::write_secret(&d.join(file), b"placeholder").unwrap();
        }
        let mut quadlet = vec![];
        let mut check = vec![];
        for _ in 0..10 {
            quadlet.push(time(&[
                "scribe",
                "quadlet",
                "--state",
                &s,
                "--digests",
                &d,
                "--out",
                &o,
            ]));
            check.push(time(&[
                "scribe",
                "check",
                "--state",
                &s,
                "--digests",
                &d,
                "--out",
                &o,
            ]));
        }
        println!("reach CLI wall time ({}):", reach.display());
        println!("  reach scribe identities (first)    {:8.1} ms", ms(ids));
        println!(
            "  reach scribe quadlet (median of 10){:8.1} ms",
            ms(median(quadlet))
        );
        println!(
            "  reach scribe check (median of 10)  {:8.1} ms",
            ms(median(check))
        );
    } else {
        println!("({} absent: no CLI wall time)", reach.display());
    }

    // Images and containers.
    let Some(r) = rootless_or_skip("bench scribe (images and container RSS)") else {
        return;
    };
    clean(&r, &m);
    let _cleanup = Cleanup {
        rootless: &r,
        manifest: &m,
    };
    let t = Instant::now();
    let mat = materialize(&r, &m, false);
    let build = t.elapsed();
    println!(
        "images from {} (stripped copies), built in {:.1} s with the materialization:",
        bins_dir().display(),
        build.as_secs_f64()
    );
    for line in mat.report.lines() {
        println!("  {line}");
    }
    let raw: u64 = m
        .roles
        .iter()
        .map(|r| {
            std::fs::metadata(bins_dir().join(&r.binary))
                .map(|md| md.len())
                .unwrap_or(0)
        })
        .sum();
    println!(
        "  (the eight binaries as built: {:.1} MiB; images hold stripped copies)",
        raw as f64 / 1048576.0
    );
    let _ = &mat.sizes;

    let names: Vec<String> = m.roles.iter().map(|r| r.name.as_str().to_owned()).collect();
    let order: Vec<&str> = names.iter().map(String::as_str).collect();
    let t = Instant::now();
    let ready = start(&r, &mat, &order);
    let all_ready = t.elapsed();
    std::thread::sleep(IDLE);
    println!("containers (rootless, runc, cgroupfs): start to READY=1, idle RSS after {IDLE:?}:");
    let mut rss_total = 0u64;
    let ready: BTreeMap<String, Duration> = ready.into_iter().collect();
    for role in &names {
        let o = r.podman_out(&[
            "inspect",
            "--format",
            "{{.State.Pid}}",
            &format!("reach-{role}"),
        ]);
        let pid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        let kib = rss_kib(&Path::new("/proc").join(&pid).join("status"));
        rss_total += kib;
        println!(
            "  {:<16} ready {:7.0} ms  RSS {:6.1} MiB",
            role,
            ms(ready[role]),
            kib as f64 / 1024.0
        );
    }
    println!(
        "  all eight: ready in {:.1} s; RSS {:.1} MiB in all (target < 150 MiB)",
        all_ready.as_secs_f64(),
        rss_total as f64 / 1024.0
    );
}

fn rss_kib(status: &Path) -> u64 {
    let text = std::fs::read_to_string(status).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
