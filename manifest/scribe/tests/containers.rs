//! The container end-to-end test (issue #3): every role of the checked-in manifest runs as a
//! rootless container, as the unprivileged test user, from an image Scribe built from
//! `scratch` and pinned by digest, with exactly the `podman run` line the real Quadlet
//! generator writes for its unit (see tests/common/podman.rs for the substitutions systemd
//! would make). Then, across distinct user namespaces: an allowed mTLS call between two
//! containers succeeds, a disallowed one is refused, a role cannot open another role's socket
//! directory, data or secret, and `podman inspect` shows the hardening.
//!
//! Skipped, loudly, when rootless Podman is absent and `REACH_REQUIRE_PODMAN` is unset.
#![allow(clippy::disallowed_methods)] // Test knobs (REACH_REQUIRE_PODMAN), never secrets.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use common::podman::{
    Cleanup, USER, bins_dir, clean, materialize, probe, restart, rootless_or_skip, start,
};
use common::*;
use reach_manifest::{NetworkClass, VPS_PUBLIC};
use reach_scribe::image_build::{build_context, write_context};

/// Every role in manifest order (servers start before their callers).
fn roles(m: &reach_manifest::Manifest) -> Vec<String> {
    m.roles.iter().map(|r| r.name.as_str().to_owned()).collect()
}

