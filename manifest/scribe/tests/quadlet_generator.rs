//! The generated units through the real Quadlet generator (`quadlet -dryrun`, from Debian's
//! podman 5 package; install it with scripts/quadlet-setup.sh), asserting the `podman run`
//! line of every role.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use reach_manifest::VPS_PUBLIC;
use reach_manifest::plan::StateLayout;
use reach_scribe::quadlet::{QuadletInput, derive, service_name, write_out};
use reach_scribe::renewal::{Renewal, SERVICE_FILE, TIMER_FILE};

/// Values of every occurrence of `flag` (`--flag value` form, as Quadlet writes them).
fn values(words: &[String], flag: &str) -> Vec<String> {
    words
        .windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].clone())
        .collect()
}

#[test]
fn real_quadlet_generates_hardened_podman_run_lines() {
    let out = derive_text(VPS_PUBLIC, Path::new(REFERENCE_STATE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_out(&out, dir.path()).unwrap();
    let services = dryrun(dir.path());
    let m = load(VPS_PUBLIC);
    assert_eq!(out.containers.len(), 8);
    for c in &out.containers {
        let svc = services
            .get(&service_name(&c.role))
            .unwrap_or_else(|| panic!("no service for {}", c.role));
        let words = exec_start(svc);
        let role = m.role(&c.role).unwrap();
        let has = |w: &str| words.iter().any(|x| x == w);
        assert_eq!(&words[..2], ["/usr/bin/podman", "run"], "{}", c.role);
        assert!(has("--read-only"), "{}: {words:?}", c.role);
        assert_eq!(values(&words, "--cap-drop"), ["all"], "{}", c.role);
        assert!(
            has("--security-opt=no-new-privileges"),
            "{}: {words:?}",
            c.role
        );
        assert!(
            !words
                .iter()
                .any(|w| w.starts_with("--privileged") || w.starts_with("--cap-add")),
            "{}",
            c.role
        );
        assert!(has("--sdnotify=container"), "{}", c.role);
        // A sized `auto` namespace with the body's group mapped in (sockets across roles).
        assert_eq!(
            values(&words, "--userns"),
            ["auto:size=2048,gidmapping=2000:0:1"],
            "{}",
            c.role
        );
        assert_eq!(values(&words, "--user"), ["1000:2000"], "{}", c.role);
        assert!(has("--umask=0007"), "{}: {words:?}", c.role);
        assert_eq!(
            values(&words, "--pids-limit"),
            [role.limits.pids.to_string()],
            "{}",
            c.role
        );
        // No core dumps; no `nproc` ulimit, which crun would apply to its own clone as the
        // body's user (the role sets RLIMIT_NPROC on itself from its config).
        assert_eq!(values(&words, "--ulimit"), ["core=0:0"], "{}", c.role);
        assert!(
            has(&format!("--memory={}m", role.limits.memory_mib)),
            "{}",
            c.role
        );
        let network = values(&words, "--network");
        match &role.network {
            reach_manifest::NetworkClass::None => assert_eq!(network, ["none"], "{}", c.role),
            reach_manifest::NetworkClass::Egress(_) => {
                assert_eq!(network, [format!("reach-egress-{}", c.role)], "{}", c.role)
            }
        }
        // Image pinned by digest, then exactly `--config <path>`.
        let image_at = words
            .iter()
            .position(|w| w.contains("@sha256:"))
            .expect("image by digest");
        assert_eq!(
            words[image_at],
            format!("localhost/reach/{}@{}", c.role, pinned(&m)[&c.role].digest)
        );
        assert_eq!(
            &words[image_at + 1..],
            ["--config", &format!("/reach/config/{}.toml", c.role)]
        );

        // Only its own configuration as a Podman secret; its leaf, key, bundle and credentials
        // come from its own secret directory, mounted read-only (below).
        let secrets: Vec<String> = values(&words, "--secret")
            .iter()
            .map(|s| s.split(',').next().unwrap().to_owned())
            .collect();
        assert_eq!(secrets, [format!("reach.{}.config", c.role)], "{}", c.role);
        for s in values(&words, "--secret") {
            assert!(s.ends_with(",mode=0400,uid=1000,gid=2000"), "{s}");
        }

        // Only permitted sockets: served ports writable, called ports read-only, nothing else.
        let mut expected_sockets = BTreeSet::new();
        for p in &m.ports {
            if p.server == role.name {
                expected_sockets.insert(format!("reach-port-{0}:/reach/sockets/{0}:U", p.name));
            } else if p.grants.iter().any(|g| g.caller == c.role) {
                expected_sockets.insert(format!("reach-port-{0}:/reach/sockets/{0}:ro", p.name));
            }
        }
        let volumes: Vec<String> = values(&words, "-v");
        let sockets: BTreeSet<String> = volumes
            .iter()
            .filter(|v| v.starts_with("reach-port-"))
            .cloned()
            .collect();
        assert_eq!(sockets, expected_sockets, "{}", c.role);
        let others: Vec<&String> = volumes
            .iter()
            .filter(|v| !v.starts_with("reach-port-"))
            .collect();
        // Its own secret directory read-only, nobody else's; its own data writable; another
        // role's snapshots read-only where the manifest says so.
        let mut expected_data = vec![
            format!(
                "{REFERENCE_STATE}/secrets/{0}:/reach/secrets/{0}:ro",
                c.role
            ),
            format!("reach-data-{0}:/reach/data/{0}:U", c.role),
        ];
        if let Some(from) = role.settings.get("corpus_from").and_then(|v| v.as_str()) {
            expected_data.push(format!("reach-data-{from}:/reach/data/{from}:ro"));
        }
        assert_eq!(
            others,
            expected_data.iter().collect::<Vec<_>>(),
            "{}",
            c.role
        );

        // Ordering from the manifest.
        for a in &role.after {
            assert!(
                svc.contains(&format!("\nRequires={}\n", service_name(a.as_str()))),
                "{}",
                c.role
            );
            assert!(
                svc.contains(&format!("\nAfter={}\n", service_name(a.as_str()))),
                "{}",
                c.role
            );
        }
    }
    // The volumes and networks are units of their own.
    for p in &m.ports {
        let svc = &services[&format!("reach-port-{}-volume.service", p.name)];
        assert!(
            svc.contains(&format!(
                "podman volume create --ignore reach-port-{}",
                p.name
            )),
            "{svc}"
        );
    }
    let networks: Vec<&String> = services
        .keys()
        .filter(|k| k.ends_with("-network.service"))
        .collect();
    assert_eq!(
        networks,
        [
            "reach-egress-corpus-builder-network.service",
            "reach-egress-egress-discord-network.service",
            "reach-egress-egress-provider-network.service",
            "reach-egress-ingress-edge-network.service"
        ]
    );
}

#[test]
fn core_calls_ward_but_never_mounts_discord_sockets() {
    // A spot check in words a reviewer can read: the roles that hold the bot credential and
    // the vault never share a writable mount, and core has no network.
    let out = derive_text(VPS_PUBLIC, Path::new(REFERENCE_STATE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_out(&out, dir.path()).unwrap();
    let services = dryrun(dir.path());
    let core = exec_start(&services["reach-core.service"]);
    assert!(
        core.contains(&"reach-port-ward.authority:/reach/sockets/ward.authority:ro".to_owned())
    );
    assert!(core.contains(&"reach-port-core.admission:/reach/sockets/core.admission:U".to_owned()));
    assert!(!core.iter().any(|w| w.contains("discord-bot-token")));
    assert_eq!(values(&core, "--network"), ["none"]);
    let edge = exec_start(&services["reach-ingress-edge.service"]);
    assert!(
        edge.contains(&"reach-port-core.admission:/reach/sockets/core.admission:ro".to_owned())
    );
    assert!(!edge.iter().any(|w| w.contains("reach-data-core")));
}

/// `systemd-analyze verify` of the renewal timer and its service: nothing to warn about, and a
/// broken calendar is caught (so the check can fail).
#[test]
fn systemd_verifies_the_renewal_timer() {
    let m = load(VPS_PUBLIC);
    // verify checks that ExecStart's binary is executable: this test binary stands in for reach.
    let renewal = Renewal {
        reach: std::env::current_exe().unwrap(),
        manifest: None,
    };
    let input = QuadletInput::new(&m, pinned(&m), StateLayout::new(REFERENCE_STATE));
    let out = derive(&input.with_renewal(renewal)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_out(&out, dir.path()).unwrap();
    let verify = || {
        let o = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(dir.path().join(TIMER_FILE))
            .arg(dir.path().join(SERVICE_FILE))
            .output()
            .expect("systemd-analyze runs (apt package systemd)");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, stderr) = verify();
    assert!(ok && stderr.is_empty(), "{stderr}");
    let timer = dir.path().join(TIMER_FILE);
    let text = std::fs::read_to_string(&timer).unwrap();
    std::fs::write(
        &timer,
        text.replace("OnCalendar=hourly", "OnCalendar=hourlyish"),
    )
    .unwrap();
    let (ok, stderr) = verify();
    assert!(!ok && stderr.contains("hourlyish"), "{stderr}");
}
