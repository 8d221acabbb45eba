//! The `core.packs` port: task-pack install, lifecycle and local bindings (issue #27).
//!
//! Core verifies an archive with `reach_taskpack::conform` (signature against the keys its
//! settings trust, facts recomputed, version, expiry, the compile-only refusal corpus through
//! the real plan compiler), stores it inertly under its data directory, and records every
//! lifecycle change and binding in the Phylactery. Readiness asks vm-broker, read-only,
//! whether the pack's prepared system exists. Protobuf stops here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reach_digest::Sha256Digest;
use reach_phylactery as ledger;
use reach_phylactery::Phylactery;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_server::{Packs, PacksServer};
use reach_proto::vm::v1 as vm;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_taskpack::{TrustedKeys, VerifiedPack};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::ports::status as ledger_status;

mod fence;

/// The directory under core's data directory holding installed archives.
pub const PACK_DIR: &str = "packs";

/// Parses `settings.pack_keys` (absent: no key is trusted and every install is refused
/// `package/unknown-signer`).
pub fn trusted_keys(settings: &toml::Table) -> anyhow::Result<TrustedKeys> {
    TrustedKeys::from_settings(settings).map_err(anyhow::Error::msg)
}

#[derive(Debug, Clone)]
pub struct PackPort {
    vault: Phylactery,
    keys: Arc<TrustedKeys>,
    store: PathBuf,
    broker: Option<VmBrokerClient<Channel>>,
    /// `ward.authority`: every change of a pack's standing is stated there (`fence`).
    ward: WardClient<Channel>,
    fence_state: Arc<fence::FenceState>,
    /// Task runs (`settings.tasks`); `None`: AskTask and the run readers are refused.
    tasks: Option<crate::tasks::TaskRuns>,
}

impl PackPort {
    pub fn new(
        vault: Phylactery,
        keys: TrustedKeys,
        data_dir: &Path,
        broker: Option<VmBrokerClient<Channel>>,
        ward: Channel,
    ) -> Self {
        Self {
            vault,
            keys: Arc::new(keys),
            store: data_dir.join(PACK_DIR),
            broker,
            ward: WardClient::new(ward),
            fence_state: Arc::default(),
            tasks: None,
        }
    }

    pub fn server(self) -> PacksServer<Self> {
        PacksServer::new(self).max_decoding_message_size(reach_taskpack::MAX_ARCHIVE_BYTES + 4096)
    }

    fn archive_path(&self, name: &str, version: u64, digest: &Sha256Digest) -> PathBuf {
        self.store
            .join(name)
            .join(format!("{version}-{}.tar", &digest.hex()[..16]))
    }

    /// The stored archive of one installed version, verified again as it is read (a file
    /// changed under core is refused, not trusted).
    async fn load(&self, name: &str, version: u64) -> Result<VerifiedPack, Status> {
        let status = self.status_of(name).await?;
        let rec = status
            .versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(|| {
                Status::not_found(format!("package/not-installed: {name} v{version}"))
            })?;
        let bytes = tokio::fs::read(&rec.archive_path).await.map_err(|e| {
            Status::internal(format!("package/store: reading {name} v{version}: {e}"))
        })?;
        // Verified again as read, against the keys trusted now; expiry is checked where it
        // matters (activation), so a stored pack past its date still shows.
        let pack = reach_taskpack::conform(&bytes, &self.keys, None, 0)
            .map_err(|e| Status::internal(format!("package/store: {}: {e}", e.code())))?;
        if pack.archive_digest() != rec.archive_digest {
            return Err(Status::internal(format!(
                "package/store: {name} v{version}'s archive is not the one installed"
            )));
        }
        Ok(pack)
    }

    async fn status_of(&self, name: &str) -> Result<ledger::PackStatus, Status> {
        self.vault
            .pack_status(name)
            .await
            .map_err(ledger_status)?
            .ok_or_else(|| Status::not_found(format!("package/not-installed: {name}")))
    }

