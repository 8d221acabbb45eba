//! `reach compromise ROLE`: the runbook of a service compromise (seed 001, "Restart,
//! uncertainty, and compromise": "revoke leases/credentials, quarantine output, mark
//! tasks/deliveries as tainted, and preserve bounded secret-free correlation"), in order:
//!
//! 1. **Leases and work** (core's ledger, the one mechanism `reach vault taint` uses): every
//!    lease the role's principal holds is revoked, its SUBMITTING deliveries become UNKNOWN,
//!    attempts and Intercom tasks addressed to it are settled or flagged, and each touched
//!    record is marked tainted: never handed out again, settled only from independent evidence.
//!    That is the quarantine of its pending outputs: nothing it produced and the ledger has not
//!    settled is acted on.
//! 2. **Its leaf** (Scribe): the port layer has no revocation list, so the role's leaf is made
//!    unacceptable by taking away what it chains to. Its leaf is withheld (removed from its
//!    secret directory, and no issuance gives it another, `reach_scribe::identities::withhold`),
//!    the root is rotated (every other principal gets a leaf under a new root, its bundle
//!    trusting both), and once every other live role serves its new leaf the previous root is
//!    retired: from then on every port refuses the old leaf at the handshake, which this
//!    command proves by presenting it to a port that admitted it before.
//! 3. **Next steps** the seed names, printed: rebuild the role, revoke its external
//!    credentials at their issuers, reconcile the tainted records, and what a root, operator
//!    or control-plane compromise needs instead.
//!
//! A body under Quadlet (`--podman`) reads its leaves from the state directory too (each role's
//! secret directory is mounted into its container): the compromised role's unit is stopped, and
//! every other role takes each step at its next material reload, as under the launcher. No role
//! restarts and no call fails during the rotation.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_port::material::RELOAD_INTERVAL;
use reach_scribe::identities::{self, Rotation};

/// How long every other live role has to serve its leaf under the new root before the previous
/// root is retired anyway (a role that has not reloaded by then is refused until it does).
const SWITCH_DEADLINE: Duration = Duration::from_secs(20);
/// How long the proof's probe may take (a refused handshake ends it at once).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(clap::Args, Debug)]
pub struct CompromiseArgs {
    /// The compromised role, e.g. egress-discord.
    role: String,
    /// Why (kept in the ledger's taint record).
    #[arg(long, required_unless_present = "reinstate")]
    reason: Option<String>,
    /// After the role was rebuilt: lift the withholding of its leaf and issue it a fresh one.
    #[arg(long, conflicts_with = "reason")]
    reinstate: bool,
    #[command(flatten)]
    target: crate::BodyTarget,
}

