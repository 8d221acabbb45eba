//! A deployed host, for real (issue #32): the deployment guest (deploy/guest/image.toml) booted
//! under QEMU, Reach installed by the operator's steps (deploy/guest/install.sh: Scribe's
//! images, identities and Quadlet units, as the lingering user `reach`), the body started by
//! that user's systemd, and `reach audit --podman --units` run in the guest, its JSON receipt
//! brought back and judged. Then, in the same guest:
//! - **reboot**: the body comes back by itself and the receipt passes again;
//! - **ceilings**: cgroup v2 holds every role's memory and pids ceilings (the receipt's
//!   `resources/*` checks, which honestly fail on a cgroup v1 host, pass here), and the
//!   kernel's own files say the same;
//! - **loss**: core's vault deleted, core refuses to serve (ROLLED_BACK) until the operator
//!   records `reach vault reconcile`, which the receipt then shows;
//! - **shutdown**: the reboot's shutdown stops every role cleanly, callers before the roles
//!   they need, and the vault's last commit is there after it;
//! - **compromise and root rotation**: `reach compromise egress-discord --podman` under the
//!   user's systemd: its leaf withheld, the root rotated and the old one retired with every
//!   other role restarted on its new leaf, no role's handshake refused, the old leaf refused;
//!   reinstated, all serve again;
//! - **renewal**: the clock moved 19 h on, within every leaf's renewal window: the timer
//!   Scribe wrote runs `scribe renew --restart` by itself, every leaf is renewed, every role
//!   serves again;
//! - **rebuild**: the body destroyed (containers, volumes, secrets, state) and provisioned
//!   again from the pinned images with a new root: the old operator's leaf is refused by
//!   every role, the new vault waits for reconciliation, and the receipt passes on the new
//!   body; a power-off completes.
//!
//! One guest for the whole story: a TCG boot costs a minute, the install several. The clock
//! moves last but one: a reboot after it would bring the guest's clock back before the
//! renewed leaves' start.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reach_tests::deployed::{self, Guest, STATE, UNITS};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(1800);
const SHORT: Duration = Duration::from_secs(120);

/// The guest's directory: removed after the test, or kept.
enum Keep {
    Temp(tempfile::TempDir),
    Kept(std::path::PathBuf),
}

impl Keep {
    fn path(&self) -> &std::path::Path {
        match self {
            Keep::Temp(d) => d.path(),
            Keep::Kept(p) => p,
        }
    }
}

/// Every check's (outcome, detail) by id.
fn checks(receipt: &Value) -> BTreeMap<String, (String, String)> {
    reach_tests::receipt_checks(receipt)
        .into_iter()
        .map(|(id, outcome, detail)| (id, (outcome, detail)))
        .collect()
}

