//! `reach audit`: the live-host receipt (seed 001, "Acceptance gates"). A machine-readable
//! account of what runs and which checks pass, each check observed on the running body, never
//! read back from the manifest alone:
//!
//! - every role answers its health port to the operator's pinned leaf (`health/<role>`);
//! - every port refuses the operator on a method the port table does not grant it
//!   (`authorization/<port>`: authenticated, but not allowed);
//! - every role refuses a leaf naming the operator under a root of the same trust domain that
//!   the manifest does not pin (`identity/<role>`: impersonation by a foreign root);
//! - every principal's leaf is its own and has more than the renewal window left
//!   (`identity/leaves`);
//! - every principal's secret directory holds only its leaf, the bundle and the credentials
//!   the manifest gives it (`secrets/holders`: core holds none);
//! - every secret file and directory is closed to group and others (`secrets/modes`), and no
//!   secret's bytes appear in a running role's environment or command line
//!   (`secrets/environment`, `secrets/command-line`) or in any role's log (`secrets/logs`);
//! - each role process holds its manifest's process and memory ceilings, as the kernel holds
//!   them (`resources/pids`, `resources/memory`; `audit/ceilings.rs`);
//! - the vault serves (`vault/serving`) and the active corpus snapshot is fresh
//!   (`corpus/fresh`).
//!
//! The CLI adds what Scribe owns: the drift of an installed Quadlet directory (`units/drift`)
//! and the live egress table against the loaded ruleset file (`firewall/egress`).
//!
//! The receipt also records the host (OS, kernel, user, Podman, systemd, cgroup version) and
//! the manifest (profile, digest, trust domain, recovery policy). It carries no secret: the
//! checks compare secret bytes in memory and report only file names.
//!
//! A check passes only on evidence: a handshake refusal counts only from a role that answered
//! its health check (an outage looks the same to the client), and nothing to look at (no
//! secret directory, no readable secret) fails its check. The body's ports and processes come
//! from the state directory (`reach up`) or, for a Quadlet body, from Podman
//! ([`Processes::Listed`] and a layout with the port volumes).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use reach_identity::{Principal, TrustRoot};
use reach_manifest::plan::StateLayout;
use reach_manifest::{CredentialKind, Manifest};
use reach_proto::core::v1::VaultStatusRequest;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::corpus::v1::StatusRequest;
use reach_proto::corpus::v1::corpus_admin_client::CorpusAdminClient;
use serde::Serialize;

use crate::status::{CHECK_TIMEOUT, operator_channel, operator_material, status};

mod ceilings;
mod host;
mod junit;
mod logs;

pub use host::{account, shutdown_in, swap_in};

/// The receipt's format name.
pub const RECEIPT_FORMAT: &str = "reach.audit-receipt.v1";
/// The principal the operator's CLI presents.
const OPERATOR: &str = "operator";
/// Secret bytes shorter than this are not searched for (a short value matches by chance).
const MIN_SECRET_BYTES: usize = 16;

/// The live-host receipt.
#[derive(Debug, Serialize)]
pub struct Receipt {
    pub format: &'static str,
    pub generated_at_ms: u64,
    pub reach_version: &'static str,
    pub host: Host,
    pub manifest: ManifestFacts,
    pub checks: Vec<Check>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Receipt {
    /// Whether no check failed.
    pub fn passes(&self) -> bool {
        self.failed == 0
    }

    /// Adds a check made outside this module (e.g. Scribe's drift report), counted as the rest.
    pub fn push(&mut self, check: Check) {
        match check.outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail => self.failed += 1,
            Outcome::Skip => self.skipped += 1,
        }
        self.checks.push(check);
    }
}

/// What the host is.
#[derive(Debug, Serialize)]
pub struct Host {
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub uid: u32,
    pub podman: Option<String>,
    pub systemd: Option<String>,
    pub cgroup: &'static str,
}

/// What the body was deployed from.
#[derive(Debug, Serialize)]
pub struct ManifestFacts {
    pub profile: String,
    /// The SHA-256 of the manifest's bytes, as the caller read them.
    pub digest: String,
    pub trust_domain: String,
    pub recovery_policy: reach_manifest::schema::RecoveryPolicy,
    pub idempotency_horizon_hours: u32,
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    /// The check does not apply to this body (said why in its detail).
    Skip,
}

/// One observed check.
#[derive(Debug, Serialize)]
pub struct Check {
    pub id: String,
    pub outcome: Outcome,
    pub detail: String,
}