pub async fn run(args: CompromiseArgs) -> anyhow::Result<ExitCode> {
    let m = args.target.manifest()?;
    let Some(reason) = args.reason.as_deref() else {
        let state = StateLayout::new(&args.target.target.state);
        return reinstate(&m, &state, &args.role, args.target.podman);
    };
    let role = m
        .role(&args.role)
        .with_context(|| format!("the manifest has no role `{}`", args.role))?;
    let name = role.name.as_str().to_owned();
    let principal = m.principal(&name).to_string();
    let state = StateLayout::new(&args.target.target.state);
    let layout = args.target.layout(&m)?;

    // The leaf as it stands, kept (in a private directory) to prove its refusal afterwards.
    let old = tempfile::tempdir()?;
    let held = copy_leaf(&state, &name, old.path())?;

    // 1. Leases and in-flight work, in core's ledger. Core not answering does not hold back
    // the revocation of the leaf: the taint is said to be owed, and the command fails at the end.
    let mut owed = Vec::new();
    for key in taint_names(&m, &name) {
        println!("1. leases and work of {key}");
        let reason = format!("compromise: {reason}");
        let report = match crate::vault::mark_tainted(&m, &layout, &key, &reason).await {
            Ok(r) => r,
            Err(e) => {
                println!("   NOT tainted: core's ledger did not answer ({e:#})");
                owed.push(format!(
                    "reach vault taint --principal {key} --reason {reason:?} --state {}",
                    args.target.target.state.display()
                ));
                continue;
            }
        };
        println!(
            "   taint {} recorded: {} record(s) tainted, never resent",
            report.taint_id,
            report.records.len()
        );
        crate::vault::print_tainted(&report.records, "   ");
    }

    // 2. Its leaf: withheld, then the root it chains to rotated out.
    println!("2. the leaf of {principal}");
    identities::withhold(&state, &name)?;
    println!("   withheld: removed from its secret directory; no issuance gives it another");
    if args.target.podman {
        // Its container is stopped: its sessions end with it, and nothing restarts it with
        // secrets it should no longer hold (the rollouts below skip a withheld role).
        let manager = crate::host_checks::manager_of(nix::unistd::getuid())?;
        let unit = reach_scribe::quadlet::service_name(&name);
        let status = manager
            .command()
            .args(["stop", &unit])
            .status()
            .with_context(|| format!("{} stop {unit}", manager.systemctl()))?;
        if !status.success() {
            bail!("{} stop {unit}: {status}", manager.systemctl());
        }
        println!("   {unit} stopped");
    }
    let now = SystemTime::now;
    // Every role trusts both roots before any leaf chains to the new one.
    identities::write_bundles(&m, &state, Rotation::Root, now())?;
    tokio::time::sleep(RELOAD_INTERVAL * 4).await;
    let issued = identities::issue_leaves(&m, &state, Rotation::Root, now())?;
    println!(
        "   root rotated: {} leaves issued under the new root ({name} not among them)",
        issued.len()
    );
    let waited = wait_for_new_leaves(&m, &layout, &state, &name).await;
    identities::write_bundles(&m, &state, Rotation::RetirePreviousRoot, now())?;
    tokio::time::sleep(RELOAD_INTERVAL * 4).await;
    match waited {
        Ok(n) => println!("   previous root retired after {n} live roles served their new leaf"),
        Err(late) => println!(
            "   previous root retired; not yet on their new leaf (refused until they reload): {late}"
        ),
    }
    let proof = if held {
        prove_refused(&m, &layout, &state, &name, old.path()).await
    } else {
        format!("{name} held no leaf in the state directory")
    };
    println!("   {proof}");

    println!("3. next steps (seed 001, \"Restart, uncertainty, and compromise\")");
    print!("{}", next_steps(&m, &name, &args.target));
    if owed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "reach: the ledger's taint is owed; once core serves, run: {}",
        owed.join("; ")
    );
    Ok(ExitCode::FAILURE)
}

/// The names core's ledger keys `role`'s work by: its principal (the leases it holds) and, for
/// egress-provider, the destinations it sends to, which attempts and Intercom tasks are
/// addressed to (core's `settings.portal.endpoint` and `settings.intercom.peer`).
fn taint_names(m: &Manifest, role: &str) -> Vec<String> {
    let mut names = vec![m.principal(role).to_string()];
    let egress_provider =
        m.role(role).map(|r| r.kind) == Some(reach_manifest::schema::RoleKind::EgressProvider);
    if egress_provider && let Some(core) = m.roles.iter().find(|r| r.name.as_str() == "core") {
        for (table, key) in [("portal", "endpoint"), ("intercom", "peer")] {
            if let Some(v) = core
                .settings
                .get(table)
                .and_then(|t| t.get(key))
                .and_then(|v| v.as_str())
            {
                names.push(v.to_owned());
            }
        }
    }
    names
}

/// Copies `role`'s leaf, key and bundle into `to`; false if it holds no leaf.
fn copy_leaf(state: &StateLayout, role: &str, to: &std::path::Path) -> anyhow::Result<bool> {
    use reach_identity::files::{LEAF_CERT, LEAF_KEY, TRUST_BUNDLE, read_secret, write_secret};
    let from = state.secret_dir(role);
    if !from.join(LEAF_CERT).exists() {
        return Ok(false);
    }
    for file in [LEAF_CERT, LEAF_KEY, TRUST_BUNDLE] {
        write_secret(&to.join(file), &read_secret(&from.join(file))?)?;
    }
    Ok(true)
}

/// Waits until every live role other than `role` serves the leaf its secret directory holds
/// now; the count of those that do, or the names of those that did not in time.
async fn wait_for_new_leaves(
    m: &Manifest,
    layout: &StateLayout,
    state: &StateLayout,
    role: &str,
) -> Result<usize, String> {
    let deadline = Instant::now() + SWITCH_DEADLINE;
    loop {
        let mut late = Vec::new();
        let mut served = 0;
        if let Ok(health) = reach_launcher::status(m, layout).await {
            for h in health.iter().filter(|h| h.role != role) {
                let Ok(r) = &h.result else {
                    continue; // down: nothing to wait for
                };
                if Some(&r.leaf_serial) == file_serial(m, state, &h.role).as_ref() {
                    served += 1;
                } else {
                    late.push(h.role.clone());
                }
            }
        }
        if late.is_empty() {
            return Ok(served);
        }
        if Instant::now() > deadline {
            return Err(late.join(", "));
        }
        tokio::time::sleep(RELOAD_INTERVAL).await;
    }
}

