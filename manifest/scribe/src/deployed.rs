//! Where a body Scribe deployed under Quadlet lives on its host, as rootless Podman reports
//! it: each port's socket directory is the mount point of the volume `reach-port-<port>`, each
//! role's main process the container `reach-<role>`. The operator's CLI reads these to reach
//! the ports (`reach status --podman`, `reach audit --podman`) and to audit the processes.
//! [`rollout`] decides what a change in the state directory (a renewed leaf, a new credential)
//! still needs on the host, and [`replace_secret`] replaces a secret (`reach scribe renew`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

use crate::image_build::Podman;
use crate::quadlet::{QuadletInput, container_name, port_volume_name, state_secrets};

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

/// What a Quadlet body still has to do after its state directory changed, decided from what
/// the host shows rather than from what one run changed: a run interrupted anywhere between
/// writing a leaf and restarting its role is finished by the next one.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Podman secrets that are missing, or were created before their file in the state
    /// directory was last written, each with that file: replace them.
    pub replace: Vec<(String, PathBuf)>,
    /// Running roles, in manifest order, that started before one of their secrets was created
    /// or whose secrets are replaced now: each holds older copies until it restarts.
    pub restart: Vec<String>,
}

/// One state-directory secret of a role, with the two times that decide its rollout (both
/// nanoseconds since the epoch on the host's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretTimes {
    pub role: String,
    pub secret: String,
    pub file: PathBuf,
    /// When the file was last written.
    pub written: i128,
    /// When Podman created the secret; `None` when Podman has none by that name.
    pub created: Option<i128>,
}

/// The rollout for `secrets` (roles in manifest order) and the running role containers' start
/// times. A replaced secret counts as created now, after every start.
pub fn decide(secrets: &[SecretTimes], started: &BTreeMap<String, i128>) -> Rollout {
    let mut out = Rollout::default();
    let mut newest: Vec<(&str, i128)> = Vec::new();
    for s in secrets {
        let created = match s.created {
            Some(c) if c >= s.written => c,
            _ => {
                out.replace.push((s.secret.clone(), s.file.clone()));
                i128::MAX
            }
        };
        match newest.iter_mut().find(|(r, _)| *r == s.role) {
            Some((_, n)) => *n = (*n).max(created),
            None => newest.push((&s.role, created)),
        }
    }
    for (role, newest) in newest {
        if started.get(role).is_some_and(|&at| at < newest) {
            out.restart.push(role.to_owned());
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

/// Asks Podman and the state directory what the body of `input` still needs: which of its
/// state-directory secrets to replace and which running roles to restart ([`decide`]).
pub fn rollout(podman: &Podman, input: &QuadletInput<'_>) -> Result<Rollout, RolloutError> {
    // A withheld principal (`reach compromise`) holds no leaf: its secrets are not rolled out
    // and its role is not restarted (it stays as the operator stopped it, until reinstated).
    let withheld = crate::identities::withheld(&input.state).map_err(|e| RolloutError::Source {
        path: input.state.scribe_dir(),
        error: std::io::Error::other(e.to_string()),
    })?;
    let wanted: Vec<_> = state_secrets(input)
        .into_iter()
        .filter(|(role, _, _)| !withheld.contains(role))
        .collect();
    let listed: BTreeSet<String> = run(
        podman,
        "secret ls",
        &["secret", "ls", "--format", "{{.Name}}"],
    )?
    .lines()
    .map(|l| l.trim().to_owned())
    .collect();
    let present: Vec<&str> = wanted
        .iter()
        .map(|(_, name, _)| name.as_str())
        .filter(|n| listed.contains(*n))
        .collect();
    let created = inspect_times(
        podman,
        "secret",
        "{{.Spec.Name}} {{.CreatedAt.UnixNano}}",
        &present,
    )?;
    let mut secrets = Vec::new();
    for (role, secret, rel) in wanted {
        let file = input.state.root().join(rel);
        let written = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .map_err(|error| RolloutError::Source {
                path: file.clone(),
                error,
            })?;
        secrets.push(SecretTimes {
            created: created.get(&secret).copied(),
            role,
            secret,
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
    Ok(decide(&secrets, &started))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(role: &str, file: &str, written: i128, created: Option<i128>) -> SecretTimes {
        SecretTimes {
            role: role.to_owned(),
            secret: format!("reach.{role}.{file}"),
            file: PathBuf::from(format!("/state/secrets/{role}/{file}")),
            written,
            created,
        }
    }

    #[test]
    fn a_secret_older_than_its_file_is_replaced_and_its_running_role_restarted() {
        let secrets = [
            secret("core", "tls.crt", 10, Some(20)),
            secret("ward", "tls.crt", 30, Some(20)),
            secret("ward", "tls.key", 30, None),
            secret("vm-broker", "tls.crt", 30, Some(20)),
        ];
        // vm-broker is not running: its secret is replaced, nothing restarted.
        let started = BTreeMap::from([("core".to_owned(), 25), ("ward".to_owned(), 25)]);
        let r = decide(&secrets, &started);
        assert_eq!(
            r.replace,
            vec![
                (
                    "reach.ward.tls.crt".to_owned(),
                    PathBuf::from("/state/secrets/ward/tls.crt")
                ),
                (
                    "reach.ward.tls.key".to_owned(),
                    PathBuf::from("/state/secrets/ward/tls.key")
                ),
                (
                    "reach.vm-broker.tls.crt".to_owned(),
                    PathBuf::from("/state/secrets/vm-broker/tls.crt")
                ),
            ]
        );
        assert_eq!(r.restart, vec!["ward".to_owned()]);
    }

    #[test]
    fn a_role_started_before_its_current_secret_is_restarted_even_with_nothing_to_replace() {
        // The run that replaced ward's secret at 40 stopped before restarting ward (started 25).
        let secrets = [
            secret("core", "tls.crt", 10, Some(20)),
            secret("ward", "tls.crt", 30, Some(40)),
            secret("ward", "bundle.pem", 5, Some(20)),
        ];
        let started = BTreeMap::from([("core".to_owned(), 25), ("ward".to_owned(), 25)]);
        let r = decide(&secrets, &started);
        assert!(r.replace.is_empty());
        assert_eq!(r.restart, vec!["ward".to_owned()]);
        // Once ward has started after it, nothing is left to do.
        let started = BTreeMap::from([("core".to_owned(), 25), ("ward".to_owned(), 41)]);
        assert_eq!(decide(&secrets, &started), Rollout::default());
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
