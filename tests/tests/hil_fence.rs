//! The current-use fence and HIL answers on the real body (issue #29): core states each pack's
//! standing to ward after every lifecycle and binding change (and again when ward or core comes
//! back), ward mints step grants only under it, and the operator answers HIL requests with
//! `reach hil` — the real CLI, on ward's port, with the operator's leaf.
//!
//! The step claims here are what core will hold for a stamped step; the guest part of the
//! story (a step executing, or not, in a VM) is tests/tests/workbench.rs.

use std::process::Output;
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_tests::TestBody;
use reach_tests::packs::{PACK, build_variant, replace_in, source as pack_source};
use reach_tests::workbench::code;
use tokio::io::AsyncBufReadExt as _;
use tonic::transport::Channel;

/// One step as core will claim it: `index` of a plan stamped under `generation` and the
/// profile `profile`.
#[derive(Clone)]
struct Step {
    index: u32,
    class: &'static str,
    generation: u64,
    profile: Sha256Digest,
}

impl Step {
    fn digest(&self) -> String {
        Sha256Digest::of(format!("step {} gen {}", self.index, self.generation).as_bytes())
            .to_string()
    }

    fn plan(&self) -> String {
        Sha256Digest::of(format!("plan gen {}", self.generation).as_bytes()).to_string()
    }

    fn mint(&self) -> ward_pb::MintStepGrantRequest {
        ward_pb::MintStepGrantRequest {
            experiment_id: "exp-fence".into(),
            instance_id: "vm-fence".into(),
            plan_digest: self.plan(),
            step_index: self.index,
            step_digest: self.digest(),
            pack_name: PACK.into(),
            pack_generation: self.generation,
            effect_class: self.class.into(),
            ttl_ms: 0,
            profile_digest: self.profile.to_string(),
            hil_required: self.class != "observation",
        }
    }

    fn filing(&self) -> ward_pb::FileHilRequestRequest {
        let mutation = self.class != "observation";
        ward_pb::FileHilRequestRequest {
            experiment_id: "exp-fence".into(),
            instance_id: "vm-fence".into(),
            plan_digest: self.plan(),
            step_index: self.index,
            step_digest: self.digest(),
            pack_name: PACK.into(),
            pack_generation: self.generation,
            effect_class: self.class.into(),
            class_source: if mutation {
                "patch-policy.toml#main-cf"
            } else {
                "command-profiles.toml#service-status"
            }
            .into(),
            action: if mutation { "patch" } else { "run" }.into(),
            target: if mutation {
                "etc/postfix/main.cf"
            } else {
                "service-status"
            }
            .into(),
            argv: Vec::new(),
            diff: if mutation {
                "--- a/etc/postfix/main.cf\n+++ b/etc/postfix/main.cf\n@@ -1 +1 @@\n-mydestination =\n+mydestination = localhost\n".into()
            } else {
                String::new()
            },
            rollback: "recreate-prepared-system".into(),
            ttl_ms: 0,
        }
    }

    fn redeem(&self, grant: String) -> ward_pb::RedeemStepGrantRequest {
        ward_pb::RedeemStepGrantRequest {
            grant,
            experiment_id: "exp-fence".into(),
            instance_id: "vm-fence".into(),
            plan_digest: self.plan(),
            step_index: self.index,
            step_digest: self.digest(),
            pack_name: PACK.into(),
            pack_generation: self.generation,
        }
    }
}

fn ward_as(body: &TestBody, principal: &str) -> WardClient<Channel> {
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material(principal),
        body.manifest.principal("ward"),
    ))
}

async fn mint(core: &mut WardClient<Channel>, step: &Step) -> Result<String, tonic::Status> {
    Ok(core.mint_step_grant(step.mint()).await?.into_inner().grant)
}

/// The refusal code of minting `step` now (`ok` when ward mints).
async fn mint_code(core: &mut WardClient<Channel>, step: &Step) -> String {
    match mint(core, step).await {
        Ok(_) => "ok".into(),
        Err(e) => code(&e).to_owned(),
    }
}