fn file_serial(m: &Manifest, state: &StateLayout, role: &str) -> Option<String> {
    let der = reach_identity::files::read_leaf_cert(&state.secret_dir(role)).ok()?;
    reach_identity::inspect_leaf(&der, &m.trust_domain, SystemTime::now())
        .ok()
        .map(|i| i.serial_hex)
}

/// Presents the withheld leaf (trusting the current root, so the server's leaf verifies) to a
/// port the manifest lets `role` call, served by a role that answers the operator: it must be
/// refused at the handshake. Says what was observed.
async fn prove_refused(
    m: &Manifest,
    layout: &StateLayout,
    state: &StateLayout,
    role: &str,
    old: &std::path::Path,
) -> String {
    use reach_identity::files::{TRUST_BUNDLE, read_secret, write_secret};
    let current = match read_secret(&state.secret_dir("operator").join(TRUST_BUNDLE)) {
        Ok(b) => b,
        Err(e) => return format!("cannot read the current bundle: {e}"),
    };
    // The old root too: the material checks its own leaf chains to its bundle. The server
    // must refuse the leaf; the probe trusting more changes nothing of that.
    let previous = match read_secret(&old.join(TRUST_BUNDLE)) {
        Ok(b) => b,
        Err(e) => return format!("cannot read the old bundle: {e}"),
    };
    if let Err(e) = write_secret(&old.join(TRUST_BUNDLE), &[current, previous].concat()) {
        return format!("cannot prepare the probe: {e}");
    }
    let material = match reach_port::PortMaterial::load(old, m.trust_domain.clone()) {
        Ok(material) => material,
        Err(e) => return format!("the old leaf does not load: {e}"),
    };
    let up: Vec<String> = match reach_launcher::status(m, layout).await {
        Ok(h) => h
            .into_iter()
            .filter(|h| h.result.is_ok())
            .map(|h| h.role)
            .collect(),
        Err(e) => return format!("the operator's material: {e}"),
    };
    // A read where the port grants the role one: should the port still admit the leaf, its
    // empty message then changes nothing.
    let reads = |method: &str| {
        ["List", "Get", "Read", "Check", "Status"]
            .iter()
            .any(|r| method.starts_with(r))
    };
    let Some((port, grant)) = m.ports.iter().find_map(|p| {
        let live = up.iter().any(|u| u == p.server.as_str());
        let mine = || p.grants.iter().filter(|g| g.caller == role);
        let g = mine()
            .find(|g| reads(&g.method))
            .or_else(|| mine().next())?;
        live.then_some((p, g))
    }) else {
        return format!("no live port admits {role}; every port pins only the new root");
    };
    let path = port.path(&grant.method);
    let code = probe(m, layout, &material, &port.name, &path).await;
    if reach_port::probe::refused_at_handshake(code) {
        format!(
            "the old leaf is refused: {} (which admitted {role} before) refused it at the \
             handshake ({code:?}) calling {path}",
            port.server
        )
    } else {
        format!(
            "WARNING: {} answered the old leaf with {code:?} calling {path}: it is not refused",
            port.server
        )
    }
}

async fn probe(
    m: &Manifest,
    layout: &StateLayout,
    material: &Arc<reach_port::PortMaterial>,
    port: &str,
    path: &str,
) -> tonic::Code {
    let Some(p) = m.port(port) else {
        return tonic::Code::NotFound;
    };
    let channel = reach_port::connect_lazy(
        reach_port::PortAddress::Unix(layout.socket_path(port)),
        material,
        m.principal(p.server.as_str()),
    );
    let Ok(path) = tonic::codegen::http::uri::PathAndQuery::try_from(path) else {
        return tonic::Code::InvalidArgument;
    };
    let call = reach_port::probe::call_empty(channel, path, tonic::Request::new(()));
    match tokio::time::timeout(PROBE_TIMEOUT, call).await {
        Ok(Ok(())) => tonic::Code::Ok,
        Ok(Err(s)) => s.code(),
        Err(_) => tonic::Code::DeadlineExceeded,
    }
}