impl Check {
    /// A check that passed or failed on what was observed.
    pub fn observed(id: impl Into<String>, pass: bool, detail: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            outcome: if pass { Outcome::Pass } else { Outcome::Fail },
            detail: detail.into(),
        }
    }

    /// A check that does not apply to this body; `why` says so.
    pub fn skipped(id: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            outcome: Outcome::Skip,
            detail: why.into(),
        }
    }
}

fn check(id: impl Into<String>, pass: bool, detail: impl Into<String>) -> Check {
    Check::observed(id, pass, detail)
}

/// Where the audit finds each role's main process.
#[derive(Debug, Clone)]
pub enum Processes {
    /// `run/roles`, which `reach up` keeps.
    Launcher,
    /// Listed by the caller, e.g. from Podman for a body under Quadlet.
    Listed(Vec<RoleProcess>),
}

/// One role's main process.
#[derive(Debug, Clone)]
pub struct RoleProcess {
    pub role: String,
    pub pid: u32,
    /// The environment its manager gave it (Podman's `Config.Env`), read when the auditor may
    /// not read `/proc/<pid>/environ` (a rootless container's process is another user's).
    pub configured_env: Option<Vec<String>>,
    /// The command that prints its log (e.g. `podman logs reach-<role>`), where its log is not
    /// a file of the state directory.
    pub log_command: Option<Vec<String>>,
}

/// Audits the body `manifest` describes in `layout`; `manifest_digest` names the manifest's
/// bytes.
pub async fn audit(
    manifest: &Manifest,
    manifest_digest: String,
    layout: &StateLayout,
    processes: Processes,
) -> Receipt {
    let mut checks = Vec::new();
    let up = health(manifest, layout, &mut checks).await;
    let quadlet = matches!(processes, Processes::Listed(_));
    let roles = role_processes(layout, &processes);
    authorization(manifest, layout, &up, &mut checks).await;
    foreign_root(manifest, layout, &up, &mut checks).await;
    // Read once: the bytes searched for in environments, command lines and logs.
    let secrets = secret_values(&secret_files(manifest, layout));
    checks.push(modes(manifest, layout));
    checks.push(holders(manifest, layout));
    checks.push(leaves(manifest, layout));
    checks.extend(ceilings::ceilings(manifest, &processes));
    checks.push(logs::logs(manifest, layout, &processes, &secrets));
    checks.extend(exposure(&secrets, layout, processes));
    checks.push(host::core_dumps(manifest, &roles));
    checks.push(host::swap());
    if quadlet {
        checks.push(host::account(
            nix::unistd::getuid(),
            Path::new("/var/lib/systemd/linger"),
        ));
        checks.push(host::reboot(manifest, layout, &up));
        checks.push(host::shutdown(manifest, layout, nix::unistd::getuid().as_raw()).await);
    } else {
        checks.push(host::account_skipped());
        checks.push(host::reboot_skipped());
        checks.push(host::shutdown_skipped());
    }
    checks.push(host::rotation(manifest, layout));
    checks.extend(vault(manifest, layout).await);
    checks.push(corpus(manifest, layout).await);
    let count = |o| checks.iter().filter(|c| c.outcome == o).count();
    Receipt {
        format: RECEIPT_FORMAT,
        generated_at_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        reach_version: env!("CARGO_PKG_VERSION"),
        host: host().await,
        manifest: ManifestFacts {
            profile: manifest.profile.clone(),
            digest: manifest_digest,
            trust_domain: manifest.trust_domain.to_string(),
            recovery_policy: manifest.recovery.policy,
            idempotency_horizon_hours: manifest.recovery.idempotency_horizon_hours,
            roles: manifest
                .roles
                .iter()
                .map(|r| r.name.as_str().to_owned())
                .collect(),
        },
        passed: count(Outcome::Pass),
        failed: count(Outcome::Fail),
        skipped: count(Outcome::Skip),
        checks,
    }
}

/// Asks every role's health port; returns the roles that answered.
async fn health(manifest: &Manifest, layout: &StateLayout, checks: &mut Vec<Check>) -> Vec<String> {
    let mut up = Vec::new();
    match status(manifest, layout).await {
        Ok(all) => {
            for h in all {
                let id = format!("health/{}", h.role);
                checks.push(match h.result {
                    Ok(r) => {
                        up.push(h.role);
                        check(
                            id,
                            true,
                            format!("leaf {}, up {} s", r.leaf_serial, r.uptime_ms / 1000),
                        )
                    }
                    Err(e) => check(id, false, e),
                });
            }
        }
        Err(e) => checks.push(check("health", false, format!("operator material: {e}"))),
    }
    up
}

