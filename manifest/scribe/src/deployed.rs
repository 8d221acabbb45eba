//! Where a body Scribe deployed under Quadlet lives on its host, as rootless Podman reports
//! it: each port's socket directory is the mount point of the volume `reach-port-<port>`, each
//! role's main process the container `reach-<role>`. The operator's CLI reads these to reach
//! the ports (`reach status --podman`, `reach audit --podman`) and to audit the processes.
//! [`rollout`] decides which roles a change in the state directory (a credential set since they
//! started) still needs restarted; a renewed leaf needs nothing (`reach scribe renew`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

use crate::image_build::Podman;
use crate::quadlet::{QuadletInput, container_name, port_volume_name, reloaded_live, state_files};

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

/// What a Quadlet body still has to do after its state directory changed, decided from what
/// the host shows rather than from what one run changed: a run interrupted anywhere between
/// writing a credential and restarting its role is finished by the next one. Leaves, keys and
/// bundles never need anything: each role's secret directory is mounted into its container and
/// the role reloads them live ([`crate::quadlet::reloaded_live`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Running roles, in manifest order, that started before one of the credentials they read
    /// at start was last written: each runs on the older one until it restarts.
    pub restart: Vec<String>,
}

/// One file a role reads from its secret directory only at start, with the time it was last
/// written (nanoseconds since the epoch on the host's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTimes {
    pub role: String,
    pub file: PathBuf,
    pub written: i128,
}

/// The rollout for `files` (roles in manifest order) and the running role containers' start
/// times.
pub fn decide(files: &[FileTimes], started: &BTreeMap<String, i128>) -> Rollout {
    let mut out = Rollout::default();
    for f in files {
        if out.restart.contains(&f.role) {
            continue;
        }
        if started.get(&f.role).is_some_and(|&at| at < f.written) {
            out.restart.push(f.role.clone());
        }
    }
    out
}

/// Why a rollout could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error(transparent)]
    Podman(#[from] LocateError),
    /// a secret's file in the state directory cannot be read for its time
    #[error("{path}: {error}")]
    Source {
        path: PathBuf,
        error: std::io::Error,
    },
}

fn nanos(t: std::time::SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// Lines of `name nanos` (a Go template's `UnixNano`) as a map.
fn times(text: &str) -> BTreeMap<String, i128> {
    text.lines()
        .filter_map(|l| {
            let (name, at) = l.trim().split_once(' ')?;
            Some((
                name.trim_start_matches('/').to_owned(),
                at.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// `podman <kind> inspect` of `names` with `format` (a name, then a time's `UnixNano`): each
/// name's time. Nothing to ask for, nothing asked.
fn inspect_times(
    podman: &Podman,
    kind: &'static str,
    format: &str,
    names: &[&str],
) -> Result<BTreeMap<String, i128>, LocateError> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut args = vec![kind, "inspect", "--format", format];
    args.extend(names);
    Ok(times(&run(podman, kind, &args)?))
}

/// Asks Podman and the state directory which running roles of the body of `input` started
/// before a credential they read at start was written ([`decide`]).
pub fn rollout(podman: &Podman, input: &QuadletInput<'_>) -> Result<Rollout, RolloutError> {
    // A withheld principal (`reach compromise`) holds no leaf: its role is not restarted (it
    // stays as the operator stopped it, until reinstated).
    let withheld = crate::identities::withheld(&input.state).map_err(|e| RolloutError::Source {
        path: input.state.scribe_dir(),
        error: std::io::Error::other(e.to_string()),
    })?;
    let mut files = Vec::new();
    for (role, name, rel) in state_files(input) {
        if withheld.contains(&role) || reloaded_live(&name) {
            continue;
        }
        let file = input.state.root().join(rel);
        let written = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .map_err(|error| RolloutError::Source {
                path: file.clone(),
                error,
            })?;
        files.push(FileTimes {
            role,
            file,
            written: nanos(written),
        });
    }
    let running: BTreeSet<String> = run(podman, "ps", &["ps", "--format", "{{.Names}}"])?
        .lines()
        .map(|l| l.trim().to_owned())
        .collect();
    // (role, its container), for the running ones.
    let containers: Vec<(&str, String)> = input
        .manifest
        .roles
        .iter()
        .map(|r| (r.name.as_str(), container_name(r.name.as_str())))
        .filter(|(role, c)| running.contains(c) && !withheld.contains(*role))
        .collect();
    let names: Vec<&str> = containers.iter().map(|(_, c)| c.as_str()).collect();
    let times = inspect_times(
        podman,
        "container",
        "{{.Name}} {{.State.StartedAt.UnixNano}}",
        &names,
    )?;
    let started = containers
        .iter()
        .filter_map(|(role, c)| Some(((*role).to_owned(), *times.get(c)?)))
        .collect();
    Ok(decide(&files, &started))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(role: &str, name: &str, written: i128) -> FileTimes {
        FileTimes {
            role: role.to_owned(),
            file: PathBuf::from(format!("/state/secrets/{role}/{name}")),
            written,
        }
    }

    #[test]
    fn a_role_started_before_a_credential_was_written_is_restarted_once() {
        let files = [
            file("core", "portal-key", 10),
            file("egress-discord", "discord-bot-token", 30),
            file("egress-discord", "interaction-seal", 40),
            file("egress-provider", "provider-key", 30),
        ];
        // egress-provider is not running: nothing to restart there.
        let started = BTreeMap::from([("core".to_owned(), 25), ("egress-discord".to_owned(), 25)]);
        let r = decide(&files, &started);
        assert_eq!(r.restart, vec!["egress-discord".to_owned()]);
        // Once it has started after its newest credential, nothing is left to do.
        let started = BTreeMap::from([("core".to_owned(), 25), ("egress-discord".to_owned(), 41)]);
        assert_eq!(decide(&files, &started), Rollout::default());
    }

    #[test]
    fn podman_times_are_read_by_name() {
        let t = times("/reach-ward 1796173362430316179\nreach.core.tls.crt 17\nbroken\nx y\n");
        assert_eq!(
            t,
            BTreeMap::from([
                ("reach-ward".to_owned(), 1_796_173_362_430_316_179),
                ("reach.core.tls.crt".to_owned(), 17),
            ])
        );
    }
}
