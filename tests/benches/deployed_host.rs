//! A deployed host's boot and receipt figures (issue #32): the deployment guest
//! (deploy/guest/image.toml) under QEMU (TCG unless KVM boots here), Reach installed by
//! deploy/guest/install.sh, the body started by the lingering user's systemd.
//!
//! ```text
//! cargo build --bins && cargo bench --profile dev -p reach-tests --bench deployed_host
//! ```
//!
//! Printed, from one run: `boot` (QEMU start → the guest's boot settled), `install` (the
//! operator's steps: loading the eight role images built on this host, identities, units,
//! start), `healthy` (units started
//! → every role healthy), `receipt` (one `reach audit --podman --units`), `reboot`
//! (`systemctl reboot` → every role healthy again, nobody attending), and the ratio of a
//! reboot to a first boot plus the body's start, which says what the body adds to a reboot.

use std::time::{Duration, Instant};

use reach_tests::deployed::{self, Guest};

fn s(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    let roles = m.roles.len();
    let image = deployed::image();
    let accel = deployed::accel(&image).await;
    let dir = tempfile::Builder::new()
        .prefix("reach-deployed-bench-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let install = deployed::install_disk(dir.path(), &m);
    let disk = deployed::overlay(&image, &dir.path().join("disk.qcow2"));
    let run = dir.path().join("run");

    let t = Instant::now();
    let mut g = Guest::boot(&image, accel, &run, &disk, Some(&install)).await;
    let boot = t.elapsed();
    let t = Instant::now();
    g.install("").await;
    let installed = t.elapsed();
    let healthy = g.healthy(roles).await;
    g.reconcile("bench", true).await;
    let t = Instant::now();
    let (ok, _) = g.receipt().await;
    let receipt = t.elapsed();
    assert!(ok, "the receipt passes on a fresh install");
    let t = Instant::now();
    g.reboot().await;
    let rebooted = g.healthy(roles).await + t.elapsed();
    let (ok, _) = g.receipt().await;
    assert!(ok, "the receipt passes after a reboot");
    g.poweroff().await;

    println!("deployed host, {} ({roles} roles)", accel.as_str());
    println!("  boot      {:7.1} s  (QEMU start → boot settled)", s(boot));
    println!(
        "  install   {:7.1} s  (install.sh: load images, identities, units, start)",
        s(installed)
    );
    println!(
        "  healthy   {:7.1} s  (units started → {roles}/{roles} healthy)",
        s(healthy)
    );
    println!(
        "  receipt   {:7.1} s  (reach audit --podman --units)",
        s(receipt)
    );
    println!(
        "  reboot    {:7.1} s  (systemctl reboot → {roles}/{roles} healthy)",
        s(rebooted)
    );
    println!(
        "  reboot / (boot + healthy) = {:.2}",
        s(rebooted) / (s(boot) + s(healthy))
    );
}
