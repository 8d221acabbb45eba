//! `reach scribe check`: drift between the manifest and what is on disk.

mod common;

use std::path::Path;
use std::time::SystemTime;

use common::*;
use expect_test::expect;
use reach_manifest::VPS_PUBLIC;
use reach_manifest::plan::StateLayout;
use reach_scribe::check::{CheckOptions, check};
use reach_scribe::identities::{Rotation, materialize_identities};
use reach_scribe::quadlet::{QuadletInput, derive, write_out};

/// A body with identities and both Discord token files, and its units written to `out`.
fn body() -> (tempfile::TempDir, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let m = load(VPS_PUBLIC);
    let layout = StateLayout::new(state.path());
    materialize_identities(&m, &layout, Rotation::IfNeeded, SystemTime::now()).unwrap();
    for role in ["egress-discord", "ingress-edge"] {
        reach_identity::files::write_secret(
            &layout.secret_dir(role).join("discord-bot-token"),
            b"t",
        )
        .unwrap();
    }
    let d = derive_text(VPS_PUBLIC, state.path()).unwrap();
    write_out(&d, out.path()).unwrap();
    (state, out)
}

fn drift(state: &Path, out: &Path, options: &CheckOptions) -> String {
    let m = load(VPS_PUBLIC);
    let input = QuadletInput::new(&m, pinned(&m), StateLayout::new(state));
    let derived = derive(&input).unwrap();
    let found = check(&input, &derived, out, options).unwrap();
    found
        .iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .replace(&state.display().to_string(), "<state>")
        .replace(&out.display().to_string(), "<out>")
}

#[test]
fn a_fresh_materialization_has_no_drift() {
    let (state, out) = body();
    assert_eq!(
        drift(state.path(), out.path(), &CheckOptions::default()),
        ""
    );
}

#[test]
fn reports_changed_missing_and_extra_units() {
    let (state, out) = body();
    let core = out.path().join("reach-core.container");
    let text = std::fs::read_to_string(&core).unwrap();
    std::fs::write(&core, text.replace("ReadOnly=true\n", "ReadOnly=false\n")).unwrap();
    std::fs::remove_file(out.path().join("reach-port-ward.health.volume")).unwrap();
    std::fs::write(
        out.path().join("reach-intruder.container"),
        "[Container]\nImage=x\n",
    )
    .unwrap();
    // The renewal timer is Scribe's too: slowed to a week, a leaf would end first.
    let timer = out.path().join(reach_scribe::renewal::TIMER_FILE);
    let text = std::fs::read_to_string(&timer).unwrap();
    std::fs::write(
        &timer,
        text.replace("OnCalendar=hourly", "OnCalendar=weekly"),
    )
    .unwrap();
    expect![[r#"
        changed: reach-core.container line 21: expected `ReadOnly=true`, found `ReadOnly=false`
        missing: reach-port-ward.health.volume
        changed: systemd/reach-renew.timer line 7: expected `OnCalendar=hourly`, found `OnCalendar=weekly`
        extra: reach-intruder.container (not derived from the manifest)
    "#]]
    .assert_eq(&drift(state.path(), out.path(), &CheckOptions::default()));
}

#[test]
fn a_hand_edit_is_refused_with_the_rule_it_breaks() {
    let (state, out) = body();
    let unit = out.path().join("reach-egress-discord.container");
    let text = std::fs::read_to_string(&unit).unwrap();
    let text = text
        .replace("PodmanArgs=--memory=64m --memory-swap=64m --umask=0007\n", "PodmanArgs=--memory=64m --memory-swap=64m --umask=0007 --privileged\n")
        .replace(
            "Secret=reach.egress-discord.config,",
            "Secret=reach.core.config,type=mount,target=/stolen,mode=0400,uid=1000,gid=2000\nSecret=reach.egress-discord.config,",
        );
    // Another role's secret directory, and Scribe's, mounted beside its own.
    let own = format!("Volume={}/secrets/egress-discord:", state.path().display());
    let text = text.replace(
        &own,
        &format!(
            "Volume={0}/secrets/core:/stolen-key:ro\nVolume={0}/scribe:/root-key:ro\n{own}",
            state.path().display()
        ),
    );
    std::fs::write(&unit, text).unwrap();
    let core = out.path().join("reach-core.container");
    let text = std::fs::read_to_string(&core).unwrap();
    std::fs::write(&core, text.replace("Network=none\n", "Network=host\n")).unwrap();
    expect![[r#"
        changed: reach-core.container line 27: expected `Network=none`, found `Network=host`
        changed: reach-egress-discord.container line 25: expected `PodmanArgs=--memory=64m --memory-swap=64m --umask=0007`, found `PodmanArgs=--memory=64m --memory-swap=64m --umask=0007 --privileged`
        refused: reach-core.container: scribe/host-namespace: reach-core.container:27: `Network=host` joins a host namespace
        refused: reach-egress-discord.container: scribe/privileged: reach-egress-discord.container:25: `--privileged` gives the container every capability and device
        refused: reach-egress-discord.container: scribe/foreign-secret: reach-egress-discord.container:27: `<state>/secrets/core` belongs to `core`, not to role `egress-discord`
        refused: reach-egress-discord.container: scribe/foreign-secret: reach-egress-discord.container:28: `<state>/scribe` belongs to `scribe`, not to role `egress-discord`
        refused: reach-egress-discord.container: scribe/foreign-secret: reach-egress-discord.container:34: `reach.core.config` belongs to `core`, not to role `egress-discord`
    "#]].assert_eq(&drift(state.path(), out.path(), &CheckOptions::default()));
}

#[test]
fn reports_missing_secret_sources_and_ruleset_drift() {
    let (state, out) = body();
    std::fs::remove_file(
        StateLayout::new(state.path())
            .secret_dir("ingress-edge")
            .join("discord-bot-token"),
    )
    .unwrap();
    let ruleset = out.path().join("reach.nft");
    std::fs::write(&ruleset, "table inet reach_egress {\n}\n").unwrap();
    let options = CheckOptions {
        podman: None,
        ruleset: Some((
            ruleset,
            "table inet reach_egress {\n\tchain output {\n}\n".into(),
        )),
    };
    expect![[r#"
        secret source missing: ingress-edge/discord-bot-token from <state>/secrets/ingress-edge/discord-bot-token
        ruleset <out>/reach.nft line 2: expected `	chain output {`, found `}`
    "#]].assert_eq(&drift(state.path(), out.path(), &options));
}

#[test]
fn a_hand_edited_umask_is_refused() {
    // Scribe's own `--umask=0007` passes; any other umask (sockets and data for everyone) is a
    // flag outside the allow-list.
    let (state, out) = body();
    let unit = out.path().join("reach-ward.container");
    let text = std::fs::read_to_string(&unit).unwrap();
    std::fs::write(&unit, text.replace("--umask=0007", "--umask=0000")).unwrap();
    let report = drift(state.path(), out.path(), &CheckOptions::default());
    assert!(
        report.contains("refused: reach-ward.container: scribe/podman-arg-not-allowed"),
        "{report}"
    );
    assert!(report.contains("--umask=0000"), "{report}");
}
