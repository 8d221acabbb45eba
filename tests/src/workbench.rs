//! The workbench's body fixture (tests/tests/workbench.rs and benches/workbench.rs): the
//! preparable reference pack built and signed, its prepared system made by the real
//! `reach image prepare --pack` in the shared VM image cache, a body whose core, workbench
//! and vm-broker trust the pack's key and whose broker pins that prepared system, the
//! pack's repair compiled into a stamped plan, and clients as core.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::path::{Path, PathBuf};

use reach_digest::Sha256Digest;
use reach_plan::{BindingTerms, HilMode, StampedPlan};
use reach_proto::core::v1 as core_pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_proto::vm::v1 as vm_pb;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::workbench::v1 as pb;
use reach_proto::workbench::v1::workbench_client::WorkbenchClient;
use tokio::io::AsyncBufReadExt as _;
use tonic::transport::Channel;

use crate::TestBody;

/// The image cache every guest test shares.
pub const CACHE: &str = "/var/tmp/reach-vm-images";

pub fn code(s: &tonic::Status) -> &str {
    s.message().split(':').next().unwrap_or_default()
}

/// Runs `reach image prepare --pack ARCHIVE --cache CACHE`: (image digest and dir, prepared
/// digest and dir), from what it prints.
async fn prepare_pack(archive: &Path) -> ((String, PathBuf), (String, PathBuf)) {
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(["image", "prepare", "--pack"])
        .arg(archive)
        .args(["--cache", CACHE])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    let pair = |line: &str| {
        let (d, p) = line.trim().split_once(' ').expect("digest and directory");
        (d.to_owned(), PathBuf::from(p))
    };
    let image = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("image sha256:")
                .map(|r| format!("sha256:{r}"))
        })
        .map(|l| pair(&l))
        .expect("the image line");
    (image, pair(&stdout))
}

#[derive(Debug)]
pub struct Fixture {
    pub body: TestBody,
    pub archive: Vec<u8>,
    pub pack: String,
    pub plan: StampedPlan,
    pub prepared: String,
    pub image: String,
    /// The pack's own witnesses that nothing changed: each verifier observation compared with
    /// a snapshot (`same_as`), as its profile and arguments.
    pub witnesses: Vec<(String, Vec<String>)>,
    /// The pack's vocabulary and its fixture's repair candidate, to stamp the repair again.
    vocabulary: reach_plan::Vocabulary,
    repair: String,
}

/// Starts the fixture (see the module docs).
pub async fn start() -> Fixture {
    start_with(|_| {}, |_, _| {}).await
}

