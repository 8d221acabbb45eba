//! `reach scribe images | quadlet | nftables | check`: the operator's side of Scribe's materialization.
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
    let manager = user_unit_dir(nix::unistd::getuid())?;
    println!(
        "renew the leaves hourly, once: {}",
        timer_install(&manager, &std::path::absolute(&args.out)?)
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
fn egress_destinations(m: &Manifest) -> Vec<&reach_manifest::schema::Destination> {
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
fn resolve(d: &reach_manifest::schema::Destination) -> anyhow::Result<BTreeSet<IpAddr>> {
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
fn drift_of(
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

/// The audit's checks of an installed Quadlet directory `dir`, from one derivation:
/// `units/drift` (Scribe's drift report, with the images the local Podman store holds, its
/// Podman secrets and image digests included) and `renewal/timer`.
pub fn units(
    m: &Manifest,
    manifest: Option<&Path>,
    state: &Path,
    dir: &Path,
) -> [reach_launcher::audit::Check; 2] {
    use reach_launcher::audit::Check;
    const ID: &str = "units/drift";
    let podman = std::path::PathBuf::from("podman");
    let options = CheckOptions {
        podman: Some(podman.clone()),
        ruleset: None,
    };
    let report = pin_images(m, &DigestSource::LocalPodman(podman))
        .map_err(anyhow::Error::from)
        .and_then(|images| drift_of(m, manifest, images, state, dir, &options));
    let (derived, drift) = match report {
        Ok(r) => r,
        Err(e) => {
            let e = format!("{e:#}");
            return [
                Check::observed(ID, false, e.clone()),
                Check::observed(RENEWAL_TIMER, false, e),
            ];
        }
    };
    let drift_check = if drift.is_empty() {
        Check::observed(
            ID,
            true,
            format!(
                "{} files of {} match, {} roles",
                derived.files.len(),
                dir.display(),
                derived.containers.len()
            ),
        )
    } else {
        Check::observed(
            ID,
            false,
            drift
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    let timer = match user_unit_dir(nix::unistd::getuid()) {
        Ok(manager) => renewal_timer_in(&manager, &derived, dir),
        Err(e) => Check::observed(RENEWAL_TIMER, false, format!("{e:#}")),
    };
    [drift_check, timer]
}

const RENEWAL_TIMER: &str = "renewal/timer";

/// The service manager that runs a body's units: the system's for root, else the user's own.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Manager {
    /// Where `systemctl link`/`enable` put its units.
    units: PathBuf,
    /// `systemctl`'s words for it (`systemctl --user` for a user's manager).
    systemctl: &'static str,
}

fn user_unit_dir(uid: nix::unistd::Uid) -> anyhow::Result<Manager> {
    if uid.is_root() {
        return Ok(Manager {
            units: PathBuf::from("/etc/systemd/system"),
            systemctl: "systemctl",
        });
    }
    let user = nix::unistd::User::from_uid(uid)
        .with_context(|| format!("uid {uid}"))?
        .with_context(|| format!("uid {uid} has no user entry"))?;
    Ok(Manager {
        units: user.dir.join(".config/systemd/user"),
        systemctl: "systemctl --user",
    })
}

/// The commands that link the renewal timer Scribe wrote into `out` into `manager` and start it.
fn timer_install(manager: &Manager, out: &Path) -> String {
    use reach_scribe::renewal::{SERVICE_FILE, TIMER_FILE, TIMER_UNIT};
    let systemctl = manager.systemctl;
    format!(
        "{systemctl} link {0} {1} && {systemctl} enable --now {TIMER_UNIT}",
        out.join(SERVICE_FILE).display(),
        out.join(TIMER_FILE).display()
    )
}

/// `renewal/timer`: the renewal timer Scribe wrote into `out` is enabled in `units` (the
/// manager's unit directory) and both its units, as systemd finds them there, are exactly
/// Scribe's. Without it every leaf of a Quadlet body ends a day after it was issued.
fn renewal_timer_in(
    manager: &Manager,
    derived: &reach_scribe::quadlet::Materialized,
    out: &Path,
) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::renewal::{SERVICE_FILE, SERVICE_UNIT, TIMER_FILE, TIMER_UNIT};
    let units = &manager.units;
    let install = timer_install(manager, out);
    let found = [
        (
            units.join("timers.target.wants").join(TIMER_UNIT),
            TIMER_FILE,
        ),
        (units.join(SERVICE_UNIT), SERVICE_FILE),
    ];
    for (path, file) in found {
        // Read through the links `systemctl link` and `enable` make.
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Check::observed(
                    RENEWAL_TIMER,
                    false,
                    format!(
                        "no {}: the leaves are not renewed and end within a day; run `{install}`",
                        path.display()
                    ),
                );
            }
            Err(e) => {
                return Check::observed(RENEWAL_TIMER, false, format!("{}: {e}", path.display()));
            }
        };
        if Some(&text) != derived.files.get(file) {
            return Check::observed(
                RENEWAL_TIMER,
                false,
                format!(
                    "{} is not the unit Scribe derives ({file}); link Scribe's: `{install}`",
                    path.display()
                ),
            );
        }
    }
    Check::observed(
        RENEWAL_TIMER,
        true,
        format!(
            "{TIMER_UNIT} enabled in {}: `{}` every hour",
            units.display(),
            derived.files[SERVICE_FILE]
                .lines()
                .find_map(|l| l.strip_prefix("ExecStart="))
                .unwrap_or_default()
        ),
    )
}

/// The receipt's `secrets/rollout` for a Quadlet body: every running role holds the secrets its
/// state directory has now. It fails while a renewed leaf (or a credential set since) waits for
/// its Podman secret or its role's restart, naming what `reach scribe renew --restart` would do.
pub fn secrets_rollout(m: &Manifest, state: &Path) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    const ID: &str = "secrets/rollout";
    let podman = reach_scribe::image_build::Podman::new("podman");
    let input = QuadletInput::new(m, Default::default(), StateLayout::new(state));
    match reach_scribe::deployed::rollout(&podman, &input) {
        Ok(r) if r.replace.is_empty() && r.restart.is_empty() => Check::observed(
            ID,
            true,
            "every running role holds the secrets of the state directory",
        ),
        Ok(r) => {
            let mut stale: Vec<String> = r
                .replace
                .iter()
                .map(|(name, file)| format!("{name} is older than {}", file.display()))
                .collect();
            stale.extend(
                r.restart
                    .iter()
                    .map(|role| format!("{role} started before its secrets were replaced")),
            );
            Check::observed(
                ID,
                false,
                format!(
                    "{}; run `reach scribe renew --state {} --restart`",
                    stale.join("; "),
                    state.display()
                ),
            )
        }
        Err(e) => Check::observed(ID, false, e.to_string()),
    }
}

/// `reach scribe renew`.
#[derive(clap::Args, Debug, Clone)]
pub struct RenewArgs {
    #[command(flatten)]
    target: crate::Target,
    /// Restart each role that holds older secrets (`systemctl --user restart
    /// reach-<role>.service`; root's body, the system manager's), one at a time, so it starts
    /// with its new leaf.
    #[arg(long)]
    restart: bool,
}

/// Renews every leaf within its renewal window, then rolls the state directory out to Podman
/// ([`reach_scribe::deployed::rollout`]): replaces every secret older than its file (a renewed
/// leaf, a credential set since) and, with `--restart`, restarts every running role that started
/// before its secrets were created. Both are decided from what the host shows, so a run
/// interrupted between renewing and restarting is finished by the next. The operator's own leaf
/// is renewed in the state directory.
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
    let podman = reach_scribe::image_build::Podman::new("podman");
    // Which secrets come from the state directory needs no image: none is pinned here.
    let input = QuadletInput::new(&m, Default::default(), layout);
    let rollout = reach_scribe::deployed::rollout(&podman, &input)?;
    for (name, file) in &rollout.replace {
        reach_scribe::deployed::replace_secret(&podman, name, file)?;
        println!("podman secret {name} replaced");
    }
    if rollout.restart.is_empty() {
        println!("every running role holds its current secrets");
    }
    let systemctl = user_unit_dir(nix::unistd::getuid())?.systemctl;
    for role in &rollout.restart {
        let unit = reach_scribe::quadlet::service_name(role);
        if !args.restart {
            println!("restart {unit} to serve the new leaf");
            continue;
        }
        let mut words = systemctl.split(' ');
        let status = std::process::Command::new(words.next().expect("systemctl"))
            .args(words)
            .args(["restart", &unit])
            .status()
            .with_context(|| format!("{systemctl} restart {unit}"))?;
        if !status.success() {
            bail!("{systemctl} restart {unit}: {status}");
        }
        println!("restarted {unit}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The receipt's firewall checks, `firewall/egress` and `network/dns`, from one listing of the
/// live `inet reach_egress` table; both skipped without a ruleset file.
pub fn firewall(m: &Manifest, ruleset: Option<&Path>) -> [reach_launcher::audit::Check; 2] {
    use reach_launcher::audit::Check;
    let Some(path) = ruleset else {
        let why = "no ruleset file given (--ruleset)";
        return [
            Check::skipped("firewall/egress", why),
            Check::skipped("network/dns", why),
        ];
    };
    let live = reach_scribe::live_ruleset::listing(std::process::Command::new("nft"))
        .map_err(|e| e.to_string());
    [firewall_egress(path, &live), network_dns(m, &live)]
}

/// The live table as [`reach_scribe::live_ruleset::listing`] gave it (`None`: not loaded).
type Listing = Result<Option<String>, String>;

/// `firewall/egress`: the live table against the ruleset file the host loaded
/// ([`reach_scribe::live_ruleset`]), named by its digest.
fn firewall_egress(path: &Path, live: &Listing) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::live_ruleset::{Loaded, compare_listing};
    const ID: &str = "firewall/egress";
    let digest = match std::fs::read(path) {
        Ok(bytes) => reach_digest::Sha256Digest::of(&bytes),
        Err(e) => return Check::observed(ID, false, format!("{}: {e}", path.display())),
    };
    let file = format!("{} ({digest})", path.display());
    let live = match live {
        Ok(l) => l.as_deref(),
        Err(e) => return Check::observed(ID, false, format!("{file}: {e}")),
    };
    match compare_listing(live, path) {
        Ok(Loaded::Matches { lines }) => Check::observed(
            ID,
            true,
            format!("the live table matches {file}: {lines} lines as the kernel lists them"),
        ),
        Ok(Loaded::Absent) => Check::observed(
            ID,
            false,
            format!("no table inet reach_egress is loaded; expected {file}"),
        ),
        Ok(Loaded::Differs {
            line,
            within,
            expected,
            found,
        }) => Check::observed(
            ID,
            false,
            format!(
                "the live table differs from {file} at line {line} of the kernel's listing{}: \
                 expected `{expected}`, found `{found}`",
                within.map_or(String::new(), |w| format!(" ({w})"))
            ),
        ),
        Err(e) => Check::observed(ID, false, format!("{file}: {e}")),
    }
}

/// Where systemd-logind keeps one file per user whose service manager runs from boot (what
/// `loginctl enable-linger USER` creates).
const LINGER_DIR: &str = "/var/lib/systemd/linger";

/// The receipt's `reboot/linger` for a Quadlet body: its units are `WantedBy=default.target`
/// of the manager that runs them, and a rootless user's manager starts at boot only when the
/// user lingers; without it the body stays down after a reboot until the user logs in.
pub fn reboot_linger() -> reach_launcher::audit::Check {
    reboot_linger_in(Path::new(LINGER_DIR), nix::unistd::getuid())
}

fn reboot_linger_in(linger_dir: &Path, uid: nix::unistd::Uid) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    const ID: &str = "reboot/linger";
    if uid.is_root() {
        return Check::observed(
            ID,
            true,
            "root's units run under the system manager, which starts them at boot",
        );
    }
    let name = match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => u.name,
        Ok(None) => return Check::observed(ID, false, format!("uid {uid} has no user name")),
        Err(e) => return Check::observed(ID, false, format!("uid {uid}: {e}")),
    };
    let file = linger_dir.join(&name);
    if file.exists() {
        Check::observed(
            ID,
            true,
            format!(
                "{name} lingers ({}): the units start at boot",
                file.display()
            ),
        )
    } else {
        Check::observed(
            ID,
            false,
            format!(
                "{name} does not linger (no {}): the units start only when {name} logs in; \
                 run `loginctl enable-linger {name}` as root",
                file.display()
            ),
        )
    }
}

