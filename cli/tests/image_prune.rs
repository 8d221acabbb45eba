//! `reach image prune`, run as an operator runs it. Which entries a set of digests keeps is
//! `reach_vm::cache`'s unit tests; here: the command's refusals and what it prints and removes.

use std::path::Path;
use std::process::{Command, Output};

fn prune(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reach"))
        .args(["image", "prune", "--cache"])
        .arg(cache)
        .args(args)
        .output()
        .expect("reach image prune runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn text_of(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

#[test]
fn prune_refuses_what_it_cannot_keep_and_removes_only_entries() {
    let cache = tempfile::tempdir().unwrap();
    // An image build and a preparation that stopped before their manifests.
    let image = cache.path().join("0f".repeat(32));
    let layer = cache.path().join("prepared").join("1e".repeat(16));
    for d in [&image, &layer] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("rootfs.raw"), vec![1u8; 8192]).unwrap();
    }
    std::fs::write(cache.path().join("notes.txt"), "mine").unwrap();

    // Neither a manifest, a digest to keep nor --all: refused by the command line.
    let out = prune(cache.path(), &[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("required arguments were not provided"),
        "{}",
        text(&out.stderr)
    );

    // A digest the cache does not hold: refused, nothing removed.
    let absent = format!("sha256:{}", "ab".repeat(32));
    let out = prune(cache.path(), &["--keep", &absent]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(&format!("{absent} is in no entry of the cache")),
        "{}",
        text(&out.stderr)
    );
    assert!(image.exists() && layer.exists());

    // Not a digest at all.
    let out = prune(cache.path(), &["--keep", "postfix"]);
    assert!(!out.status.success());

    // A dry run says what it would remove and removes nothing.
    let out = prune(cache.path(), &["--all", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for d in [&image, &layer] {
        assert!(
            stdout.contains(&format!(
                "would remove (unreadable manifest) {}",
                d.display()
            )),
            "{stdout}"
        );
        assert!(d.exists());
    }

    // A deployment's pins: a manifest without a vm-broker role, or with settings the broker
    // would refuse, is refused; a pin that lives outside this cache is no refusal.
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifest/reach.vps.public.toml"),
    )
    .unwrap();
    let limits = "limits = { memory_mib = 1536, pids = 64 }\n";
    assert!(shipped.contains(limits), "the vm-broker role's line moved");
    let manifest = |settings: &str| {
        let f = cache.path().join("m.toml");
        std::fs::write(&f, shipped.replace(limits, &format!("{limits}{settings}"))).unwrap();
        f.display().to_string()
    };
    let elsewhere = format!(
        "[roles.settings]\n[[roles.settings.prepared]]\ndigest = \"{absent}\"\ndir = \"/srv/prepared\"\n"
    );
    let out = prune(
        cache.path(),
        &[
            "--manifest",
            &manifest("[roles.settings]\nnetwork = \"on\"\n"),
            "--dry-run",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text_of(&out).contains("vm-broker settings"),
        "{}",
        text_of(&out)
    );
    let out = prune(
        cache.path(),
        &["--manifest", &manifest(&elsewhere), "--dry-run"],
    );
    assert!(out.status.success(), "{}", text_of(&out));
    assert_eq!(text(&out.stdout).matches("would remove ").count(), 2);

    let out = prune(cache.path(), &["--all"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("removed ").count(), 2);
    assert!(!image.exists() && !layer.exists());
    // What is not an entry stays.
    assert!(cache.path().join("notes.txt").exists());
    assert!(cache.path().join("m.toml").exists());
    assert!(cache.path().join("prepared").is_dir());
}
