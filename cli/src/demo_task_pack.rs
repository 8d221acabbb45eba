//! `reach demo task-pack`: Story 013's operator half on embedded defaults, as far as it is
//! built: a fresh signing key, a reference pack built and signed, the whole body up
//! with core trusting that key, the pack installed inertly, activated and bound from safe
//! defaults, and readiness read — `environment/prepared-system-missing` naming the command
//! that prepares it, or `runnable` when `--cache` holds it. The Room, the experiments and the
//! recipe (issues #28, #29, #37) come next; the demo says so rather than pretend.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;

/// The first reference pack (in name order) beside the sources this binary was built from
/// whose image needs no operator-supplied package: one this machine can prepare as it is.
pub fn default_pack_dir() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
    if !root.is_dir() {
        anyhow::bail!(
            "no packs beside the sources ({}): give --pack DIR",
            root.display()
        );
    }
    reach_taskpack::preparable_pack(&root).ok_or_else(|| {
        anyhow::anyhow!(
            "no pack under {} prepares without an operator's package: give --pack DIR",
            root.display()
        )
    })
}

pub async fn run(pack_dir: Option<PathBuf>, cache: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let pack_dir = match pack_dir {
        Some(d) => d,
        None => default_pack_dir()?,
    };
    anyhow::ensure!(
        pack_dir.join("task-profile.toml").is_file(),
        "{} is not a pack directory (give --pack DIR)",
        pack_dir.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("reach-demo-pack-")
        .tempdir()?;
    let layout = StateLayout::new(dir.path());
    std::fs::create_dir_all(layout.root())?;

    println!("Reach demo — task pack {}", pack_dir.display());
    println!("  state: {} (removed at exit)", dir.path().display());
    let pkcs8 = reach_taskpack::PackKey::generate()?;
    let key = reach_taskpack::PackKey::from_pkcs8(&pkcs8)?;
    let started = Instant::now();
    let built =
        reach_taskpack::build(&pack_dir, &key).map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    println!(
        "  reach pack build: {} v{} → {} ({} bytes, {:.1?}), signed by {}",
        built.facts.name,
        built.facts.version,
        built.digest,
        built.archive.len(),
        started.elapsed(),
        key.public()
    );

    let mut m = crate::load_manifest(None)?;
    // The whole body, Discord roles included, on a loopback Discord as `reach demo` runs it.
    let _discord = crate::demo::start_discord(&mut m, &layout).await?;
    let cache = match cache {
        Some(c) => std::path::absolute(&c)?,
        None => dir.path().join("image-cache"),
    };
    std::fs::create_dir_all(&cache)?;
    for role in &mut m.roles {
        match role.name.as_str() {
            "core" => {
                let mut k = toml::Table::new();
                k.insert("name".into(), "demo-operator".into());
                k.insert("key".into(), key.public().to_string().into());
                role.settings
                    .insert("pack_keys".into(), toml::Value::Array(vec![k.into()]));
            }
            "vm-broker" => {
                role.settings
                    .insert("cache".into(), cache.display().to_string().into());
            }
            _ => {}
        }
    }
    let body = crate::demo::quiet_body(&m, &layout).await?;
    println!(
        "  {} roles up behind mTLS ports; core trusts the demo key\n",
        body.pids().len()
    );

    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "core.packs")
        .await
        .map_err(anyhow::Error::msg)?;
    let mut packs = PacksClient::new(ch);
    let result = async {
        let name = built.facts.name.clone();
        let r = packs
            .install_pack(pb::InstallPackRequest {
                archive: built.archive.clone(),
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        println!(
            "reach pack install: {} v{} stored inertly ({}); {} refusal fixtures refused as expected",
            r.name, r.version, r.state, r.fixtures_checked
        );
        let s = packs
            .activate_pack(pb::ActivatePackRequest {
                name: name.clone(),
                version: 0,
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        println!(
            "reach pack activate: {} v{}, generation {}",
            s.transition, s.active_version, s.generation
        );
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace)?;
        let b = packs
            .bind(pb::BindRequest {
                pack: name.clone(),
                workspace: workspace.display().to_string(),
                vm_backend: "qemu".into(),
                ..Default::default()
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        println!(
            "reach bind: network {}, HIL {}, {} concurrent run, publication {}",
            b.network,
            b.hil,
            b.max_concurrent_runs,
            if b.publication { "on" } else { "off" }
        );
        let st = packs
            .bind_status(pb::BindStatusRequest { pack: name })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        if st.readiness == "runnable" {
            println!(
                "reach bind status: runnable (image {}, prepared system {})",
                st.image_digest, st.prepared_digest
            );
        } else {
            println!(
                "reach bind status: {}\n  {}\n  next: {}",
                st.readiness, st.reason, st.next
            );
        }
        println!(
            "\nNot built yet: the Room (Solver and Reviewer passages), experiments on VM₁ and VM₂, \
             HIL approval of each mutation and the signed recipe (issues #28, #29, #37)."
        );
        anyhow::Ok(())
    }
    .await;
    let report = body.stop().await;
    println!("stopped {} roles", report.stopped.len());
    result.context("task-pack demo")?;
    Ok(ExitCode::SUCCESS)
}
