//! Where a body Scribe deployed under Quadlet lives on its host, as rootless Podman reports
//! it: each port's socket directory is the mount point of the volume `reach-port-<port>`, each
//! role's main process the container `reach-<role>`. The operator's CLI reads these to reach
//! the ports (`reach status --podman`, `reach audit --podman`) and to audit the processes, and
//! replaces a renewed leaf's secrets here (`reach scribe renew`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

use crate::image_build::Podman;
use crate::quadlet::{container_name, port_volume_name};

/// A deployed body as its host shows it.
#[derive(Debug)]
pub struct Deployed {
    /// The state layout with every port's socket directory at its volume.
    pub layout: StateLayout,
    /// Each running role container, in manifest order.
    pub containers: Vec<Container>,
    /// Port volumes Podman does not have (their ports are unreachable).
    pub missing_volumes: Vec<String>,
}

/// A running role container.
#[derive(Debug, Clone)]
pub struct Container {
    pub role: String,
    /// Its main process, as the host numbers it.
    pub pid: u32,
    /// The environment Podman gave it (`Config.Env`).
    pub env: Vec<String>,
}

/// Why Podman could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("podman {what}: {detail}")]
pub struct LocateError {
    what: &'static str,
    detail: String,
}

fn run(podman: &Podman, what: &'static str, args: &[&str]) -> Result<String, LocateError> {
    let out = podman
        .command()
        .args(args)
        .output()
        .map_err(|e| LocateError {
            what,
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LocateError {
            what,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Replaces Podman secret `name` with the bytes of `source`, as the generated `secrets.sh` does:
/// remove, then create (Podman 4.3 has no `secret create --replace`). Removing a secret a
/// running container uses is safe: the container keeps the copy it took when it was created.
pub fn replace_secret(podman: &Podman, name: &str, source: &Path) -> Result<(), LocateError> {
    let _ = podman.command().args(["secret", "rm", name]).output();
    run(
        podman,
        "secret create",
        &["secret", "create", name, &source.to_string_lossy()],
    )
    .map(drop)
}

/// Asks Podman where `manifest`'s body, with its state directory at `state`, lives.
pub fn locate(podman: &Podman, manifest: &Manifest, state: &Path) -> Result<Deployed, LocateError> {
    let volumes: BTreeMap<String, PathBuf> = run(
        podman,
        "volume ls",
        &["volume", "ls", "--format", "{{.Name}} {{.Mountpoint}}"],
    )?
    .lines()
    .filter_map(|l| l.split_once(' '))
    .map(|(name, at)| (name.to_owned(), PathBuf::from(at)))
    .collect();
    let mut layout = StateLayout::new(state);
    let mut missing_volumes = Vec::new();
    for port in &manifest.ports {
        let name = port_volume_name(&port.name);
        match volumes.get(&name) {
            Some(at) => layout = layout.with_socket_dir(&port.name, at),
            None => missing_volumes.push(name),
        }
    }
    let running: BTreeMap<String, u32> =
        run(podman, "ps", &["ps", "--format", "{{.Names}} {{.Pid}}"])?
            .lines()
            .filter_map(|l| {
                let (name, pid) = l.split_once(' ')?;
                Some((name.to_owned(), pid.trim().parse().ok()?))
            })
            .collect();
    // The running role containers, and each one's environment in one `inspect`.
    let roles: Vec<(String, String, u32)> = manifest
        .roles
        .iter()
        .filter_map(|r| {
            let name = container_name(r.name.as_str());
            let pid = *running.get(&name)?;
            Some((r.name.as_str().to_owned(), name, pid))
        })
        .collect();
    let mut envs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if !roles.is_empty() {
        let mut args = vec!["inspect", "--format", "{{.Name}} {{json .Config.Env}}"];
        args.extend(roles.iter().map(|(_, name, _)| name.as_str()));
        for line in run(podman, "inspect", &args)?.lines() {
            let Some((name, env)) = line.split_once(' ') else {
                continue;
            };
            let env = serde_json::from_str(env).map_err(|e| LocateError {
                what: "inspect",
                detail: format!("{name}: Config.Env: {e}"),
            })?;
            envs.insert(name.to_owned(), env);
        }
    }
    let containers = roles
        .into_iter()
        .map(|(role, name, pid)| {
            let env = envs.remove(&name).ok_or_else(|| LocateError {
                what: "inspect",
                detail: format!("{name}: no Config.Env"),
            })?;
            Ok(Container { role, pid, env })
        })
        .collect::<Result<_, LocateError>>()?;
    Ok(Deployed {
        layout,
        containers,
        missing_volumes,
    })
}