/// Whether a role that answered the real operator refused a probe at the handshake. A port
/// that is down fails a probe the same way, so a refusal counts only from a role that answered
/// its health check (a server closing the connection on a client certificate is seen as an
/// alert, a reset or a broken pipe, whichever arrives first).
fn refused_by_live_role(answer: &Answer, role: &str, up: &[String]) -> (bool, &'static str) {
    if !up.iter().any(|r| r == role) {
        return (
            false,
            "; the role did not answer its health check, so no refusal is proved",
        );
    }
    // The probe's own refusal of the server is no refusal by the server.
    if answer.causes.contains("invalid peer certificate") {
        return (false, "; the probe refused the server's certificate");
    }
    (reach_port::probe::refused_at_handshake(answer.code), "")
}

/// Calls one method the port table grants another caller and not the operator. A port that
/// grants the operator nothing refuses it at the handshake; one that grants it other methods
/// answers PERMISSION_DENIED.
async fn authorization(
    manifest: &Manifest,
    layout: &StateLayout,
    up: &[String],
    checks: &mut Vec<Check>,
) {
    let Ok(material) = operator_material(manifest, layout) else {
        return; // reported by `health`
    };
    for port in &manifest.ports {
        let granted = |m: &str| {
            port.grants
                .iter()
                .any(|g| g.caller == OPERATOR && g.method == m)
        };
        // A read where the port has one: should a broken port admit the probe, its empty
        // message then changes nothing.
        let reads = |m: &str| {
            ["Get", "List", "Read", "Check", "Status"]
                .iter()
                .any(|p| m.starts_with(p))
        };
        let candidates: Vec<_> = port.grants.iter().filter(|g| !granted(&g.method)).collect();
        let Some(grant) = candidates
            .iter()
            .find(|g| reads(&g.method))
            .or(candidates.first())
            .copied()
        else {
            continue;
        };
        let path = port.path(&grant.method);
        let answer = probe(manifest, layout, &material, &port.name, &path).await;
        let admitted = port.grants.iter().any(|g| g.caller == OPERATOR);
        let (refused, how, note) = if admitted {
            (
                answer.code == tonic::Code::PermissionDenied,
                "authorization",
                "",
            )
        } else {
            let (refused, note) = refused_by_live_role(&answer, port.server.as_str(), up);
            (refused, "handshake", note)
        };
        checks.push(check(
            format!("authorization/{}", port.name),
            refused,
            format!(
                "operator calling {path} (granted to {}): {answer}; refusal expected at the {how}{note}",
                grant.caller
            ),
        ));
    }
}

/// How one probing call ended: its status code and the causes below it.
struct Answer {
    code: tonic::Code,
    causes: String,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.code)?;
        if !self.causes.is_empty() {
            write!(f, " ({})", self.causes)?;
        }
        Ok(())
    }
}

/// A unary call of `path` with an empty message to `port`'s manifest server, presenting
/// `material`, on a channel that connects at the call (so a refused handshake is the call's
/// answer).
async fn probe(
    manifest: &Manifest,
    layout: &StateLayout,
    material: &std::sync::Arc<reach_port::PortMaterial>,
    port: &str,
    path: &str,
) -> Answer {
    let Some(p) = manifest.port(port) else {
        return Answer {
            code: tonic::Code::NotFound,
            causes: format!("no port {port}"),
        };
    };
    let channel = reach_port::connect_lazy(
        reach_port::PortAddress::Unix(layout.socket_path(port)),
        material,
        manifest.principal(p.server.as_str()),
    );
    let Ok(path) = http::uri::PathAndQuery::try_from(path) else {
        return Answer {
            code: tonic::Code::InvalidArgument,
            causes: format!("bad path {path}"),
        };
    };
    let call = reach_port::probe::call_empty(channel, path, tonic::Request::new(()));
    match tokio::time::timeout(CHECK_TIMEOUT, call).await {
        Ok(Ok(())) => Answer {
            code: tonic::Code::Ok,
            causes: String::new(),
        },
        Ok(Err(s)) => {
            let below = std::error::Error::source(&s).map(reach_port::probe::error_chain);
            let causes = [Some(s.message().to_owned()), below]
                .into_iter()
                .flatten()
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            Answer {
                code: s.code(),
                causes,
            }
        }
        Err(_) => Answer {
            code: tonic::Code::DeadlineExceeded,
            causes: String::new(),
        },
    }
}

