//! `reach up` starts all eight roles as separate processes from a fresh state directory,
//! `reach status` reports them healthy, and a stop leaves no process behind. A role given bad
//! input refuses to start with a typed error naming what and where.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reach_manifest::plan::StateLayout;

fn bin(name: &str) -> PathBuf {
    reach_launcher::default_bin_dir().join(name)
}

fn alive(pid: i32) -> bool {
    // A reaped child is gone; an unreaped zombie would still answer, so also check /proc state.
    kill(Pid::from_raw(pid), None).is_ok()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
}

fn status(state: &Path) -> std::process::Output {
    Command::new(bin("reach"))
        .args(["status", "--state"])
        .arg(state)
        .output()
        .unwrap()
}

#[test]
fn reach_up_status_and_stop_leave_nothing_behind() {
    let dir = tempfile::Builder::new()
        .prefix("ru")
        .tempdir_in("/tmp")
        .unwrap();
    let state = dir.path();
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    reach_tests::write_placeholder_credentials(&manifest, &StateLayout::new(state));

    let mut up = Command::new(bin("reach"))
        .args(["up", "--log-level", "warn", "--state"])
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Wait until status reports every role healthy.
    let deadline = Instant::now() + Duration::from_secs(60);
    let out = loop {
        let out = status(state);
        if out.status.success() {
            break out;
        }
        assert!(up.try_wait().unwrap().is_none(), "reach up exited early");
        assert!(
            Instant::now() < deadline,
            "body never became healthy:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("8/8 roles healthy"), "{text}");

    // Healthy roles can answer before the launcher has taken every READY=1: it is up once it
    // has written its pid file.
    while !state.join("run/launcher.pid").exists() {
        assert!(
            Instant::now() < deadline,
            "reach up never reported itself up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Eight distinct role processes, none of them the launcher.
    let roles = std::fs::read_to_string(state.join("run/roles")).unwrap();
    let pids: Vec<i32> = roles
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 8, "{roles}");
    let mut distinct = pids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 8);
    assert!(!pids.contains(&(up.id() as i32)));
    assert!(pids.iter().all(|&p| alive(p)));

    // SIGTERM the launcher: it stops the roles in reverse order and exits.
    kill(Pid::from_raw(up.id() as i32), Signal::SIGTERM).unwrap();
    let exit = up.wait().unwrap();
    assert!(exit.success(), "reach up exit {exit:?}");
    for p in pids {
        assert!(!alive(p), "role pid {p} outlived the stop");
    }
    let out = status(state);
    assert!(!out.status.success(), "status must report the body down");
    // Each role's line says why: nothing listens on its socket (tonic's own message is only
    // "transport error").
    let text = String::from_utf8_lossy(&out.stdout);
    let down: Vec<&str> = text.lines().filter(|l| l.contains(" DOWN ")).collect();
    assert_eq!(down.len(), 8, "{text}");
    assert!(
        down.iter()
            .all(|l| l
                .ends_with("cannot connect: transport error: Connection refused (os error 111)")),
        "{text}"
    );
}

fn role_output(state: &Path, role: &str) -> std::process::Output {
    let binary = format!("reach-{role}");
    Command::new(bin(&binary))
        .arg("--config")
        .arg(StateLayout::new(state).config_path(role))
        .env_clear()
        .output()
        .unwrap()
}

#[test]
fn bad_input_stops_a_role_from_starting() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("rb")
        .tempdir_in("/tmp")
        .unwrap();
    let layout = StateLayout::new(dir.path());
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    reach_tests::write_placeholder_credentials(&manifest, &layout);
    reach_launcher::prepare(&manifest, &layout).unwrap();

    // A leaf key readable by others.
    let key = layout.secret_dir("workbench").join("tls.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = role_output(dir.path(), "workbench");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has mode 644") && err.contains("tls.key"),
        "{err}"
    );

    // A missing credential file the manifest names.
    std::fs::remove_file(
        layout
            .secret_dir("egress-discord")
            .join("discord-bot-token"),
    )
    .unwrap();
    let out = role_output(dir.path(), "egress-discord");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("credential discord-bot") && err.contains("is missing"),
        "{err}"
    );

    // An unknown key in the role's config.
    let cfg = layout.config_path("vm-broker");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("surprise = true\n{text}")).unwrap();
    let out = role_output(dir.path(), "vm-broker");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field") && err.contains("surprise"),
        "{err}"
    );

    // The config and the binary disagree about ports, or a port cannot be bound: each refused
    // by name before the role serves anything (ward serves ward.health and ward.authority).
    let cfg = layout.config_path("ward");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let ward_refuses = |text: String, want: &str| {
        std::fs::write(&cfg, text).unwrap();
        let out = role_output(dir.path(), "ward");
        assert_eq!(out.status.code(), Some(78), "{want}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    };
    ward_refuses(
        good.replace("name = \"ward.health\"", "name = \"ward.elsewhere\""),
        "port `ward.health` is not in this role's config",
    );
    ward_refuses(
        format!(
            "{good}\n[[serves]]\nname = \"ward.extra\"\nservice = \"reach.health.v1.Health\"\n\
             socket = \"/nonexistent/extra.sock\"\ngrants = []\n"
        ),
        "port `ward.extra` is in the config but this role serves no handler for it",
    );
    ward_refuses(
        good.replace("role = \"ward\"", "role = \"Ward!\""),
        "config names a malformed principal",
    );
    let sockets = layout.socket_dir("ward.health");
    std::fs::remove_dir_all(&sockets).unwrap();
    ward_refuses(good.clone(), "port `ward.health` could not be bound");
    std::fs::create_dir_all(&sockets).unwrap();
    std::fs::write(&cfg, &good).unwrap();

    // The role's own leaf from another trust root, then an expired one: refused before serving.
    let now = std::time::SystemTime::now();
    let p = manifest.principal("ward");
    let sd = layout.secret_dir("ward");
    let install =
        |leaf: &reach_identity::IssuedLeaf| reach_identity::files::write_leaf(&sd, leaf).unwrap();
    let other = reach_identity::TrustRoot::generate(&manifest.trust_domain, now).unwrap();
    install(
        &other
            .issue_leaf(&p, now, Duration::from_secs(3600))
            .unwrap(),
    );
    let out = role_output(dir.path(), "ward");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not chain to the trust bundle"), "{err}");

    let read =
        |n: &str| String::from_utf8(std::fs::read(layout.scribe_dir().join(n)).unwrap()).unwrap();
    let root = reach_identity::TrustRoot::from_pem(read("root.crt"), read("root.key")).unwrap();
    install(
        &root
            .issue_leaf(
                &p,
                now - Duration::from_secs(3 * 86400),
                Duration::from_secs(86400),
            )
            .unwrap(),
    );
    let out = role_output(dir.path(), "ward");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("leaf has expired"), "{err}");
}