/// What the operator does next: the seed's steps, with this body's names.
pub fn next_steps(m: &Manifest, role: &str, target: &crate::BodyTarget) -> String {
    let state = target.target.state.display();
    let mut s = String::new();
    let mut step = |text: String| s.push_str(&format!("   - {text}\n"));
    // Core holds the vault, ward the authority that mints every decision and grant: whoever
    // held either could have written what the ledger says, so the ledger's taint proves less.
    if matches!(role, "core" | "ward") {
        step(format!(
            "{role} holds the body's {}: treat this as a compromise of the body (the last step)",
            if role == "core" { "vault" } else { "authority" }
        ));
    }
    step(format!(
        "stop {role} and rebuild it from its trusted pinned image; then give it a fresh leaf \
         with `reach compromise {role} --reinstate --state {state}`"
    ));
    use reach_manifest::CredentialKind as K;
    let held = |generated: bool| -> Vec<String> {
        m.role(role)
            .map(|r| {
                r.credentials
                    .iter()
                    .filter(|c| c.kind != K::InteractionSealPublic)
                    .filter(|c| matches!(c.kind, K::WardKey | K::InteractionSealKey) == generated)
                    .map(|c| format!("{} ({})", c.file, c.kind.as_str()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (external, generated) = (held(false), held(true));
    if external.is_empty() {
        step(format!("{role} held no external credential to revoke"));
    } else {
        step(format!(
            "revoke at their issuers the credentials {role} held, then set new ones with \
             `reach secret set {role} FILE --state {state}`: {}",
            external.join(", ")
        ));
    }
    if !generated.is_empty() {
        step(format!(
            "replace the keys Scribe generated for {role}: {} (the interaction-seal pair with \
             `reach scribe identities --rotate interaction-seal --state {state}`)",
            generated.join(", ")
        ));
    }
    step(format!(
        "reconcile the tainted records: an UNKNOWN delivery or INDETERMINATE attempt is settled \
         only from independent evidence (a channel read, the provider's record), never resent; \
         `reach trail ID --state {state}` shows each"
    ));
    step(format!(
        "keep {role}'s logs and the taint record: the secret-free correlation of what it did"
    ));
    step(
        "if the root, the operator or the VPS control plane may be compromised, rebuild the \
         body instead: stop Reach, withdraw routes, callback DNS and cards, revoke every \
         potentially exposed Discord, provider, A2A, operator, source and deployment \
         credential, mark and reconcile uncertain external effects, then destroy and \
         reprovision from a trusted pinned image, restore only independently verified \
         non-secret records, rebuild the corpus, issue disjoint credentials and enroll from \
         zero authority"
            .to_owned(),
    );
    s
}

/// `reach compromise ROLE --reinstate`: after the rebuild, lift the withholding and issue the
/// role a fresh leaf under the current root.
pub fn reinstate(
    m: &Manifest,
    state: &StateLayout,
    role: &str,
    podman: bool,
) -> anyhow::Result<ExitCode> {
    if m.role(role).is_none() {
        bail!("the manifest has no role `{role}`");
    }
    if !identities::reinstate(state, role)? {
        bail!("{role}'s leaf is not withheld");
    }
    let issued = identities::issue_leaves(m, state, Rotation::IfNeeded, SystemTime::now())?;
    println!("{role} reinstated; leaves issued: {}", issued.join(", "));
    if podman {
        let unit = reach_scribe::quadlet::service_name(role);
        println!("start {unit} so {role} serves its new leaf");
    } else {
        println!("restart {role} so it serves its new leaf");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// egress-provider's attempts and Intercom tasks are addressed to the destinations it sends
    /// to, not to its principal: those are tainted too. Another role's work is keyed by its
    /// principal alone.
    #[test]
    fn an_egress_providers_work_is_found_by_its_destinations() {
        let text = reach_manifest::VPS_PUBLIC.replacen(
            r#"settings = { corpus_from = "corpus-builder", refusals = "post" }"#,
            r#"settings = { corpus_from = "corpus-builder", portal = { endpoint = "https://provider.invalid/v1/chat/completions" }, intercom = { peer = "https://peer.invalid/a2a" } }"#,
            1,
        );
        assert_ne!(text, reach_manifest::VPS_PUBLIC);
        let m = reach_manifest::load(&text).unwrap();
        assert_eq!(
            taint_names(&m, "egress-provider"),
            [
                "spiffe://reach.local/egress-provider",
                "https://provider.invalid/v1/chat/completions",
                "https://peer.invalid/a2a",
            ]
        );
        assert_eq!(
            taint_names(&m, "egress-discord"),
            ["spiffe://reach.local/egress-discord"]
        );
    }
}