/// The receipt passed, and with it every check the deployed host must observe.
fn passes(ok: bool, receipt: &Value, m: &reach_manifest::Manifest, rebooted: bool) {
    let failed: Vec<&Value> = receipt["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["outcome"] != "pass" && c["outcome"] != "skip")
        .collect();
    assert!(
        ok && failed.is_empty(),
        "{failed:#?}\n{}",
        receipt["stderr"].as_str().unwrap_or_default()
    );
    let c = checks(receipt);
    let mut must: Vec<String> = [
        "vault/serving",
        "units/drift",
        "units/core-dumps",
        "process/core-dumps",
        "reboot/linger",
        "renewal/timer",
        "units/shutdown",
        "secrets/rollout",
        "identity/leaves",
        "resources/memory",
        "resources/pids",
        "host/account",
        "host/swap",
        "corpus/fresh",
        "rotation/root",
        "recovery/policy",
        "recovery/reconciliation",
    ]
    .map(String::from)
    .to_vec();
    if rebooted {
        must.push("lifecycle/reboot".into());
        must.push("lifecycle/shutdown".into());
    }
    for role in &m.roles {
        must.push(format!("health/{}", role.name));
    }
    for id in &must {
        let (outcome, detail) = c
            .get(id)
            .unwrap_or_else(|| panic!("{id} missing: {receipt:#}"));
        assert_eq!(outcome, "pass", "{id}: {detail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_host_runs_the_body_under_systemd_across_reboot_and_shutdown() {
    let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    let roles = m.roles.len();
    let image = deployed::image();
    let accel = deployed::accel(&image).await;
    let dir = tempfile::Builder::new()
        .prefix("reach-deployed-")
        .tempdir_in("/var/tmp")
        .unwrap();
    // REACH_DEPLOYED_KEEP keeps the guest's disks for a look after a failure.
    #[allow(clippy::disallowed_methods)] // A test knob.
    let dir = if std::env::var_os("REACH_DEPLOYED_KEEP").is_some() {
        Keep::Kept(dir.keep())
    } else {
        Keep::Temp(dir)
    };
    let install = deployed::install_disk(dir.path(), &m);
    let disk = deployed::overlay(&image, &dir.path().join("disk.qcow2"));
    let run = dir.path().join("run");

    let booted = Instant::now();
    let mut g = Guest::boot(&image, accel, &run, &disk, Some(&install)).await;
    let boot_s = booted.elapsed();
    // The platform floor: cgroup v2, and the body's account as the seed asks it.
    assert_eq!(
        g.ok("stat -fc %T /sys/fs/cgroup", SHORT).await.trim(),
        "cgroup2fs"
    );
    let account = g.ok("getent passwd reach", SHORT).await;
    assert!(account.trim().ends_with(":/usr/sbin/nologin"), "{account}");

    let installing = Instant::now();
    g.install("").await;
    let install_s = installing.elapsed();
    let up_s = g.healthy(roles).await;
    g.reconcile("deployed host: first start", true).await;
    let audited = Instant::now();
    let (ok, first) = g.receipt().await;
    let receipt_s = audited.elapsed();
    passes(ok, &first, &m, false);
    // The units started under systemd, not by hand: each role's service is active, from
    // Scribe's Quadlet unit, in the user's manager.
    for role in &m.roles {
        let o = g
            .body(
                &format!(
                    "systemctl --user show reach-{}.service -p ActiveState -p SourcePath",
                    role.name
                ),
                SHORT,
            )
            .await;
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("ActiveState=active"), "{}: {text}", role.name);
        assert!(
            text.contains(&format!("SourcePath={UNITS}/reach-{}.container", role.name)),
            "{}: {text}",
            role.name
        );
    }

    // Ceilings: each role's container cgroup carries its memory and pids limits (cgroup v2
    // enforces what the files say; the receipt read the same above).
    for role in &m.roles {
        let script = format!(
            "id=$(podman inspect --format '{{{{.Id}}}}' reach-{0}) && \
             cg=$(find /sys/fs/cgroup/user.slice -type d -name \"*$id*\" | head -n1) && \
             cat \"$cg/memory.max\" \"$cg/pids.max\"",
            role.name
        );
        let o = g.body(&script, SHORT).await;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                (u64::from(role.limits.memory_mib) << 20).to_string(),
                role.limits.pids.to_string()
            ],
            "{}: {}",
            role.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    loss(&mut g, roles).await;

    // Reboot: nobody logs in, nothing is started by hand; the lingering user's manager starts
    // the body again. The reboot's shutdown stopped every role cleanly (SIGTERM answered, no
    // timeout, no kill), callers before what they need, as the previous boot's journal shows;
    // the vault's last commit (the genesis reconciliation: a vault that lost it awaits
    // reconciliation again) survived it; and the receipt passes again.
    let rebooting = Instant::now();
    g.reboot().await;
    let reboot_up_s = g.healthy(roles).await + rebooting.elapsed();
    // Where a reboot's time goes: the shutdown (monotonic, the boot before) and this boot.
    let spans = g
        .ok(
            "journalctl -b -1 --no-pager -o short-monotonic | grep -E 'Stopping reach-shutdown@|Stopped reach-shutdown@|Stopping User Manager|Stopped User Manager|systemd-shutdown' | head -n 8; \
             journalctl -b -1 --no-pager -o short-monotonic -n 1; systemd-analyze time || true",
            SHORT,
        )
        .await;
    println!("reboot:\n{spans}");
    let vault = g.vault_status().await;
    assert!(vault.starts_with("vault SERVING"), "{vault}");
    let journal = g
        .ok(
            "journalctl -b -1 --no-pager -o cat _UID=1500 _COMM=systemd | grep -E '^(Stopped|Stopping) reach-|^reach-.*(Failed|timed out|process exited)' || true",
            SHORT,
        )
        .await;
    // No role was killed or ran out of its stop timeout; each drained (its own `stopped` line).
    assert!(
        !journal.contains("timed out") && !journal.contains("code=killed"),
        "{journal}"
    );
    // Each role drained (its own `stopped` line; core and its callers also stopped once at
    // the loss above). The receipt's `lifecycle/shutdown` judges the last stop of each unit
    // and the order, from the same journal, below.
    for role in &m.roles {
        let said = g
            .ok(
                &format!(
                    "journalctl -b -1 --no-pager -o cat _UID=1500 SYSLOG_IDENTIFIER=reach-{} | grep -c '\"message\":\"stopped\"' || true",
                    role.name
                ),
                SHORT,
            )
            .await;
        assert!(
            said.trim().parse::<u32>().unwrap_or(0) >= 1,
            "{} did not drain and stop:\n{journal}",
            role.name
        );
    }
    // No unit's stop failed: since reach-shutdown@.service stops the body before the user's
    // manager exits, Podman's removal of the containers on an egress network succeeds too.
    if journal.contains("Failed with result") {
        let why = g
            .ok(
                "journalctl -b -1 --no-pager -o short-monotonic _UID=1500 | grep -v '\"level\"' | tail -n 150",
                SHORT,
            )
            .await;
        panic!("a unit's stop failed:\n{journal}\nthe user's journal at the shutdown:\n{why}");
    }
    let (ok, again) = g.receipt().await;
    println!(
        "lifecycle/shutdown: {:?}",
        checks(&again).get("lifecycle/shutdown")
    );
    passes(ok, &again, &m, true);
    assert!(
        again["host"].is_object(),
        "the receipt names its host: {again:#}"
    );

    let drilling = Instant::now();
    compromise(&mut g, &m).await;
    let compromise_s = drilling.elapsed();
    let renewing = Instant::now();
    renewal(&mut g, &m).await;
    let renewal_s = renewing.elapsed();
    let rebuilding = Instant::now();
    rebuild(&mut g, &m).await;
    let rebuild_s = rebuilding.elapsed();

    // A power-off completes (QEMU exits on its own).
    g.poweroff().await;

    println!(
        "deployed host ({}): boot {:.1} s, install {:.1} s, body healthy {:.1} s after install, \
         reboot to healthy {:.1} s, receipt {:.1} s, compromise drill {:.1} s, renewal {:.1} s, \
         rebuild {:.1} s",
        accel.as_str(),
        boot_s.as_secs_f64(),
        install_s.as_secs_f64(),
        up_s.as_secs_f64(),
        reboot_up_s.as_secs_f64(),
        receipt_s.as_secs_f64(),
        compromise_s.as_secs_f64(),
        renewal_s.as_secs_f64(),
        rebuild_s.as_secs_f64()
    );
}

/// Loss: core's vault is deleted while core is stopped (its high-water mark stays). Core comes
/// back with a fresh vault that refuses to serve (ROLLED_BACK: older than the body's high-water
/// mark) until the operator records that the effects inside the idempotency horizon were
/// reconciled. The receipt's `vault/serving` reads the same status.
async fn loss(g: &mut Guest, roles: usize) {
    g.body_ok("systemctl --user stop reach-core.service", SHORT)
        .await;
    let data = g
        .body_ok(
            "podman volume inspect reach-data-core --format '{{.Mountpoint}}'",
            SHORT,
        )
        .await;
    let data = data.trim();
    let left = g
        .ok(
            &format!(
                "cd {data} && test -s phylactery.sqlite && \
                 rm -f phylactery.sqlite phylactery.sqlite-wal phylactery.sqlite-shm && ls -A"
            ),
            SHORT,
        )
        .await;
    assert!(
        left.contains("high-water"),
        "the high-water mark stays: {left}"
    );
    // Starting core's callers starts core (they require it).
    g.body_ok(
        "systemctl --user start reach-core.service reach-egress-discord.service \
         reach-ingress-edge.service",
        SHORT,
    )
    .await;
    g.healthy(roles).await;
    let lost = g.vault_status().await;
    assert!(lost.starts_with("vault ROLLED_BACK"), "{lost}");
    g.reconcile(
        "deployed host: vault deleted; no effect in the horizon",
        false,
    )
    .await;
    let back = g.vault_status().await;
    assert!(back.starts_with("vault SERVING"), "{back}");
    // The receipt after the reboot below judges the reconciliation (`recovery/reconciliation`).
}

/// Where the background caller of the compromise drill writes, and its end-of-run mark.
const CALLS: &str = "/tmp/reach-calls";
const CALLED: &str = "-- end of run --";

/// The health calls in the background caller's output `text` to every role but `withheld`, and
/// the lines of those that failed. A run whose own material could not be read (the operator's
/// leaf caught between its key's and its certificate's write) lists no role and makes no call.
fn failed_calls(text: &str, m: &reach_manifest::Manifest, withheld: &str) -> (usize, Vec<String>) {
    let (mut made, mut failed) = (0, Vec::new());
    for line in text.lines() {
        let role = line.split_whitespace().next().unwrap_or_default();
        if role == withheld || m.role(role).is_none() {
            continue;
        }
        made += 1;
        if !line.contains(" healthy ") {
            failed.push(line.to_owned());
        }
    }
    (made, failed)
}

/// Each role's systemd invocation: a restart changes it.
async fn invocations(g: &mut Guest, m: &reach_manifest::Manifest) -> BTreeMap<String, String> {
    let units: Vec<String> = m
        .roles
        .iter()
        .map(|r| format!("reach-{}.service", r.name))
        .collect();
    let out = g
        .body_ok(
            &format!(
                "systemctl --user show -p Id -p InvocationID {}",
                units.join(" ")
            ),
            SHORT,
        )
        .await;
    let mut ids = BTreeMap::new();
    for block in out.split("\n\n") {
        let field = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_default()
                .to_owned()
        };
        ids.insert(field("Id="), field("InvocationID="));
    }
    ids
}

/// The compromise drill on the deployed body: the runbook rotates the root under the user's
/// systemd while every other role keeps running (each reloads its mounted secret directory),
/// the old leaf is refused, and once reinstated and started the role serves with the rest.
async fn compromise(g: &mut Guest, m: &reach_manifest::Manifest) {
    let roles = m.roles.len();
    let before = invocations(g, m).await;
    // Calls through the whole drill: the operator asks every role's health port (an mTLS call
    // each) twice a second, in the background, with the leaf the state directory holds then.
    g.body_ok(
        &format!(
            "rm -f {CALLS} {CALLS}.stop && nohup sh -c 'while [ ! -e {CALLS}.stop ]; do \
             reach status --podman --state {STATE} >> {CALLS} 2>&1; echo {CALLED} >> {CALLS}; \
             sleep 0.5; done' >/dev/null 2>&1 &"
        ),
        SHORT,
    )
    .await;
    let since = g.ok("date +%s", SHORT).await;
    let out = g
        .body_ok(
            &format!(
                "reach compromise egress-discord --reason 'deployed host: drill' --podman \
             --state {STATE}"
            ),
            LONG,
        )
        .await;
    assert!(out.contains("the old leaf is refused"), "{out}");
    assert!(out.contains("root rotated"), "{out}");
    // The rotation restarted no role, so no call failed for a server going down; and it refused
    // no role: the one handshake refused is the proof's, at the server it names.
    let after = invocations(g, m).await;
    for (unit, id) in &before {
        if unit != "reach-egress-discord.service" {
            assert_eq!(
                after.get(unit),
                Some(id),
                "{unit} restarted during the rotation"
            );
        }
    }
    g.body_ok(&format!("touch {CALLS}.stop && sleep 2"), SHORT)
        .await;
    let calls = g.body_ok(&format!("cat {CALLS}"), SHORT).await;
    let (made, failed) = failed_calls(&calls, m, "egress-discord");
    println!(
        "root rotation on the deployed body: {made} calls to the roles that stay up, {} failed",
        failed.len()
    );
    assert!(made > 0, "no call was made during the drill:\n{calls}");
    assert!(
        failed.is_empty(),
        "calls failed during the rotation:\n{}",
        failed.join("\n")
    );
    let server = out
        .lines()
        .find_map(|l| l.split("the old leaf is refused: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no proof: {out}"))
        .to_owned();
    let refused = refused_since(g, &since).await;
    assert!(
        refused
            .lines()
            .all(|l| l.contains(&format!(" reach-{server}["))),
        "a role was refused during the root rotation:\n{refused}"
    );
    let state = g
        .body_ok(
            "systemctl --user show reach-egress-discord.service -p ActiveState",
            SHORT,
        )
        .await;
    assert_eq!(state.trim(), "ActiveState=inactive", "{out}");
    g.body_ok(
        &format!("reach compromise egress-discord --reinstate --podman --state {STATE}"),
        LONG,
    )
    .await;
    g.body_ok("systemctl --user start reach-egress-discord.service", SHORT)
        .await;
    g.healthy(roles).await;
    // The receipt after the renewal below judges the rotation (`rotation/root`).
}

/// Renewal: the guest's clock moved 19 h on puts every leaf (24 h) inside its 6 h renewal
/// window. Nothing is run by hand: the timer Scribe wrote elapses at the time change, its
/// service renews every leaf in the state directory, and every role serves its new leaf at its
/// next reload, with no restart.
async fn renewal(g: &mut Guest, m: &reach_manifest::Manifest) {
    let running = invocations(g, m).await;
    let served_before = served(g, m).await;
    let leaves = format!("cd {STATE}/secrets && sha256sum */tls.crt");
    let before = g.ok(&leaves, SHORT).await;
    let invocation =
        "systemctl --user show reach-renew.service -p InvocationID -p ActiveState -p Result";
    let first = g.body_ok(invocation, SHORT).await;
    let since = g.ok("date -s '+19 hours' +%s", SHORT).await;
    let deadline = Instant::now() + Duration::from_secs(900);
    let done = loop {
        let now = g.body_ok(invocation, SHORT).await;
        let id = |s: &str| {
            s.lines()
                .find_map(|l| l.strip_prefix("InvocationID="))
                .unwrap_or_default()
                .to_owned()
        };
        if id(&now) != id(&first)
            && !id(&now).is_empty()
            && (now.contains("ActiveState=inactive") || now.contains("ActiveState=failed"))
        {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the renewal timer did not run: {now}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    };
    let said = g
        .ok(
            "journalctl --no-pager -o cat _UID=1500 _SYSTEMD_USER_UNIT=reach-renew.service",
            SHORT,
        )
        .await;
    assert!(done.contains("Result=success"), "{done}\n{said}");
    let renewed = said
        .lines()
        .rfind(|l| l.starts_with("renewed: "))
        .unwrap_or_else(|| panic!("no leaf renewed:\n{said}"));
    for role in &m.roles {
        assert!(renewed.contains(role.name.as_str()), "{renewed}");
    }
    assert!(
        said.contains("every running role reads its current secrets") && !said.contains("restart"),
        "{said}"
    );
    assert_eq!(invocations(g, m).await, running, "a role restarted");
    // Every role serves a new leaf (the old ones chain to the same root and stay valid, so
    // health alone would not show it): within a few reloads.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = served(g, m).await;
        let same: Vec<&String> = now
            .iter()
            .filter(|(role, serial)| served_before.get(*role) == Some(*serial))
            .map(|(role, _)| role)
            .collect();
        if same.is_empty() && now.len() == m.roles.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still serving the old leaf: {same:?} ({now:?})"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let after = g.ok(&leaves, SHORT).await;
    for line in before.lines() {
        assert!(!after.contains(line), "not renewed: {line}");
    }
    g.healthy(m.roles.len()).await;
    // Renewed leaves chain to the same root: no handshake was refused.
    let refused = refused_since(g, &since).await;
    assert!(refused.is_empty(), "refused during the renewal:\n{refused}");
    let (ok, receipt) = g.receipt().await;
    passes(ok, &receipt, m, true);
}

/// The leaf serial (its first 12 hex digits) each healthy role serves, from `reach status`.
async fn served(g: &mut Guest, m: &reach_manifest::Manifest) -> BTreeMap<String, String> {
    let o = g
        .body(&format!("reach status --podman --state {STATE}"), SHORT)
        .await;
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let role = words.next()?;
            let healthy = l.contains(" healthy ");
            let serial = words.next_back()?;
            (healthy && m.role(role).is_some()).then(|| (role.to_owned(), serial.to_owned()))
        })
        .collect()
}