    /// What readiness needs to know of the environment: vm-broker's answer for the pack's
    /// first image variant.
    async fn prepared(&self, pack: &VerifiedPack) -> reach_taskpack::PreparedLookup {
        let Some(variant) = pack.facts().image_variants.first() else {
            return reach_taskpack::PreparedLookup::Missing {
                command: "the pack names no image variant".into(),
            };
        };
        let archive = self
            .archive_path(pack.name(), pack.version(), &pack.archive_digest())
            .display()
            .to_string();
        let command = |cache: &str| {
            let cache = if cache.is_empty() {
                "DIR (and set vm-broker's settings.cache = DIR)".to_owned()
            } else {
                cache.to_owned()
            };
            format!("reach image prepare --pack {archive} --cache {cache}")
        };
        let Some(mut broker) = self.broker.clone() else {
            return reach_taskpack::PreparedLookup::Missing {
                command: command(""),
            };
        };
        match broker
            .find_prepared(vm::FindPreparedRequest {
                image_spec_digest: variant.image_spec_digest.to_string(),
                prepared_spec_digest: variant.prepared_spec_digest.to_string(),
            })
            .await
        {
            Ok(r) => {
                let r = r.into_inner();
                match (r.found, r.image_digest.parse(), r.prepared_digest.parse()) {
                    (true, Ok(image_digest), Ok(prepared_digest)) => {
                        reach_taskpack::PreparedLookup::Found {
                            image_digest,
                            prepared_digest,
                        }
                    }
                    _ => reach_taskpack::PreparedLookup::Missing {
                        command: command(&r.cache),
                    },
                }
            }
            Err(e) => reach_taskpack::PreparedLookup::Missing {
                command: format!(
                    "vm-broker did not answer ({}); start it, then {}",
                    e.message(),
                    command("")
                ),
            },
        }
    }
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn refusal(code: &str, msg: impl std::fmt::Display) -> Status {
    Status::failed_precondition(format!("{code}: {msg}"))
}

fn pack_status(s: &ledger::PackStatus, transition: &str, profile_changed: bool) -> pb::PackStatus {
    pb::PackStatus {
        name: s.name.clone(),
        state: s.state.as_str().to_owned(),
        active_version: s.active_version.unwrap_or(0),
        generation: s.generation,
        versions: s
            .versions
            .iter()
            .map(|v| pb::PackVersion {
                version: v.version,
                archive_digest: v.archive_digest.to_string(),
                facts_digest: v.facts_digest.to_string(),
                profile_digest: v.profile_digest.to_string(),
                signer: v.signer.clone(),
                expires_at_s: v.expires_at_s as i64,
                installed_at_ms: v.installed_at.0,
            })
            .collect(),
        events: s
            .events
            .iter()
            .map(|e| pb::PackEvent {
                version: e.version,
                event: e.event.as_str().to_owned(),
                generation: e.generation,
                at_ms: e.at.0,
            })
            .collect(),
        transition: transition.to_owned(),
        profile_changed,
    }
}

fn binding(b: &ledger::BindingRecord) -> pb::Binding {
    pb::Binding {
        pack: b.pack.clone(),
        workspace: b.workspace.clone(),
        vm_backend: b.vm_backend.clone(),
        model: b.model.clone().unwrap_or_default(),
        network: b.network.clone(),
        hil: b.hil.clone(),
        max_concurrent_runs: b.max_concurrent_runs,
        publication: b.publication,
        paused: b.paused,
        bound_generation: b.bound_generation,
        bound_profile_digest: b.bound_profile_digest.to_string(),
        bound_at_ms: b.bound_at.0,
    }
}

/// A binding from safe defaults, stricter than the pack, never looser.
fn binding_terms(r: &pb::BindRequest, pack: &VerifiedPack) -> Result<ledger::NewBinding, Status> {
    let network = match r.network.as_str() {
        "" | "none" => "none",
        "isolated" => {
            return Err(refusal(
                "environment/not-contained",
                "an isolated network is not containment; the pack's ceiling is none",
            ));
        }
        other => {
            return Err(refusal(
                "environment/not-contained",
                format!("network {other:?} is above the pack's ceiling (none)"),
            ));
        }
    };
    let minimum = pack.vocabulary().hil_minimum;
    let hil = match r.hil.as_str() {
        "" | "each-step" => reach_plan::HilMode::EachStep,
        "each-mutation" => reach_plan::HilMode::EachMutation,
        other => {
            return Err(refusal(
                "local-binding/hil-below-minimum",
                format!("HIL {other:?} is not each-step or each-mutation"),
            ));
        }
    };
    if hil < minimum {
        return Err(refusal(
            "local-binding/hil-below-minimum",
            format!(
                "HIL {} is below the pack's minimum {}",
                hil_text(hil),
                hil_text(minimum)
            ),
        ));
    }
    if r.vm_backend != "qemu" {
        return Err(refusal(
            "local-binding/vm-backend",
            format!("VM backend {:?} is not available here (qemu)", r.vm_backend),
        ));
    }
    if !Path::new(&r.workspace).is_absolute() {
        return Err(refusal(
            "local-binding/workspace",
            "the workspace root must be an absolute path",
        ));
    }
    // Which runtimes a flow admits arrives with the real-model class (issue #31); until then
    // a model name is kept as given, bounded and printable.
    let model = (!r.model.is_empty()).then(|| r.model.clone());
    if let Some(m) = &model
        && (m.len() > 128 || !m.chars().all(|c| c.is_ascii_graphic()))
    {
        return Err(refusal(
            "local-binding/model",
            "a model name is at most 128 printable ASCII characters",
        ));
    }
    Ok(ledger::NewBinding {
        pack: pack.name().to_owned(),
        workspace: r.workspace.clone(),
        vm_backend: r.vm_backend.clone(),
        model,
        network: network.to_owned(),
        hil: hil_text(hil).to_owned(),
        max_concurrent_runs: match r.max_concurrent_runs {
            0 | 1 => 1,
            n => {
                return Err(refusal(
                    "local-binding/concurrency",
                    format!("{n} concurrent runs: a binding runs one at a time"),
                ));
            }
        },
        publication: false,
    })
}

/// Readiness's plain inputs from the ledger's records and the active pack.
fn readiness_inputs(
    pack: &str,
    status: Option<&ledger::PackStatus>,
    binding: Option<&ledger::BindingRecord>,
    active: Option<&VerifiedPack>,
    prepared: reach_taskpack::PreparedLookup,
) -> reach_taskpack::ReadinessInputs {
    use reach_taskpack::PackLifecycle;
    let pack_state = match status.map(|s| s.state) {
        None => PackLifecycle::NotInstalled,
        Some(ledger::PackState::Inactive) => PackLifecycle::Installed,
        Some(ledger::PackState::Active { .. }) => PackLifecycle::Active,
        Some(ledger::PackState::Revoked { .. }) => PackLifecycle::Revoked,
    };
    reach_taskpack::ReadinessInputs {
        pack: pack.to_owned(),
        pack_state,
        binding: binding.map(|b| reach_taskpack::BindingView {
            bound_generation: b.bound_generation,
            bound_profile_digest: b.bound_profile_digest,
            paused: b.paused,
        }),
        current_generation: status.map(|s| s.generation).unwrap_or(0),
        current_profile_digest: active
            .map(|p| p.profile_digest())
            .unwrap_or(Sha256Digest::of(b"")),
        prepared,
        effect_modes_missing: active
            .map(|p| p.facts().effect_modes_missing.clone())
            .unwrap_or_default(),
        // The runtime is probed by `bind_status` once nothing else blocks.
        model: reach_taskpack::ModelRuntime::NotRequired,
    }
}

fn hil_text(h: reach_plan::HilMode) -> &'static str {
    match h {
        reach_plan::HilMode::EachStep => "each-step",
        reach_plan::HilMode::EachMutation => "each-mutation",
    }
}

