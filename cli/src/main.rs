//! `reach`: the operator CLI.

mod a2a;
mod acceptance;
mod body;
mod compromise;
mod corpus;
mod demo;
mod demo_task_pack;
mod hil;
mod host_checks;
mod image;
mod pack;
mod quiet_pipe;
mod scribe;
mod task;
mod vault;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

#[derive(Parser, Debug)]
#[command(name = "reach", version, about = "Operate a Reach body")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Target {
    /// The ApplicationDeploymentManifest@1 file; the embedded reach.vps.public@1 if omitted.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// The body's state directory (identities, sockets, configs, data, logs).
    #[arg(long, default_value = "reach-state")]
    state: PathBuf,
}

/// A running body to look at: started by `reach up`, or under Quadlet.
#[derive(clap::Args, Debug, Clone)]
struct BodyTarget {
    #[command(flatten)]
    target: Target,
    /// The body runs under Quadlet (rootless Podman, as this user): each port's socket is in
    /// its `reach-port-<port>` volume, each role's process in its `reach-<role>` container.
    #[arg(long)]
    podman: bool,
}

impl BodyTarget {
    fn manifest(&self) -> anyhow::Result<Manifest> {
        load_manifest(self.target.manifest.as_deref())
    }

    /// The state layout, with Podman's socket directories under `--podman`.
    fn layout(&self, m: &Manifest) -> anyhow::Result<StateLayout> {
        Ok(self.locate(m)?.0)
    }