/// Presents a leaf naming the operator, issued by a fresh root of the manifest's trust domain
/// that no bundle pins, to every role's health port (which the real operator may call): each
/// must refuse it at the handshake.
async fn foreign_root(
    manifest: &Manifest,
    layout: &StateLayout,
    up: &[String],
    checks: &mut Vec<Check>,
) {
    let (_dir, material) = match forge(manifest, layout) {
        Ok(m) => m,
        Err(e) => {
            checks.push(check(
                "identity",
                false,
                format!("cannot forge a leaf: {e}"),
            ));
            return;
        }
    };
    for role in &manifest.roles {
        let port = format!("{}.health", role.name);
        let answer = probe(
            manifest,
            layout,
            &material,
            &port,
            "/reach.health.v1.Health/Check",
        )
        .await;
        let (refused, note) = refused_by_live_role(&answer, role.name.as_str(), up);
        checks.push(check(
            format!("identity/{}", role.name),
            refused,
            format!("a leaf naming the operator from an unpinned root: {answer}{note}"),
        ));
    }
}

/// The forged client material: a fresh root's leaf for the operator, and a bundle of that root
/// and the real ones (so the real server is still verified). The directory lives as long as
/// the material.
fn forge(
    manifest: &Manifest,
    layout: &StateLayout,
) -> Result<(tempfile::TempDir, std::sync::Arc<reach_port::PortMaterial>), String> {
    let dir = tempfile::Builder::new()
        .prefix("reach-audit-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let principal =
        Principal::new(manifest.trust_domain.clone(), OPERATOR).map_err(|e| e.to_string())?;
    let root = TrustRoot::generate(&manifest.trust_domain, SystemTime::now())
        .map_err(|e| e.to_string())?;
    root.provision(dir.path(), &principal, Duration::from_secs(600))
        .map_err(|e| e.to_string())?;
    let bundle = |dir: &Path| dir.join(reach_identity::files::TRUST_BUNDLE);
    let read =
        |dir: &Path| reach_identity::files::read_secret(&bundle(dir)).map_err(|e| e.to_string());
    let both = [read(dir.path())?, read(&layout.secret_dir(OPERATOR))?].concat();
    reach_identity::files::write_secret(&bundle(dir.path()), &both).map_err(|e| e.to_string())?;
    let material = reach_port::PortMaterial::load(dir.path(), manifest.trust_domain.clone())
        .map_err(|e| e.to_string())?;
    Ok((dir, material))
}

/// A secret file: its path and whether its bytes are secret (a public half is not).
struct SecretFile {
    path: PathBuf,
    secret: bool,
}

/// The secret files whose bytes are searched for: each principal's leaf key and each role's
/// credentials. The trust root's key is not read here (only Scribe's identities code reads
/// it; `secrets/modes` covers its directory).
fn secret_files(manifest: &Manifest, layout: &StateLayout) -> Vec<SecretFile> {
    let mut out = Vec::new();
    let principals = manifest
        .roles
        .iter()
        .map(|r| r.name.as_str())
        .chain([OPERATOR]);
    for p in principals {
        out.push(SecretFile {
            path: layout.secret_dir(p).join(reach_identity::files::LEAF_KEY),
            secret: true,
        });
    }
    for role in &manifest.roles {
        for c in &role.credentials {
            out.push(SecretFile {
                path: layout.secret_dir(role.name.as_str()).join(&c.file),
                secret: c.kind != CredentialKind::InteractionSealPublic,
            });
        }
    }
    out.retain(|f| f.path.exists());
    out
}

/// Every file and directory under the secret directories and Scribe's directory is private
/// enough (`reach_identity::files::private_enough`): nothing for others, and read access for
/// the body user's own group only (how a Quadlet role reads its bind-mounted secrets).
fn modes(manifest: &Manifest, layout: &StateLayout) -> Check {
    let mut roots: Vec<PathBuf> = manifest
        .roles
        .iter()
        .map(|r| layout.secret_dir(r.name.as_str()))
        .chain([layout.secret_dir(OPERATOR), layout.scribe_dir()])
        .collect();
    roots.retain(|d| d.exists());
    if roots.is_empty() {
        // Nothing to look at is no evidence: the state directory is not this body's.
        return check(
            "secrets/modes",
            false,
            format!("no secret directory under {}", layout.root().display()),
        );
    }
    let mut open = Vec::new();
    let mut seen = 0;
    let own = reach_identity::files::own_group();
    for root in &roots {
        walk(root, &mut |path, meta| {
            seen += 1;
            let mode = meta.permissions().mode();
            if !reach_identity::files::private_enough(mode, meta.gid(), own) {
                open.push(format!(
                    "{} {:o} group {}",
                    path.display(),
                    mode & 0o777,
                    meta.gid()
                ));
            }
        });
    }
    if open.is_empty() {
        check(
            "secrets/modes",
            true,
            format!(
                "{seen} secret files and directories, none open to others or to a foreign group"
            ),
        )
    } else {
        check(
            "secrets/modes",
            false,
            format!("open to others or a foreign group: {}", open.join(", ")),
        )
    }
}

/// Every principal's leaf in the state directory is this deployment's, for that principal, and
/// has more than Scribe's renewal window left (less means no renewal ran: a leaf lasts a day).
fn leaves(manifest: &Manifest, layout: &StateLayout) -> Check {
    const ID: &str = "identity/leaves";
    let now = SystemTime::now();
    let window = reach_scribe::identities::RENEW_BEFORE;
    let mut short = Vec::new();
    let mut nearest: Option<(Duration, String)> = None;
    for p in manifest.principals() {
        let name = p.name().to_owned();
        let info = reach_identity::files::read_leaf_cert(&layout.secret_dir(&name))
            .map_err(|e| e.to_string())
            .and_then(|der| {
                reach_identity::inspect_leaf(&der, &manifest.trust_domain, now)
                    .map_err(|e| format!("{name}'s leaf: {e}"))
            });
        let info = match info {
            Ok(i) if i.principal == p => i,
            Ok(i) => {
                short.push(format!("{name}'s leaf names {}", i.principal));
                continue;
            }
            Err(e) => {
                short.push(e);
                continue;
            }
        };
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(info.not_after_unix.max(0) as u64);
        let left = end.duration_since(now).unwrap_or_default();
        if left < window {
            short.push(format!("{name}'s leaf ends in {}", hours_minutes(left)));
        }
        if nearest.as_ref().is_none_or(|(d, _)| left < *d) {
            nearest = Some((left, name));
        }
    }
    match (short.is_empty(), nearest) {
        (true, Some((left, name))) => check(
            ID,
            true,
            format!(
                "{} leaves, the nearest end in {} ({name})",
                manifest.principals().len(),
                hours_minutes(left)
            ),
        ),
        _ => check(
            ID,
            false,
            format!(
                "{} (renew with `reach scribe identities --state DIR`)",
                short.join(", ")
            ),
        ),
    }
}

fn hours_minutes(d: Duration) -> String {
    let m = d.as_secs() / 60;
    format!("{}h {:02}m", m / 60, m % 60)
}

/// Each principal's secret directory holds only what the manifest gives it: its leaf, the trust
/// bundle and its own credentials. A credential in another role's directory (core's, above all:
/// core holds none) fails, naming who the manifest gives it to.
fn holders(manifest: &Manifest, layout: &StateLayout) -> Check {
    const ID: &str = "secrets/holders";
    let identity = [
        reach_identity::files::LEAF_CERT,
        reach_identity::files::LEAF_KEY,
        reach_identity::files::TRUST_BUNDLE,
    ];
    let granted = |file: &str| -> Vec<&str> {
        manifest
            .roles
            .iter()
            .filter(|r| r.credentials.iter().any(|c| c.file == file))
            .map(|r| r.name.as_str())
            .collect()
    };
    let principals = manifest
        .roles
        .iter()
        .map(|r| (r.name.as_str(), Some(r)))
        .chain([(OPERATOR, None)]);
    let (mut dirs, mut files, mut stray) = (0, 0, Vec::new());
    for (name, role) in principals {
        let Ok(entries) = std::fs::read_dir(layout.secret_dir(name)) else {
            continue;
        };
        dirs += 1;
        for e in entries.flatten() {
            files += 1;
            let file = e.file_name().to_string_lossy().into_owned();
            let own = identity.contains(&file.as_str())
                || role.is_some_and(|r| r.credentials.iter().any(|c| c.file == file));
            if !own {
                let to = granted(&file);
                stray.push(if to.is_empty() {
                    format!("{name} holds {file}, which the manifest gives no role")
                } else {
                    format!(
                        "{name} holds {file}, which the manifest gives {}",
                        to.join(", ")
                    )
                });
            }
        }
    }
    if dirs == 0 {
        return check(
            ID,
            false,
            format!("no secret directory under {}", layout.root().display()),
        );
    }
    if stray.is_empty() {
        check(
            ID,
            true,
            format!("{dirs} secret directories, {files} files, each its holder's own"),
        )
    } else {
        check(ID, false, stray.join(", "))
    }
}

fn walk(path: &Path, visit: &mut impl FnMut(&Path, &std::fs::Metadata)) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    visit(path, &meta);
    if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for e in entries.flatten() {
            walk(&e.path(), visit);
        }
    }
}