/// The body's `handshake refused` log lines since the guest's unix time `since`.
async fn refused_since(g: &mut Guest, since: &str) -> String {
    g.ok(
        &format!(
            "journalctl --no-pager -o short --since @{} _UID=1500 | grep 'handshake refused' || true",
            since.trim()
        ),
        SHORT,
    )
    .await
}

/// The clean rebuild (seed 001: "destroying and reprovisioning from a trusted pinned image
/// … issue disjoint credentials, and enroll from zero authority"): install.sh's `rebuild`
/// destroys the body and provisions it again from the images pinned at install. Nothing of
/// the old authority is accepted: the old operator's leaf is refused by every role. The
/// corpus is built again, the fresh vault waits for reconciliation, and the receipt passes.
async fn rebuild(g: &mut Guest, m: &reach_manifest::Manifest) {
    let roles = m.roles.len();
    let bundle = format!("sha256sum < {STATE}/secrets/operator/bundle.pem");
    let old_bundle = g.ok(&bundle, SHORT).await;
    g.ok(
        &format!(
            "mkdir -p /home/reach/old/secrets && cp -a {STATE}/secrets/operator \
             /home/reach/old/secrets/ && chown -R reach:reach /home/reach/old"
        ),
        SHORT,
    )
    .await;
    g.install("rebuild").await;
    g.healthy(roles).await;
    assert_ne!(g.ok(&bundle, SHORT).await, old_bundle, "the same root");
    let old = g
        .body("reach status --podman --state /home/reach/old", SHORT)
        .await;
    let said = String::from_utf8_lossy(&o_all(&old)).into_owned();
    assert!(
        old.exit_code != Some(0) && said.contains(&format!("0/{roles} roles healthy")),
        "the old operator's leaf: {said}"
    );
    let fresh = g.vault_status().await;
    assert!(
        fresh.starts_with("vault AWAITING_RECONCILIATION"),
        "{fresh}"
    );
    g.reconcile("deployed host: rebuilt; effects reconciled", false)
        .await;
    let (ok, receipt) = g.receipt().await;
    // The rebuilt body has not been through a reboot: lifecycle/reboot is skipped.
    passes(ok, &receipt, m, false);
    let c = checks(&receipt);
    assert_eq!(c["corpus/fresh"].0, "pass", "{:?}", c["corpus/fresh"]);
}

fn o_all(o: &reach_vm::agent::ExecOutcome) -> Vec<u8> {
    [o.stdout.as_slice(), o.stderr.as_slice()].concat()
}