    /// Where the body's ports and role processes are: the state directory's, or Podman's.
    fn locate(
        &self,
        m: &Manifest,
    ) -> anyhow::Result<(StateLayout, reach_launcher::audit::Processes)> {
        use reach_launcher::audit::Processes;
        if !self.podman {
            return Ok((StateLayout::new(&self.target.state), Processes::Launcher));
        }
        let podman = reach_scribe::image_build::Podman::new("podman");
        let d = reach_scribe::deployed::locate(&podman, m, &self.target.state)?;
        if !d.missing_volumes.is_empty() {
            eprintln!("podman has no volume {}", d.missing_volumes.join(", "));
        }
        let processes = d
            .containers
            .into_iter()
            .map(|c| reach_launcher::audit::RoleProcess {
                log_command: Some(vec![
                    "podman".into(),
                    "logs".into(),
                    reach_scribe::quadlet::container_name(&c.role),
                ]),
                role: c.role,
                pid: c.pid,
                configured_env: Some(c.env),
            })
            .collect();
        Ok((d.layout, Processes::Listed(processes)))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the demo on embedded defaults: the whole body, a loopback Discord, one question.
    #[command(args_conflicts_with_subcommands = true)]
    Demo {
        #[command(subcommand)]
        story: Option<DemoStory>,
        /// Ask this question instead of the default (repeatable).
        #[arg(long)]
        ask: Vec<String>,
        /// Keep a prompt open for more questions.
        #[arg(long)]
        interactive: bool,
        /// Answer from this directory of Markdown or HTML (e.g. a built mdBook) instead of the
        /// project's own docs.
        #[arg(long, value_name = "DIR")]
        docs: Option<std::path::PathBuf>,
        /// Rank with this static embedding table beside BM25 (`scripts/embedding-setup.sh`
        /// distils one), placed where core reads it: `<corpus root>/embedding.bin`.
        #[arg(long, value_name = "TABLE")]
        embedding: Option<std::path::PathBuf>,
    },
    /// Start every role as its own process, in manifest order; stop them on Ctrl-C.
    Up {
        #[command(flatten)]
        target: Target,
        #[arg(long, default_value = "info")]
        log_level: String,
    },
    /// Show every role's health.
    Status {
        #[command(flatten)]
        body: BodyTarget,
    },
    /// The live-host receipt: check the running body (health, authorization and identity
    /// refusals, secret files and exposure in environments, command lines and logs, resource
    /// ceilings, vault, corpus; units, reboot and firewall where named) and print a JSON
    /// receipt; exit 1 if a check fails.
    Audit {
        #[command(flatten)]
        body: BodyTarget,
        /// The installed Quadlet directory: add Scribe's drift report of it (units, volumes,
        /// secrets script; Podman secrets and image digests) as the check `units/drift`, and
        /// whether the units start again after a reboot (`reboot/linger`: a rootless user's
        /// manager starts at boot only if the user lingers) and whether Scribe's leaf-renewal
        /// timer is linked and enabled (`renewal/timer`).
        #[arg(long, value_name = "DIR", requires = "podman")]
        units: Option<PathBuf>,
        /// The ruleset file `reach scribe nftables` wrote and the host loaded: compare the live
        /// `inet reach_egress` table with it as the check `firewall/egress`, and each egress
        /// destination's current addresses with what that table admits as `network/dns` (both
        /// skipped without it; listing the live table needs CAP_NET_ADMIN).
        #[arg(long, value_name = "FILE")]
        ruleset: Option<PathBuf>,
        /// `json` (the receipt) or `junit` (the same checks as JUnit XML for CI: one testcase
        /// per check, failures and skips marked).
        #[arg(long, value_enum, default_value = "json")]
        format: body::ReceiptFormat,
    },
    /// After a service compromise: revoke ROLE's leases and leaf (its root rotated out),
    /// quarantine and taint its pending work (never resent), and print the next steps.
    Compromise(compromise::CompromiseArgs),
    /// Stop a body started by `reach up`.
    Down {
        #[command(flatten)]
        target: Target,
    },
    /// Scribe: materialize the manifest.
    Scribe {
        #[command(subcommand)]
        command: ScribeCommand,
    },
    /// Manage the external credential files the manifest names.
    Secret {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// The public corpus: sources, admission, builds, status and search.
    Corpus {
        #[command(subcommand)]
        command: corpus::CorpusCommand,
    },
    /// Print the committed chain of one question (event id, admission id or turn id).
    Trail {
        key: String,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Outbound A2A tasks to core's enrolled peer: send one, or read where one stands.
    A2a {
        #[command(subcommand)]
        command: a2a::A2aCommand,
    },
    /// The Phylactery's serving state, and the operator's reconciliation of a fresh or lost vault.
    Vault {
        #[command(subcommand)]
        command: VaultCommand,
    },
    /// Signed task packs: keys, build, install, activate, revoke, list, show.
    Pack {
        #[command(subcommand)]
        command: pack::PackCommand,
    },
    /// Bind an activated pack to the local lab, or read, pause, resume or accept a binding.
    Bind(pack::BindArgs),
    /// The operator's answers to HIL requests: list, show, approve, deny, watch.
    Hil {
        #[command(subcommand)]
        command: hil::HilCommand,
    },
    /// Task runs under a bound pack: ask (follow live), list, show, trail.
    Task {
        #[command(subcommand)]
        command: task::TaskCommand,
    },
    /// A run's signed recipe.
    Recipe {
        #[command(subcommand)]
        command: task::RecipeCommand,
    },
    /// Build a pinned guest image for the vm-broker.
    Image {
        #[command(subcommand)]
        command: image::ImageCommand,
    },
    /// Validate a manifest and print its port table.
    Manifest {
        /// The manifest file; the embedded reach.vps.public@1 if omitted.
        path: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum DemoStory {
    /// The operator task-pack story (seed 000) as far as it is built: the reference pack
    /// built, signed, installed, activated, bound and its readiness read.
    TaskPack {
        /// The pack's source directory (default: the first reference pack beside the sources
        /// that prepares without an operator-supplied package).
        #[arg(long)]
        pack: Option<PathBuf>,
        /// The image cache: the pack's image and prepared system are built there once and
        /// reused (default /var/tmp/reach-vm-images); vm-broker searches it.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Leave every HIL answer to the person (`reach hil approve|deny … --state DIR`)
        /// instead of the demo's operator.
        #[arg(long)]
        interactive: bool,
        /// Who answers the Solver and the Reviewer: the deterministic inference fixture, or
        /// `local`, a real model on this machine (the real-model class; says what to install
        /// when it is missing).
        #[arg(long, value_enum, default_value = "fixture")]
        model: demo_task_pack::ModelChoice,
    },
}

#[derive(Subcommand, Debug)]
enum ScribeCommand {
    /// Mint or rotate the trust root and every principal's leaf.
    Identities {
        #[command(flatten)]
        target: Target,
        #[arg(long, value_enum, default_value = "if-needed")]
        rotate: RotateArg,
    },
    /// Build one image per role from `scratch` (stripped binary, its libraries, a non-root user).
    Images(scribe::ImagesArgs),
    /// Write the rootless Quadlet units, volumes, networks, configs and secrets script, and the
    /// leaf-renewal timer (`systemd/`, to link with `systemctl --user link`).
    Quadlet(scribe::QuadletArgs),
    /// Write the body's nftables egress ruleset.
    Nftables(scribe::NftablesArgs),
    /// Re-derive everything from the manifest and report drift (exit status 1 on drift).
    Check(scribe::CheckArgs),
    /// A Quadlet body's leaf renewal (what its renewal timer runs hourly, as the body's user):
    /// renew every leaf within its renewal window, replace every Podman secret older than its
    /// file in the state directory and, with `--restart`, restart in one transaction every
    /// running role that started before its secrets were created.
    Renew(scribe::RenewArgs),
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum RotateArg {
    IfNeeded,
    Leaves,
    Root,
    RetirePreviousRoot,
    /// A new interaction-seal pair; egress-discord keeps opening tokens sealed to the previous
    /// key for 20 minutes. Restart egress-discord, then ingress-edge.
    InteractionSeal,
}

#[derive(Subcommand, Debug)]
enum VaultCommand {
    /// Whether core's vault serves or awaits reconciliation.
    Status {
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Record that no effect inside the idempotency horizon is unaccounted for.
    Reconcile {
        /// A brand-new deployment: there are no earlier effects to reconcile.
        #[arg(long)]
        genesis: bool,
        /// What was checked (kept in the trail).
        #[arg(long)]
        note: String,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// After a service compromise: revoke a principal's leases and mark its in-flight work
    /// tainted (never resent; settled only from independent evidence).
    Taint {
        /// The compromised principal, e.g. spiffe://reach.local/egress-discord.
        #[arg(long)]
        principal: String,
        /// Why (kept in the trail).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: BodyTarget,
    },
}

#[derive(Subcommand, Debug)]
enum SecretCommand {
    /// Read a credential from standard input into ROLE's secret directory (mode 0640, for its group).
    Set {
        role: String,
        file: String,
        #[command(flatten)]
        target: Target,
    },
}

pub(crate) fn load_manifest(path: Option<&std::path::Path>) -> anyhow::Result<Manifest> {
    Ok(match path {
        Some(p) => reach_manifest::load_file(p)?,
        None => reach_manifest::load(reach_manifest::VPS_PUBLIC)?,
    })
}

fn main() -> ExitCode {
    quiet_pipe::install();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("reach: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Demo {
            story:
                Some(DemoStory::TaskPack {
                    pack,
                    cache,
                    interactive,
                    model,
                }),
            ..
        } => demo_task_pack::run(pack, cache, interactive, model).await,
        Command::Demo {
            story: None,
            ask,
            interactive,
            docs,
            embedding,
        } => demo::run(ask, interactive, docs, embedding).await,
        Command::Image { command } => image::run(command).await,
        Command::Up { target, log_level } => {
            let m = load_manifest(target.manifest.as_deref())?;
            body::up(&m, &StateLayout::new(&target.state), &log_level).await
        }
        Command::Status { body } => {
            let m = body.manifest()?;
            body::print_status(&m, &body.layout(&m)?).await
        }
        Command::Down { target } => body::down(&StateLayout::new(&target.state)).await,
        Command::Audit {
            body,
            units,
            ruleset,
            format,
        } => body::audit(&body, units.as_deref(), ruleset.as_deref(), format).await,
        Command::Compromise(args) => compromise::run(args).await,
        Command::Corpus { command } => corpus::run(command).await,
        Command::A2a { command } => a2a::run(command).await,
        Command::Scribe {
            command:
                ScribeCommand::Identities {
                    target,
                    rotate: RotateArg::InteractionSeal,
                },
        } => {
            let m = load_manifest(target.manifest.as_deref())?;
            let written = reach_scribe::identities::rotate_interaction_seal(
                &m,
                &StateLayout::new(&target.state),
                std::time::SystemTime::now(),
            )?;
            println!(
                "interaction-seal rotated ({} files); restart egress-discord, then ingress-edge",
                written.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Scribe {
            command: ScribeCommand::Identities { target, rotate },
        } => {
            let m = load_manifest(target.manifest.as_deref())?;
            let rotation = match rotate {
                RotateArg::IfNeeded => reach_scribe::Rotation::IfNeeded,
                RotateArg::Leaves => reach_scribe::Rotation::Leaves,
                RotateArg::Root => reach_scribe::Rotation::Root,
                RotateArg::RetirePreviousRoot => reach_scribe::Rotation::RetirePreviousRoot,
                RotateArg::InteractionSeal => unreachable!("handled above"),
            };
            let report = reach_scribe::materialize_identities(
                &m,
                &StateLayout::new(&target.state),
                rotation,
                std::time::SystemTime::now(),
            )?;
            println!(
                "root {}; {} leaves issued ({}); trust bundle holds {} root(s)",
                if report.root_created {
                    "created"
                } else {
                    "kept"
                },
                report.leaves_issued.len(),
                report.leaves_issued.join(", "),
                report.bundle_roots
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Scribe {
            command: ScribeCommand::Images(args),
        } => scribe::images(args),
        Command::Scribe {
            command: ScribeCommand::Quadlet(args),
        } => scribe::quadlet(args),
        Command::Scribe {
            command: ScribeCommand::Nftables(args),
        } => scribe::nftables(args),
        Command::Scribe {
            command: ScribeCommand::Check(args),
        } => scribe::run_check(args),
        Command::Scribe {
            command: ScribeCommand::Renew(args),
        } => scribe::renew(args),
        Command::Secret {
            command: SecretCommand::Set { role, file, target },
        } => {
            let m = load_manifest(target.manifest.as_deref())?;
            let owns = m
                .role(&role)
                .is_some_and(|r| r.credentials.iter().any(|c| c.file == file));
            anyhow::ensure!(
                owns,
                "the manifest gives role `{role}` no credential file `{file}`"
            );
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes)?;
            let trimmed = bytes.trim_ascii_end();
            anyhow::ensure!(!trimmed.is_empty(), "no credential on standard input");
            let layout = StateLayout::new(&target.state);
            let dir = layout.secret_dir(&role);
            reach_identity::files::ensure_secret_dir(&dir)?;
            reach_identity::files::write_secret(&dir.join(&file), trimmed)?;
            println!(
                "wrote {} (mode {:o})",
                dir.join(&file).display(),
                reach_identity::files::SECRET_FILE_MODE
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Trail { key, target } => {
            let m = target.manifest()?;
            vault::trail(&m, &target.layout(&m)?, &key).await
        }
        Command::Vault {
            command: VaultCommand::Status { target },
        } => {
            let m = target.manifest()?;
            vault::status(&m, &target.layout(&m)?).await
        }
        Command::Vault {
            command:
                VaultCommand::Reconcile {
                    genesis,
                    note,
                    target,
                },
        } => {
            let m = target.manifest()?;
            vault::reconcile(&m, &target.layout(&m)?, genesis, &note).await
        }
        Command::Vault {
            command:
                VaultCommand::Taint {
                    principal,
                    reason,
                    target,
                },
        } => {
            let m = target.manifest()?;
            vault::taint(&m, &target.layout(&m)?, &principal, &reason).await
        }
        Command::Pack { command } => pack::run(command).await,
        Command::Bind(args) => pack::bind(args).await,
        Command::Hil { command } => hil::run(command).await,
        Command::Task { command } => task::run(command).await,
        Command::Recipe { command } => task::recipe(command).await,
        Command::Manifest { path } => {
            let m = load_manifest(path.as_deref())?;
            // `reach manifest | head` closes the pipe early: that ends the listing, no error.
            match print_manifest(&m, &mut std::io::stdout().lock()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
                r => {
                    r?;
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
    }
}

/// `reach manifest`: the profile and each port with its grants.
fn print_manifest(m: &Manifest, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{} ({}): {} roles, {} ports — valid",
        m.profile,
        m.trust_domain,
        m.roles.len(),
        m.ports.len()
    )?;
    for p in &m.ports {
        let grants: Vec<String> = p
            .grants
            .iter()
            .map(|g| format!("{}→{}", g.caller, g.method))
            .collect();
        writeln!(
            out,
            "  {:<24} server {:<16} {}",
            p.name,
            p.server.as_str(),
            grants.join(", ")
        )?;
    }
    out.flush()
}
