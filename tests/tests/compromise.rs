//! `reach compromise ROLE` on a running body, run as the operator runs it (the real binary):
//! the role's lease is revoked and its claimed delivery tainted in core's ledger, its leaf is
//! withheld and the root it chains to rotated out, so every port refuses it at the handshake
//! while every other role keeps answering under the new root; the seed's next steps are
//! printed; `--reinstate` gives the rebuilt role a fresh leaf.

use std::time::{Duration, Instant};

use reach_proto::core::v1::admission_client::AdmissionClient;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::*;
use reach_tests::TestBody;

const BASE: &str = "https://discord.test/api/v10";

fn question(id: &str, text: &str) -> AdmitRequest {
    AdmitRequest {
        platform: "discord".into(),
        adapter_revision: "reach-discord@1".into(),
        application_id: "app-1".into(),
        event_kind: "MESSAGE_CREATE".into(),
        external_event_id: id.into(),
        payload_digest: reach_digest::Sha256Digest::of(text).to_string(),
        guild_id: "g1".into(),
        channel_id: "c1".into(),
        subject_id: "u1".into(),
        question: text.into(),
        reply_to_message_id: id.into(),
        sealed_interaction_token: Vec::new(),
    }
}

fn reach(body: &TestBody, args: &[&str]) -> std::process::Output {
    std::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(args)
        .arg("--state")
        .arg(body.layout.root())
        .output()
        .expect("reach runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compromised_role_loses_its_lease_and_its_leaf_and_the_rest_serve_on() {
    let body = TestBody::start().await;
    body.operator_after_genesis("compromise test").await;
    let core = body.manifest.principal("core");
    // egress-discord as the compromised sender: it holds a claimed delivery. Its material is
    // loaded now, as the attacker holds it: what it presents later is this leaf.
    let gate_material = body.material("egress-discord");
    let mut edge = AdmissionClient::new(reach_port::connect_lazy(
        body.socket("core.admission"),
        &body.material("ingress-edge"),
        core.clone(),
    ));
    let mut gate = DeliveryClient::new(reach_port::connect_lazy(
        body.socket("core.delivery"),
        &gate_material,
        core.clone(),
    ));
    edge.admit(question("m-c1", "How does a port authenticate a call?"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let intent = loop {
        let claimed = gate
            .claim(ClaimRequest {
                lease_ms: 60_000,
                destination_base: BASE.into(),
                wait_ms: 0,
                interactions_only: false,
            })
            .await
            .unwrap()
            .into_inner()
            .intent;
        if let Some(i) = claimed {
            break i;
        }
        assert!(Instant::now() < deadline, "no intent became claimable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let out = reach(
        &body,
        &[
            "compromise",
            "egress-discord",
            "--reason",
            "host image tampered",
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 1. The lease revoked and the delivery tainted, in the ledger.
    assert!(
        said.contains(&format!(
            "{:<26} {}  CLAIMED -> LEASE_REVOKED",
            "DiscordDeliveryIntent@1", intent.intent_id
        )),
        "{said}"
    );
    // 2. Its leaf withheld, the root rotated out, and the proof of refusal.
    assert!(said.contains("root rotated: 8 leaves issued"), "{said}");
    assert!(
        said.contains("previous root retired after 7 live roles served their new leaf"),
        "{said}"
    );
    assert!(
        said.contains("the old leaf is refused: ")
            && said.contains("(which admitted egress-discord before) refused it at the handshake"),
        "{said}"
    );
    // 3. The seed's next steps, with this body's names.
    for step in [
        "stop egress-discord and rebuild it from its trusted pinned image",
        "revoke at their issuers the credentials egress-discord held",
        "discord-bot-token (discord-bot)",
        "--rotate interaction-seal",
        "never resent",
        "rebuild the body instead",
    ] {
        assert!(said.contains(step), "{step}: {said}");
    }
    // Nothing secret is printed.
    let token = std::fs::read(
        body.layout
            .secret_dir("egress-discord")
            .join("discord-bot-token"),
    )
    .unwrap();
    assert!(!said.as_bytes().windows(token.len()).any(|w| w == token));

    // The attacker's connection, opened before the compromise, was ended when core reloaded
    // the retired root, and its reconnection is refused at the handshake: even the lease it
    // held is out of reach (before the ledger's fence would refuse it too).
    let refused = gate
        .mark_submitting(MarkSubmittingRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            egress_decision_id: intent.egress_decision_id.clone(),
        })
        .await
        .unwrap_err();
    assert!(
        reach_port::probe::refused_at_handshake(refused.code()),
        "{refused:?}"
    );
    // Its secret directory holds no leaf, and no renewal gives it one.
    let secrets = body.layout.secret_dir("egress-discord");
    assert!(!secrets.join("tls.crt").exists() && !secrets.join("tls.key").exists());
    reach_scribe::identities::issue_leaves(
        &body.manifest,
        &body.layout,
        reach_scribe::Rotation::IfNeeded,
        std::time::SystemTime::now(),
    )
    .unwrap();
    assert!(!secrets.join("tls.crt").exists());
    // Every other role answers the operator under the new root; the compromised one does not.
    let health = reach_launcher::status(&body.manifest, &body.layout)
        .await
        .unwrap();
    for h in &health {
        assert_eq!(
            h.result.is_ok(),
            h.role != "egress-discord",
            "{}: {:?}",
            h.role,
            h.result
        );
    }

    // The receipt says so too: the compromised role's health and leaf fail, the rotation is
    // finished.
    let audit = reach(&body, &["audit"]);
    let receipt: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let outcome = |id: &str| {
        receipt["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {receipt:#}"))["outcome"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(outcome("health/egress-discord"), "fail");
    assert_eq!(outcome("identity/leaves"), "fail");
    assert_eq!(outcome("rotation/root"), "pass");
    assert_eq!(outcome("health/core"), "pass");

    // After the rebuild: reinstated, it gets a fresh leaf under the current root.
    let out = reach(&body, &["compromise", "egress-discord", "--reinstate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(secrets.join("tls.crt").exists());
    let again = reach(&body, &["compromise", "egress-discord", "--reinstate"]);
    assert!(!again.status.success(), "reinstated twice");
    body.stop().await;
}

/// Core not answering does not hold back the revocation: the leaf is withheld and its root
/// retired all the same, the ledger's taint is said to be owed (with the command that records
/// it once core serves), and the command fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_core_down_the_leaf_is_revoked_and_the_taint_is_owed() {
    let body = TestBody::start().await;
    body.operator_after_genesis("compromise test").await;
    let roles = std::fs::read_to_string(body.layout.run_dir().join("roles")).unwrap();
    let pid: i32 = roles
        .lines()
        .find_map(|l| l.strip_prefix("core "))
        .expect("core's pid")
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let out = reach(
        &body,
        &["compromise", "egress-discord", "--reason", "token leaked"],
    );
    let (said, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("NOT tainted: core's ledger did not answer"),
        "{said}"
    );
    assert!(said.contains("previous root retired"), "{said}");
    assert!(
        said.contains("the old leaf is refused: ward (which admitted egress-discord before)"),
        "{said}"
    );
    assert!(
        err.contains(
            "run: reach vault taint --principal spiffe://reach.local/egress-discord \
             --reason \"compromise: token leaked\""
        ),
        "{err}"
    );
    assert!(
        !body
            .layout
            .secret_dir("egress-discord")
            .join("tls.crt")
            .exists()
    );
    body.stop().await;
}