/// The bytes searched for: each readable secret file's, trimmed, named by its path (too short
/// a value is left out: it would match by chance).
fn secret_values(secrets: &[SecretFile]) -> Vec<(String, Vec<u8>)> {
    secrets
        .iter()
        .filter(|f| f.secret)
        .filter_map(|f| {
            let bytes = std::fs::read(&f.path).ok()?;
            let trimmed = bytes.trim_ascii().to_vec();
            (trimmed.len() >= MIN_SECRET_BYTES).then(|| (f.path.display().to_string(), trimmed))
        })
        .collect()
}

/// Each role's main process: Podman's list, or `run/roles`, which `reach up` keeps.
fn role_processes(layout: &StateLayout, processes: &Processes) -> Vec<RoleProcess> {
    match processes {
        Processes::Listed(pids) => pids.clone(),
        Processes::Launcher => std::fs::read_to_string(layout.run_dir().join("roles"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (role, pid) = l.split_once(' ')?;
                Some(RoleProcess {
                    role: role.to_owned(),
                    pid: pid.parse().ok()?,
                    configured_env: None,
                    log_command: None,
                })
            })
            .collect(),
    }
}

/// No secret's bytes in any running role's environment or command line (skipped when no role
/// process is known).
fn exposure(
    values: &[(String, Vec<u8>)],
    layout: &StateLayout,
    processes: Processes,
) -> [Check; 2] {
    let pids = role_processes(layout, &processes);
    if pids.is_empty() {
        let skip =
            |id: &str| Check::skipped(id, "no role process known (no run/roles, none listed)");
        return [skip("secrets/environment"), skip("secrets/command-line")];
    }
    if values.is_empty() {
        // Nothing to search for is no evidence either.
        let none = |id: &str| check(id, false, "no secret file readable to search for");
        return [none("secrets/environment"), none("secrets/command-line")];
    }
    let scan = |file: &str, id: &str| {
        let mut found = Vec::new();
        let (mut read, mut configured) = (0, 0);
        for p in &pids {
            let (role, pid) = (&p.role, p.pid);
            let bytes = match std::fs::read(format!("/proc/{pid}/{file}")) {
                Ok(b) => b,
                // Another user's process: its environment as its manager configured it.
                Err(_) if file == "environ" && p.configured_env.is_some() => {
                    configured += 1;
                    p.configured_env
                        .as_deref()
                        .unwrap_or_default()
                        .join("\0")
                        .into_bytes()
                }
                Err(e) => {
                    found.push(format!("{role}: /proc/{pid}/{file}: {e}"));
                    continue;
                }
            };
            read += 1;
            for (name, secret) in values {
                if bytes.windows(secret.len()).any(|w| w == secret.as_slice()) {
                    found.push(format!("{role} holds {name}"));
                }
            }
        }
        if found.is_empty() {
            let how = if configured > 0 {
                format!(" ({configured} as their manager configured them)")
            } else {
                String::new()
            };
            check(
                id,
                true,
                format!(
                    "{read} role processes{how}, {} secrets, none exposed",
                    values.len()
                ),
            )
        } else {
            check(id, false, found.join(", "))
        }
    };
    [
        scan("environ", "secrets/environment"),
        scan("cmdline", "secrets/command-line"),
    ]
}

