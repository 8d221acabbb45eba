//! Quadlet units: one `.container` per role, the `.volume`/`.network` units they need, the
//! container-side role configurations, and the script that creates the configurations' Podman
//! secrets.
//!
//! Inside every container the body is laid out as [`StateLayout`] rooted at [`CONTAINER_ROOT`],
//! so a role reads the same [`RoleConfig`](reach_manifest::plan::RoleConfig) shape as under the
//! dev launcher, only with container paths:
//!
//! * `/reach/config/<role>.toml` — the role's configuration (a Podman secret, read-only);
//! * `/reach/secrets/<role>/…` — its leaf, key, trust bundle and own credentials: the role's
//!   own secret directory of the host's state directory, bind-mounted read-only. The files are
//!   0640 in a 0750 directory of the body user's group, which the units map to the role's group
//!   ([`BODY_GID`]); their owner is nobody inside. A renewed leaf or a rotated bundle is one
//!   rename on the host that the role's material reload sees: no copy, no restart, no failed
//!   call (a Podman secret is a copy taken when the container starts);
//! * `/reach/sockets/<port>/` — one named volume per port: writable in the server, read-only in
//!   each allowed caller (connecting to a Unix socket needs no write access to the mount);
//! * `/reach/data/<role>/` — the role's own writable volume.
//!
//! Beside the units, `systemd/` holds the body's leaf-renewal timer ([`crate::renewal`]).
//!
//! The root filesystem is read-only, every capability is dropped, no-new-privileges is set and
//! roles without egress have no network at all.
//!
//! **Architecture Invariant:** output is a pure function of the manifest, the pinned images,
//! which optional credentials exist, the state directory's path and the renewal command (the
//! binary and manifest paths). No
//! timestamps, no host names, sorted everywhere, so a re-run is byte-identical and
//! `reach scribe check` can compare bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reach_identity::files::{LEAF_CERT, LEAF_KEY, TRUST_BUNDLE};
use reach_manifest::plan::{StateLayout, to_toml};
use reach_manifest::{Manifest, NetworkClass};

use crate::images::PinnedImage;
use crate::refusal::{self, Refusal, RefusalKind, SecretOwners};
use crate::renewal::Renewal;

/// Where the body's layout is rooted inside every container.
pub const CONTAINER_ROOT: &str = "/reach";
/// How long a role may drain after SIGTERM before Podman kills it (the launcher's 15 s).
pub const STOP_TIMEOUT_SECS: u32 = 15;
/// The mode of every mounted Podman secret (the configuration): the role's own user reads it;
/// group and others nothing.
const SECRET_MODE: &str = "0400";
/// The user every role runs as inside its container (the images' `USER`, the units' `User=`).
/// Not root: with `UserNS=auto` each container's 1000 is a different host id anyway, and a
/// non-root user owns nothing in the read-only image.
pub const ROLE_UID: u32 = 1000;
/// The group every role runs as: the body's group. Under `UserNS=auto` each container gets a
/// disjoint range of host ids, so a socket one role binds is owned by an id no other
/// container maps, and connecting to a Unix socket needs write access to it. The units map
/// this one container gid onto the rootless user's own group (`gidmapping=2000:0:1`: id 0 of
/// the rootless namespace, never handed out by `auto`), and roles run with umask
/// [`ROLE_UMASK`], so a port's socket is group-writable for the body's roles and nothing for
/// others. Which roles can reach a socket at all is decided by which containers mount the
/// port's volume: only its server and its allowed callers.
pub const BODY_GID: u32 = 2000;
/// The ids each `UserNS=auto` container takes from the rootless user's subordinate range.
/// Podman sizes an unsized `auto` namespace from the image and, here, took the whole 65536
/// range for the first container; a fixed size lets thirty containers share a default range.
/// The role images use only ids 0 (file owner) and [`ROLE_UID`].
pub const USERNS_AUTO_SIZE: u32 = 2048;
/// The umask of every role: group keeps write (sockets, see [`BODY_GID`]), others get nothing.
/// Quadlet 5.4 has no `Umask=` key; it is Podman's own flag on the `PodmanArgs=` line.
pub const ROLE_UMASK: &str = "0007";

