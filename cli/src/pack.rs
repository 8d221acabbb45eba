//! `reach pack …` and `reach bind …`: signed task packs and their local bindings.
//!
//! Building, key generation and reading an archive are local (`reach_taskpack`); everything
//! that changes what the body holds goes to core's `core.packs` port with the operator's leaf.
//! Core owns the records and the stored archives; this module never writes core's files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;

use crate::BodyTarget;

#[derive(clap::Subcommand, Debug)]
pub enum PackCommand {
    /// Generate an ed25519 pack-signing key (PKCS#8, mode 0600) and print its public key, the
    /// value core's `settings.pack_keys` trusts.
    Keygen {
        /// Where to write the private key; refused if it exists.
        #[arg(long)]
        out: PathBuf,
    },
    /// Derive a pack's facts from its sources and write the signed, deterministic archive.
    Build {
        /// The pack's source directory (`packs/<name>`).
        dir: PathBuf,
        /// The signing key (`reach pack keygen`).
        #[arg(long)]
        key: PathBuf,
        /// The archive to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Install an archive: core verifies it and stores it inertly (nothing is activated).
    Install {
        archive: PathBuf,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Activate the newest installed version (or `--version`): first activation, upgrade or
    /// reactivation.
    Activate {
        name: String,
        #[arg(long)]
        version: Option<u64>,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Revoke the active pack: every binding blocks until it is reactivated.
    Revoke {
        name: String,
        #[arg(long, default_value = "revoked by the operator")]
        reason: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Every installed pack, its state and generation.
    List {
        #[command(flatten)]
        body: BodyTarget,
    },
    /// One pack: versions, lifecycle events and its signed facts.
    Show {
        name: String,
        #[arg(long)]
        version: Option<u64>,
        #[command(flatten)]
        body: BodyTarget,
    },
}

/// `reach bind PACK --workspace DIR --vm-backend qemu` or `reach bind status|pause|resume|accept`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BindArgs {
    #[command(subcommand)]
    pub command: Option<BindCommand>,
    /// The activated pack to bind.
    #[arg(required = true)]
    pub pack: Option<String>,
    /// The binding's workspace root.
    #[arg(long, required = true)]
    pub workspace: Option<PathBuf>,
    /// The VM backend (`qemu`).
    #[arg(long, required = true)]
    pub vm_backend: Option<String>,
    /// The model runtime, where the pack's flow admits more than one.
    #[arg(long)]
    pub model: Option<String>,
    /// HIL: `each-step` (the safe default) or `each-mutation` (never below the pack's minimum).
    #[arg(long)]
    pub hil: Option<String>,
    /// Runtime network: `none` (the default and the pack's ceiling).
    #[arg(long)]
    pub network: Option<String>,
    #[command(flatten)]
    pub body: BodyTarget,
}

#[derive(clap::Subcommand, Debug)]
pub enum BindCommand {
    /// `runnable`, or the one decisive blocker and the command that clears it.
    Status {
        pack: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Stop new runs (a running one stops at its next step boundary).
    Pause {
        pack: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    Resume {
        pack: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Print the task-profile diff of the active version against the bound one, then accept
    /// it for the binding.
    Accept {
        pack: String,
        #[command(flatten)]
        body: BodyTarget,
    },
}

async fn client(body: &BodyTarget) -> anyhow::Result<PacksClient<tonic::transport::Channel>> {
    let m: Manifest = body.manifest()?;
    let layout: StateLayout = body.layout(&m)?;
    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "core.packs")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(PacksClient::new(ch).max_decoding_message_size(reach_taskpack::MAX_ARCHIVE_BYTES * 2))
}

/// A refusal from core: its message already leads with the stable code.
fn refused(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{}", s.message())
}

pub async fn run(command: PackCommand) -> anyhow::Result<ExitCode> {
    match command {
        PackCommand::Keygen { out } => {
            let pkcs8 = reach_taskpack::PackKey::generate()?;
            let key = reach_taskpack::PackKey::from_pkcs8(&pkcs8)?;
            write_new_secret(&out, &pkcs8)?;
            println!("{}", key.public());
            eprintln!(
                "wrote {} (mode 0600); trust it in core's settings: pack_keys = [{{ name = \"…\", key = \"{}\" }}]",
                out.display(),
                key.public()
            );
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Build { dir, key, out } => {
            let key_bytes =
                std::fs::read(&key).with_context(|| format!("reading {}", key.display()))?;
            let key = reach_taskpack::PackKey::from_pkcs8(&key_bytes)?;
            let built = reach_taskpack::build(&dir, &key)
                .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
            reach_durable_file::replace(&out, &built.archive, 0o644)
                .with_context(|| format!("writing {}", out.display()))?;
            println!(
                "{} {} v{}: {} ({} bytes), facts {}",
                out.display(),
                built.facts.name,
                built.facts.version,
                built.digest,
                built.archive.len(),
                built.facts.digest()
            );
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Install { archive, body } => {
            let bytes = read_bounded(&archive)?;
            let r = client(&body)
                .await?
                .install_pack(pb::InstallPackRequest { archive: bytes })
                .await
                .map_err(refused)?
                .into_inner();
            println!(
                "installed {} v{} ({}), signed by {} ({}); {} refusal fixtures refused as expected; state {}",
                r.name,
                r.version,
                r.archive_digest,
                r.signer_name,
                r.signer,
                r.fixtures_checked,
                r.state
            );
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Activate {
            name,
            version,
            body,
        } => {
            let s = client(&body)
                .await?
                .activate_pack(pb::ActivatePackRequest {
                    name,
                    version: version.unwrap_or(0),
                })
                .await
                .map_err(refused)?
                .into_inner();
            println!(
                "{} {}: v{} active, generation {}{}",
                s.name,
                s.transition,
                s.active_version,
                s.generation,
                if s.profile_changed {
                    "; the task profile changed: bindings wait for `reach bind accept`"
                } else {
                    ""
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Revoke { name, reason, body } => {
            let s = client(&body)
                .await?
                .revoke_pack(pb::RevokePackRequest { name, reason })
                .await
                .map_err(refused)?
                .into_inner();
            println!("{} revoked, generation {}", s.name, s.generation);
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::List { body } => {
            let r = client(&body)
                .await?
                .list_packs(pb::ListPacksRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            if r.packs.is_empty() {
                println!("no pack installed");
            }
            for p in r.packs {
                println!(
                    "{:<32} {:<10} active v{:<4} generation {:<4} {} version(s)",
                    p.name,
                    p.state,
                    p.active_version,
                    p.generation,
                    p.versions.len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Show {
            name,
            version,
            body,
        } => {
            let r = client(&body)
                .await?
                .show_pack(pb::ShowPackRequest {
                    name,
                    version: version.unwrap_or(0),
                })
                .await
                .map_err(refused)?
                .into_inner();
            print!("{}", render_show(&r));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn render_show(r: &pb::ShowPackResponse) -> String {
    let mut out = String::new();
    if let Some(s) = &r.status {
        out.push_str(&format!(
            "{} ({}), active v{}, generation {}\n",
            s.name, s.state, s.active_version, s.generation
        ));
        for v in &s.versions {
            out.push_str(&format!(
                "  v{:<4} archive {}  profile {}  signer {}  expires {}\n",
                v.version, v.archive_digest, v.profile_digest, v.signer, v.expires_at_s
            ));
        }
        for e in &s.events {
            out.push_str(&format!(
                "  {:>15} ms  {:<12} v{} generation {}\n",
                e.at_ms, e.event, e.version, e.generation
            ));
        }
    }
    out.push_str(&format!("facts of v{}:\n{}\n", r.version, r.facts_json));
    out
}

pub async fn bind(args: BindArgs) -> anyhow::Result<ExitCode> {
    let Some(command) = args.command else {
        let (Some(pack), Some(workspace), Some(vm_backend)) =
            (args.pack, args.workspace, args.vm_backend)
        else {
            anyhow::bail!("reach bind PACK --workspace DIR --vm-backend qemu");
        };
        let workspace = std::path::absolute(&workspace)
            .with_context(|| format!("workspace {}", workspace.display()))?;
        let b = client(&args.body)
            .await?
            .bind(pb::BindRequest {
                pack,
                workspace: workspace.display().to_string(),
                vm_backend,
                model: args.model.unwrap_or_default(),
                network: args.network.unwrap_or_default(),
                hil: args.hil.unwrap_or_default(),
                max_concurrent_runs: 0,
            })
            .await
            .map_err(refused)?
            .into_inner();
        println!("{}", render_binding(&b));
        return Ok(ExitCode::SUCCESS);
    };
    match command {
        BindCommand::Status { pack, json, body } => {
            let s = client(&body)
                .await?
                .bind_status(pb::BindStatusRequest { pack })
                .await
                .map_err(refused)?
                .into_inner();
            if json {
                println!("{}", s.json);
            } else if s.readiness == "runnable" {
                println!(
                    "runnable (generation {}, image {}, prepared system {})",
                    s.generation, s.image_digest, s.prepared_digest
                );
            } else {
                println!("{}: {}\n  next: {}", s.readiness, s.reason, s.next);
            }
            Ok(if s.readiness == "runnable" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
        BindCommand::Pause { pack, body } => {
            let b = client(&body)
                .await?
                .pause_binding(pb::BindingRef { pack })
                .await
                .map_err(refused)?
                .into_inner();
            println!("{}", render_binding(&b));
            Ok(ExitCode::SUCCESS)
        }
        BindCommand::Resume { pack, body } => {
            let b = client(&body)
                .await?
                .resume_binding(pb::BindingRef { pack })
                .await
                .map_err(refused)?
                .into_inner();
            println!("{}", render_binding(&b));
            Ok(ExitCode::SUCCESS)
        }
        BindCommand::Accept { pack, body } => {
            let mut c = client(&body).await?;
            let d = c
                .profile_diff(pb::BindingRef { pack: pack.clone() })
                .await
                .map_err(refused)?
                .into_inner();
            if d.diff.is_empty() {
                println!(
                    "task profile unchanged ({}); accepting the active generation",
                    d.active_profile_digest
                );
            } else {
                println!(
                    "task profile {} -> {}:\n{}",
                    d.bound_profile_digest, d.active_profile_digest, d.diff
                );
            }
            let b = c
                .accept_profile(pb::AcceptProfileRequest {
                    pack,
                    profile_digest: d.active_profile_digest,
                })
                .await
                .map_err(refused)?
                .into_inner();
            println!("{}", render_binding(&b));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn render_binding(b: &pb::Binding) -> String {
    format!(
        "{} bound{}: workspace {}, vm {}, network {}, hil {}, {} concurrent run(s), publication {}, generation {}, profile {}{}",
        b.pack,
        if b.paused { " (paused)" } else { "" },
        b.workspace,
        b.vm_backend,
        b.network,
        b.hil,
        b.max_concurrent_runs,
        if b.publication { "on" } else { "off" },
        b.bound_generation,
        b.bound_profile_digest,
        if b.model.is_empty() {
            String::new()
        } else {
            format!(", model {}", b.model)
        }
    )
}

/// Reads a file no larger than an archive may be.
fn read_bounded(path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    anyhow::ensure!(
        len <= reach_taskpack::MAX_ARCHIVE_BYTES as u64,
        "{} is {len} bytes; an archive is at most {}",
        path.display(),
        reach_taskpack::MAX_ARCHIVE_BYTES
    );
    Ok(std::fs::read(path)?)
}

/// Writes a new private key file, 0600, refusing to replace one.
fn write_new_secret(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}