/// The operator's channel to `port`, or why there is none.
async fn operator_port(
    manifest: &Manifest,
    layout: &StateLayout,
    port: &str,
) -> Result<tonic::transport::Channel, String> {
    let material = operator_material(manifest, layout).map_err(|e| e.to_string())?;
    operator_channel(manifest, layout, &material, port).await
}

fn status_text(s: tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// The vault's checks from one status read: `vault/serving`, the recovery policy this build
/// must honour (`recovery/policy`), its backup (`recovery/backup`) and the reconciliations
/// the vault recorded (`recovery/reconciliation`).
async fn vault(manifest: &Manifest, layout: &StateLayout) -> [Check; 4] {
    let asked = async {
        let ch = operator_port(manifest, layout, "core.trail").await?;
        TrailClient::new(ch)
            .vault_status(VaultStatusRequest {})
            .await
            .map(|r| r.into_inner())
            .map_err(status_text)
    };
    let asked = asked.await;
    let serving = match &asked {
        Ok(s) => check(
            "vault/serving",
            s.status == "SERVING",
            format!("{} ({})", s.status, s.backend),
        ),
        Err(e) => check("vault/serving", false, e.clone()),
    };
    let policy = manifest.recovery.policy;
    let horizon = manifest.recovery.idempotency_horizon_hours;
    let state = match &asked {
        Ok(s) => format!("the vault is {}", s.status),
        Err(e) => format!("the vault did not answer ({e})"),
    };
    let policy_check = match policy.honoured_by_this_build() {
        // Without the vault's answer the policy's state is unknown: no evidence, no pass.
        Ok(()) => check(
            "recovery/policy",
            asked.is_ok(),
            format!(
                "{}: no backup is kept; a lost vault is declared lost and serves nothing until \
                 `reach vault reconcile` or the {horizon} h idempotency horizon; {state}",
                policy.as_str()
            ),
        ),
        Err(r) => check(
            "recovery/policy",
            false,
            format!("{}: {r}; {state}", r.code()),
        ),
    };
    let backup = Check::skipped(
        "recovery/backup",
        format!(
            "this build keeps no backup (policy {}): loss, declared and reconciled, is the \
             recovery (recovery/reconciliation)",
            policy.as_str()
        ),
    );
    let reconciliation = match &asked {
        Err(e) => check("recovery/reconciliation", false, e.clone()),
        Ok(s) if s.status != "SERVING" => check(
            "recovery/reconciliation",
            false,
            format!(
                "the vault is {}: a lost, fresh or rolled-back vault waits for `reach vault \
                 reconcile` ({} reconciliation(s) recorded)",
                s.status,
                s.reconciliations.len()
            ),
        ),
        Ok(s) => match s.reconciliations.last() {
            Some(r) => check(
                "recovery/reconciliation",
                true,
                format!(
                    "{} reconciliation(s); the latest {} by {} at unix {} ms: {}",
                    s.reconciliations.len(),
                    r.kind,
                    r.recorded_by,
                    r.recorded_at_ms,
                    r.note
                ),
            ),
            None => check(
                "recovery/reconciliation",
                false,
                "the vault serves with no reconciliation recorded",
            ),
        },
    };
    [serving, policy_check, backup, reconciliation]
}

async fn corpus(manifest: &Manifest, layout: &StateLayout) -> Check {
    let asked = async {
        let ch = operator_port(manifest, layout, "corpus-builder.admin").await?;
        CorpusAdminClient::new(ch)
            .status(StatusRequest {})
            .await
            .map(|r| r.into_inner().sources)
            .map_err(status_text)
    };
    match asked.await {
        Ok(sources) => match sources.iter().find(|s| !s.active_snapshot_id.is_empty()) {
            Some(s) => check(
                "corpus/fresh",
                s.freshness == "fresh",
                format!(
                    "{} snapshot {} of {} is {}",
                    s.source, s.active_snapshot_id, s.admitted_revision, s.freshness
                ),
            ),
            None => check("corpus/fresh", false, "no active snapshot"),
        },
        Err(e) => check("corpus/fresh", false, e),
    }
}

async fn host() -> Host {
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned());
    Host {
        os,
        kernel,
        uid: std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid()),
        podman: first_line("podman", &["--version"]).await,
        systemd: first_line("systemctl", &["--version"]).await,
        cgroup: if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            "v2"
        } else {
            "v1"
        },
    }
}

/// The first line a tool prints, if it runs.
async fn first_line(tool: &str, args: &[&str]) -> Option<String> {
    let out = tokio::process::Command::new(tool)
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CHECK_TIMEOUT, out).await.ok()?.ok()?;
    out.status
        .success()
        .then(|| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .flatten()
}