/// The user namespace a unit asks for: the manifest's, with the size and the body's group
/// mapping added to a plain `auto` (see [`BODY_GID`]).
pub fn unit_user_ns(manifest_user_ns: &str) -> String {
    if manifest_user_ns == "auto" {
        format!("auto:size={USERNS_AUTO_SIZE},gidmapping={BODY_GID}:0:1")
    } else {
        manifest_user_ns.to_owned()
    }
}

/// What Scribe materializes units from.
#[derive(Debug)]
pub struct QuadletInput<'a> {
    pub manifest: &'a Manifest,
    /// Every role's image, pinned (see [`crate::images::pin_images`]).
    pub images: BTreeMap<String, PinnedImage>,
    /// The body's state directory on the host: each role's secret directory in it is mounted
    /// into its container.
    pub state: StateLayout,
    /// Optional credentials present in the state directory, as (role, file). An absent optional
    /// credential is not mounted: the capability it enables is disabled.
    pub optional_present: BTreeSet<(String, String)>,
    /// The command the renewal timer runs ([`crate::renewal`]).
    pub renewal: Renewal,
}

impl<'a> QuadletInput<'a> {
    /// The input for `manifest`, finding optional credentials under `state`.
    pub fn new(
        manifest: &'a Manifest,
        images: BTreeMap<String, PinnedImage>,
        state: StateLayout,
    ) -> Self {
        let mut optional_present = BTreeSet::new();
        for role in &manifest.roles {
            for c in role.credentials.iter().filter(|c| c.optional) {
                if state.secret_dir(role.name.as_str()).join(&c.file).exists() {
                    optional_present.insert((role.name.as_str().to_owned(), c.file.clone()));
                }
            }
        }
        Self {
            manifest,
            images,
            state,
            optional_present,
            renewal: Renewal::default(),
        }
    }

    /// The same input with the renewal timer running `renewal` (the CLI's own binary).
    pub fn with_renewal(mut self, renewal: Renewal) -> Self {
        self.renewal = renewal;
        self
    }
}

/// One mount of a container.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct VolumeMount {
    /// A `.volume` unit (`reach-data-core.volume`), a named volume, or an absolute host path.
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// One Podman secret mounted into a container: a role's configuration.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretMount {
    /// The Podman secret name, `reach.<role>.config`.
    pub name: String,
    /// The path inside the container.
    pub target: String,
    /// Where the secrets script takes its bytes from, relative to the output directory
    /// (`config/<role>.toml`).
    pub from: String,
}

/// Everything one role's `.container` unit says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerUnit {
    pub role: String,
    pub image: String,
    pub exec: Vec<String>,
    pub user_ns: String,
    /// `None` for no network; else the `.network` unit.
    pub network: Option<String>,
    pub volumes: Vec<VolumeMount>,
    pub secrets: Vec<SecretMount>,
    pub environment: BTreeMap<String, String>,
    pub memory_mib: u32,
    pub pids: u32,
    pub cpu_millis: Option<u32>,
    /// Vetted extra arguments from the manifest.
    pub podman_args: Vec<String>,
    /// Roles that must be up first.
    pub after: Vec<String>,
}

/// The materialized output: file name (relative to the output directory) to contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Materialized {
    pub files: BTreeMap<String, String>,
    pub containers: Vec<ContainerUnit>,
}

/// The unit file of a role.
pub fn container_file(role: &str) -> String {
    format!("reach-{role}.container")
}
/// The systemd service Quadlet generates for a role.
pub fn service_name(role: &str) -> String {
    format!("reach-{role}.service")
}
/// The data volume unit of a role.
pub fn data_volume(role: &str) -> String {
    format!("reach-data-{role}.volume")
}
/// The socket volume unit of a port.
pub fn port_volume(port: &str) -> String {
    format!("{}.volume", port_volume_name(port))
}
/// The Podman volume that unit creates: the port's socket directory on the host.
pub fn port_volume_name(port: &str) -> String {
    format!("reach-port-{port}")
}
/// The Podman container a role's unit runs.
pub fn container_name(role: &str) -> String {
    format!("reach-{role}")
}
/// The network unit of an egress role.
pub fn egress_network(role: &str) -> String {
    format!("reach-egress-{role}.network")
}
/// The Podman secret name of one of a role's files.
pub fn secret_name(role: &str, file: &str) -> String {
    format!("reach.{role}.{file}")
}
/// The file the secrets script lives in.
pub const SECRETS_SCRIPT: &str = "secrets.sh";