/// The fixture with the pack's sources edited first (in a copy; `edit` gets its directory)
/// and the body's manifest configured further by `configure`.
pub async fn start_with(
    edit: impl FnOnce(&Path),
    configure: impl FnOnce(&mut reach_manifest::Manifest, &reach_manifest::plan::StateLayout)
    + Send
    + 'static,
) -> Fixture {
    let dir =
        reach_taskpack::preparable_pack(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"))
            .expect("a preparable pack");
    let key =
        reach_taskpack::PackKey::from_pkcs8(&reach_taskpack::PackKey::generate().unwrap()).unwrap();
    let copy = tempfile::tempdir().unwrap();
    crate::packs::copy_dir(&dir, copy.path());
    edit(copy.path());
    let built = reach_taskpack::build(copy.path(), &key).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &built.archive).unwrap();
    let ((image, image_dir), (prepared, prepared_dir)) = prepare_pack(file.path()).await;

    let public = key.public().to_string();
    let (img, pre) = (image.clone(), prepared.clone());
    let body = TestBody::start_configured(move |m, layout| {
        configure(m, layout);
        let mut k = toml::Table::new();
        k.insert("name".into(), "test-operator".into());
        k.insert("key".into(), public.clone().into());
        let keys = toml::Value::Array(vec![k.into()]);
        for role in &mut m.roles {
            match role.name.as_str() {
                "core" | "workbench" => {
                    role.settings.insert("pack_keys".into(), keys.clone());
                }
                "vm-broker" => {
                    role.settings = format!(
                        "cache = {CACHE:?}\n[[images]]\ndigest = {img:?}\ndir = {:?}\n[[prepared]]\ndigest = {pre:?}\ndir = {:?}\n",
                        image_dir.display().to_string(),
                        prepared_dir.display().to_string()
                    )
                    .parse()
                    .unwrap();
                    role.settings.insert("pack_keys".into(), keys.clone());
                }
                _ => {}
            }
        }
    })
    .await;
    let mut trusted = reach_taskpack::TrustedKeys::new();
    trusted.insert("test-operator", key.public());
    let verified = reach_taskpack::conform(&built.archive, &trusted, None, 1_800_000_000).unwrap();
    let repair = verified
        .sources()
        .answers
        .solver
        .iter()
        .find(|a| a.id == "repair")
        .unwrap();
    let vocabulary = verified.vocabulary();
    let plan = stamp(&vocabulary, &repair.candidate, 1);
    let repair = repair.candidate.clone();
    let witnesses = verified
        .sources()
        .verifier
        .checks
        .iter()
        .flat_map(|c| &c.observe)
        .filter(|o| o.same_as.is_some())
        .map(|o| (o.profile.clone(), o.args.clone()))
        .collect();
    Fixture {
        vocabulary,
        repair,
        witnesses,
        body,
        archive: built.archive,
        pack: verified.name().to_owned(),
        plan,
        prepared,
        image,
    }
}

/// The repair `candidate` stamped each-mutation at pack generation `generation`.
fn stamp(vocabulary: &reach_plan::Vocabulary, candidate: &str, generation: u64) -> StampedPlan {
    let terms = BindingTerms {
        hil: HilMode::EachMutation,
        generation,
    };
    reach_plan::compile(vocabulary, &terms, candidate.as_bytes()).unwrap()
}

impl Fixture {
    /// The pack's vocabulary, as the host compiles against it.
    pub fn vocabulary(&self) -> &reach_plan::Vocabulary {
        &self.vocabulary
    }

    /// The fixture's repair stamped at pack generation `generation` (after a reactivation).
    pub fn plan_at(&self, generation: u64) -> StampedPlan {
        stamp(&self.vocabulary, &self.repair, generation)
    }

    /// The operator's `core.packs` client, after the fixture's pack was installed, activated
    /// and bound each-mutation through it (core states the standing to ward itself).
    pub async fn install_and_bind(&self) -> PacksClient<Channel> {
        let body = &self.body;
        let mut packs = PacksClient::new(reach_port::connect_lazy(
            body.socket("core.packs"),
            &body.material("operator"),
            body.manifest.principal("core"),
        ))
        .max_decoding_message_size(reach_taskpack::MAX_ARCHIVE_BYTES * 2);
        packs
            .install_pack(core_pb::InstallPackRequest {
                archive: self.archive.clone(),
            })
            .await
            .unwrap();
        packs
            .activate_pack(core_pb::ActivatePackRequest {
                name: self.pack.clone(),
                version: 0,
            })
            .await
            .unwrap();
        packs
            .bind(core_pb::BindRequest {
                pack: self.pack.clone(),
                workspace: "/tmp/reach-ws".into(),
                vm_backend: "qemu".into(),
                hil: "each-mutation".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        packs
    }

    /// Core's coordinator on the fixture's body, with core's certificate.
    pub fn coordinator(&self) -> reach_experiment::Experiment {
        let body = &self.body;
        let core = |port: &str, role: &str| {
            reach_port::connect_lazy(
                body.socket(port),
                &body.material("core"),
                body.manifest.principal(role),
            )
        };
        reach_experiment::Experiment::new(
            core("ward.authority", "ward"),
            core("workbench.steps", "workbench"),
        )
    }

    /// Experiment `id` of the fixture's pack on its prepared system.
    pub fn setup(&self, id: &str) -> reach_experiment::Setup {
        reach_experiment::Setup {
            experiment_id: id.into(),
            pack_name: self.pack.clone(),
            pack_archive: self.archive.clone(),
            prepared_digest: self.prepared.clone(),
        }
    }
}

pub fn workbench(body: &TestBody, as_role: &str) -> WorkbenchClient<Channel> {
    WorkbenchClient::new(reach_port::connect_lazy(
        body.socket("workbench.steps"),
        &body.material(as_role),
        body.manifest.principal("workbench"),
    ))
    .max_decoding_message_size(8 << 20)
}

pub fn ward(body: &TestBody) -> WardClient<Channel> {
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material("core"),
        body.manifest.principal("ward"),
    ))
}

