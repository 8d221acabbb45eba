//! A small, service-neutral vocabulary for tests and benchmarks (feature `testing`).
//!
//! It stands for no real pack: a made-up service `svc` with its configuration `etc/app.conf`,
//! and command profiles of every mode.

use std::collections::{BTreeMap, BTreeSet};

use reach_digest::Sha256Digest;

use crate::patch_policy::PatchPolicy;
use crate::vocabulary::{
    ArgSlot, BindingTerms, CommandProfile, EffectClass, HilMode, PackRef, Vocabulary,
};

/// The test pack's patch policy.
pub const POLICY: &str = r#"
format = "sensorium-patch-policy.v1"
forbidden = ["*", "0.0.0.0/0", "::/0"]

[[files]]
target = "etc/app.conf"
max_bytes = 4096
uid = 0
gid = 0
mode = "0644"
line_shapes = ['^accept = [a-z0-9., -]+$', '^listen = [a-z0-9.:]+$', '^# .*$']

[[files]]
target = "etc/app.d/limits.conf"
max_bytes = 256
uid = 0
gid = 0
mode = "0640"
line_shapes = ['^max_[a-z]+ = [0-9]{1,6}$']

# Admitted by the policy, but the prepared system has no such file.
[[files]]
target = "etc/app.d/absent.conf"
max_bytes = 256
uid = 0
gid = 0
mode = "0644"
line_shapes = ['^.*$']
"#;

/// The baseline of `etc/app.conf`: the local domain is missing from `accept`.
pub const APP_CONF: &str = "\
# app configuration
listen = 127.0.0.1
accept = localhost
log = info
";

/// The baseline of `etc/app.d/limits.conf`.
pub const LIMITS_CONF: &str = "max_clients = 10\nmax_queue = 100\n";

/// A profile entry as `command-profiles.toml#<name>` would give it.
pub fn profile(name: &str, mode: Option<EffectClass>, args: &[&[&str]]) -> CommandProfile {
    CommandProfile {
        mode,
        args: args
            .iter()
            .map(|slot| ArgSlot {
                one_of: slot.iter().map(|s| (*s).to_owned()).collect(),
            })
            .collect(),
        source: format!("command-profiles.toml#{name}"),
    }
}

/// The test pack's reference.
pub fn pack_ref() -> PackRef {
    PackRef {
        name: "app-local".to_owned(),
        version: 3,
        facts_digest: Sha256Digest::of(b"app-local facts"),
        profile_digest: Sha256Digest::of(b"app-local task profile"),
    }
}

/// The test vocabulary:
/// - `show-config` (observation), `service-status svc` (observation), `list-dir etc|var`
///   (observation), `reload-cache` (contained mutation), `legacy-tool` (no enforced mode);
/// - service `svc`;
/// - [`POLICY`] with baselines for `etc/app.conf` and `etc/app.d/limits.conf`;
/// - HIL minimum `each-mutation`, at most 16 steps.
pub fn vocabulary() -> Vocabulary {
    let obs = Some(EffectClass::Observation);
    let commands = [
        ("show-config", profile("show-config", obs, &[])),
        (
            "service-status",
            profile("service-status", obs, &[&["svc"]]),
        ),
        ("list-dir", profile("list-dir", obs, &[&["etc", "var"]])),
        (
            "reload-cache",
            profile("reload-cache", Some(EffectClass::ContainedMutation), &[]),
        ),
        ("legacy-tool", profile("legacy-tool", None, &[])),
    ]
    .into_iter()
    .map(|(n, p)| (n.to_owned(), p))
    .collect();
    Vocabulary {
        pack: pack_ref(),
        commands,
        services: BTreeSet::from(["svc".to_owned()]),
        patch_policy: PatchPolicy::parse(POLICY).expect("the test policy parses"),
        baselines: BTreeMap::from([
            ("etc/app.conf".to_owned(), APP_CONF.to_owned()),
            ("etc/app.d/limits.conf".to_owned(), LIMITS_CONF.to_owned()),
        ]),
        hil_minimum: HilMode::EachMutation,
        rollback: "recreate-prepared-system".to_owned(),
        max_steps: 16,
    }
}

/// Binding terms with `hil` at generation 7.
pub fn terms(hil: HilMode) -> BindingTerms {
    BindingTerms { hil, generation: 7 }
}

/// A ten-step candidate the test vocabulary admits: observations first, three patches (two
/// chained on `etc/app.conf`), a restart, a contained-mutation profile and the verifier.
pub const TEN_STEPS: &str = r##"{
  "format": "reach.plan.candidate.v1",
  "diagnosis": "The local domain is missing from accept; add it and restart svc.",
  "steps": [
    { "kind": "run", "profile": "show-config" },
    { "kind": "run", "profile": "service-status", "args": ["svc"] },
    { "kind": "patch", "target": "etc/app.conf",
      "edits": [ { "op": "replace", "line": "accept = localhost", "with": "accept = localhost, example.test" } ] },
    { "kind": "patch", "target": "etc/app.conf",
      "edits": [ { "op": "append", "with": "# accept example.test locally" },
                 { "op": "delete", "line": "log = info" } ] },
    { "kind": "patch", "target": "etc/app.d/limits.conf",
      "edits": [ { "op": "replace", "line": "max_queue = 100", "with": "max_queue = 200" } ] },
    { "kind": "run", "profile": "reload-cache" },
    { "kind": "restart", "service": "svc" },
    { "kind": "run", "profile": "list-dir", "args": ["etc"] },
    { "kind": "run", "profile": "service-status", "args": ["svc"] },
    { "kind": "verify" }
  ]
}"##;