/// Every Podman secret each role owns: its configuration.
pub fn secret_owners(input: &QuadletInput<'_>) -> SecretOwners {
    let mut owners = SecretOwners::new();
    for role in &input.manifest.roles {
        for s in role_secrets(role.name.as_str()) {
            owners.insert(s.name, role.name.as_str().to_owned());
        }
    }
    owners
}

/// Whether a role rereads a file of its secret directory while it runs: the leaf, its key and
/// the trust bundle ([`PortMaterial`](../../reach_port/material/index.html) reloads them). A
/// credential is read at start, so a change to one needs a restart.
pub fn reloaded_live(file: &str) -> bool {
    [LEAF_CERT, LEAF_KEY, TRUST_BUNDLE].contains(&file)
}

/// Every file a role's container reads from its secret directory, as (role, file name, path
/// relative to the state directory), roles in manifest order: what must exist before the body
/// starts ([`crate::check`]) and what a change in the state directory may need a restart for
/// ([`crate::deployed::rollout`]).
pub fn state_files(input: &QuadletInput<'_>) -> Vec<(String, String, PathBuf)> {
    let mut v = Vec::new();
    for role in &input.manifest.roles {
        let name = role.name.as_str();
        for f in role_state_files(input, name) {
            let rel = PathBuf::from("secrets").join(name).join(&f);
            v.push((name.to_owned(), f, rel));
        }
    }
    v
}

fn role_secrets(role_name: &str) -> Vec<SecretMount> {
    let inside = StateLayout::new(CONTAINER_ROOT);
    vec![SecretMount {
        name: secret_name(role_name, "config"),
        target: inside.config_path(role_name).display().to_string(),
        from: format!("config/{role_name}.toml"),
    }]
}

/// The file names of `role_name`'s secret directory its container reads: leaf, key, bundle
/// and its credentials (absent optional ones excluded).
fn role_state_files(input: &QuadletInput<'_>, role_name: &str) -> Vec<String> {
    let role = input
        .manifest
        .role(role_name)
        .expect("role of the manifest");
    let mut files: Vec<&str> = vec![LEAF_CERT, LEAF_KEY, TRUST_BUNDLE];
    for c in &role.credentials {
        if !c.optional
            || input
                .optional_present
                .contains(&(role_name.to_owned(), c.file.clone()))
        {
            files.push(&c.file);
        }
    }
    let mut files: Vec<String> = files.into_iter().map(str::to_owned).collect();
    files.sort();
    files
}