#[tonic::async_trait]
impl Packs for PackPort {
    async fn install_pack(
        &self,
        req: Request<pb::InstallPackRequest>,
    ) -> Result<Response<pb::InstallPackResponse>, Status> {
        let archive = req.into_inner().archive;
        // The name first (unverified), only to find the version installed; conform verifies.
        let name = reach_taskpack::archive_name(&archive).map_err(|e| refusal(e.code(), &e))?;
        let before = self.vault.pack_status(&name).await.map_err(ledger_status)?;
        let installed = before
            .as_ref()
            .and_then(|s| s.versions.iter().map(|v| v.version).max());
        let keys = self.keys.clone();
        let (pack, archive) = tokio::task::spawn_blocking(move || {
            reach_taskpack::conform(&archive, &keys, installed, now_s()).map(|p| (p, archive))
        })
        .await
        .map_err(|e| Status::internal(format!("conformance: {e}")))?
        .map_err(|e| refusal(e.code(), &e))?;
        let path = self.archive_path(pack.name(), pack.version(), &pack.archive_digest());
        let dir = path
            .parent()
            .expect("archive path has a directory")
            .to_owned();
        let bytes = archive;
        let write_to = path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            reach_durable_file::replace(&write_to, &bytes, 0o640)
        })
        .await
        .map_err(|e| Status::internal(format!("package/store: {e}")))?
        .map_err(|e| Status::internal(format!("package/store: {}: {e}", path.display())))?;
        let signer = pack.signer();
        let signer_name = pack.signer_name().to_owned();
        let rec = self
            .vault
            .pack_install(&ledger::PackInstall {
                name: pack.name().to_owned(),
                version: pack.version(),
                archive_digest: pack.archive_digest(),
                facts_digest: pack.facts_digest(),
                profile_digest: pack.profile_digest(),
                signer: signer.to_string(),
                expires_at_s: pack.expires_at_s(),
                archive_path: path.display().to_string(),
            })
            .await
            .map_err(ledger_status)?;
        let after = self.status_of(pack.name()).await?;
        tracing::info!(pack = %rec.name, version = rec.version, "task pack installed inertly");
        self.fence(pack.name()).await?;
        Ok(Response::new(pb::InstallPackResponse {
            name: rec.name,
            version: rec.version,
            archive_digest: rec.archive_digest.to_string(),
            facts_digest: rec.facts_digest.to_string(),
            profile_digest: rec.profile_digest.to_string(),
            signer: signer.to_string(),
            signer_name,
            fixtures_checked: pack.fixtures_checked() as u32,
            state: after.state.as_str().to_owned(),
        }))
    }

    async fn activate_pack(
        &self,
        req: Request<pb::ActivatePackRequest>,
    ) -> Result<Response<pb::PackStatus>, Status> {
        let r = req.into_inner();
        let version = (r.version != 0).then_some(r.version);
        // Refuse to activate what no longer verifies (or has expired since it was installed).
        let status = self.status_of(&r.name).await?;
        let target = version
            .or_else(|| status.versions.iter().map(|v| v.version).max())
            .unwrap_or(0);
        let pack = self.load(&r.name, target).await?;
        if pack.expires_at_s() <= now_s() {
            return Err(refusal(
                "package/expired",
                format!("{} v{} expired", r.name, target),
            ));
        }
        let lc = self
            .vault
            .pack_activate(&r.name, Some(target))
            .await
            .map_err(ledger_status)?;
        let s = self.status_of(&r.name).await?;
        // An upgrade whose profile digest differs: bindings wait for the operator's accept.
        let profile_of = |v: Option<u64>| {
            s.versions
                .iter()
                .find(|r| Some(r.version) == v)
                .map(|r| r.profile_digest)
        };
        let profile_changed = lc.event == ledger::PackEventKind::Upgraded
            && profile_of(lc.from.version()) != profile_of(lc.state.version());
        self.fence(&r.name).await?;
        Ok(Response::new(pack_status(
            &s,
            lc.event.as_str(),
            profile_changed,
        )))
    }

    async fn revoke_pack(
        &self,
        req: Request<pb::RevokePackRequest>,
    ) -> Result<Response<pb::PackStatus>, Status> {
        let r = req.into_inner();
        let lc = self
            .vault
            .pack_revoke(&r.name)
            .await
            .map_err(ledger_status)?;
        tracing::warn!(pack = %r.name, reason = %r.reason, "task pack revoked");
        self.fence(&r.name).await?;
        let s = self.status_of(&r.name).await?;
        Ok(Response::new(pack_status(&s, lc.event.as_str(), false)))
    }

    async fn list_packs(
        &self,
        _req: Request<pb::ListPacksRequest>,
    ) -> Result<Response<pb::ListPacksResponse>, Status> {
        let list = self.vault.pack_list().await.map_err(ledger_status)?;
        Ok(Response::new(pb::ListPacksResponse {
            packs: list.iter().map(|s| pack_status(s, "", false)).collect(),
        }))
    }

    async fn show_pack(
        &self,
        req: Request<pb::ShowPackRequest>,
    ) -> Result<Response<pb::ShowPackResponse>, Status> {
        let r = req.into_inner();
        let s = self.status_of(&r.name).await?;
        let version = match r.version {
            0 => s
                .active_version
                .or_else(|| s.versions.iter().map(|v| v.version).max())
                .unwrap_or(0),
            v => v,
        };
        let pack = self.load(&r.name, version).await?;
        Ok(Response::new(pb::ShowPackResponse {
            status: Some(pack_status(&s, "", false)),
            version,
            facts_json: String::from_utf8_lossy(&pack.facts().canonical_bytes()).into_owned(),
        }))
    }

    async fn bind(&self, req: Request<pb::BindRequest>) -> Result<Response<pb::Binding>, Status> {
        let r = req.into_inner();
        let s = self.status_of(&r.pack).await?;
        let Some(active) = s.active_version else {
            return Err(refusal(
                "package/not-active",
                format!("{} is {}; activate it first", r.pack, s.state.as_str()),
            ));
        };
        let pack = self.load(&r.pack, active).await?;
        let terms = binding_terms(&r, &pack)?;
        let b = self.vault.bind(&terms).await.map_err(ledger_status)?;
        self.fence(&r.pack).await?;
        Ok(Response::new(binding(&b)))
    }

    async fn bind_status(
        &self,
        req: Request<pb::BindStatusRequest>,
    ) -> Result<Response<pb::BindStatusResponse>, Status> {
        let pack_name = req.into_inner().pack;
        let status = self
            .vault
            .pack_status(&pack_name)
            .await
            .map_err(ledger_status)?;
        let bound = self
            .vault
            .binding(&pack_name)
            .await
            .map_err(ledger_status)?;
        let active = match status.as_ref().and_then(|s| s.active_version) {
            Some(v) => Some(self.load(&pack_name, v).await?),
            None => None,
        };
        let prepared = match &active {
            Some(p) => self.prepared(p).await,
            None => reach_taskpack::PreparedLookup::Missing {
                command: String::new(),
            },
        };
        let mut inputs = readiness_inputs(
            &pack_name,
            status.as_ref(),
            bound.as_ref(),
            active.as_ref(),
            prepared.clone(),
        );
        // The model runtime is asked last, and only when nothing before it blocks: a real
        // model's probe crosses egress-provider under a decision of its own.
        if let Some(tasks) = &self.tasks
            && reach_taskpack::Readiness::of(&inputs).is_runnable()
        {
            inputs.model = tasks.runtime().await;
        }
        let readiness = reach_taskpack::Readiness::of(&inputs);
        let (image_digest, prepared_digest) = match &prepared {
            reach_taskpack::PreparedLookup::Found {
                image_digest,
                prepared_digest,
            } => (image_digest.to_string(), prepared_digest.to_string()),
            _ => (String::new(), String::new()),
        };
        let json = serde_json::to_string(&readiness.report())
            .map_err(|e| Status::internal(format!("readiness: {e}")))?;
        Ok(Response::new(pb::BindStatusResponse {
            readiness: readiness.code().to_owned(),
            reason: readiness.reason(),
            next: readiness.next_command(),
            image_digest,
            prepared_digest,
            generation: status.map(|s| s.generation).unwrap_or(0),
            json,
        }))
    }

    async fn pause_binding(
        &self,
        req: Request<pb::BindingRef>,
    ) -> Result<Response<pb::Binding>, Status> {
        let pack = req.into_inner().pack;
        let b = self.vault.bind_pause(&pack).await.map_err(ledger_status)?;
        self.fence(&pack).await?;
        Ok(Response::new(binding(&b)))
    }

    async fn resume_binding(
        &self,
        req: Request<pb::BindingRef>,
    ) -> Result<Response<pb::Binding>, Status> {
        let pack = req.into_inner().pack;
        let b = self.vault.bind_resume(&pack).await.map_err(ledger_status)?;
        self.fence(&pack).await?;
        Ok(Response::new(binding(&b)))
    }

    async fn profile_diff(
        &self,
        req: Request<pb::BindingRef>,
    ) -> Result<Response<pb::ProfileDiffResponse>, Status> {
        let name = req.into_inner().pack;
        let (bound, active) = self.bound_and_active(&name).await?;
        let diff = if bound.profile_digest() == active.profile_digest() {
            String::new()
        } else {
            reach_plan::text_diff(
                "task-profile.toml",
                bound.task_profile_text(),
                active.task_profile_text(),
            )
        };
        Ok(Response::new(pb::ProfileDiffResponse {
            bound_profile_digest: bound.profile_digest().to_string(),
            active_profile_digest: active.profile_digest().to_string(),
            diff,
        }))
    }

    async fn accept_profile(
        &self,
        req: Request<pb::AcceptProfileRequest>,
    ) -> Result<Response<pb::Binding>, Status> {
        let r = req.into_inner();
        let (_, active) = self.bound_and_active(&r.pack).await?;
        if r.profile_digest != active.profile_digest().to_string() {
            return Err(refusal(
                "local-binding/profile-changed",
                format!(
                    "the active profile is {}, not the {} shown; read the diff again",
                    active.profile_digest(),
                    r.profile_digest
                ),
            ));
        }
        // The new profile may raise the HIL minimum above the binding's mode: the binding is
        // never looser than the pack, so the operator binds again instead.
        let minimum = active.vocabulary().hil_minimum;
        let current = self.vault.binding(&r.pack).await.map_err(ledger_status)?;
        if let Some(b) = current
            && b.hil == hil_text(reach_plan::HilMode::EachMutation)
            && minimum == reach_plan::HilMode::EachStep
        {
            return Err(refusal(
                "local-binding/hil-below-minimum",
                format!(
                    "the active profile asks HIL each-step, above the binding's {}; bind again \
                     with --hil each-step",
                    b.hil
                ),
            ));
        }
        let b = self
            .vault
            .bind_accept(&r.pack)
            .await
            .map_err(ledger_status)?;
        self.fence(&r.pack).await?;
        Ok(Response::new(binding(&b)))
    }

    type AskTaskStream = crate::tasks::EventStream;

    async fn ask_task(
        &self,
        req: Request<pb::AskTaskRequest>,
    ) -> Result<Response<Self::AskTaskStream>, Status> {
        let r = req.into_inner();
        Ok(Response::new(self.tasks()?.ask(r.pack, r.goal).await?))
    }

    async fn list_runs(
        &self,
        _req: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        Ok(Response::new(self.tasks()?.list().await?))
    }

    async fn show_run(&self, req: Request<pb::RunRef>) -> Result<Response<pb::RunView>, Status> {
        Ok(Response::new(
            self.tasks()?.show(&req.into_inner().run_id).await?,
        ))
    }

    async fn run_trail(
        &self,
        req: Request<pb::RunRef>,
    ) -> Result<Response<pb::RunTrailResponse>, Status> {
        Ok(Response::new(
            self.tasks()?.trail(&req.into_inner().run_id).await?,
        ))
    }

    async fn run_recipe(
        &self,
        req: Request<pb::RunRef>,
    ) -> Result<Response<pb::RunRecipeResponse>, Status> {
        Ok(Response::new(
            self.tasks()?.recipe(&req.into_inner().run_id).await?,
        ))
    }
}

