//! `reach image build`/`prepare` and the `vm-broker.instances` port end to end, with a real
//! guest: the real `reach` binary builds (or reuses from the shared cache) the reference
//! pack's image and its prepared system and prints their digests; the body's vm-broker pins them;
//! workbench's certificate creates an instance, runs an allow-listed profile, reads the
//! guest's `Status`, and destroys it with a confirmation, all through the mTLS port; a
//! network request is refused with its seed code; a role the port does not admit is refused.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::path::{Path, PathBuf};

use reach_digest::Sha256Digest;
use reach_proto::vm::v1 as pb;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_tests::{TestBody, call, refused_at_handshake};
use tonic::Code;

/// The image cache the reach-vm tests share (built once per spec and builder).
const CACHE: &str = "/var/tmp/reach-vm-images";

/// The preparable reference pack's directory: its image.toml and prepared.toml are the specs.
fn images_dir() -> PathBuf {
    reach_taskpack::preparable_pack(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"))
        .expect("a preparable reference pack")
}

/// Runs `reach image …` and returns the digest and directory it printed.
async fn reach_image(args: &[&str]) -> (String, PathBuf) {
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .arg("image")
        .args(args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "reach image {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (digest, dir) = stdout.trim().split_once(' ').expect("digest and directory");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{stdout}"
    );
    (digest.to_owned(), PathBuf::from(dir))
}

/// Kills any QEMU naming the body's state directory when the test ends early.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        let needle = self.0.as_os_str().as_encoded_bytes().to_vec();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmd.starts_with(b"qemu-system") && cmd.windows(needle.len()).any(|w| w == needle) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workbench_runs_a_guest_through_the_port_and_other_roles_are_refused() {
    let spec = images_dir().join("image.toml");
    let (image, image_dir) =
        reach_image(&["build", spec.to_str().unwrap(), "--cache", CACHE]).await;
    // The same spec again: the cache is reused and the digest is the same.
    let (again, again_dir) =
        reach_image(&["build", spec.to_str().unwrap(), "--cache", CACHE]).await;
    assert_eq!((&again, &again_dir), (&image, &image_dir));
    let prepared_spec = images_dir().join("prepared.toml");
    let (prepared, prepared_dir) = reach_image(&[
        "prepare",
        prepared_spec.to_str().unwrap(),
        "--base",
        image_dir.to_str().unwrap(),
        "--cache",
        CACHE,
    ])
    .await;
    // A spec the CLI refuses, with the field named.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        bad.path(),
        "format = \"reach.vm.prepared-spec.v1\"\nmemory_mib = 384\ncpus = 0\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(["image", "prepare"])
        .arg(bad.path())
        .arg("--base")
        .arg(&image_dir)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("prepared spec field cpus"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let body = TestBody::start_configured(|m, _| {
        let role = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "vm-broker")
            .unwrap();
        role.settings = format!(
            "[[images]]\ndigest = {image:?}\ndir = {:?}\n[[prepared]]\ndigest = {prepared:?}\ndir = {:?}\n",
            image_dir.display().to_string(),
            prepared_dir.display().to_string()
        )
        .parse()
        .unwrap();
    })
    .await;
    let _reaper = Reaper(body.layout.root().to_owned());
    let server = body.manifest.principal("vm-broker");
    let workbench = body.material("workbench");
    let mut vm = VmBrokerClient::new(reach_port::connect_lazy(
        body.socket("vm-broker.instances"),
        &workbench,
        server.clone(),
    ));

    // Refused before anything exists: the seed's code is the message's prefix.
    let err = vm
        .create_instance(pb::CreateInstanceRequest {
            image_digest: prepared.clone(),
            network: "isolated".into(),
            wait_ready: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().starts_with("environment/not-contained"),
        "{err:?}"
    );

    let created = vm
        .create_instance(pb::CreateInstanceRequest {
            image_digest: prepared.clone(),
            network: "none".into(),
            memory_mib: 0,
            cpus: 0,
            wait_ready: true,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", body.log("vm-broker")))
        .into_inner();
    assert_eq!(created.state, "ready");
    eprintln!(
        "ready through the port after {} ms ({})",
        created.ready_after_ms, created.accel
    );
    let id = created.instance_id;

    // A generic built-in profile (task profiles such as an MTA's come from packs, not the
    // broker): the guest, created with network none, has only its loopback interface.
    let interfaces = vm
        .exec(pb::ExecRequest {
            instance_id: id.clone(),
            profile: "net-interfaces".into(),
            args: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((interfaces.exited, interfaces.exit_code), (true, 0));
    assert_eq!(String::from_utf8_lossy(&interfaces.stdout), "lo\n");
    assert_eq!(
        interfaces.stdout_sha256,
        Sha256Digest::of(&interfaces.stdout).to_string()
    );
    let refused = vm
        .exec(pb::ExecRequest {
            instance_id: id.clone(),
            profile: "rm".into(),
            args: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().starts_with("broker/profile-refused"));

    let status = vm
        .status(pb::StatusRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (status.state.as_str(), status.image_digest.as_str()),
        ("ready", prepared.as_str())
    );
    // The broker reads the network off the running QEMU process, not off the request.
    assert_eq!(status.network, "none");

    let destroyed = vm
        .destroy(pb::DestroyRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(destroyed.outcome, "destroyed");
    assert!(destroyed.process_gone && destroyed.overlay_deleted && destroyed.sockets_deleted);
    let status = vm
        .status(pb::StatusRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.state, "destroyed");

    // A role the port grants nothing is not admitted at all: refused at the handshake, before
    // any handler or authorization layer sees the call.
    let provider = body.material("egress-provider");
    let ch = reach_port::connect_lazy(
        body.socket("vm-broker.instances"),
        &provider,
        server.clone(),
    );
    let code = call(ch, "/reach.vm.v1.VmBroker/CreateInstance").await;
    assert!(refused_at_handshake(code), "egress-provider got {code:?}");
    // Core is granted readiness's read-only FindPrepared and nothing else of the broker's.
    let core = body.material("core");
    let ch = reach_port::connect_lazy(body.socket("vm-broker.instances"), &core, server);
    let code = call(ch, "/reach.vm.v1.VmBroker/CreateInstance").await;
    assert_eq!(code, tonic::Code::PermissionDenied);
    body.stop().await;
}
