//! `reach scribe images | quadlet | nftables | check | renew`: the operator's side of Scribe's
//! materialization (the receipt's checks of what it materialized are in `host_checks`).
//!
//! The work is in `reach-scribe`; this module parses arguments, binds the host's facts (image
//! digests, uids, resolved addresses) and prints what happened.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_scribe::check::{CheckOptions, check};
use reach_scribe::image_build::{Podman, build_all, digests_file};
use reach_scribe::images::{DigestSource, pin_images};
use reach_scribe::nftables::{FirewallBinding, Identity, render};
use reach_scribe::quadlet::{QuadletInput, derive, write_out};
use reach_scribe::renewal::Renewal;

/// Which manifest, which state directory, which images.
#[derive(clap::Args, Debug, Clone)]
pub struct Source {
    /// The ApplicationDeploymentManifest@1 file; the embedded reach.vps.public@1 if omitted.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// The body's state directory on the host (secrets are read from it by secrets.sh).
    #[arg(long, default_value = "reach-state")]
    state: PathBuf,
    /// A digests file (`role = "sha256:…"`) for images the manifest does not pin.
    #[arg(long, conflicts_with = "pin_local_images")]
    digests: Option<PathBuf>,
    /// Pin images the manifest does not pin to the local Podman store's digests.
    #[arg(long)]
    pin_local_images: bool,
    /// The podman binary used for --pin-local-images and `check --podman`.
    #[arg(long, default_value = "podman")]
    podman: PathBuf,
}

/// `reach scribe images`.
#[derive(clap::Args, Debug, Clone)]
pub struct ImagesArgs {
    /// The ApplicationDeploymentManifest@1 file; the embedded reach.vps.public@1 if omitted.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// The directory holding the role binaries (`cargo build --bins` output, e.g. target/release).
    #[arg(long)]
    bins: PathBuf,
    /// Where to write the digests file (`role = "sha256:…"`) for `quadlet --digests`.
    #[arg(long)]
    digests_out: Option<PathBuf>,
    /// The podman binary that builds and stores the images.
    #[arg(long, default_value = "podman")]
    podman: PathBuf,
}

/// `reach scribe quadlet`.
#[derive(clap::Args, Debug, Clone)]
pub struct QuadletArgs {
    #[command(flatten)]
    source: Source,
    /// Where the units, configs and secrets.sh are written (e.g. ~/.config/containers/systemd).
    #[arg(long)]
    out: PathBuf,
}

/// The host's facts the ruleset needs.
#[derive(clap::Args, Debug, Clone)]
pub struct BindingArgs {
    /// A role's uid: `ROLE=UID` (one per role).
    #[arg(long = "uid", value_name = "ROLE=UID")]
    uids: Vec<String>,
    /// A role's cgroup v2 path: `ROLE=LEVEL:PATH` (instead of a uid).
    #[arg(long = "cgroup", value_name = "ROLE=LEVEL:PATH")]
    cgroups: Vec<String>,
    /// An admitted destination's address: `DESTINATION=IP`. Destinations without one are
    /// resolved now through the system resolver.
    #[arg(long = "address", value_name = "DESTINATION=IP")]
    addresses: Vec<String>,
    /// An exact local road: `ROLE=IP:PORT` (e.g. the resolver an egress role asks).
    #[arg(long = "road", value_name = "ROLE=IP:PORT")]
    roads: Vec<String>,
}

/// `reach scribe nftables`.
#[derive(clap::Args, Debug, Clone)]
pub struct NftablesArgs {
    /// The ApplicationDeploymentManifest@1 file; the embedded reach.vps.public@1 if omitted.
    #[arg(long)]
    manifest: Option<PathBuf>,
    #[command(flatten)]
    binding: BindingArgs,
    /// Where the ruleset is written (load it with `nft -f`).
    #[arg(long)]
    out: PathBuf,
}

/// `reach scribe check`.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    source: Source,
    /// The directory `reach scribe quadlet` wrote.
    #[arg(long)]
    out: PathBuf,
    /// Also compare Podman secrets and local image digests.
    #[arg(long = "with-podman")]
    with_podman: bool,
    /// A ruleset file to compare with the one derived from the manifest and the binding.
    #[arg(long)]
    ruleset: Option<PathBuf>,
    #[command(flatten)]
    binding: BindingArgs,
}