/// Derives every unit from `input`, refusing any unsafe arrangement.
pub fn derive(input: &QuadletInput<'_>) -> Result<Materialized, Refusal> {
    let m = input.manifest;
    // Units for a body that would not keep the manifest's recovery promise are not written.
    m.recovery
        .policy
        .honoured_by_this_build()
        .map_err(|r| Refusal::new("recovery.policy", RefusalKind::NotBuilt(r)))?;
    let inside = StateLayout::new(CONTAINER_ROOT);
    let owners = secret_owners(input);
    let mut containers = Vec::new();
    // Every unit's description names the profile.
    refusal::vet_unit_word(&m.profile, || m.profile.clone())
        .map_err(|k| Refusal::new("profile", k))?;
    for role in &m.roles {
        let i = role.index;
        let name = role.name.as_str();
        let unit_word = |word: &str, at: String, shown: &dyn Fn() -> String| {
            refusal::vet_unit_word(word, shown).map_err(|k| Refusal::new(at, k))
        };
        unit_word(&role.user_ns, format!("roles[{i}].user_ns"), &|| {
            role.user_ns.clone()
        })?;
        refusal::vet_user_ns(&role.user_ns)
            .map_err(|k| Refusal::new(format!("roles[{i}].user_ns"), k))?;
        unit_word(&role.image, format!("roles[{i}].image"), &|| {
            role.image.clone()
        })?;
        for (k, v) in &role.environment {
            // The value is not shown: it is refused before anyone checked what it holds.
            unit_word(
                &format!("{k}={v}"),
                format!("roles[{i}].environment"),
                &|| format!("{}=…", k.escape_debug()),
            )?;
            if refusal::looks_like_credential(k, v) {
                return Err(Refusal::new(
                    format!("roles[{i}].environment.{k}"),
                    RefusalKind::CredentialInEnvironment(format!("{k}=…")),
                ));
            }
        }
        refusal::vet_podman_args(name, &role.podman_args, &owners, |j| {
            format!("roles[{i}].podman_args[{j}]")
        })?;
        for a in &role.args {
            unit_word(a, format!("roles[{i}].args"), &|| a.clone())?;
        }

        let mut volumes = vec![
            VolumeMount {
                source: data_volume(name),
                target: inside.data_dir(name).display().to_string(),
                read_only: false,
            },
            // Its own secret directory, read-only: the files the role reads live.
            VolumeMount {
                source: input.state.secret_dir(name).display().to_string(),
                target: inside.secret_dir(name).display().to_string(),
                read_only: true,
            },
        ];
        for p in &m.ports {
            let served = p.server == role.name;
            let calls = p.grants.iter().any(|g| g.caller == name);
            if served || calls {
                volumes.push(VolumeMount {
                    source: port_volume(&p.name),
                    target: inside.socket_dir(&p.name).display().to_string(),
                    read_only: !served,
                });
            }
        }
        // A role that reads another's activated snapshots (`corpus_from`) gets that role's data
        // volume read-only, at the path its compiled config names.
        if let Some(from) = role.settings.get("corpus_from").and_then(|v| v.as_str()) {
            if m.role(from).is_none() || from == name {
                return Err(Refusal::new(
                    format!("roles[{i}].settings.corpus_from"),
                    RefusalKind::VolumeOutsideManifest(format!(
                        "data of `{from}`, which is not another role"
                    )),
                ));
            }
            volumes.push(VolumeMount {
                source: data_volume(from),
                target: inside.data_dir(from).display().to_string(),
                read_only: true,
            });
        }
        for (j, mount) in role.mounts.iter().enumerate() {
            for (field, word) in [("source", &mount.source), ("target", &mount.target)] {
                unit_word(word, format!("roles[{i}].mounts[{j}].{field}"), &|| {
                    word.clone()
                })?;
            }
            vet_manifest_mount(input, name, &mount.source)
                .map_err(|k| Refusal::new(format!("roles[{i}].mounts[{j}].source"), k))?;
            volumes.push(VolumeMount {
                source: mount.source.clone(),
                target: mount.target.clone(),
                read_only: mount.read_only,
            });
        }
        volumes.sort();

        let network = match &role.network {
            NetworkClass::None => None,
            NetworkClass::Egress(_) => Some(egress_network(name)),
        };
        let image = input.images.get(name).ok_or_else(|| {
            Refusal::new(
                format!("roles[{i}].image"),
                RefusalKind::ImageWithoutDigest(role.image.clone()),
            )
        })?;
        let mut exec = vec![
            "--config".to_owned(),
            inside.config_path(name).display().to_string(),
        ];
        exec.extend(role.args.iter().cloned());
        // The manifest's ordering, and the server of every port the role calls: a caller's
        // read-only mount of a port volume must never come first, since Podman chowns a volume
        // (the server's `:U`) only on its first mount, and the server could not bind its
        // socket (found by the deployed-host test, where systemd starts the units together).
        let mut after: Vec<String> = role.after.iter().map(|a| a.as_str().to_owned()).collect();
        for p in &m.ports {
            let server = p.server.as_str();
            if server != name && p.grants.iter().any(|g| g.caller == name) {
                after.push(server.to_owned());
            }
        }
        after.sort();
        after.dedup();
        containers.push(ContainerUnit {
            role: name.to_owned(),
            image: image.to_string(),
            exec,
            user_ns: unit_user_ns(&role.user_ns),
            network,
            volumes,
            secrets: role_secrets(name),
            environment: role.environment.clone(),
            memory_mib: role.limits.memory_mib,
            pids: role.limits.pids,
            cpu_millis: role.limits.cpu_millis,
            podman_args: role.podman_args.clone(),
            after,
        });
    }
    vet_shared_writable(m, &containers)?;
    let mut files = render(input, &containers);
    let timer = crate::renewal::render(&header(m), &m.profile, &input.renewal, input.state.root())?;
    files.extend(timer.map(|(name, text)| (name.to_owned(), text)));
    let (name, text) = crate::shutdown::render(&header(m), &m.profile, m.roles.len());
    files.insert(name.to_owned(), text);
    Ok(Materialized { files, containers })
}