/// The guest's bytes of `path`, read through the broker with the workbench's certificate.
pub async fn guest_digest(body: &TestBody, instance: &str, path: &str) -> Sha256Digest {
    let mut vm = VmBrokerClient::new(reach_port::connect_lazy(
        body.socket("vm-broker.instances"),
        &body.material("workbench"),
        body.manifest.principal("vm-broker"),
    ));
    let f = vm
        .read_file(vm_pb::ReadFileRequest {
            instance_id: instance.to_owned(),
            path: path.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    Sha256Digest::of(&f.content)
}

/// What the pack's `witnesses` print in the guest now (stdout, in order), each run through
/// the broker with the workbench's certificate as the observation it is.
pub async fn witness(
    body: &TestBody,
    instance: &str,
    witnesses: &[(String, Vec<String>)],
) -> Vec<Vec<u8>> {
    let mut vm = VmBrokerClient::new(reach_port::connect_lazy(
        body.socket("vm-broker.instances"),
        &body.material("workbench"),
        body.manifest.principal("vm-broker"),
    ));
    let mut out = Vec::new();
    for (profile, args) in witnesses {
        let r = vm
            .exec(vm_pb::ExecRequest {
                instance_id: instance.to_owned(),
                profile: profile.clone(),
                args: args.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.exited && r.exit_code == 0, "{profile}: {r:?}");
        out.push(r.stdout);
    }
    out
}

/// What a step grant is minted for.
#[derive(Debug, Clone, Copy)]
pub struct Grant<'a> {
    pub experiment: &'a str,
    pub instance: &'a str,
    pub plan: &'a StampedPlan,
    pub step: usize,
    pub generation: u64,
}

/// Core's statement of the pack's standing: active at `generation`, bound to the plan's
/// profile, not paused, under the plan's HIL mode.
pub async fn fence(ward: &mut WardClient<Channel>, plan: &StampedPlan, generation: u64) {
    let profile = plan.pack.profile_digest.to_string();
    ward.fence_pack(ward_pb::FencePackRequest {
        pack_name: plan.pack.name.clone(),
        current_generation: generation,
        revoked: false,
        paused: false,
        bound_profile_digest: profile.clone(),
        active_profile_digest: profile,
        hil: match plan.hil {
            HilMode::EachStep => "each-step",
            HilMode::EachMutation => "each-mutation",
        }
        .into(),
    })
    .await
    .unwrap();
}

/// What core files with ward for one stamped step that asks for the operator's answer.
pub fn hil_filing(g: &Grant<'_>, pack: &str) -> ward_pb::FileHilRequestRequest {
    reach_experiment::filing(g.step_ref(pack))
}

impl<'a> Grant<'a> {
    /// The step as the coordinator names it to ward and workbench.
    pub fn step_ref(&self, pack: &'a str) -> reach_experiment::StepRef<'a> {
        reach_experiment::StepRef {
            experiment_id: self.experiment,
            instance_id: self.instance,
            pack_name: pack,
            plan: self.plan,
            step: &self.plan.steps[self.step],
        }
    }
}

/// The operator's client of `ward.authority` (their own leaf).
pub fn operator_ward(body: &TestBody) -> WardClient<Channel> {
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material("operator"),
        body.manifest.principal("ward"),
    ))
}

/// Every HIL request ward holds, answered or not, as the operator lists them.
pub async fn hil_requests(body: &TestBody) -> Vec<reach_proto::ward::v1::HilRequestView> {
    operator_ward(body)
        .list_hil_requests(reach_proto::ward::v1::ListHilRequestsRequest { all: true })
        .await
        .unwrap()
        .into_inner()
        .requests
}

pub async fn mint(ward: &mut WardClient<Channel>, pack: &str, g: Grant<'_>) -> String {
    try_mint(ward, pack, g).await.unwrap()
}

pub async fn try_mint(
    ward: &mut WardClient<Channel>,
    pack: &str,
    g: Grant<'_>,
) -> Result<String, tonic::Status> {
    Ok(ward
        .mint_step_grant(reach_experiment::grant_request(g.step_ref(pack)))
        .await?
        .into_inner()
        .grant)
}

pub fn execute(
    exp: &str,
    instance: &str,
    plan: &StampedPlan,
    step: usize,
    grant: String,
) -> pb::ExecuteStepRequest {
    reach_experiment::execute_request(
        reach_experiment::StepRef {
            experiment_id: exp,
            instance_id: instance,
            pack_name: &plan.pack.name,
            plan,
            step: &plan.steps[step],
        },
        grant,
    )
}

/// What the operator does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny(&'static str),
    /// `reach bind pause PACK` first, then approve: the pause must still stop the step.
    PauseThenApprove,
    /// `reach pack revoke PACK` first, then approve: the revocation must still stop the step.
    RevokeThenApprove,
    /// `reach pack revoke PACK` and `reach pack activate PACK` (a new generation) first, then
    /// approve: the step, stamped under the old generation, must not run.
    ReactivateThenApprove,
}