fn pinned(
    m: &Manifest,
    source: &Source,
) -> anyhow::Result<std::collections::BTreeMap<String, reach_scribe::images::PinnedImage>> {
    let digests = match (&source.digests, source.pin_local_images) {
        (Some(f), _) => DigestSource::File(f.clone()),
        (None, true) => DigestSource::LocalPodman(source.podman.clone()),
        (None, false) => DigestSource::Manifest,
    };
    Ok(pin_images(m, &digests)?)
}

/// Builds one image per role from `scratch` and prints (and writes) their digests.
pub fn images(args: ImagesArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let m = crate::load_manifest(args.manifest.as_deref())?;
    let work = tempfile::tempdir().context("a build directory")?;
    let built = build_all(&m, &args.bins, &Podman::new(&args.podman), work.path())?;
    let total: u64 = built.iter().map(|b| b.size_bytes).sum();
    for b in &built {
        println!("{b}");
    }
    if let Some(path) = &args.digests_out {
        write_if_changed(path, &digests_file(&built))?;
        println!("digests in {}", path.display());
    }
    println!(
        "{} images, {:.1} MiB in all, in {:.1} s",
        built.len(),
        total as f64 / (1024.0 * 1024.0),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes the Quadlet units for the manifest.
pub fn quadlet(args: QuadletArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let m = crate::load_manifest(args.source.manifest.as_deref())?;
    let images = pinned(&m, &args.source)?;
    let input = input_for(
        &m,
        images,
        &args.source.state,
        args.source.manifest.as_deref(),
    )?;
    let out = derive(&input)?;
    let changed =
        write_out(&out, &args.out).with_context(|| format!("writing {}", args.out.display()))?;
    for c in &changed {
        println!("{c}");
    }
    println!(
        "{} files for {} roles in {} ({} changed) in {:.1} ms; create the secrets with {}/secrets.sh",
        out.files.len(),
        out.containers.len(),
        args.out.display(),
        changed.len(),
        started.elapsed().as_secs_f64() * 1000.0,
        args.out.display()
    );
    // `systemctl link` takes absolute paths only.
    let manager = crate::host_checks::manager_of(nix::unistd::getuid())?;
    println!(
        "renew the leaves hourly, once: {}",
        crate::host_checks::timer_install(&manager, &std::path::absolute(&args.out)?)
    );
    Ok(ExitCode::SUCCESS)
}

fn split_pair<'a>(s: &'a str, what: &str) -> anyhow::Result<(&'a str, &'a str)> {
    s.split_once('=')
        .with_context(|| format!("`{s}` is not {what}"))
}

fn binding(m: &Manifest, args: &BindingArgs) -> anyhow::Result<FirewallBinding> {
    let mut b = FirewallBinding::default();
    for s in &args.uids {
        let (role, uid) = split_pair(s, "ROLE=UID")?;
        b.identities.insert(
            role.to_owned(),
            Identity::Uid(uid.parse().with_context(|| format!("uid in `{s}`"))?),
        );
    }
    for s in &args.cgroups {
        let (role, rest) = split_pair(s, "ROLE=LEVEL:PATH")?;
        let (level, path) = rest
            .split_once(':')
            .with_context(|| format!("`{s}` is not ROLE=LEVEL:PATH"))?;
        b.identities.insert(
            role.to_owned(),
            Identity::Cgroup {
                level: level.parse().with_context(|| format!("level in `{s}`"))?,
                path: path.to_owned(),
            },
        );
    }
    for s in &args.addresses {
        let (dest, ip) = split_pair(s, "DESTINATION=IP")?;
        let ip: IpAddr = ip.parse().with_context(|| format!("address in `{s}`"))?;
        b.addresses.entry(dest.to_owned()).or_default().push(ip);
    }
    for s in &args.roads {
        let (role, addr) = split_pair(s, "ROLE=IP:PORT")?;
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("socket address in `{s}`"))?;
        b.local_roads.insert((role.to_owned(), addr));
    }
    // Destinations an egress role uses and the operator did not bind: the system resolver,
    // now. Scribe then refuses any special-purpose answer.
    for d in egress_destinations(m) {
        if b.addresses.contains_key(&d.name) {
            continue;
        }
        let addrs =
            resolve(d).map_err(|e| anyhow::anyhow!("{e}; bind it with --address {}=IP", d.name))?;
        b.addresses
            .insert(d.name.clone(), addrs.into_iter().collect());
    }
    Ok(b)
}