/// A manifest mount may not reach into the state directory: another role's secrets are that
/// role's, the trust root is Scribe's, and sockets and data are mounted by Scribe alone.
fn vet_manifest_mount(
    input: &QuadletInput<'_>,
    role: &str,
    source: &str,
) -> Result<(), RefusalKind> {
    let managed = source.starts_with("reach-data-") || source.starts_with("reach-port-");
    if managed {
        return Err(RefusalKind::VolumeOutsideManifest(format!(
            "{source} (a volume Scribe manages)"
        )));
    }
    let path = Path::new(source);
    if !path.is_absolute() {
        return Ok(());
    }
    let root = input.state.root();
    let Ok(rel) = path.strip_prefix(root) else {
        return Ok(());
    };
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    match (parts.next().as_deref(), parts.next()) {
        (Some("secrets"), Some(owner)) if owner != role => Err(RefusalKind::ForeignSecret {
            secret: source.to_owned(),
            owner,
            role: role.to_owned(),
        }),
        (Some("secrets"), None) => Err(RefusalKind::ForeignSecret {
            secret: source.to_owned(),
            owner: "every role".to_owned(),
            role: role.to_owned(),
        }),
        (Some("scribe"), _) => Err(RefusalKind::ForeignSecret {
            secret: source.to_owned(),
            owner: "scribe".to_owned(),
            role: role.to_owned(),
        }),
        (None, _) => Err(RefusalKind::VolumeOutsideManifest(format!(
            "{source} (the whole state directory)"
        ))),
        _ => Err(RefusalKind::VolumeOutsideManifest(format!(
            "{source} (inside the state directory Scribe manages)"
        ))),
    }
}

/// Refuses any volume mounted writable into two or more roles, naming the manifest mount.
fn vet_shared_writable(m: &Manifest, containers: &[ContainerUnit]) -> Result<(), Refusal> {
    let mut writers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in containers {
        for v in c.volumes.iter().filter(|v| !v.read_only) {
            writers.entry(v.source.as_str()).or_default().push(&c.role);
        }
    }
    for (source, roles) in writers {
        if roles.len() < 2 {
            continue;
        }
        // Name the first manifest mount that contributes to the sharing.
        let path = m
            .roles
            .iter()
            .find_map(|r| {
                let i = r.index;
                r.mounts
                    .iter()
                    .position(|mnt| mnt.source == source && !mnt.read_only)
                    .map(|j| format!("roles[{i}].mounts[{j}]"))
            })
            .unwrap_or_else(|| "roles".to_owned());
        return Err(Refusal::new(
            path,
            RefusalKind::SharedWritableVolume {
                volume: source.to_owned(),
                roles: roles.join(", "),
            },
        ));
    }
    Ok(())
}

fn header(m: &Manifest) -> String {
    format!(
        "# Generated by Scribe from ApplicationDeploymentManifest@1 ({}). Do not edit:\n\
         # `reach scribe check` reports any drift between this file and the manifest.\n",
        m.profile
    )
}

/// Quotes one `Exec=`/`PodmanArgs=` word for systemd: specifiers (`%`) and variables (`$`)
/// are escaped, and a word with anything but plain characters is double-quoted.
pub fn quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let plain = !escaped.is_empty()
        && escaped
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%$".contains(c));
    if plain {
        escaped
    } else {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// `:ro` for a read-only mount; `:U` for a writable volume Scribe manages. `UserNS=auto`
/// gives a container a new range of host ids on every start, and Podman chowns a named volume
/// only on its first mount, so after a restart the role would no longer own its own data or
/// socket directory. `:U` chowns it to the role's user at every start; read-only mounts (a
/// caller's view of a socket directory, core's view of the snapshots) are never chowned.
fn volume_options(v: &VolumeMount) -> &'static str {
    let managed = v.source.starts_with("reach-data-") || v.source.starts_with("reach-port-");
    match (v.read_only, managed) {
        (true, _) => ":ro",
        (false, true) => ":U",
        (false, false) => "",
    }
}

