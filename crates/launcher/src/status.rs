//! `reach status`: every role's health, asked over its health port with the operator's leaf.

use std::sync::Arc;
use std::time::Duration;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_port::{MaterialError, PortAddress, PortMaterial};
use reach_proto::health::v1::CheckRequest;
use reach_proto::health::v1::health_client::HealthClient;

/// How long one health check may take before the role counts as unhealthy.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// One role's health as the operator sees it.
#[derive(Debug)]
pub struct RoleHealth {
    pub role: String,
    pub port: String,
    /// The role's answer, or why there was none.
    pub result: Result<reach_proto::health::v1::CheckResponse, String>,
}

/// The operator's TLS material.
pub fn operator_material(
    manifest: &Manifest,
    layout: &StateLayout,
) -> Result<Arc<PortMaterial>, MaterialError> {
    PortMaterial::load(
        &layout.secret_dir("operator"),
        manifest.trust_domain.clone(),
    )
}

/// A channel from the operator to `port`, answered only by that port's manifest server.
pub async fn operator_channel(
    manifest: &Manifest,
    layout: &StateLayout,
    material: &Arc<PortMaterial>,
    port: &str,
) -> Result<tonic::transport::Channel, String> {
    let p = manifest
        .port(port)
        .ok_or_else(|| format!("no port `{port}` in the manifest"))?;
    let server = manifest.principal(p.server.as_str());
    let connect = reach_port::connect(
        PortAddress::Unix(layout.socket_path(port)),
        material,
        server,
    );
    match tokio::time::timeout(CHECK_TIMEOUT, connect).await {
        Ok(Ok(ch)) => Ok(ch),
        // tonic's own message is "transport error"; the cause (no socket, a refused leaf's
        // alert) is below it.
        Ok(Err(e)) => Err(format!(
            "cannot connect: {}",
            reach_port::probe::error_chain(&e)
        )),
        Err(_) => Err("connect timed out".into()),
    }
}

/// Checks every role's health port.
pub async fn status(
    manifest: &Manifest,
    layout: &StateLayout,
) -> Result<Vec<RoleHealth>, MaterialError> {
    let material = operator_material(manifest, layout)?;
    let mut out = Vec::new();
    for role in &manifest.roles {
        let port = format!("{}.health", role.name);
        let result = match operator_channel(manifest, layout, &material, &port).await {
            Ok(ch) => {
                let mut client = HealthClient::new(ch);
                match tokio::time::timeout(CHECK_TIMEOUT, client.check(CheckRequest {})).await {
                    Ok(Ok(r)) => Ok(r.into_inner()),
                    Ok(Err(s)) => Err(format!("{}: {}", s.code(), s.message())),
                    Err(_) => Err("health check timed out".into()),
                }
            }
            Err(e) => Err(e),
        };
        out.push(RoleHealth {
            role: role.name.as_str().to_owned(),
            port,
            result,
        });
    }
    Ok(out)
}