/// The destinations some egress role of `m` uses.
pub(crate) fn egress_destinations(m: &Manifest) -> Vec<&reach_manifest::schema::Destination> {
    let used: BTreeSet<&str> = m
        .roles
        .iter()
        .filter_map(|r| match &r.network {
            reach_manifest::NetworkClass::Egress(ds) => {
                Some(ds.iter().map(String::as_str).collect::<Vec<_>>())
            }
            reach_manifest::NetworkClass::None => None,
        })
        .flatten()
        .collect();
    m.destinations
        .iter()
        .filter(|d| used.contains(d.name.as_str()))
        .collect()
}

/// A destination's addresses through the system resolver, now.
pub(crate) fn resolve(d: &reach_manifest::schema::Destination) -> anyhow::Result<BTreeSet<IpAddr>> {
    let authority = d
        .url
        .strip_prefix("https://")
        .and_then(|r| r.split('/').next())
        .unwrap_or("");
    let target = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:443")
    };
    match target.to_socket_addrs() {
        Ok(a) => Ok(a.map(|a| a.ip()).collect()),
        Err(e) => bail!("destination `{}` ({target}) did not resolve: {e}", d.name),
    }
}

/// Writes the nftables ruleset.
pub fn nftables(args: NftablesArgs) -> anyhow::Result<ExitCode> {
    let m = crate::load_manifest(args.manifest.as_deref())?;
    let b = binding(&m, &args.binding)?;
    let text = render(&m, &b)?;
    write_if_changed(&args.out, &text)?;
    println!(
        "wrote {} (load it with `nft -f {}`)",
        args.out.display(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<()> {
    if std::fs::read(path).ok().as_deref() != Some(text.as_bytes()) {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// What Scribe derives the units from: `m` (read from `manifest`, if not the embedded one),
/// `images`, the state directory and, for the renewal timer, this very binary. The paths are
/// made absolute: the units and the secrets script run from no particular directory.
fn input_for<'m>(
    m: &'m Manifest,
    images: std::collections::BTreeMap<String, reach_scribe::images::PinnedImage>,
    state: &Path,
    manifest: Option<&Path>,
) -> anyhow::Result<QuadletInput<'m>> {
    let absolute = |p: &Path| std::path::absolute(p).with_context(|| format!("{}", p.display()));
    let renewal = Renewal {
        reach: std::env::current_exe().context("this binary's path")?,
        manifest: manifest.map(absolute).transpose()?,
    };
    Ok(QuadletInput::new(m, images, StateLayout::new(absolute(state)?)).with_renewal(renewal))
}

/// Scribe's drift report: `m` derived again with `images` over the state directory, compared
/// with the installed directory `out`.
pub(crate) fn drift_of(
    m: &Manifest,
    manifest: Option<&Path>,
    images: std::collections::BTreeMap<String, reach_scribe::images::PinnedImage>,
    state: &std::path::Path,
    out: &std::path::Path,
    options: &CheckOptions,
) -> anyhow::Result<(
    reach_scribe::quadlet::Materialized,
    Vec<reach_scribe::check::Drift>,
)> {
    let input = input_for(m, images, state, manifest)?;
    let derived = derive(&input)?;
    let drift =
        check(&input, &derived, out, options).with_context(|| format!("{}", out.display()))?;
    Ok((derived, drift))
}

/// Re-derives everything and reports drift; exit status 1 if there is any.
pub fn run_check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let m = crate::load_manifest(args.source.manifest.as_deref())?;
    let images = pinned(&m, &args.source)?;
    let ruleset = match &args.ruleset {
        Some(path) => Some((path.clone(), render(&m, &binding(&m, &args.binding)?)?)),
        None => None,
    };
    let options = CheckOptions {
        podman: args.with_podman.then(|| args.source.podman.clone()),
        ruleset,
    };
    let (derived, drift) = drift_of(
        &m,
        args.source.manifest.as_deref(),
        images,
        &args.source.state,
        &args.out,
        &options,
    )?;
    for d in &drift {
        println!("{d}");
    }
    if drift.is_empty() {
        println!(
            "no drift: {} files, {} roles",
            derived.files.len(),
            derived.containers.len()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{} difference(s) between the manifest and the host",
            drift.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

/// `reach scribe renew`.
#[derive(clap::Args, Debug, Clone)]
pub struct RenewArgs {
    #[command(flatten)]
    target: crate::Target,
    /// Restart every role that started before a credential it reads at start was written, in
    /// one transaction (`systemctl --user restart reach-<role>.service…`; root's body, the
    /// system manager's). Leaves need no restart: roles reload them live.
    #[arg(long)]
    restart: bool,
}

/// Renews every leaf within its renewal window in the state directory, which every role's
/// container mounts: each role serves its new leaf at its next material reload, with no restart
/// and no failed call. Then rolls the state directory out ([`reach_scribe::deployed::rollout`]):
/// with `--restart`, restarts every running role that started before a credential it reads at
/// start was written (a credential set since), in one transaction. That is decided from what the
/// host shows, so a run interrupted between writing and restarting is finished by the next. The
/// operator's own leaf is renewed in the state directory.
pub fn renew(args: RenewArgs) -> anyhow::Result<ExitCode> {
    let m = crate::load_manifest(args.target.manifest.as_deref())?;
    let layout = reach_manifest::plan::StateLayout::new(&args.target.state);
    let report = reach_scribe::materialize_identities(
        &m,
        &layout,
        reach_scribe::Rotation::IfNeeded,
        std::time::SystemTime::now(),
    )?;
    if report.leaves_issued.is_empty() {
        println!("no leaf within its renewal window");
    } else {
        println!("renewed: {}", report.leaves_issued.join(", "));
    }
    roll_out(&m, &layout, args.restart)?;
    Ok(ExitCode::SUCCESS)
}

/// Rolls the state directory out to a Quadlet body: with `restart`, restarts every running role
/// that started before a credential it reads at start was written (else says which to restart).
///
/// The restarts are one systemd transaction. Each unit `Requires=` the roles it calls, and
/// systemd restarts a unit's dependents with it: restarted one at a time, ward took every role
/// that calls it down and up again, then each later role its own callers, so a role restarted
/// as often as it had dependencies that needed a restart. In one transaction each unit stops
/// once, callers first, and starts once, what it needs first.
pub fn roll_out(
    m: &reach_manifest::Manifest,
    layout: &reach_manifest::plan::StateLayout,
    restart: bool,
) -> anyhow::Result<()> {
    let podman = reach_scribe::image_build::Podman::new("podman");
    // Which files come from the state directory needs no image: none is pinned here.
    let input = QuadletInput::new(m, Default::default(), layout.clone());
    let rollout = reach_scribe::deployed::rollout(&podman, &input)?;
    if rollout.restart.is_empty() {
        println!("every running role reads its current secrets (leaves are reloaded live)");
        return Ok(());
    }
    let units: Vec<String> = rollout
        .restart
        .iter()
        .map(|role| reach_scribe::quadlet::service_name(role))
        .collect();
    if !restart {
        for unit in &units {
            println!("restart {unit} to read its new credential");
        }
        return Ok(());
    }
    let manager = crate::host_checks::manager_of(nix::unistd::getuid())?;
    let systemctl = manager.systemctl();
    let status = manager
        .command()
        .arg("restart")
        .args(&units)
        .status()
        .with_context(|| format!("{systemctl} restart {}", units.join(" ")))?;
    if !status.success() {
        bail!("{systemctl} restart {}: {status}", units.join(" "));
    }
    for unit in &units {
        println!("restarted {unit}");
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use reach_scribe::renewal::SERVICE_FILE;

    /// The units for the embedded manifest over `state`, as `reach scribe quadlet` derives them
    /// (the reference digests stand in for built images).
    pub(crate) fn derived(
        state: &Path,
        manifest: Option<&Path>,
    ) -> reach_scribe::quadlet::Materialized {
        let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let digests =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/reference-digests.toml");
        let images = pin_images(&m, &DigestSource::File(digests)).unwrap();
        derive(&input_for(&m, images, state, manifest).unwrap()).unwrap()
    }

    /// What the renewal service runs is this CLI's own `scribe renew --restart`, for the same
    /// state directory and manifest, made absolute.
    #[test]
    fn the_renewal_service_runs_this_binarys_scribe_renew() {
        let out = derived(
            Path::new("reach-state"),
            Some(Path::new("my-manifest.toml")),
        );
        let exec = out.files[SERVICE_FILE]
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap();
        let words: Vec<&str> = exec.split(' ').collect();
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            words[0],
            std::env::current_exe().unwrap().display().to_string()
        );
        let cli = <crate::Cli as clap::Parser>::try_parse_from(&words).unwrap();
        let crate::Command::Scribe {
            command: crate::ScribeCommand::Renew(args),
        } = cli.command
        else {
            panic!("not `scribe renew`: {exec}");
        };
        assert!(args.restart);
        assert_eq!(args.target.state, here.join("reach-state"));
        assert_eq!(
            args.target.manifest.as_deref(),
            Some(here.join("my-manifest.toml").as_path())
        );
    }
}