/// `network/dns`: every admitted destination resolves now, through the host's resolver, only
/// to addresses the live egress table admits for it. An answer outside them (the destination
/// moved since the ruleset was rendered) would be dropped by the firewall: the check says which
/// and that the ruleset must be rendered and loaded again. Judged only with a ruleset file
/// (`--ruleset`), i.e. where the body has a firewall.
fn network_dns(m: &Manifest, live: &Listing) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::live_ruleset::admitted;
    const ID: &str = "network/dns";
    let live = match live {
        Ok(Some(l)) => l,
        Ok(None) => return Check::observed(ID, false, "no table inet reach_egress is loaded"),
        Err(e) => return Check::observed(ID, false, e.clone()),
    };
    let admitted = admitted(live);
    let mut broken = Vec::new();
    let mut stale = Vec::new();
    let destinations = egress_destinations(m);
    for d in &destinations {
        let allowed = admitted.get(&d.name).cloned().unwrap_or_default();
        match resolve(d) {
            Ok(now) => {
                let outside: Vec<String> =
                    now.difference(&allowed).map(ToString::to_string).collect();
                if !outside.is_empty() {
                    broken.push(format!(
                        "{} now resolves to {}, which the live firewall does not admit",
                        d.name,
                        outside.join(", ")
                    ));
                }
                stale.extend(
                    allowed
                        .difference(&now)
                        .map(|a| format!("{} ({a})", d.name)),
                );
            }
            Err(e) => broken.push(format!("{e:#}")),
        }
    }
    if broken.is_empty() {
        let mut detail = format!(
            "{} destinations resolve only to addresses the live firewall admits",
            destinations.len()
        );
        if !stale.is_empty() {
            detail.push_str(&format!(
                "; admitted but not in today's answer: {}",
                stale.join(", ")
            ));
        }
        Check::observed(ID, true, detail)
    } else {
        Check::observed(
            ID,
            false,
            format!(
                "{}: render the ruleset again (`reach scribe nftables`) and load it",
                broken.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_launcher::audit::Outcome;
    use reach_scribe::renewal::{SERVICE_FILE, SERVICE_UNIT, TIMER_FILE, TIMER_UNIT};

    /// The units for the embedded manifest over `state`, as `reach scribe quadlet` derives them
    /// (the reference digests stand in for built images).
    fn derived(state: &Path, manifest: Option<&Path>) -> reach_scribe::quadlet::Materialized {
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

    /// `renewal/timer` passes only when the timer is enabled and both units systemd finds are
    /// Scribe's, whether linked (`systemctl link`, symlinks) or copied.
    #[test]
    fn the_renewal_timer_must_be_enabled_and_scribes() {
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let units = tempfile::tempdir().unwrap();
        let d = derived(state.path(), None);
        reach_scribe::quadlet::write_out(&d, out.path()).unwrap();
        let manager = Manager {
            units: units.path().to_owned(),
            systemctl: "systemctl --user",
        };
        let check = || renewal_timer_in(&manager, &d, out.path());

        let none = check();
        assert_eq!(none.outcome, Outcome::Fail);
        assert!(
            none.detail.contains(&format!(
                "run `systemctl --user link {} {} && systemctl --user enable --now {TIMER_UNIT}`",
                out.path().join(SERVICE_FILE).display(),
                out.path().join(TIMER_FILE).display()
            )),
            "{}",
            none.detail
        );
        // What `systemctl link` and `enable` leave behind.
        let wants = units.path().join("timers.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink(
            out.path().join(SERVICE_FILE),
            units.path().join(SERVICE_UNIT),
        )
        .unwrap();
        std::os::unix::fs::symlink(out.path().join(TIMER_FILE), units.path().join(TIMER_UNIT))
            .unwrap();
        // Linked, not enabled: nothing starts it.
        assert_eq!(check().outcome, Outcome::Fail);
        std::os::unix::fs::symlink(units.path().join(TIMER_UNIT), wants.join(TIMER_UNIT)).unwrap();
        let on = check();
        assert_eq!(on.outcome, Outcome::Pass, "{}", on.detail);
        assert!(on.detail.contains("scribe renew --state"), "{}", on.detail);

        // A copy of the service that renews some other body's state directory is not Scribe's.
        std::fs::remove_file(units.path().join(SERVICE_UNIT)).unwrap();
        std::fs::write(
            units.path().join(SERVICE_UNIT),
            d.files[SERVICE_FILE].replace(&state.path().display().to_string(), "/elsewhere"),
        )
        .unwrap();
        let other = check();
        assert_eq!(other.outcome, Outcome::Fail);
        assert!(
            other.detail.contains("is not the unit Scribe derives"),
            "{}",
            other.detail
        );
        // An exact copy is.
        std::fs::write(units.path().join(SERVICE_UNIT), &d.files[SERVICE_FILE]).unwrap();
        assert_eq!(check().outcome, Outcome::Pass);
    }

    /// Root's units are the system manager's; anyone else's their own manager's.
    #[test]
    fn the_timer_is_looked_for_in_the_manager_that_runs_the_body() {
        let root = user_unit_dir(nix::unistd::Uid::from_raw(0)).unwrap();
        assert_eq!(root.units, Path::new("/etc/systemd/system"));
        assert_eq!(root.systemctl, "systemctl");
        // nobody exists on every Debian host.
        let nobody = user_unit_dir(nix::unistd::Uid::from_raw(65534)).unwrap();
        assert_eq!(nobody.units, Path::new("/nonexistent/.config/systemd/user"));
        assert_eq!(nobody.systemctl, "systemctl --user");
        assert!(user_unit_dir(nix::unistd::Uid::from_raw(4_000_000_000)).is_err());
    }

    #[test]
    fn a_rootless_body_survives_a_reboot_only_if_its_user_lingers() {
        let dir = tempfile::tempdir().unwrap();
        // nobody exists on every Debian host.
        let nobody = nix::unistd::Uid::from_raw(65534);
        let off = reboot_linger_in(dir.path(), nobody);
        assert_eq!(off.outcome, Outcome::Fail);
        assert!(
            off.detail
                .contains("run `loginctl enable-linger nobody` as root"),
            "{}",
            off.detail
        );
        std::fs::write(dir.path().join("nobody"), "").unwrap();
        let on = reboot_linger_in(dir.path(), nobody);
        assert_eq!(on.outcome, Outcome::Pass, "{}", on.detail);
        // Root's units are the system manager's.
        let root = reboot_linger_in(dir.path(), nix::unistd::Uid::from_raw(0));
        assert_eq!(root.outcome, Outcome::Pass);
        // A uid without a name is no evidence.
        let nameless = reboot_linger_in(dir.path(), nix::unistd::Uid::from_raw(4_000_000_000));
        assert_eq!(nameless.outcome, Outcome::Fail, "{}", nameless.detail);
    }
}