/// Waits until minting `step` answers `want` (core restates in the background).
async fn until_mint(core: &mut WardClient<Channel>, step: &Step, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = mint_code(core, step).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "minting step {} still answers {got}, not {want}",
            step.index
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn reach_hil(body: &TestBody, args: &[&str]) -> Output {
    tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .arg("hil")
        .args(args)
        .arg("--state")
        .arg(body.layout.root())
        .output()
        .await
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn file(core: &mut WardClient<Channel>, step: &Step) -> String {
    core.file_hil_request(step.filing())
        .await
        .unwrap()
        .into_inner()
        .id
}

/// `reach hil approve ID` through the CLI process.
async fn approve(body: &TestBody, id: &str) {
    let o = reach_hil(body, &["approve", id]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("approved"), "{}", stdout(&o));
}

fn bind(hil: &str) -> pb::BindRequest {
    pb::BindRequest {
        pack: PACK.into(),
        workspace: "/tmp/reach-ws".into(),
        vm_backend: "qemu".into(),
        hil: hil.into(),
        ..Default::default()
    }
}

fn pack_ref() -> pb::BindingRef {
    pb::BindingRef { pack: PACK.into() }
}

async fn activate(c: &mut PacksClient<Channel>) -> pb::PackStatus {
    c.activate_pack(pb::ActivatePackRequest {
        name: PACK.into(),
        version: 0,
    })
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_fences_ward_and_the_operator_answers_with_reach_hil() {
    let key =
        reach_taskpack::PackKey::from_pkcs8(&reach_taskpack::PackKey::generate().unwrap()).unwrap();
    let public = key.public().to_string();
    let mut body = TestBody::start_configured(move |m, _| {
        for role in &mut m.roles {
            if role.name.as_str() == "core" {
                let mut k = toml::Table::new();
                k.insert("name".into(), "test-operator".into());
                k.insert("key".into(), public.clone().into());
                role.settings
                    .insert("pack_keys".into(), toml::Value::Array(vec![k.into()]));
            }
        }
    })
    .await;
    let mut packs = PacksClient::new(reach_port::connect_lazy(
        body.socket("core.packs"),
        &body.material("operator"),
        body.manifest.principal("core"),
    ))
    .max_decoding_message_size(reach_taskpack::MAX_ARCHIVE_BYTES * 2);
    let mut core = ward_as(&body, "core");
    let mut workbench = ward_as(&body, "workbench");

    let v1 = reach_taskpack::build(&pack_source(), &key).unwrap();
    let p1: Sha256Digest = v1.facts.profile_digest;
    packs
        .install_pack(pb::InstallPackRequest {
            archive: v1.archive.clone(),
        })
        .await
        .unwrap();
    // Installed, never activated: ward has nothing on which to mint.
    let observe = |index, generation, profile| Step {
        index,
        class: "observation",
        generation,
        profile,
    };
    assert_eq!(
        mint_code(&mut core, &observe(0, 1, p1)).await,
        "local-binding/paused"
    );
    assert_eq!(activate(&mut packs).await.generation, 1);
    // Active without a binding: nothing may run.
    assert_eq!(
        mint_code(&mut core, &observe(0, 1, p1)).await,
        "local-binding/paused"
    );

    // Each-mutation: an observation mints without asking; a mutation asks.
    packs.bind(bind("each-mutation")).await.unwrap();
    assert_eq!(mint_code(&mut core, &observe(0, 1, p1)).await, "ok");
    let patch = Step {
        index: 1,
        class: "contained-mutation",
        generation: 1,
        profile: p1,
    };
    assert_eq!(mint_code(&mut core, &patch).await, "hil/missing");
    // Each-step: the observation asks too (the binding never changed its class).
    packs.bind(bind("each-step")).await.unwrap();
    let step0 = observe(0, 1, p1);
    assert_eq!(mint_code(&mut core, &step0).await, "hil/missing");

    // Filed by core, listed and shown by the CLI, approved by the operator: exactly that step.
    let id0 = file(&mut core, &step0).await;
    let listed = reach_hil(&body, &["list"]).await;
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(stdout(&listed).contains(&id0), "{}", stdout(&listed));
    let id1 = file(&mut core, &patch).await;
    let shown = reach_hil(&body, &["show", &id1]).await;
    assert!(shown.status.success(), "{}", stderr(&shown));
    for want in [
        "contained-mutation (the mode of patch-policy.toml#main-cf)",
        "patch etc/postfix/main.cf",
        "-mydestination =\n+mydestination = localhost",
        "recreate-prepared-system",
        &format!("{PACK}, generation 1"),
    ] {
        assert!(
            stdout(&shown).contains(want),
            "{want:?} in\n{}",
            stdout(&shown)
        );
    }
    approve(&body, &id0).await;
    assert_eq!(mint_code(&mut core, &patch).await, "hil/pending");
    // An answer binds the digest shown: another request's digest is refused.
    let other = core
        .get_hil_request(ward_pb::GetHilRequestRequest { id: id0.clone() })
        .await
        .unwrap()
        .into_inner()
        .digest;
    let e = ward_as(&body, "operator")
        .answer_hil_request(ward_pb::AnswerHilRequestRequest {
            id: id1.clone(),
            request_digest: other,
            approve: true,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "hil/other-request", "{e:?}");
    // Denied through the CLI; the first answer stays.
    let o = reach_hil(&body, &["deny", &id1, "--reason", "not this change"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(mint_code(&mut core, &patch).await, "hil/denied");
    let o = reach_hil(&body, &["approve", &id1]).await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("hil/answered"), "{}", stderr(&o));

    // The race: a pause that lands after the mint, before the redemption, stops the step.
    let grant = mint(&mut core, &step0).await.unwrap();
    packs.pause_binding(pack_ref()).await.unwrap();
    let e = workbench
        .redeem_step_grant(step0.redeem(grant))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "local-binding/paused", "{e:?}");
    assert_eq!(mint_code(&mut core, &step0).await, "local-binding/paused");
    // Resume needs no reactivation: the approved step mints and redeems, once.
    packs.resume_binding(pack_ref()).await.unwrap();
    let grant = mint(&mut core, &step0).await.unwrap();
    workbench
        .redeem_step_grant(step0.redeem(grant))
        .await
        .unwrap();
    assert_eq!(mint_code(&mut core, &step0).await, "hil/spent");

    // Ward down: the pause is recorded, core says ward has not taken it, and restates it when
    // ward returns. A request filed before survives, and one answer works after.
    let step2 = observe(2, 1, p1);
    let id2 = file(&mut core, &step2).await;
    let launcher = body.body.as_mut().unwrap();
    launcher.kill_role("ward").await.unwrap();
    let e = packs.pause_binding(pack_ref()).await.unwrap_err();
    assert_eq!(code(&e), "fence/behind", "{e:?}");
    let launcher = body.body.as_mut().unwrap();
    launcher.start_role("ward").await.unwrap();
    until_mint(&mut core, &step2, "local-binding/paused").await;
    packs.resume_binding(pack_ref()).await.unwrap();
    approve(&body, &id2).await;
    assert_eq!(mint_code(&mut core, &step2).await, "ok");

    // Ward and core both down across a pause: ward comes back with the older standing, and
    // core states the ledger's when it starts. A grant minted in between never redeems.
    let launcher = body.body.as_mut().unwrap();
    launcher.kill_role("ward").await.unwrap();
    let e = packs.pause_binding(pack_ref()).await.unwrap_err();
    assert_eq!(code(&e), "fence/behind", "{e:?}");
    let launcher = body.body.as_mut().unwrap();
    launcher.kill_role("core").await.unwrap();
    launcher.start_role("ward").await.unwrap();
    let stale = mint(&mut core, &step2).await.unwrap();
    let launcher = body.body.as_mut().unwrap();
    launcher.start_role("core").await.unwrap();
    until_mint(&mut core, &step2, "local-binding/paused").await;
    let e = workbench
        .redeem_step_grant(step2.redeem(stale))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "local-binding/paused", "{e:?}");
    packs.resume_binding(pack_ref()).await.unwrap();

    // Revoked: nothing mints. Reactivated: a step stamped before is stale for good.
    let s = packs
        .revoke_pack(pb::RevokePackRequest {
            name: PACK.into(),
            reason: "test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.generation, 2);
    assert_eq!(mint_code(&mut core, &step2).await, "package/revoked");
    assert_eq!(activate(&mut packs).await.generation, 3);
    assert_eq!(
        mint_code(&mut core, &step2).await,
        "package/generation-stale"
    );
    packs
        .accept_profile(pb::AcceptProfileRequest {
            pack: PACK.into(),
            profile_digest: p1.to_string(),
        })
        .await
        .unwrap();
    assert_eq!(
        mint_code(&mut core, &step2).await,
        "package/generation-stale"
    );

    // v2 changes the profile and raises the HIL minimum: steps stamped under the old profile
    // are refused, and an each-mutation binding cannot accept it; a new binding asks each step.
    packs.bind(bind("each-mutation")).await.unwrap();
    let v2 = build_variant(&key, |dir| {
        replace_in(&dir.join("pack.toml"), "version = 1", "version = 2");
        replace_in(
            &dir.join("task-profile.toml"),
            "hil_minimum = \"each-mutation\"",
            "hil_minimum = \"each-step\"",
        );
    });
    let p2 = v2.facts.profile_digest;
    packs
        .install_pack(pb::InstallPackRequest {
            archive: v2.archive,
        })
        .await
        .unwrap();
    let s = activate(&mut packs).await;
    assert!(s.profile_changed, "{s:?}");
    assert_eq!(s.generation, 4);
    assert_eq!(
        mint_code(&mut core, &observe(0, 4, p1)).await,
        "local-binding/profile-changed"
    );
    // Nor does a step stamped at the new generation under the new profile mint before the
    // binding accepts that profile: ward holds the bound profile beside the active one.
    assert_eq!(
        mint_code(&mut core, &observe(0, 4, p2)).await,
        "local-binding/profile-changed"
    );
    let e = packs
        .accept_profile(pb::AcceptProfileRequest {
            pack: PACK.into(),
            profile_digest: p2.to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "local-binding/hil-below-minimum", "{e:?}");
    packs.bind(bind("each-step")).await.unwrap();
    assert_eq!(
        mint_code(&mut core, &observe(0, 4, p2)).await,
        "hil/missing"
    );

    // `reach hil watch` prints a request as it is filed.
    let mut watch = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(["hil", "watch", "--state"])
        .arg(body.layout.root())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    // The watch prints what is pending first: the answered requests are not among them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id3 = file(&mut core, &observe(0, 4, p2)).await;
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let done = line.starts_with("answer: reach hil approve") && line.contains(&id3);
            seen.push(line);
            if done {
                return seen;
            }
        }
        panic!("watch ended: {seen:?}");
    })
    .await
    .expect("watch printed the request");
    assert!(
        !seen.iter().any(|l| l.contains(&id0) || l.contains(&id1)),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|l| l.contains("service-status")),
        "{seen:?}"
    );
    watch.kill().await.unwrap();
    body.stop().await;
}
