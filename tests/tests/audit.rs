//! `reach audit`, the live-host receipt, run as an auditor runs it (the real binary) against a
//! running body: every check observed passes on a sound body, and a secret file opened to its
//! group fails exactly the check that owns it.

use std::os::unix::fs::PermissionsExt;

use reach_tests::TestBody;
use serde_json::Value;

/// A PEM's base64 body, one line.
fn body_of_key_of(pem: &str) -> String {
    pem.lines().filter(|l| !l.starts_with("-----")).collect()
}

async fn audit(body: &TestBody) -> (bool, Value) {
    let (ok, receipt, _) = audit_with_stderr(body).await;
    (ok, receipt)
}

async fn audit_with_stderr(body: &TestBody) -> (bool, Value, String) {
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .arg("audit")
        .arg("--state")
        .arg(body.layout.root())
        .output()
        .await
        .expect("reach runs");
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.success(),
        receipt,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn junit_of(body: &TestBody) -> String {
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(["audit", "--format", "junit", "--state"])
        .arg(body.layout.root())
        .output()
        .await
        .expect("reach runs");
    String::from_utf8(out.stdout).unwrap()
}

/// A JUnit document read by Python's XML parser: (tests, failures, skipped) counted from the
/// testcases themselves (and checked against the suite's attributes), and the testcase names.
fn parse_junit(xml: &str) -> (usize, usize, usize, Vec<String>) {
    use std::io::Write as _;
    let script = r#"
import sys, xml.etree.ElementTree as E
root = E.parse(sys.stdin).getroot()
assert root.tag == "testsuites", root.tag
suite = root.find("testsuite")
cases = suite.findall("testcase")
failures = sum(1 for c in cases if c.find("failure") is not None)
skipped = sum(1 for c in cases if c.find("skipped") is not None)
assert int(suite.get("tests")) == len(cases)
assert int(suite.get("failures")) == failures
assert int(suite.get("skipped")) == skipped
print(len(cases), failures, skipped)
for c in cases:
    print(c.get("name"))
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let counts: Vec<usize> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    (
        counts[0],
        counts[1],
        counts[2],
        lines.map(str::to_owned).collect(),
    )
}

fn role_pid(body: &TestBody, role: &str) -> u32 {
    std::fs::read_to_string(body.layout.run_dir().join("roles"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{role} ")))
        .expect("the role's pid")
        .parse()
        .unwrap()
}

/// Active swap areas on this host.
fn swap_areas() -> usize {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .skip(1)
        .count()
}

/// A 16 MiB swap file turned on for as long as this lives (turned off on drop, even when the
/// test fails, so the host is left with no swap).
struct SwapOn(std::path::PathBuf);

impl SwapOn {
    fn new(path: &std::path::Path) -> Self {
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        std::fs::write(path, vec![0u8; 16 << 20]).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        run(std::process::Command::new("mkswap").arg(path));
        run(std::process::Command::new("swapon").arg(path));
        Self(path.to_owned())
    }
}

impl Drop for SwapOn {
    fn drop(&mut self) {
        let _ = std::process::Command::new("swapoff").arg(&self.0).status();
    }
}

/// The one check that failed (id, outcome, detail), asserting the audit failed on it alone.
fn only_failure(ok: bool, receipt: &Value) -> (String, String, String) {
    assert!(!ok);
    let mut failed: Vec<_> = outcomes(receipt)
        .into_iter()
        .filter(|c| c.1 == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    failed.remove(0)
}

fn outcomes(receipt: &Value) -> Vec<(String, String, String)> {
    reach_tests::receipt_checks(receipt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receipt_observes_a_sound_body_and_names_an_open_secret() {
    let body = TestBody::start().await;
    body.operator_after_genesis("audit").await;

    let (ok, receipt) = audit(&body).await;
    let checks = outcomes(&receipt);
    let failed: Vec<_> = checks.iter().filter(|c| c.1 != "pass").collect();
    // Everything passes but what does not apply: the firewall without a ruleset file (the
    // test below judges it), the resource ceilings, which the launcher's dev profile does
    // not set (the container test judges them), the account and the reboot, judged for a
    // Quadlet body, the shutdown, which leaves no record, and the backup this build does not
    // keep.
    assert!(ok, "{failed:#?}");
    let skipped: Vec<&str> = failed
        .iter()
        .filter(|c| c.1 == "skip")
        .map(|c| c.0.as_str())
        .collect();
    assert_eq!(
        (failed.len(), skipped),
        (
            8,
            vec![
                "resources/pids",
                "resources/memory",
                "host/account",
                "lifecycle/reboot",
                "lifecycle/shutdown",
                "recovery/backup",
                "firewall/egress",
                "network/dns"
            ]
        ),
        "{failed:#?}"
    );
    assert_eq!(receipt["format"], "reach.audit-receipt.v1");
    assert_eq!(receipt["failed"], 0);
    assert_eq!(
        receipt["manifest"]["profile"],
        body.manifest.profile.as_str()
    );
    let digest = receipt["manifest"]["digest"].as_str().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );

    // Every role was asked, refused the forged operator, and every port that grants the
    // operator less than everything refused it the rest.
    let ids: Vec<&str> = checks.iter().map(|c| c.0.as_str()).collect();
    for role in &body.manifest.roles {
        for kind in ["health", "identity"] {
            let id = format!("{kind}/{}", role.name);
            assert!(ids.contains(&id.as_str()), "{id} missing: {ids:?}");
        }
    }
    let core_admission = checks
        .iter()
        .find(|c| c.0 == "authorization/core.admission")
        .expect("core.admission audited");
    // The operator holds no grant there: the handshake refuses it.
    assert!(
        core_admission.2.contains("/reach.core.v1.Admission/Admit")
            && core_admission
                .2
                .ends_with("refusal expected at the handshake"),
        "{core_admission:?}"
    );
    // It holds some grants on ward's authority port, not AdmitScope: the port's authorization
    // answers PERMISSION_DENIED.
    let ward = checks
        .iter()
        .find(|c| c.0 == "authorization/ward.authority")
        .expect("ward.authority audited");
    assert!(
        ward.2.contains(": PermissionDenied")
            && ward.2.ends_with("refusal expected at the authorization"),
        "{ward:?}"
    );
    for id in [
        "identity/leaves",
        "secrets/modes",
        "secrets/holders",
        "secrets/environment",
        "secrets/command-line",
        "secrets/logs",
        "vault/serving",
        "corpus/fresh",
        "process/core-dumps",
        "host/swap",
        "rotation/root",
        "recovery/policy",
        "recovery/reconciliation",
    ] {
        assert!(ids.contains(&id), "{id} missing: {ids:?}");
    }
    // The reconciliation the body recorded is the evidence, and the policy is this build's.
    let reconciled = checks
        .iter()
        .find(|c| c.0 == "recovery/reconciliation")
        .unwrap();
    assert!(
        reconciled.2.contains("the latest GENESIS by spiffe://"),
        "{reconciled:?}"
    );
    let policy = checks.iter().find(|c| c.0 == "recovery/policy").unwrap();
    assert!(policy.2.starts_with("loss-unrecoverable: "), "{policy:?}");
    assert_eq!(
        receipt["host"]["os"].as_str().map(|s| !s.is_empty()),
        Some(true)
    );
    assert!(receipt["host"]["kernel"].is_string());

    // The same receipt as JUnit XML, read by a real XML parser (Python's): one testcase per
    // check, each failure and skip marked.
    let junit = junit_of(&body).await;
    let (tests, failures, skipped, names) = parse_junit(&junit);
    assert_eq!(tests, checks.len(), "{junit}");
    assert_eq!((failures, skipped), (0, 8), "{junit}");
    assert_eq!(
        names,
        checks.iter().map(|c| c.0.clone()).collect::<Vec<_>>()
    );
    // The receipt carries file names, never secret bytes.
    let key = std::fs::read_to_string(body.layout.secret_dir("ward").join("tls.key")).unwrap();
    let text = receipt.to_string();
    let body_of_key = body_of_key_of(&key);
    assert!(!text.contains(&body_of_key), "the receipt holds a key");

    // A role process that may dump core. A role sets its limit to zero, soft and hard, at
    // start, and raising a hard limit takes CAP_SYS_RESOURCE, which even root lacks on some
    // hosts (this one's): so core's entry in `run/roles` names a process with dumps allowed
    // instead. Exactly `process/core-dumps` fails, naming it.
    let roles_file = body.layout.run_dir().join("roles");
    let roles_before = std::fs::read_to_string(&roles_file).unwrap();
    let mut dumper = std::process::Command::new("sh")
        .args(["-c", "ulimit -c unlimited && exec sleep 60"])
        .spawn()
        .unwrap();
    let core_pid = dumper.id();
    let core_line = format!("core {}\n", role_pid(&body, "core"));
    std::fs::write(
        &roles_file,
        roles_before.replacen(&core_line, &format!("core {core_pid}\n"), 1),
    )
    .unwrap();
    // The shell has run `ulimit` once its limits say so.
    while !std::fs::read_to_string(format!("/proc/{core_pid}/limits"))
        .unwrap()
        .lines()
        .any(|l| {
            l.starts_with("Max core file size")
                && l.split_whitespace()
                    .skip(4)
                    .take(2)
                    .eq(["unlimited", "unlimited"])
        })
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (ok, receipt) = audit(&body).await;
    let junit = junit_of(&body).await;
    std::fs::write(&roles_file, &roles_before).unwrap();
    let _ = dumper.kill();
    let _ = dumper.wait();
    let failed = only_failure(ok, &receipt);
    assert_eq!(failed.0, "process/core-dumps");
    assert!(
        failed.2.starts_with(&format!(
            "core (pid {core_pid}): core dumps allowed: core-file size unlimited, unlimited"
        )),
        "{failed:?}"
    );
    // Its JUnit form marks that testcase, and only it, failed.
    let (_, failures, _, _) = parse_junit(&junit);
    assert_eq!(failures, 1, "{junit}");
    assert!(
        junit.contains("name=\"process/core-dumps\">\n      <failure message=\"core (pid"),
        "{junit}"
    );

    // Swap on a plain disk (a swap file on this host's file system): exactly `host/swap`
    // fails. Only where the test may turn swap on and the host has none of its own.
    if nix::unistd::getuid().is_root() && swap_areas() == 0 {
        let file = tempfile::Builder::new()
            .prefix("reach-audit-swap")
            .tempfile_in("/var/tmp")
            .unwrap();
        let on = SwapOn::new(file.path());
        let (ok, receipt) = audit(&body).await;
        drop(on);
        let failed = only_failure(ok, &receipt);
        assert_eq!(failed.0, "host/swap");
        assert!(
            failed.2.contains(&format!("{} on ", file.path().display()))
                && failed.2.contains("which is not dm-crypt"),
            "{failed:?}"
        );
        assert_eq!(swap_areas(), 0);
    }

    // A root rotation left half done (the new root minted and every leaf issued under it, the
    // previous root still pinned): exactly `rotation/root` fails, naming the command that
    // finishes it; once the previous root is retired it passes again.
    let rotate = |rotation| {
        reach_scribe::materialize_identities(
            &body.manifest,
            &body.layout,
            rotation,
            std::time::SystemTime::now(),
        )
        .unwrap()
    };
    let reload = reach_port::material::RELOAD_INTERVAL * 4;
    rotate(reach_scribe::Rotation::Root);
    tokio::time::sleep(reload).await;
    let (ok, receipt) = audit(&body).await;
    let failed = only_failure(ok, &receipt);
    assert_eq!(failed.0, "rotation/root");
    assert!(
        failed.2.contains("still pins 2 roots")
            && failed.2.ends_with("--rotate retire-previous-root`"),
        "{failed:?}"
    );
    rotate(reach_scribe::Rotation::RetirePreviousRoot);
    tokio::time::sleep(reload).await;
    let (ok, receipt) = audit(&body).await;
    assert!(ok, "{:#?}", outcomes(&receipt));

    // A leaf key opened to others: that check fails, naming the file; nothing else does. (Its
    // own group reading it is how a Quadlet role reads its mounted secret directory.)
    let opened = body.layout.secret_dir("ward").join("tls.key");
    std::fs::set_permissions(&opened, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, receipt, said) = audit_with_stderr(&body).await;
    std::fs::set_permissions(
        &opened,
        std::fs::Permissions::from_mode(reach_identity::files::SECRET_FILE_MODE),
    )
    .unwrap();
    assert!(
        said.contains("FAIL secrets/modes: open to others or a foreign group:"),
        "{said}"
    );
    let failed = only_failure(ok, &receipt);
    assert_eq!(failed.0, "secrets/modes");
    assert!(
        failed
            .2
            .contains(&format!("{} 644 group", opened.display())),
        "{failed:?}"
    );

    // Workbench's leaf swapped for one of the same root that ends in 5 hours (no renewal ran):
    // exactly `identity/leaves` fails, naming it.
    let workbench = body.layout.secret_dir("workbench");
    let (crt, key) = (workbench.join("tls.crt"), workbench.join("tls.key"));
    let (crt_before, key_before) = (std::fs::read(&crt).unwrap(), std::fs::read(&key).unwrap());
    let scribe = body.layout.scribe_dir();
    let short = reach_identity::TrustRoot::from_pem(
        std::fs::read_to_string(scribe.join("root.crt")).unwrap(),
        std::fs::read_to_string(scribe.join("root.key")).unwrap(),
    )
    .unwrap()
    .issue_leaf(
        &body.manifest.principal("workbench"),
        std::time::SystemTime::now(),
        std::time::Duration::from_secs(5 * 3600),
    )
    .unwrap();
    reach_identity::files::write_leaf(&workbench, &short).unwrap();
    let (ok, receipt) = audit(&body).await;
    reach_identity::files::write_secret(&key, &key_before).unwrap();
    reach_identity::files::write_secret(&crt, &crt_before).unwrap();
    let failed = only_failure(ok, &receipt);
    assert_eq!(failed.0, "identity/leaves");
    assert!(
        failed.2.starts_with("workbench's leaf ends in 4h 59m")
            || failed.2.starts_with("workbench's leaf ends in 5h 00m"),
        "{failed:?}"
    );

    // Discord's bot token copied into core's secret directory (core holds no credential):
    // exactly `secrets/holders` fails, naming who the manifest gives it to.
    let token = body
        .layout
        .secret_dir("egress-discord")
        .join("discord-bot-token");
    let stray = body.layout.secret_dir("core").join("discord-bot-token");
    std::fs::copy(&token, &stray).unwrap();
    let (ok, receipt) = audit(&body).await;
    std::fs::remove_file(&stray).unwrap();
    let failed = only_failure(ok, &receipt);
    assert_eq!(
        (failed.0.as_str(), failed.2.as_str()),
        (
            "secrets/holders",
            "core holds discord-bot-token, which the manifest gives egress-discord, ingress-edge"
        )
    );

    // A leaf key's bytes in a role's log: exactly `secrets/logs` fails, naming the role and
    // the file (not the bytes).
    let key_path = body.layout.secret_dir("egress-discord").join("tls.key");
    let leaked = std::fs::read_to_string(&key_path).unwrap();
    let log = body.layout.log_path("core");
    let before = std::fs::read(&log).unwrap();
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        writeln!(f, "debug dump: {}", leaked.trim()).unwrap();
    }
    let (ok, receipt) = audit(&body).await;
    let failed = only_failure(ok, &receipt);
    assert_eq!(failed.0, "secrets/logs");
    assert_eq!(failed.2, format!("core's log holds {}", key_path.display()));
    assert!(!receipt.to_string().contains(&body_of_key_of(&leaked)));
    // Core's own lines since were appended; put back what was there plus them, without the dump.
    let now = std::fs::read_to_string(&log).unwrap();
    let dump = format!("debug dump: {}\n", leaked.trim());
    std::fs::write(&log, now.replacen(&dump, "", 1)).unwrap();
    assert!(std::fs::read(&log).unwrap().starts_with(&before));

    // A role that is down: its health fails, and its failed probes prove no refusal (an outage
    // and a refused certificate look the same to the client), so its identity check fails too.
    let roles = std::fs::read_to_string(body.layout.run_dir().join("roles")).unwrap();
    let pid: i32 = roles
        .lines()
        .find_map(|l| l.strip_prefix("workbench "))
        .expect("workbench's pid")
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (ok, receipt) = audit(&body).await;
    assert!(!ok);
    let checks = outcomes(&receipt);
    let outcome = |id: &str| checks.iter().find(|c| c.0 == id).expect(id).clone();
    assert_eq!(outcome("health/workbench").1, "fail");
    let identity = outcome("identity/workbench");
    assert_eq!(identity.1, "fail");
    assert!(
        identity
            .2
            .ends_with("the role did not answer its health check, so no refusal is proved"),
        "{identity:?}"
    );
    // The roles still up pass as before.
    assert_eq!(outcome("identity/core").1, "pass");
    assert_eq!(outcome("health/core").1, "pass");

    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_of_nothing_passes_nothing() {
    // Pointed at a state directory with no body, every check that needs evidence fails or is
    // skipped; none passes for want of something to look at.
    let empty = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .arg("audit")
        .arg("--state")
        .arg(empty.path())
        .output()
        .await
        .expect("reach runs");
    assert!(!out.status.success());
    let receipt: Value = serde_json::from_slice(&out.stdout).expect("a receipt");
    let checks = outcomes(&receipt);
    // Only the host's own swap is judged without a body (it is the host's, not the body's).
    let passed: Vec<_> = checks
        .iter()
        .filter(|c| c.1 == "pass" && c.0 != "host/swap")
        .collect();
    assert!(passed.is_empty(), "{passed:#?}");
    for id in [
        "health",
        "identity",
        "identity/leaves",
        "secrets/modes",
        "secrets/holders",
        "vault/serving",
        "corpus/fresh",
        "process/core-dumps",
        "rotation/root",
        "recovery/reconciliation",
    ] {
        assert!(
            checks.iter().any(|c| c.0 == id && c.1 == "fail"),
            "{id}: {checks:#?}"
        );
    }
    // No ruleset file named: the firewall is not judged either way.
    assert!(
        checks
            .iter()
            .any(|c| c.0 == "firewall/egress" && c.1 == "skip"),
        "{checks:#?}"
    );
}

/// `reach audit --ruleset`, run in a network namespace of the test's own: the live egress table
/// against the file `reach scribe nftables` wrote, as `firewall/egress`.
#[test]
fn the_receipt_compares_the_live_firewall_with_the_ruleset_file() {
    use std::process::Command;
    let reach = reach_launcher::default_bin_dir().join("reach");
    let dir = tempfile::tempdir().unwrap();
    let ruleset = dir.path().join("egress.nft");
    let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    let mut scribe = Command::new(&reach);
    scribe.args(["scribe", "nftables", "--out"]).arg(&ruleset);
    for (i, r) in m.roles.iter().enumerate() {
        scribe.arg(format!("--uid={}={}", r.name, 64_300 + i));
    }
    // Each host at one address (destinations on the same host, such as discord.com's REST
    // and session limit, share it), and every destination rendered with its host's address.
    let mut hosts: Vec<(String, String)> = Vec::new();
    for d in &m.destinations {
        let host = d
            .url
            .trim_start_matches("https://")
            .split([':', '/'])
            .next()
            .unwrap()
            .to_owned();
        let addr = match hosts.iter().find(|(h, _)| *h == host) {
            Some((_, a)) => a.clone(),
            None => {
                let a = format!("11.0.1.{}", hosts.len() + 1);
                hosts.push((host, a.clone()));
                a
            }
        };
        scribe.arg(format!("--address={}={addr}", d.name));
    }
    assert!(scribe.status().unwrap().success());

    let ns = format!("reach-audit-fw-{}", std::process::id());
    // The namespace's own /etc/hosts (`ip netns exec` mounts /etc/netns/<ns>/hosts over it):
    // each destination's host at the address the ruleset was rendered with.
    let etc = std::path::PathBuf::from("/etc/netns").join(&ns);
    std::fs::create_dir_all(&etc).unwrap();
    let write_hosts = |hosts: &[(String, String)]| {
        let text: String = hosts.iter().map(|(h, a)| format!("{a} {h}\n")).collect();
        std::fs::write(etc.join("hosts"), text).unwrap();
    };
    write_hosts(&hosts);
    let ip = |args: &[&str]| {
        let ok = Command::new("ip").args(args).status().unwrap().success();
        assert!(ok, "ip {args:?}");
    };
    ip(&["netns", "add", &ns]);
    struct Gone<'a>(&'a str);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", self.0]).status();
            let _ = std::fs::remove_dir_all(std::path::Path::new("/etc/netns").join(self.0));
        }
    }
    let _gone = Gone(&ns);
    let empty = tempfile::tempdir().unwrap();
    let receipt = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(&reach)
            .arg("audit")
            .arg("--state")
            .arg(empty.path())
            .arg("--ruleset")
            .arg(&ruleset)
            .output()
            .unwrap();
        let receipt: Value = serde_json::from_slice(&out.stdout).expect("a receipt");
        outcomes(&receipt)
    };
    let find = |checks: Vec<(String, String, String)>, id: &str| {
        checks.into_iter().find(|c| c.0 == id).expect(id)
    };
    let firewall = || find(receipt(), "firewall/egress");
    let dns = || find(receipt(), "network/dns");

    let absent = firewall();
    assert_eq!(absent.1, "fail");
    assert!(
        absent.2.starts_with("no table inet reach_egress is loaded"),
        "{absent:?}"
    );
    assert_eq!(dns().1, "fail");

    let path = ruleset.to_str().unwrap();
    ip(&["netns", "exec", &ns, "nft", "-f", path]);
    let loaded = firewall();
    assert_eq!(loaded.1, "pass", "{loaded:?}");
    let digest = reach_digest::Sha256Digest::of(std::fs::read(&ruleset).unwrap()).to_string();
    assert!(loaded.2.contains(&digest), "{loaded:?}");

    // Every destination resolves where the firewall admits it; then discord.com moves.
    let resolved = dns();
    assert_eq!(resolved.1, "pass", "{resolved:?}");
    assert!(
        resolved
            .2
            .starts_with("5 destinations resolve only to addresses the live firewall admits"),
        "{resolved:?}"
    );
    let moved: Vec<(String, String)> = hosts
        .iter()
        .map(|(h, a)| match h.as_str() {
            "discord.com" => (h.clone(), "11.0.1.99".to_owned()),
            _ => (h.clone(), a.clone()),
        })
        .collect();
    write_hosts(&moved);
    let outdated = dns();
    assert_eq!(outdated.1, "fail");
    assert!(
        outdated.2.starts_with(
            "discord-rest now resolves to 11.0.1.99, which the live firewall does not admit"
        ) && outdated
            .2
            .ends_with("render the ruleset again (`reach scribe nftables`) and load it"),
        "{outdated:?}"
    );
    write_hosts(&hosts);

    ip(&[
        "netns",
        "exec",
        &ns,
        "nft",
        "add",
        "rule",
        "inet",
        "reach_egress",
        "role_core",
        "accept",
    ]);
    let edited = firewall();
    assert_eq!(edited.1, "fail");
    assert!(
        edited
            .2
            .contains("(chain role_core): expected `}`, found `accept`"),
        "{edited:?}"
    );
}