/// What a task run starts from: the active pack as verified again, its archive's bytes (the
/// workbench verifies them itself), the binding's terms and the prepared system's pin.
#[derive(Debug, Clone)]
pub struct Runnable {
    pub pack: VerifiedPack,
    pub archive: Vec<u8>,
    pub generation: u64,
    pub hil: reach_plan::HilMode,
    pub prepared_digest: String,
    pub model: String,
    pub max_concurrent_runs: u32,
}

impl PackPort {
    /// The pack's binding as a task run needs it, or the readiness blocker's code
    /// (`environment/prepared-system-missing: …`) when it is not runnable.
    pub async fn runnable(&self, name: &str) -> Result<Runnable, Status> {
        let status = self
            .bind_status(Request::new(pb::BindStatusRequest {
                pack: name.to_owned(),
            }))
            .await?
            .into_inner();
        if status.readiness != "runnable" {
            return Err(refusal(&status.readiness, &status.reason));
        }
        let s = self.status_of(name).await?;
        let Some(version) = s.active_version else {
            return Err(refusal("package/not-active", name));
        };
        let pack = self.load(name, version).await?;
        let path = self.archive_path(name, version, &pack.archive_digest());
        let archive = tokio::fs::read(&path)
            .await
            .map_err(|e| Status::internal(format!("package/store: reading {name}: {e}")))?;
        let b = self
            .vault
            .binding(name)
            .await
            .map_err(ledger_status)?
            .ok_or_else(|| Status::not_found(format!("local-binding/missing: {name}")))?;
        let hil = if b.hil == hil_text(reach_plan::HilMode::EachMutation) {
            reach_plan::HilMode::EachMutation
        } else {
            reach_plan::HilMode::EachStep
        };
        Ok(Runnable {
            pack,
            archive,
            generation: s.generation,
            hil,
            prepared_digest: status.prepared_digest,
            model: b.model.unwrap_or_default(),
            max_concurrent_runs: b.max_concurrent_runs,
        })
    }