/// An operator at `reach hil watch`: each request as printed (its whole block) goes to
/// `decide`, answered with the real CLI. Returns (request id, approved) per answer.
pub fn operator(
    body: &TestBody,
    pack: &str,
    decide: impl Fn(&str) -> Verdict + Send + 'static,
) -> tokio::task::JoinHandle<Vec<(String, bool)>> {
    let pack = pack.to_owned();
    let reach = reach_launcher::default_bin_dir().join("reach");
    let state = body.layout.root().to_owned();
    tokio::spawn(async move {
        let mut watch = tokio::process::Command::new(&reach)
            .args(["hil", "watch", "--state"])
            .arg(&state)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
        let mut answered = Vec::new();
        let mut block = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix("answer: reach hil approve ") {
                let id = rest.split_whitespace().next().unwrap().to_owned();
                let verdict = decide(&block);
                let run = async |args: &[&str]| {
                    let out = tokio::process::Command::new(&reach)
                        .args(args)
                        .arg("--state")
                        .arg(&state)
                        .output()
                        .await
                        .unwrap();
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    // An operator started after another (a watch that ward's restart ended)
                    // may find a request the first one answered meanwhile: the first stands.
                    let answered_before = args[0] == "hil" && stderr.contains("hil/answered");
                    assert!(
                        out.status.success() || answered_before,
                        "{args:?}: {stderr}"
                    );
                };
                match verdict {
                    Verdict::Approve => run(&["hil", "approve", &id]).await,
                    Verdict::Deny(reason) => run(&["hil", "deny", &id, "--reason", reason]).await,
                    Verdict::PauseThenApprove => {
                        run(&["bind", "pause", &pack]).await;
                        run(&["hil", "approve", &id]).await;
                    }
                    Verdict::RevokeThenApprove => {
                        run(&["pack", "revoke", &pack]).await;
                        run(&["hil", "approve", &id]).await;
                    }
                    Verdict::ReactivateThenApprove => {
                        run(&["pack", "revoke", &pack]).await;
                        run(&["pack", "activate", &pack]).await;
                        run(&["hil", "approve", &id]).await;
                    }
                }
                answered.push((id, !matches!(verdict, Verdict::Deny(_))));
                block.clear();
            } else {
                block.push_str(&line);
                block.push('\n');
            }
        }
        answered
    })
}
