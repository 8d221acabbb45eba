//! Patch policies, from a pack (crates/plan `PatchPolicy::parse`), and applying a patch under
//! one (`PatchPolicy::apply`: the one implementation the compiler runs on the baseline and the
//! workbench runs again on the real file in the guest).
//!
//! Input: the policy's TOML text, a 0 byte, the pre-image, a 0 byte, a target selector byte,
//! then the edits as a candidate writes them (a JSON array, read by `Candidate::parse` as the
//! plan reads it). Without the separators the whole input is a policy.
//!
//! Promised: a refused policy is `package/schema`; an accepted one admits only relative
//! targets, modes within `0o7777`, and no empty forbidden substring. Applying never panics and
//! refuses with `workbench/patch-outside-policy`. An applied patch adds only lines that match
//! one of the target's shapes and hold no forbidden substring, fits `max_bytes`, keeps the
//! pre-image's final newline or its absence (when anything is left), carries the digests of the exact pre- and
//! post-image, and applying it again to the same pre-image gives the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_digest::Sha256Digest;
use reach_plan::patch_policy::PatchPolicy;
use reach_plan::{Candidate, Edit, RelativeTarget, Step};

fn edits_of(target: &str, edits: &str) -> Option<Vec<Edit>> {
    let candidate = format!(
        r#"{{"format":"reach.plan.candidate.v1","diagnosis":"d","steps":[{{"kind":"patch","target":{},"edits":{edits}}}]}}"#,
        serde_json::to_string(target).ok()?
    );
    let c = Candidate::parse(candidate.as_bytes()).ok()?;
    match c.steps.into_iter().next()? {
        Step::Patch { edits, .. } => Some(edits),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |b| *b == 0);
    let Ok(policy_text) = std::str::from_utf8(parts.next().unwrap_or_default()) else {
        return;
    };
    let policy = match PatchPolicy::parse(policy_text) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.code(), "package/schema", "{e}");
            return;
        }
    };
    assert!(policy.forbidden().iter().all(|f| !f.is_empty()));
    for f in policy.files() {
        assert!(RelativeTarget::new(f.target.as_str()).is_ok(), "{}", f.target.as_str());
        assert!(f.mode <= 0o7777, "{:o}", f.mode);
        assert_eq!(policy.file(f.target.as_str()).map(|g| &g.target), Some(&f.target));
    }

    let (Some(pre), Some(rest)) = (parts.next(), parts.next()) else {
        return;
    };
    let Ok(pre) = std::str::from_utf8(pre) else {
        return;
    };
    let Some((selector, edits)) = rest.split_first() else {
        return;
    };
    let Ok(edits) = std::str::from_utf8(edits) else {
        return;
    };
    // One of the policy's targets, or (the selector past them) one it does not admit.
    let targets: Vec<&RelativeTarget> = policy.targets().collect();
    let target = match targets.get(*selector as usize) {
        Some(t) => (*t).clone(),
        None => RelativeTarget::new("etc/not-in-the-policy.conf").expect("a relative target"),
    };
    let Some(edits) = edits_of(target.as_str(), edits) else {
        return;
    };
    match policy.apply(&target, pre, &edits) {
        Err(e) => assert_eq!(e.code(), "workbench/patch-outside-policy", "{e}"),
        Ok(out) => {
            let file = policy.file(target.as_str()).expect("only an admitted target applies");
            assert!(!edits.is_empty());
            for added in edits.iter().filter_map(Edit::added) {
                let line = added.as_str();
                assert!(
                    file.line_shapes.iter().any(|s| s.matches(line)),
                    "{line:?} matches no shape"
                );
                assert!(
                    policy.forbidden().iter().all(|f| !line.contains(f.as_str())),
                    "{line:?} holds a forbidden substring"
                );
            }
            assert!(out.post_image.len() as u64 <= file.max_bytes);
            assert_eq!(out.pre_digest, Sha256Digest::of(pre));
            assert_eq!(out.post_digest, Sha256Digest::of(&out.post_image));
            if !pre.is_empty() && !out.post_image.is_empty() {
                assert_eq!(pre.ends_with('\n'), out.post_image.ends_with('\n'));
            }
            let again = policy.apply(&target, pre, &edits).expect("the same patch again");
            assert_eq!(again, out);
        }
    }
});