#[test]
fn every_role_runs_as_a_hardened_rootless_container_from_its_unit() {
    let Some(r) = rootless_or_skip(
        "containers::every_role_runs_as_a_hardened_rootless_container_from_its_unit",
    ) else {
        return;
    };
    let m = load(VPS_PUBLIC);
    clean(&r, &m);
    let _cleanup = Cleanup {
        rootless: &r,
        manifest: &m,
    };
    let mat = materialize(&r, &m, true);
    let names = roles(&m);
    let order: Vec<&str> = names.iter().map(String::as_str).collect();
    let ready = start(&r, &mat, &order);
    assert_eq!(ready.len(), 8);

    // The images are what `reach scribe images` pinned, and nothing but the role: non-root,
    // no shell, the same digest when built again from the same binary.
    assert_eq!(mat.images.len(), 8, "{}", mat.report);
    for (role, pinned) in &mat.images {
        let unit =
            std::fs::read_to_string(mat.out.join(format!("reach-{role}.container"))).unwrap();
        assert!(
            unit.contains(&format!("\nImage={pinned}\n")),
            "{role}: {unit}"
        );
        assert!(mat.report.contains(&format!("{pinned} ")), "{}", mat.report);
        assert!(mat.report.contains("(5 files)"), "{}", mat.report);
        let user = r.podman_out(&[
            "image",
            "inspect",
            "--format",
            "{{.Config.User}}",
            &pinned.to_string(),
        ]);
        assert_eq!(
            String::from_utf8_lossy(&user.stdout).trim(),
            "1000:2000",
            "{role}"
        );
    }
    let ctx = mat.dir.path().join("work/ward-again");
    write_context("ward", &bins_dir().join("reach-ward"), &ctx).unwrap();
    r.give(&ctx);
    let (again, _) =
        build_context(&r.podman(), "ward", "localhost/reach/ward-again", &ctx).unwrap();
    r.podman_out(&["rmi", "localhost/reach/ward-again"]);
    assert_eq!(
        again, mat.images["ward"].digest,
        "ward's image is reproducible"
    );

    // An allowed call between two containers: egress-discord (its own egress network, its own
    // user namespace) asks core (no network, another user namespace) over core.delivery.
    let lines = probe(
        &r,
        &mat,
        "egress-discord",
        &[
            "call",
            "/reach/sockets/core.delivery/port.sock",
            "core",
            "/reach.core.v1.Delivery/ListUnknown",
            // ward.authority allows egress-discord RedeemDecision only.
            "call",
            "/reach/sockets/ward.authority/port.sock",
            "ward",
            "/reach.ward.v1.Ward/AdmitScope",
            "call",
            "/reach/sockets/ward.authority/port.sock",
            "ward",
            "/reach.ward.v1.Ward/RedeemDecision",
            "open",
            "/reach/secrets/egress-discord/tls.key",
            "open",
            "/reach/secrets/core/tls.key",
            "open",
            "/reach/sockets/core.admission",
            "open",
            "/reach/sockets/egress-provider.call",
            "open",
            "/reach/data/core",
        ],
    );
    assert_eq!(
        lines,
        [
            "call /reach.core.v1.Delivery/ListUnknown Ok",
            "call /reach.ward.v1.Ward/AdmitScope PermissionDenied",
            // Authorized: ward's handler refuses the empty message itself.
            "call /reach.ward.v1.Ward/RedeemDecision InvalidArgument",
            "open /reach/secrets/egress-discord/tls.key ok",
            "open /reach/secrets/core/tls.key NotFound",
            "open /reach/sockets/core.admission NotFound",
            "open /reach/sockets/egress-provider.call NotFound",
            "open /reach/data/core NotFound",
        ]
    );

    // Core calls ward and egress-provider; it holds no ward key, no bot token, no admin socket.
    // It mounts vm-broker's socket for readiness's read-only FindPrepared, and nothing else of
    // the broker's is granted to it.
    let lines = probe(
        &r,
        &mat,
        "core",
        &[
            "call",
            "/reach/sockets/ward.authority/port.sock",
            "ward",
            "/reach.ward.v1.Ward/RedeemDecision",
            "open",
            "/reach/secrets/ward/ward-key",
            "open",
            "/reach/secrets/egress-discord/discord-bot-token",
            "open",
            "/reach/sockets/corpus-builder.admin",
            "call",
            "/reach/sockets/vm-broker.instances/port.sock",
            "vm-broker",
            "/reach.vm.v1.VmBroker/CreateInstance",
            "open",
            "/reach/data/ward",
            // Core reads corpus-builder's activated snapshots (read-only, the body's group).
            "open",
            "/reach/data/corpus-builder",
        ],
    );
    assert_eq!(
        lines,
        [
            "call /reach.ward.v1.Ward/RedeemDecision PermissionDenied",
            "open /reach/secrets/ward/ward-key NotFound",
            "open /reach/secrets/egress-discord/discord-bot-token NotFound",
            "open /reach/sockets/corpus-builder.admin NotFound",
            "call /reach.vm.v1.VmBroker/CreateInstance PermissionDenied",
            "open /reach/data/ward NotFound",
            "open /reach/data/corpus-builder ok",
        ]
    );

    // podman inspect: read-only rootfs, no capabilities, no-new-privileges, the role user, no
    // network unless egress, and user namespaces that share no host id.
    let cgroup_v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mut ranges: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for role in &m.roles {
        let name = format!("reach-{}", role.name);
        let o = r.podman_out(&[
            "inspect",
            "--format",
            "{{.HostConfig.ReadonlyRootfs}}|{{.EffectiveCaps}}|{{.BoundingCaps}}|{{.HostConfig.SecurityOpt}}|{{.Config.User}}|{{.HostConfig.NetworkMode}}|{{.HostConfig.Memory}}|{{.HostConfig.PidsLimit}}|{{.HostConfig.IDMappings.UIDMap}}|{{.HostConfig.IDMappings.GIDMap}}|{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
            &name,
        ]);
        let text = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        let f: Vec<&str> = text.split('|').collect();
        assert_eq!(f.len(), 11, "{name}: {text}");
        assert_eq!(f[0], "true", "{name}: read-only rootfs");
        assert_eq!(f[1], "[]", "{name}: effective capabilities");
        assert_eq!(f[2], "[]", "{name}: bounding capabilities");
        assert!(f[3].contains("no-new-privileges"), "{name}: {}", f[3]);
        assert_eq!(f[4], "1000:2000", "{name}: user");
        match &role.network {
            NetworkClass::None => assert_eq!((f[5], f[10].trim()), ("none", ""), "{name}"),
            NetworkClass::Egress(_) => assert_eq!(
                (f[5], f[10].trim()),
                ("bridge", format!("reach-egress-{}", role.name).as_str()),
                "{name}: its own network only"
            ),
        }
        // The process ceiling the kernel holds on every host, cgroup or not: the role's main
        // process carries RLIMIT_NPROC at the role's pids ceiling, soft and hard.
        let pid = r.podman_out(&["inspect", "--format", "{{.State.Pid}}", &name]);
        let pid = String::from_utf8_lossy(&pid.stdout).trim().to_owned();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let nproc: Vec<&str> = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max processes"))
            .unwrap_or_else(|| panic!("{name}: {limits}"))
            .split_whitespace()
            .collect();
        let ceiling = role.limits.pids.to_string();
        assert_eq!(
            nproc[..2],
            [ceiling.as_str(), ceiling.as_str()],
            "{name}: process limit"
        );
        let (memory, pids): (u64, u64) = (f[6].parse().unwrap(), f[7].parse().unwrap());
        if cgroup_v2 {
            assert_eq!(
                memory,
                u64::from(role.limits.memory_mib) << 20,
                "{name}: memory"
            );
            assert_eq!(pids, u64::from(role.limits.pids), "{name}: pids");
        } else {
            // FIXME(#3): rootless Podman on a cgroup v1 host (this sandbox is hybrid v1) ignores
            // every cgroup limit ("Resource limits are not supported and ignored on cgroups V1
            // rootless systems"): the units ask for the ceilings (the generator test asserts
            // `--memory` and `--pids-limit`). The process ceiling holds anyway through
            // RLIMIT_NPROC (above); nothing enforces the memory ceiling here.
            assert_eq!(
                (memory, pids),
                (0, 0),
                "{name}: cgroup v1 rootless enforces no ceiling"
            );
        }
        // The body's group is the rootless user's own group in every container.
        assert!(
            f[9].split_whitespace()
                .any(|g| g.trim_matches(|c| c == '[' || c == ']') == "2000:0:1"),
            "{name}: gid map {}",
            f[9]
        );
        // `[0:HOST:SIZE]`: the container's ids start at HOST in the rootless namespace.
        let map = f[8].trim_matches(|c| c == '[' || c == ']');
        let parts: Vec<u64> = map
            .split(':')
            .map(|n| {
                n.parse()
                    .unwrap_or_else(|_| panic!("{name}: uid map `{}`", f[8]))
            })
            .collect();
        assert_eq!(parts.len(), 3, "{name}: one uid range, {map}");
        assert_eq!(parts[0], 0, "{name}: {map}");
        ranges.insert(
            role.name.as_str().to_owned(),
            (parts[1], parts[1] + parts[2]),
        );
    }
    let list: Vec<_> = ranges.iter().collect();
    for (i, (a, ra)) in list.iter().enumerate() {
        assert!(ra.0 > 0, "{a}: maps the rootless user itself");
        for (b, rb) in &list[i + 1..] {
            assert!(
                ra.1 <= rb.0 || rb.1 <= ra.0,
                "{a} {ra:?} and {b} {rb:?} share host ids"
            );
        }
    }

    // The operator's view of the Quadlet body, as the rootless user: `reach status --podman`
    // reaches every health port in its volume, `reach vault reconcile --podman` core's trail
    // port, and `reach audit --podman` observes the refusals and the secrets of the containers.
    let reach = |args: &[&str]| {
        let mut words = vec![bins_dir().join("reach").display().to_string()];
        words.extend(args.iter().map(|a| (*a).to_owned()));
        words.extend(["--podman".to_owned(), "--state".to_owned()]);
        words.push(mat.state.display().to_string());
        r.command(&words, &[]).output().expect("reach runs")
    };
    let status = reach(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.status.success() && text.contains("8/8 roles healthy"),
        "{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    // The operator's genesis reconciliation reaches core in its container, so the vault serves.
    let genesis = reach(&[
        "vault",
        "reconcile",
        "--genesis",
        "--note",
        "container test",
    ]);
    assert!(
        genesis.status.success(),
        "{}",
        String::from_utf8_lossy(&genesis.stderr)
    );
    let units = mat.out.display().to_string();
    let out_file = |f: &str| mat.out.join(f);
    // The rootless user lingers, as `loginctl enable-linger` records it (no logind here), so
    // its manager and the units would start at boot. Removed again below unless it was there.
    let linger = Path::new("/var/lib/systemd/linger").join(USER);
    let lingered_before = linger.exists();
    std::fs::create_dir_all(linger.parent().unwrap()).unwrap();
    std::fs::write(&linger, "").unwrap();
    struct Unlinger(Option<std::path::PathBuf>);
    impl Drop for Unlinger {
        fn drop(&mut self) {
            if let Some(p) = &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let _unlinger = Unlinger((!lingered_before).then(|| linger.clone()));
    // The renewal timer linked and enabled as the user, as `systemctl --user link` and
    // `enable` would (no user manager here). Removed again with the test.
    let user_units = r.home.join(".config/systemd/user");
    let timer_links = [
        (
            out_file(reach_scribe::renewal::SERVICE_FILE),
            "reach-renew.service",
        ),
        (
            out_file(reach_scribe::renewal::TIMER_FILE),
            "reach-renew.timer",
        ),
        (
            user_units.join("reach-renew.timer"),
            "timers.target.wants/reach-renew.timer",
        ),
    ];
    let link = |target: &Path, at: &str| {
        let words = [
            "sh",
            "-c",
            "mkdir -p \"$(dirname \"$2\")\" && ln -sfn \"$1\" \"$2\"",
            "sh",
        ];
        let mut words: Vec<String> = words.map(String::from).to_vec();
        words.push(target.display().to_string());
        words.push(user_units.join(at).display().to_string());
        let o = r.command(&words, &[]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    for (target, at) in &timer_links {
        link(target, at);
    }
    struct Unlink(Vec<std::path::PathBuf>);
    impl Drop for Unlink {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let _unlink = Unlink(
        timer_links
            .iter()
            .map(|(_, at)| user_units.join(at))
            .collect(),
    );
    // The system unit of the body's orderly stop, installed and enabled for the user as root
    // would (`install` into /etc/systemd/system, `systemctl enable`; no system manager reads
    // them here). Removed again with the test, unless they were there.
    let system = Path::new("/etc/systemd/system");
    let template = system.join(reach_scribe::shutdown::TEMPLATE);
    let enabled = system
        .join("multi-user.target.wants")
        .join(reach_scribe::shutdown::instance(r.uid));
    let installed_before = template.exists() || enabled.exists();
    if !installed_before {
        std::fs::create_dir_all(enabled.parent().unwrap()).unwrap();
        std::fs::copy(out_file(reach_scribe::shutdown::UNIT_FILE), &template).unwrap();
        std::os::unix::fs::symlink(&template, &enabled).unwrap();
    }
    let _uninstall = Unlink(if installed_before {
        Vec::new()
    } else {
        vec![enabled.clone(), template.clone()]
    });
    let audit = reach(&["audit", "--units", &units]);
    let receipt: serde_json::Value = serde_json::from_slice(&audit.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&audit.stderr)));
    assert!(
        receipt["host"]["podman"]
            .as_str()
            .is_some_and(|p| p.starts_with("podman"))
    );
    let outcome = |id: &str| {
        receipt["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing: {receipt:#}"))
            .clone()
    };
    let mut ids: Vec<String> = Vec::new();
    for role in &m.roles {
        ids.push(format!("health/{}", role.name));
        ids.push(format!("identity/{}", role.name));
    }
    ids.extend(
        [
            "authorization/core.admission",
            "authorization/ward.authority",
            "identity/leaves",
            "secrets/modes",
            "secrets/holders",
            "secrets/environment",
            "secrets/command-line",
            "secrets/logs",
            "vault/serving",
            "units/drift",
            "reboot/linger",
            "renewal/timer",
            "units/shutdown",
            "secrets/rollout",
            "resources/pids",
            "process/core-dumps",
            "units/core-dumps",
            "host/account",
            "rotation/root",
            "recovery/policy",
            "recovery/reconciliation",
        ]
        .map(String::from),
    );
    for id in &ids {
        let c = outcome(id);
        assert_eq!(c["outcome"], "pass", "{c}");
    }
    // The memory ceiling as the kernel holds it: on cgroup v2 each container's cgroup; on this
    // cgroup v1 host rootless Podman sets none, and the receipt says so (FIXME(#3) above).
    let memory = outcome("resources/memory");
    if cgroup_v2 {
        assert_eq!(memory["outcome"], "pass", "{memory}");
    } else {
        assert_eq!(memory["outcome"], "fail", "{memory}");
        assert!(
            memory["detail"]
                .as_str()
                .unwrap()
                .contains("core: no memory ceiling of 128 MiB"),
            "{memory}"
        );
    }
    // Failures other than that known gap of a v1 host.
    let known_gap = |c: &&serde_json::Value| !cgroup_v2 && c["id"] == "resources/memory";
    // An audit that failed on one check alone (that gap aside): its id and detail.
    let only_failure = |out: std::process::Output| -> (String, String) {
        assert!(!out.status.success());
        let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let failed: Vec<&serde_json::Value> = receipt["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["outcome"] == "fail")
            .filter(|c| !known_gap(c))
            .collect();
        assert_eq!(failed.len(), 1, "{failed:#?}");
        let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
        (text(&failed[0]["id"]), text(&failed[0]["detail"]))
    };
    // A hand edit of an installed unit fails exactly `units/drift`, naming the line.
    let core_unit = mat.out.join("reach-core.container");
    let text = std::fs::read_to_string(&core_unit).unwrap();
    std::fs::write(
        &core_unit,
        text.replace("ReadOnly=true\n", "ReadOnly=false\n"),
    )
    .unwrap();
    let edited = reach(&["audit", "--units", &units]);
    std::fs::write(&core_unit, &text).unwrap();
    let (id, detail) = only_failure(edited);
    assert_eq!(id, "units/drift");
    assert!(detail.contains("reach-core.container line"), "{detail}");

    // With the timer linked but not enabled nothing renews the leaves: exactly `renewal/timer`
    // fails, saying what to run.
    let wants = user_units.join("timers.target.wants/reach-renew.timer");
    std::fs::remove_file(&wants).unwrap();
    let (id, detail) = only_failure(reach(&["audit", "--units", &units]));
    assert_eq!(id, "renewal/timer");
    assert!(
        detail.contains("systemctl --user enable --now reach-renew.timer"),
        "{detail}"
    );
    link(&timer_links[2].0, timer_links[2].1);

    // Not enabled for the user, a shutdown stops the body all at once: exactly
    // `units/shutdown` fails, saying what root runs.
    if !installed_before {
        std::fs::remove_file(&enabled).unwrap();
        let (id, detail) = only_failure(reach(&["audit", "--units", &units]));
        assert_eq!(id, "units/shutdown");
        assert!(
            detail.contains(&format!(
                "systemctl enable --now {}",
                reach_scribe::shutdown::instance(r.uid)
            )),
            "{detail}"
        );
        std::os::unix::fs::symlink(&template, &enabled).unwrap();
    }

    // Without lingering the body would stay down after a reboot: exactly `reboot/linger` fails,
    // saying what to run.
    if !lingered_before {
        std::fs::remove_file(&linger).unwrap();
        let (id, detail) = only_failure(reach(&["audit", "--units", &units]));
        assert_eq!(id, "reboot/linger");
        assert!(
            detail.contains(&format!("run `loginctl enable-linger {USER}` as root")),
            "{detail}"
        );
    }

    // Every role container's process was read.
    assert!(
        outcome("secrets/environment")["detail"]
            .as_str()
            .unwrap()
            .starts_with("8 role processes"),
        "{receipt:#}"
    );

    // Leaf renewal of the Quadlet body, as its user: ward's leaf swapped for one of the same
    // root that ends in 5 hours is renewed by `reach scribe renew`, and ward serves each new
    // leaf from its mounted secret directory at its next reload: no Podman secret, no restart.
    let started = |role: &str| -> String {
        let out = r.podman_out(&[
            "inspect",
            "--format",
            "{{.State.StartedAt.UnixNano}}",
            &format!("reach-{role}"),
        ]);
        assert!(out.status.success(), "inspect reach-{role}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let ward_started = started("ward");
    let scribe_dir = mat.state.join("scribe");
    let ward_dir = mat.state.join("secrets").join("ward");
    // Ward's leaf in the state directory swapped for one of the same root lasting `hours`.
    let ward_leaf_for = |hours: u64| {
        let leaf = reach_identity::TrustRoot::from_pem(
            std::fs::read_to_string(scribe_dir.join("root.crt")).unwrap(),
            std::fs::read_to_string(scribe_dir.join("root.key")).unwrap(),
        )
        .unwrap()
        .issue_leaf(
            &m.principal("ward"),
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(hours * 3600),
        )
        .unwrap();
        reach_identity::files::write_leaf(&ward_dir, &leaf).unwrap();
        r.give(&ward_dir);
    };
    // Ward serves the leaf its secret directory holds, within a few reloads.
    let serves_its_file = || {
        // Read as the body's user: the file is its group's, not this (root) process's.
        let cat = [
            "cat".to_owned(),
            ward_dir.join("tls.crt").display().to_string(),
        ];
        let pem = r.command(&cat, &[]).output().unwrap().stdout;
        let der = rustls_pemfile::certs(&mut &pem[..])
            .next()
            .unwrap()
            .unwrap();
        let serial = reach_identity::inspect_leaf(&der, &m.trust_domain, SystemTime::now())
            .unwrap()
            .serial_hex;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = reach(&["status"]);
            let text = String::from_utf8_lossy(&status.stdout).into_owned();
            let line = text.lines().find(|l| l.starts_with("ward ")).unwrap_or("");
            if status.status.success()
                && text.contains("8/8 roles healthy")
                && line.ends_with(&serial[..12])
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ward does not serve {serial}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    ward_leaf_for(5);
    serves_its_file();
    // What the renewal timer runs, as the body's user (no --restart: no user manager here).
    let renew = || {
        let renew = r
            .command(
                &[
                    bins_dir().join("reach").display().to_string(),
                    "scribe".into(),
                    "renew".into(),
                    "--state".into(),
                    mat.state.display().to_string(),
                ],
                &[],
            )
            .output()
            .expect("reach runs");
        let said = String::from_utf8_lossy(&renew.stdout).into_owned();
        assert!(
            renew.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&renew.stderr)
        );
        said
    };
    const CURRENT: &str =
        "every running role reads its current secrets (leaves are reloaded live)\n";
    assert_eq!(renew(), format!("renewed: ward\n{CURRENT}"));
    serves_its_file();
    assert_eq!(started("ward"), ward_started, "ward was not restarted");
    assert_eq!(
        renew(),
        format!("no leaf within its renewal window\n{CURRENT}")
    );

    // A credential the operator sets since is read at start: its role's restart is named, and
    // until then the receipt fails exactly `secrets/rollout`, naming it (without --units: the
    // user no longer lingers, see above).
    let mut set = r
        .command(
            &[
                bins_dir().join("reach").display().to_string(),
                "secret".into(),
                "set".into(),
                "egress-discord".into(),
                "discord-bot-token".into(),
                "--state".into(),
                mat.state.display().to_string(),
            ],
            &[],
        )
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    set.stdin.take().unwrap().write_all(b"a-new-token").unwrap();
    assert!(set.wait().unwrap().success());
    assert_eq!(
        renew(),
        "no leaf within its renewal window\n\
         restart reach-egress-discord.service to read its new credential\n"
    );
    let (id, detail) = only_failure(reach(&["audit"]));
    assert_eq!(id, "secrets/rollout");
    assert!(
        detail.starts_with(
            "egress-discord started before a credential it reads was written; run `reach scribe renew"
        ),
        "{detail}"
    );
    // Restarted as systemd restarts its unit, it reads the new token and every role answers.
    restart(&r, &mat, "egress-discord");
    let status = reach(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.status.success() && text.contains("8/8 roles healthy"),
        "{text}"
    );
    assert_eq!(
        renew(),
        format!("no leaf within its renewal window\n{CURRENT}")
    );
}