/// A role binary for the launcher's refusals: a shell script in place of the real one.
fn script(dir: &Path, binary: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(binary);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every role's binary linked from the built ones, except `fake`'s, which runs `body`.
fn bin_dir_with(dir: &Path, manifest: &reach_manifest::Manifest, fake: &str, body: &str) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for role in &manifest.roles {
        if role.name.as_str() == fake {
            script(dir, &role.binary, body);
        } else {
            std::os::unix::fs::symlink(bin(&role.binary), dir.join(&role.binary)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_cannot_come_up_is_refused_and_leaves_no_role_running() {
    use reach_launcher::{Body, LaunchError, LaunchOptions};
    let dir = tempfile::Builder::new()
        .prefix("rl")
        .tempdir_in("/tmp")
        .unwrap();
    let layout = StateLayout::new(dir.path().join("state"));
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    // Only ward (first) and corpus-builder (second) matter here.
    assert_eq!(manifest.roles[0].name.as_str(), "ward");
    assert_eq!(manifest.roles[1].name.as_str(), "corpus-builder");

    // External credentials the manifest names are missing: nothing starts.
    match reach_launcher::prepare(&manifest, &layout) {
        Err(LaunchError::MissingCredentials(missing)) => assert!(
            missing.contains(&("egress-discord".to_owned(), "discord-bot-token".to_owned())),
            "{missing:?}"
        ),
        other => panic!("expected missing credentials, got {other:?}"),
    }
    reach_tests::write_placeholder_credentials(&manifest, &layout);

    let options = |bin_dir: PathBuf, ready_timeout: Duration| LaunchOptions {
        bin_dir,
        ready_timeout,
        log_level: "warn".into(),
        ..LaunchOptions::default()
    };
    let ward_down = async || {
        let health = reach_launcher::status(&manifest, &layout).await.unwrap();
        let ward = health.iter().find(|h| h.role == "ward").unwrap();
        assert!(
            ward.result.is_err(),
            "ward still answers: {:?}",
            ward.result
        );
    };

    // No role binaries where the launcher looks.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    match Body::up(
        &manifest,
        &layout,
        options(empty.clone(), Duration::from_secs(30)),
    )
    .await
    {
        Err(LaunchError::MissingBinary(path)) => assert_eq!(path, empty.join("reach-ward")),
        other => panic!("expected a missing binary, got {other:?}"),
    }

    // The second role exits before it is ready: refused with its status, and ward, already
    // started, is stopped.
    let bins = dir.path().join("bins");
    bin_dir_with(
        &bins,
        &manifest,
        "corpus-builder",
        "echo 'no corpus today' >&2; exit 3",
    );
    match Body::up(
        &manifest,
        &layout,
        options(bins.clone(), Duration::from_secs(30)),
    )
    .await
    {
        Err(LaunchError::Exited {
            role,
            status,
            log_tail,
        }) => {
            assert_eq!((role.as_str(), status.code()), ("corpus-builder", Some(3)));
            assert!(log_tail.contains("no corpus today"), "{log_tail}");
        }
        other => panic!("expected an early exit, got {other:?}"),
    }
    ward_down().await;

    // The second role never says READY=1: refused after the ready timeout, killed, and ward
    // stopped.
    let pid_file = dir.path().join("silent.pid");
    bin_dir_with(
        &bins,
        &manifest,
        "corpus-builder",
        &format!("echo $$ > {}; exec /bin/sleep 600", pid_file.display()),
    );
    match Body::up(&manifest, &layout, options(bins, Duration::from_secs(3))).await {
        Err(LaunchError::NotReady { role, timeout, .. }) => {
            assert_eq!(
                (role.as_str(), timeout),
                ("corpus-builder", Duration::from_secs(3))
            )
        }
        other => panic!("expected no readiness, got {other:?}"),
    }
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the silent role outlived its refusal");
    ward_down().await;
}

#[test]
fn a_state_directory_the_launcher_cannot_use_is_refused_naming_what() {
    use reach_launcher::LaunchError;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path().join("state"));
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();

    // A file where the run directory goes: refused naming it, and it is left as it was.
    std::fs::create_dir_all(layout.root()).unwrap();
    std::fs::write(layout.run_dir(), "not a directory").unwrap();
    match reach_launcher::prepare(&manifest, &layout) {
        Err(LaunchError::Io { path, .. }) => assert_eq!(path, layout.run_dir()),
        other => panic!("expected an unusable path, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(layout.run_dir()).unwrap(),
        "not a directory"
    );
    std::fs::remove_file(layout.run_dir()).unwrap();

    // A trust root key that is no key: Scribe's refusal, and nothing is minted over it.
    assert!(matches!(
        reach_launcher::prepare(&manifest, &layout),
        Err(LaunchError::MissingCredentials(_))
    ));
    let key = layout.scribe_dir().join("root.key");
    let leaf = layout.secret_dir("ward").join("tls.crt");
    let leaf_before = std::fs::read(&leaf).unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    match reach_launcher::prepare(&manifest, &layout) {
        Err(LaunchError::Scribe(e)) => {
            assert!(
                e.to_string().starts_with("trust root PEM is unreadable"),
                "{e}"
            )
        }
        other => panic!("expected Scribe's refusal, got {other:?}"),
    }
    assert!(std::fs::read_to_string(&key).unwrap().contains("broken"));
    assert_eq!(
        std::fs::read(&leaf).unwrap(),
        leaf_before,
        "no leaf re-minted"
    );
}

/// The expiry of the leaf in `dir`, as seconds since the Unix epoch.
fn leaf_expiry(manifest: &reach_manifest::Manifest, dir: &Path) -> i64 {
    let der = reach_identity::files::read_leaf_cert(dir).unwrap();
    reach_identity::inspect_leaf(&der, &manifest.trust_domain, std::time::SystemTime::now())
        .unwrap()
        .not_after_unix
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_body_renews_a_leaf_near_its_end_and_keeps_talking() {
    use reach_launcher::{Body, LaunchOptions};
    let dir = tempfile::Builder::new()
        .prefix("rr")
        .tempdir_in("/tmp")
        .unwrap();
    let layout = StateLayout::new(dir.path().join("state"));
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    let _ = reach_launcher::prepare(&manifest, &layout);
    reach_tests::write_placeholder_credentials(&manifest, &layout);
    let body = Body::up(
        &manifest,
        &layout,
        LaunchOptions {
            log_level: "warn".into(),
            renew_every: Duration::from_millis(500),
            ..LaunchOptions::default()
        },
    )
    .await
    .expect("body comes up");

    // Ward's leaf swapped, while it runs, for one of the same root that ends in 5 hours:
    // inside the renewal window (6 hours before the end).
    let scribe = layout.scribe_dir();
    let root = reach_identity::TrustRoot::from_pem(
        std::fs::read_to_string(scribe.join("root.crt")).unwrap(),
        std::fs::read_to_string(scribe.join("root.key")).unwrap(),
    )
    .unwrap();
    let ward = layout.secret_dir("ward");
    let short = root
        .issue_leaf(
            &manifest.principal("ward"),
            std::time::SystemTime::now(),
            Duration::from_secs(5 * 3600),
        )
        .unwrap();
    let core_before = std::fs::read(layout.secret_dir("core").join("tls.crt")).unwrap();
    reach_identity::files::write_leaf(&ward, &short).unwrap();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    assert!(leaf_expiry(&manifest, &ward) < now() + 6 * 3600);

    // The running body renews it to a full day, and only it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while leaf_expiry(&manifest, &ward) < now() + 23 * 3600 {
        assert!(Instant::now() < deadline, "ward's leaf was not renewed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        std::fs::read(layout.secret_dir("core").join("tls.crt")).unwrap(),
        core_before,
        "a leaf far from its end is left alone"
    );
    // Ward reloads it and every role still answers the operator.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let health = reach_launcher::status(&manifest, &layout).await.unwrap();
    let down: Vec<_> = health.iter().filter(|h| h.result.is_err()).collect();
    assert!(down.is_empty(), "{down:?}");
    body.stop().await;
}

/// A manifest whose `[recovery] policy` this build cannot honour (`encrypted-backup`: it keeps
/// no backup) is refused with its code before anything is written or started, by the launcher
/// and by `reach up` as the operator runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_policy_the_build_cannot_honour_starts_nothing() {
    use reach_launcher::{Body, LaunchError, LaunchOptions};
    use reach_manifest::schema::BuildRefusal;
    let dir = tempfile::tempdir().unwrap();
    let layout = StateLayout::new(dir.path().join("state"));
    let text = reach_manifest::VPS_PUBLIC.replacen(
        r#"policy = "loss-unrecoverable""#,
        r#"policy = "encrypted-backup""#,
        1,
    );
    let manifest = reach_manifest::load(&text).unwrap();
    match Body::up(&manifest, &layout, LaunchOptions::default()).await {
        Err(e @ LaunchError::Build(BuildRefusal::EncryptedBackupNotBuilt)) => assert!(
            e.to_string()
                .starts_with("recovery/encrypted-backup-not-built: "),
            "{e}"
        ),
        Err(other) => panic!("expected the build refusal, got {other:?}"),
        Ok(_) => panic!("a body started on a policy this build cannot honour"),
    }
    assert!(
        !layout.root().exists(),
        "the refusal wrote a state directory"
    );

    let file = dir.path().join("encrypted-backup.toml");
    std::fs::write(&file, &text).unwrap();
    let out = std::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .arg("up")
        .arg("--manifest")
        .arg(&file)
        .arg("--state")
        .arg(layout.root())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("recovery/encrypted-backup-not-built"),
        "{said}"
    );
    assert!(!layout.root().exists());
}
