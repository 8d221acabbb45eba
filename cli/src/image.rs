//! `reach image build SPEC [--out DIR]`: a pinned Debian guest image for the vm-broker.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reach_vm::image::{self, Progress, Stage};
use reach_vm::spec::ImageSpec;

#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Build the image a spec describes; prints the image digest.
    Build {
        /// The reach.vm.image-spec.v1 TOML file.
        spec: PathBuf,
        /// Output directory (default: images/<spec digest hex>).
        #[arg(long)]
        out: Option<PathBuf>,
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
    let ImageCommand::Build { spec, out } = command;
    let text =
        std::fs::read_to_string(&spec).with_context(|| format!("read {}", spec.display()))?;
    let parsed = ImageSpec::parse(&text)?;
    let out = out.unwrap_or_else(|| PathBuf::from("images").join(parsed.digest().hex()));
    let spec_dir = spec.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let bar = ProgressBar::new(Stage::COUNT - 1);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} {prefix}: {wide_msg}")
            .expect("template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let built = tokio::task::spawn_blocking(move || {
        let bars = Bars(bar);
        let r = image::build(&parsed, &spec_dir, &out, &bars);
        bars.0.finish_and_clear();
        r
    })
    .await??;
    eprintln!(
        "built {} in {:.1} s: rootfs {} ({} bytes), {} packages",
        built.dir.display(),
        built.elapsed.as_secs_f64(),
        built.manifest.rootfs.sha256,
        built.manifest.rootfs.bytes,
        built.manifest.packages.len()
    );
    println!("{}", built.digest);
    Ok(ExitCode::SUCCESS)
}
