//! `reach image build SPEC [--out DIR]`: a pinned Debian guest image for the vm-broker;
//! `reach image prepare SPEC --base DIR [--out DIR]`: a pinned prepared-system layer over it
//! (booted once, captured, restored by the broker for every instance);
//! `reach image prune --cache DIR [--manifest FILE] [--keep DIGEST…]`: removes the cache's
//! entries no one pins.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reach_vm::image::{self, Progress, Stage};
use reach_vm::manifest::ImageManifest;
use reach_vm::prepared::{self, PrepareInputs, PreparedSpec};
use reach_vm::probe;
use reach_vm::spec::ImageSpec;

#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Build the image a spec describes; prints the image digest.
    Build {
        /// The reach.vm.image-spec.v1 TOML file.
        spec: PathBuf,
        /// Output directory (default: `images/<spec digest hex>`).
        #[arg(long, conflicts_with = "cache")]
        out: Option<PathBuf>,
        /// Reuse (or build into) `CACHE/<spec digest hex>` when its manifest names this spec
        /// and builder and its artifacts verify.
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Prepare a system over a built image (boot it once, place files, capture its state);
    /// prints the prepared-system digest. With `--pack`, a task pack's own image and prepared
    /// system (its first image variant): the image is built into the cache first.
    Prepare {
        /// The reach.vm.prepared-spec.v1 TOML file.
        #[arg(required_unless_present = "pack", conflicts_with = "pack")]
        spec: Option<PathBuf>,
        /// The base image directory (`reach image build`'s output).
        #[arg(long, required_unless_present = "pack", conflicts_with = "pack")]
        base: Option<PathBuf>,
        /// A `reach.taskpack.v1` archive (`reach pack build`): its specs, read from the archive
        /// as built (core verifies the signature at install; the digests bind either way).
        #[arg(long, requires = "cache")]
        pack: Option<PathBuf>,
        /// Where an image spec's relative `[[local_debs]]` paths resolve (with `--pack`).
        #[arg(long, requires = "pack")]
        debs: Option<PathBuf>,
        /// Output directory (default: `images/prepared/<spec digest hex>`).
        #[arg(long, conflicts_with = "cache")]
        out: Option<PathBuf>,
        /// Reuse (or prepare into) `CACHE/prepared/<key>` when its manifest names this spec,
        /// base, QEMU and accelerator and its artifacts verify.
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Remove every image and prepared layer in a cache directory except the digests kept
    /// and the base image of each kept prepared layer. A digest named with --keep that the
    /// cache does not hold removes nothing.
    Prune {
        /// The cache directory (`--cache` of build and prepare).
        #[arg(long)]
        cache: PathBuf,
        /// Keep every digest this deployment manifest's vm-broker settings pin.
        #[arg(long, value_name = "FILE", required_unless_present_any = ["keep", "all"])]
        manifest: Option<PathBuf>,
        /// An image or prepared-system digest still pinned (repeat for each).
        #[arg(long = "keep", value_name = "DIGEST")]
        keep: Vec<reach_digest::Sha256Digest>,
        /// Keep nothing: remove every entry.
        #[arg(long, conflicts_with_all = ["keep", "manifest"])]
        all: bool,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// One bar for the stages, its message the latest tool line (downloads, unpacking).
struct Bars(ProgressBar);

impl Progress for Bars {
    fn stage(&self, stage: Stage) {
        self.0.set_position(stage.index());
        self.0.set_prefix(stage.label());
    }
    fn line(&self, line: &str) {
        self.0
            .set_message(line.chars().take(70).collect::<String>());
    }
}

pub async fn run(command: ImageCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImageCommand::Build { spec, out, cache } => build(spec, out, cache).await,
        ImageCommand::Prepare {
            pack: Some(pack),
            debs,
            cache,
            ..
        } => prepare_pack(&pack, debs, cache.expect("clap requires --cache")).await,
        ImageCommand::Prepare {
            spec,
            base,
            out,
            cache,
            ..
        } => {
            let spec = spec.expect("clap requires a spec without --pack");
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("read {}", spec.display()))?;
            let base = base.expect("clap requires --base without --pack");
            prepare(PreparedSpec::parse(&text)?, base, out, cache).await
        }
        ImageCommand::Prune {
            cache,
            manifest,
            keep,
            all: _,
            dry_run,
        } => prune(&cache, manifest.as_deref(), &keep, dry_run),
    }
}

fn prune(
    cache: &Path,
    manifest: Option<&Path>,
    named: &[reach_digest::Sha256Digest],
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    if !cache.is_dir() {
        anyhow::bail!("{} is not a directory", cache.display());
    }
    let pinned = match manifest {
        Some(path) => deployment_pins(path)?,
        None => Vec::new(),
    };
    let _lock = lock_cache(cache)?;
    let keep = reach_vm::cache::Keep {
        named,
        pinned: &pinned,
    };
    let pruned = reach_vm::cache::prune(cache, keep, dry_run)?;
    let name = |e: &reach_vm::cache::Entry| {
        e.digest
            .map_or_else(|| "(unreadable manifest)".to_owned(), |d| d.to_string())
    };
    for e in &pruned.kept {
        println!("keep   {} {}", name(e), e.dir.display());
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    for e in &pruned.removed {
        println!(
            "{verb} {} {} ({:.1} MiB)",
            name(e),
            e.dir.display(),
            e.allocated as f64 / 1048576.0
        );
    }
    let freed: u64 = pruned.removed.iter().map(|e| e.allocated).sum();
    eprintln!(
        "{} kept; {verb} {} ({:.1} MiB)",
        pruned.kept.len(),
        pruned.removed.len(),
        freed as f64 / 1048576.0
    );
    Ok(ExitCode::SUCCESS)
}

fn bar() -> ProgressBar {
    let bar = ProgressBar::new(Stage::COUNT - 1);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} {prefix}: {wide_msg}")
            .expect("template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Holds `CACHE/.lock` (the lock the reach-vm tests take too) while a cache is used.
fn lock_cache(cache: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    std::fs::create_dir_all(cache).with_context(|| format!("create {}", cache.display()))?;
    let f = std::fs::File::create(cache.join(".lock"))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| anyhow::anyhow!("lock {}: {e}", cache.display()))
}

/// The digests the vm-broker role's settings pin in a deployment manifest.
fn deployment_pins(path: &Path) -> anyhow::Result<Vec<reach_digest::Sha256Digest>> {
    let m =
        reach_manifest::load_file(path).with_context(|| format!("manifest {}", path.display()))?;
    let Some(role) = m.roles.iter().find(|r| r.name.as_str() == "vm-broker") else {
        anyhow::bail!("{} has no vm-broker role", path.display());
    };
    let settings = reach_vm::settings::Settings::from_table(&role.settings)
        .with_context(|| format!("{}: vm-broker settings", path.display()))?;
    Ok(settings.pinned().collect())
}

/// `reach image prepare --pack ARCHIVE --cache DIR`: the command readiness names when a
/// pack's prepared system is missing. Builds the pack's image into the cache (or reuses it),
/// then prepares over it, both keyed by the spec digests the pack's facts carry.
async fn prepare_pack(
    archive: &Path,
    debs: Option<PathBuf>,
    cache: PathBuf,
) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(archive).with_context(|| format!("read {}", archive.display()))?;
    let pins = pack_pins(&bytes, &archive.display().to_string(), debs, cache).await?;
    println!("{} {}", pins.prepared.0, pins.prepared.1.display());
    Ok(ExitCode::SUCCESS)
}

/// What a pack's environment is, built or reused: the image and the prepared system, each a
/// digest and its cache directory (what vm-broker's settings pin).
#[derive(Debug, Clone)]
pub struct PackPins {
    pub image: (reach_digest::Sha256Digest, PathBuf),
    pub prepared: (reach_digest::Sha256Digest, PathBuf),
}

/// Builds (or reuses) the image of the pack archive `bytes` in `cache`, then prepares (or
/// reuses) its prepared system over it, both keyed by the spec digests its facts carry.
pub async fn pack_pins(
    bytes: &[u8],
    name: &str,
    debs: Option<PathBuf>,
    cache: PathBuf,
) -> anyhow::Result<PackPins> {
    let archive = name;
    let contents =
        reach_taskpack::archive::read(bytes).map_err(|e| anyhow::anyhow!("{archive}: {e}"))?;
    let variant = contents
        .facts
        .image_variants
        .first()
        .ok_or_else(|| anyhow::anyhow!("{archive} names no image variant"))?;
    let text = |path: &str| -> anyhow::Result<String> {
        let b = contents
            .files
            .get(path)
            .ok_or_else(|| anyhow::anyhow!("the pack has no {path}"))?;
        Ok(String::from_utf8(b.to_vec())?)
    };
    let image = ImageSpec::parse(&text(&variant.image)?)?;
    let prepared = PreparedSpec::parse(&text(&variant.prepared)?)?;
    anyhow::ensure!(
        image.digest() == variant.image_spec_digest
            && prepared.digest() == variant.prepared_spec_digest,
        "the pack's specs do not match its facts' digests"
    );
    eprintln!(
        "{} v{}: image {} (spec {}), prepared system {} (spec {})",
        contents.facts.name,
        contents.facts.version,
        variant.image,
        variant.image_spec_digest,
        variant.prepared,
        variant.prepared_spec_digest
    );
    let spec_dir = match debs {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let (base, _, digest) = build_spec(image, spec_dir, None, Some(cache.clone())).await?;
    eprintln!("image {digest} {}", base.display());
    let (dir, _, prepared_digest) = prepare_in(prepared, base.clone(), None, Some(cache)).await?;
    Ok(PackPins {
        image: (digest, base),
        prepared: (prepared_digest, dir),
    })
}

async fn prepare(
    parsed: PreparedSpec,
    base: PathBuf,
    out: Option<PathBuf>,
    cache: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let (dir, _, digest) = prepare_in(parsed, base, out, cache).await?;
    println!("{digest} {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Prepares (or, with a cache, reuses) `parsed` over the image at `base`.
async fn prepare_in(
    parsed: PreparedSpec,
    base: PathBuf,
    out: Option<PathBuf>,
    cache: Option<PathBuf>,
) -> anyhow::Result<(
    PathBuf,
    reach_vm::prepared::PreparedManifest,
    reach_digest::Sha256Digest,
)> {
    let out = out.unwrap_or_else(|| {
        PathBuf::from("images")
            .join("prepared")
            .join(parsed.digest().hex())
    });
    let manifest = ImageManifest::read(&base)?;
    let qemu = Path::new("qemu-system-x86_64");
    // The same probe the broker runs: a capture loads only under the accelerator it was made with.
    let probe_dir = cache
        .clone()
        .unwrap_or_else(|| out.parent().unwrap_or(Path::new(".")).to_owned());
    std::fs::create_dir_all(&probe_dir)?;
    let accel = probe::probe(qemu, &base.join(&manifest.kernel.file), &probe_dir).await;
    let bars = Bars(bar());
    bars.0.set_prefix(format!("prepare ({})", accel.as_str()));
    let inputs = PrepareInputs::new(&base, accel);
    let r = match &cache {
        Some(c) => {
            let _lock = lock_cache(c)?;
            prepared::cached_prepare(&parsed, &inputs, c, &bars).await
        }
        None => prepared::prepare(&parsed, &inputs, &out, &bars)
            .await
            .map(|p| {
                eprintln!(
                    "prepared {} in {:.1} s (capture boot {:.1} s)",
                    p.dir.display(),
                    p.elapsed.as_secs_f64(),
                    p.boot.as_secs_f64(),
                );
                (p.dir, p.manifest, p.digest)
            }),
    };
    bars.0.finish_and_clear();
    let (dir, manifest, digest) = r?;
    eprintln!(
        "prepared system over {}: state {} ({} bytes), {} files",
        manifest.base_image,
        manifest.state.sha256,
        manifest.state.bytes,
        manifest.files.len()
    );
    Ok((dir, manifest, digest))
}

async fn build(
    spec: PathBuf,
    out: Option<PathBuf>,
    cache: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(&spec).with_context(|| format!("read {}", spec.display()))?;
    let parsed = ImageSpec::parse(&text)?;
    let spec_dir = spec.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let (dir, _, digest) = build_spec(parsed, spec_dir, out, cache).await?;
    // The digest, then the directory: `reach image build SPEC | cut -d' ' -f1` pins it.
    println!("{digest} {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Builds (or, with a cache, reuses) the image of `parsed`.
async fn build_spec(
    parsed: ImageSpec,
    spec_dir: PathBuf,
    out: Option<PathBuf>,
    cache: Option<PathBuf>,
) -> anyhow::Result<(PathBuf, ImageManifest, reach_digest::Sha256Digest)> {
    let out = out.unwrap_or_else(|| PathBuf::from("images").join(parsed.digest().hex()));
    let bar = bar();
    let started = std::time::Instant::now();
    let (dir, manifest, digest) = tokio::task::spawn_blocking(move || {
        let bars = Bars(bar);
        let r = match cache {
            Some(c) => lock_cache(&c)
                .and_then(|_lock| Ok(image::cached_build(&parsed, &spec_dir, &c, &bars)?)),
            None => image::build(&parsed, &spec_dir, &out, &bars)
                .map(|b| (b.dir, b.manifest, b.digest))
                .map_err(Into::into),
        };
        bars.0.finish_and_clear();
        r
    })
    .await??;
    eprintln!(
        "image {} ready in {:.1} s: rootfs {} ({} bytes), {} packages",
        dir.display(),
        started.elapsed().as_secs_f64(),
        manifest.rootfs.sha256,
        manifest.rootfs.bytes,
        manifest.packages.len()
    );
    Ok((dir, manifest, digest))
}
