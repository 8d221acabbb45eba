//! Readiness: each blocker in order, from inputs where every later blocker would also fire.

use expect_test::expect;
use reach_digest::Sha256Digest;
use reach_taskpack::{
    BindingView, ModelRuntime, PackLifecycle, PreparedLookup, Readiness, ReadinessInputs,
};

/// Inputs where every blocker fires that the binding's absence leaves possible.
fn all_blocked() -> ReadinessInputs {
    ReadinessInputs {
        pack: "app-local".to_owned(),
        pack_state: PackLifecycle::NotInstalled,
        binding: None,
        current_generation: 4,
        current_profile_digest: Sha256Digest::of(b"profile v2"),
        prepared: PreparedLookup::Missing {
            command: "reach image prepare --pack app-local.taskpack --cache DIR".to_owned(),
        },
        effect_modes_missing: vec!["legacy-tool".to_owned(), "old-probe".to_owned()],
        model: ModelRuntime::Unreachable {
            why: "connection refused at 127.0.0.1:8080".to_owned(),
        },
    }
}

/// Each step lifts the decisive blocker of the one before: the table is the order.
fn steps() -> Vec<(&'static str, ReadinessInputs)> {
    let mut i = all_blocked();
    let mut out = vec![("nothing installed", i.clone())];
    i.pack_state = PackLifecycle::Installed;
    out.push(("installed", i.clone()));
    i.pack_state = PackLifecycle::Revoked;
    out.push(("revoked", i.clone()));
    i.pack_state = PackLifecycle::Active;
    out.push(("active", i.clone()));
    i.binding = Some(BindingView {
        bound_generation: 2,
        bound_profile_digest: Sha256Digest::of(b"profile v1"),
        paused: true,
    });
    out.push(("bound to another profile and generation, paused", i.clone()));
    i.binding.as_mut().unwrap().bound_profile_digest = i.current_profile_digest;
    out.push(("same profile", i.clone()));
    i.binding.as_mut().unwrap().bound_generation = i.current_generation;
    out.push(("same generation", i.clone()));
    i.binding.as_mut().unwrap().paused = false;
    out.push(("resumed", i.clone()));
    i.prepared = PreparedLookup::Found {
        image_digest: Sha256Digest::of(b"image"),
        prepared_digest: Sha256Digest::of(b"prepared"),
    };
    out.push(("prepared", i.clone()));
    i.effect_modes_missing.clear();
    out.push(("every mode enforced", i.clone()));
    i.model = ModelRuntime::OtherModel {
        model: "smollm2@sha256:b179".to_owned(),
        served: vec!["smollm2@sha256:0000".to_owned()],
    };
    out.push(("another model served", i.clone()));
    i.model = ModelRuntime::Reachable;
    out.push(("model reachable", i.clone()));
    i.model = ModelRuntime::NotRequired;
    out.push(("no model needed", i));
    out
}

#[test]
fn blockers_in_order() {
    let mut out = String::new();
    for (what, inputs) in steps() {
        let r = Readiness::of(&inputs);
        out.push_str(&format!("{what}: {}\n", r.code()));
        if let Some(b) = r.blocker() {
            out.push_str(&format!(
                "  {}\n  next: {}\n",
                b.message(),
                b.next_command()
            ));
        }
    }
    expect![[r#"
        nothing installed: package/not-installed
          no version of the pack app-local is installed
          next: reach pack install FILE
        installed: package/not-active
          the pack app-local is installed but not active
          next: reach pack activate app-local
        revoked: package/revoked
          the pack app-local is revoked
          next: reach pack activate app-local
        active: local-binding/missing
          the pack app-local has no local binding
          next: reach bind app-local --workspace DIR --vm-backend qemu
        bound to another profile and generation, paused: local-binding/profile-changed
          the binding of app-local was made for the task profile sha256:2cc0d1d4f39daad78314636c1c1a94380e1075feeb45602ef458d4738c4ec3f0; the active pack's is sha256:627ebe849ad39134ed1a1795cdd31da444080e7c09611cfe238fe927af4ff787: read the diff and accept it
          next: reach bind accept app-local
        same profile: package/generation-stale
          the binding of app-local was made at generation 2; the pack is at generation 4 (same task profile)
          next: reach bind accept app-local
        same generation: local-binding/paused
          the binding of app-local is paused
          next: reach bind resume app-local
        resumed: environment/prepared-system-missing
          the pack's prepared system does not exist yet; `reach image prepare --pack app-local.taskpack --cache DIR` makes it
          next: reach image prepare --pack app-local.taskpack --cache DIR
        prepared: workbench/effect-mode-missing
          the command profiles legacy-tool, old-probe of app-local have no enforced effect mode: a version of the pack that gives each one is needed
          next: reach pack install FILE
        every mode enforced: inference/runtime-unreachable
          the model runtime of the binding of app-local is unreachable: connection refused at 127.0.0.1:8080
          next: reach bind status app-local
        another model served: inference/model-not-served
          the model runtime of the binding of app-local does not serve smollm2@sha256:b179; it serves: smollm2@sha256:0000
          next: reach bind status app-local
        model reachable: runnable
        no model needed: runnable
    "#]]
    .assert_eq(&out);
}

#[test]
fn json_form() {
    let blocked = Readiness::of(&all_blocked());
    let mut runnable_inputs = steps().pop().unwrap().1;
    runnable_inputs.pack_state = PackLifecycle::Active;
    let runnable = Readiness::of(&runnable_inputs);
    assert!(runnable.is_runnable());
    let text = format!(
        "{}\n{}\n{}\n",
        serde_json::to_string(&blocked).unwrap(),
        serde_json::to_string(&runnable).unwrap(),
        serde_json::to_string(&all_blocked()).unwrap(),
    );
    expect![[r#"
        {"state":"blocked","code":"package/not-installed","message":"no version of the pack app-local is installed","next_command":"reach pack install FILE"}
        {"state":"runnable"}
        {"pack":"app-local","pack_state":"not-installed","binding":null,"current_generation":4,"current_profile_digest":"sha256:627ebe849ad39134ed1a1795cdd31da444080e7c09611cfe238fe927af4ff787","prepared":{"state":"missing","command":"reach image prepare --pack app-local.taskpack --cache DIR"},"effect_modes_missing":["legacy-tool","old-probe"],"model":{"state":"unreachable","why":"connection refused at 127.0.0.1:8080"}}
    "#]]
    .assert_eq(&text);
    let back: reach_taskpack::ReadinessReport =
        serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(back, blocked.report());
    let inputs: ReadinessInputs = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    assert_eq!(inputs, all_blocked());
}