fn render_container(m: &Manifest, c: &ContainerUnit) -> String {
    let mut s = header(m);
    s.push_str("[Unit]\n");
    s.push_str(&format!(
        "Description=Reach role {} ({})\n",
        c.role, m.profile
    ));
    for a in &c.after {
        s.push_str(&format!(
            "After={}\nRequires={}\n",
            service_name(a),
            service_name(a)
        ));
    }
    s.push_str("\n[Container]\n");
    s.push_str(&format!("ContainerName={}\n", container_name(&c.role)));
    s.push_str(&format!("Image={}\n", c.image));
    s.push_str("Pull=never\n");
    s.push_str(&format!(
        "Exec={}\n",
        c.exec
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    s.push_str("ReadOnly=true\n");
    s.push_str("NoNewPrivileges=true\n");
    s.push_str("DropCapability=all\n");
    s.push_str(&format!("UserNS={}\n", c.user_ns));
    s.push_str(&format!("User={ROLE_UID}\nGroup={BODY_GID}\n"));
    s.push_str(&format!(
        "Network={}\n",
        c.network.as_deref().unwrap_or("none")
    ));
    s.push_str("Notify=true\n");
    // The cgroup's pids.max. The same number is the role's RLIMIT_NPROC, which the role sets
    // on itself at start (its config's `process_ceiling`): the kernel holds that without a
    // cgroup, where rootless Podman on cgroup v1 ignores PidsLimit, and each role's user is a
    // host id of its own, so the count is the role's alone. Not `Ulimit=nproc`: crun applies
    // it before it clones the container's first process, as the body's user, so it counts
    // every Podman thread of that user and a start beside others fails with EAGAIN.
    s.push_str(&format!("PidsLimit={}\n", c.pids));
    // No core dump, soft or hard: a role's memory holds its key. The role sets the same limit
    // on itself at start (`reach_runtime::no_core_dumps`); here it holds from the first exec.
    s.push_str("Ulimit=core=0:0\n");
    // Quadlet 5.4 has no Memory= key; the ceiling is podman's own flag. Swap equal to memory
    // means no swap on top of the ceiling.
    let mut args = vec![
        format!("--memory={}m", c.memory_mib),
        format!("--memory-swap={}m", c.memory_mib),
        format!("--umask={ROLE_UMASK}"),
    ];
    if let Some(cpu) = c.cpu_millis {
        args.push(format!("--cpus={}.{:03}", cpu / 1000, cpu % 1000));
    }
    args.extend(c.podman_args.iter().cloned());
    s.push_str(&format!(
        "PodmanArgs={}\n",
        args.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
    ));
    s.push_str(&format!("StopTimeout={STOP_TIMEOUT_SECS}\n"));
    for (k, v) in &c.environment {
        s.push_str(&format!("Environment={}\n", quote(&format!("{k}={v}"))));
    }
    for v in &c.volumes {
        s.push_str(&format!(
            "Volume={}:{}{}\n",
            v.source,
            v.target,
            volume_options(v)
        ));
    }
    for sec in &c.secrets {
        s.push_str(&format!(
            "Secret={},type=mount,target={},mode={SECRET_MODE},uid={ROLE_UID},gid={BODY_GID}\n",
            sec.name, sec.target
        ));
    }
    s.push_str("\n[Service]\nRestart=on-failure\nTimeoutStartSec=60\n");
    s.push_str("\n[Install]\nWantedBy=default.target\n");
    s
}

fn render(input: &QuadletInput<'_>, containers: &[ContainerUnit]) -> BTreeMap<String, String> {
    let m = input.manifest;
    let inside = StateLayout::new(CONTAINER_ROOT);
    let mut files = BTreeMap::new();
    for c in containers {
        files.insert(container_file(&c.role), render_container(m, c));
        files.insert(
            data_volume(&c.role),
            format!("{}[Volume]\nVolumeName=reach-data-{}\n", header(m), c.role),
        );
        if let Some(net) = &c.network {
            files.insert(
                net.clone(),
                format!(
                    "{}# The egress road of role {}: nftables admits only its destinations.\n\
                     [Network]\nNetworkName=reach-egress-{}\nDisableDNS=true\n",
                    header(m),
                    c.role,
                    c.role
                ),
            );
        }
        let role = m.role(&c.role).expect("role of the manifest");
        let mut config = m.role_config(role, &inside);
        // The pids ceiling held by the kernel on every host, cgroup or not (see `PidsLimit`
        // in `render_container`).
        config.process_ceiling = Some(c.pids);
        files.insert(format!("config/{}.toml", c.role), to_toml(&config));
    }
    for p in &m.ports {
        files.insert(
            port_volume(&p.name),
            format!(
                "{}# Socket directory of port {} (server {}).\n[Volume]\nVolumeName={}\n",
                header(m),
                p.name,
                p.server,
                port_volume_name(&p.name)
            ),
        );
    }
    files.insert(
        SECRETS_SCRIPT.to_owned(),
        render_secrets_script(input, containers),
    );
    files
}

fn render_secrets_script(input: &QuadletInput<'_>, containers: &[ContainerUnit]) -> String {
    let m = input.manifest;
    let mut s = String::from("#!/bin/sh\n");
    s.push_str(&header(m));
    s.push_str(&format!(
        "#\n# Creates (or replaces) every Podman secret the units mount: the roles' configurations.\n\
         # Run it as the body's user. Leaves, keys and credentials are not Podman secrets: each\n\
         # role's secret directory under {} is mounted into its container.\n\
         set -eu\n\
         here=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\n\
         put() {{\n    podman secret rm \"$1\" >/dev/null 2>&1 || true\n    podman secret create \"$1\" \"$2\" >/dev/null\n    echo \"secret $1\"\n}}\n",
        input.state.root().display(),
    ));
    for c in containers {
        for sec in &c.secrets {
            s.push_str(&format!("put {} \"$here/{}\"\n", sec.name, sec.from));
        }
    }
    s
}

/// Writes `out` into `dir`, removing Scribe files of an earlier run that are no longer part
/// of the output. Files are written only if their bytes change.
pub fn write_out(out: &Materialized, dir: &Path) -> std::io::Result<Vec<String>> {
    for sub in SUBDIRS {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let mut changed = Vec::new();
    for stale in scribe_files_on_disk(dir)? {
        if !out.files.contains_key(&stale) {
            std::fs::remove_file(dir.join(&stale))?;
            changed.push(format!("removed {stale}"));
        }
    }
    for (name, text) in &out.files {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            std::fs::write(&path, text)?;
            changed.push(format!("wrote {name}"));
        }
        if name == SECRETS_SCRIPT {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(changed)
}

/// The subdirectories of the output Scribe writes into: the roles' configurations, the
/// renewal timer's units ([`crate::renewal`]) and the system unit of the body's orderly stop
/// ([`crate::shutdown`]).
const SUBDIRS: [&str; 3] = ["config", "systemd", "systemd/system"];

/// The files in `dir` that Scribe would own: `reach-*` units, `config/*.toml`, the secrets
/// script, `systemd/reach-*` and `systemd/system/reach-*` units. Sorted.
pub fn scribe_files_on_disk(dir: &Path) -> std::io::Result<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    let list = |d: &Path| -> std::io::Result<Vec<String>> {
        match std::fs::read_dir(d) {
            Ok(rd) => rd
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    };
    for name in list(dir)? {
        let unit = [".container", ".volume", ".network", ".pod", ".kube"]
            .iter()
            .any(|x| name.ends_with(x));
        if (name.starts_with("reach-") && unit) || name == SECRETS_SCRIPT {
            found.insert(name);
        }
    }
    for name in list(&dir.join("config"))? {
        if name.ends_with(".toml") {
            found.insert(format!("config/{name}"));
        }
    }
    for sub in ["systemd", "systemd/system"] {
        for name in list(&dir.join(sub))? {
            if name.starts_with("reach-")
                && (name.ends_with(".service") || name.ends_with(".timer"))
            {
                found.insert(format!("{sub}/{name}"));
            }
        }
    }
    Ok(found)
}
