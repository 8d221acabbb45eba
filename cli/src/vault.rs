//! `reach trail` and `reach vault`: the operator's view of core's ledger, over core's trail
//! port with the operator's leaf.

use std::process::ExitCode;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::{
    GetTrailRequest, MarkTaintedRequest, ReconcileVaultRequest, VaultStatusRequest,
};

async fn client(
    m: &Manifest,
    layout: &StateLayout,
) -> anyhow::Result<TrailClient<tonic::transport::Channel>> {
    let material = reach_launcher::operator_material(m, layout)?;
    let ch = reach_launcher::operator_channel(m, layout, &material, "core.trail")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(TrailClient::new(ch))
}

pub async fn trail(m: &Manifest, layout: &StateLayout, key: &str) -> anyhow::Result<ExitCode> {
    let edges = client(m, layout)
        .await?
        .get_trail(GetTrailRequest {
            key: key.to_owned(),
        })
        .await?
        .into_inner()
        .edges;
    if edges.is_empty() {
        println!("no committed record for {key}");
        return Ok(ExitCode::FAILURE);
    }
    print!("{}", render_trail(&edges));
    Ok(ExitCode::SUCCESS)
}

/// One block per committed record, in chain order.
pub fn render_trail(edges: &[reach_proto::core::v1::TrailEdge]) -> String {
    let mut out = String::new();
    for e in edges {
        out.push_str(&format!(
            "{:<26} {}  (committed {} ms)\n",
            e.record, e.id, e.committed_at_ms
        ));
        let mut fields: Vec<_> = e.fields.iter().collect();
        fields.sort();
        for (k, v) in fields {
            out.push_str(&format!("    {k:<20} {v}\n"));
        }
    }
    out
}

pub async fn status(m: &Manifest, layout: &StateLayout) -> anyhow::Result<ExitCode> {
    let s = client(m, layout)
        .await?
        .vault_status(VaultStatusRequest {})
        .await?
        .into_inner();
    println!("vault {} ({})", s.status, s.backend);
    Ok(ExitCode::SUCCESS)
}

pub async fn reconcile(
    m: &Manifest,
    layout: &StateLayout,
    genesis: bool,
    note: &str,
) -> anyhow::Result<ExitCode> {
    let kind = if genesis {
        "GENESIS"
    } else {
        "EFFECTS_RECONCILED"
    };
    let r = client(m, layout)
        .await?
        .reconcile_vault(ReconcileVaultRequest {
            kind: kind.into(),
            note: note.into(),
        })
        .await?
        .into_inner();
    println!("vault {} (reconciliation {kind} recorded)", r.status);
    Ok(ExitCode::SUCCESS)
}

/// Core's taint of `principal`: its leases revoked, its in-flight work marked tainted (also
/// `reach compromise`'s first step).
pub async fn mark_tainted(
    m: &Manifest,
    layout: &StateLayout,
    principal: &str,
    reason: &str,
) -> anyhow::Result<reach_proto::core::v1::MarkTaintedResponse> {
    Ok(client(m, layout)
        .await?
        .mark_tainted(MarkTaintedRequest {
            principal: principal.into(),
            reason: reason.into(),
        })
        .await?
        .into_inner())
}

pub async fn taint(
    m: &Manifest,
    layout: &StateLayout,
    principal: &str,
    reason: &str,
) -> anyhow::Result<ExitCode> {
    let r = mark_tainted(m, layout, principal, reason).await?;
    println!(
        "taint {} recorded for {principal}: {} record(s)",
        r.taint_id,
        r.records.len()
    );
    print_tainted(&r.records, "  ");
    Ok(ExitCode::SUCCESS)
}

/// One line per record a taint marked, each after `indent` (`vault taint`, `compromise`).
pub fn print_tainted(records: &[reach_proto::core::v1::TaintedRecord], indent: &str) {
    for t in records {
        println!(
            "{indent}{:<26} {}  {} -> {}",
            t.record, t.id, t.state_at_taint, t.action
        );
    }
}