    /// Task runs, when core's config names the task model runtime (`settings.tasks`).
    pub fn with_tasks(mut self, tasks: crate::tasks::TaskRuns) -> Self {
        self.tasks = Some(tasks);
        self
    }

    fn tasks(&self) -> Result<&crate::tasks::TaskRuns, Status> {
        self.tasks.as_ref().ok_or_else(|| {
            Status::failed_precondition(
                "tasks/not-configured: core has no task model runtime (settings.tasks)",
            )
        })
    }

    /// The version a binding was bound to (by its profile digest) and the active one.
    async fn bound_and_active(&self, name: &str) -> Result<(VerifiedPack, VerifiedPack), Status> {
        let s = self.status_of(name).await?;
        let b = self
            .vault
            .binding(name)
            .await
            .map_err(ledger_status)?
            .ok_or_else(|| Status::not_found(format!("local-binding/missing: {name}")))?;
        let Some(active) = s.active_version else {
            return Err(refusal(
                "package/not-active",
                format!("{name} is {}", s.state.as_str()),
            ));
        };
        let bound_version = s
            .versions
            .iter()
            .filter(|v| v.profile_digest == b.bound_profile_digest)
            .map(|v| v.version)
            .max()
            .unwrap_or(active);
        Ok((
            self.load(name, bound_version).await?,
            self.load(name, active).await?,
        ))
    }
}
