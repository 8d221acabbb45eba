// Shared by the corpus targets (included with `include!`): the checks every processed tree
// must pass, whatever its origin.

use reach_corpus::process::{Processed, process_tree};
use reach_corpus::{AcquiredTree, BuildError, Ceilings, Policy, Rule, passage};

/// Small ceilings, so the fuzzer reaches every one of them.
fn ceilings() -> Ceilings {
    Ceilings {
        max_files: 16,
        max_bytes: 2 * 1024 * 1024,
        max_expansion_ratio: 50,
        max_depth: 6,
        max_work_time_secs: 60,
        max_file_bytes: 16 * 1024,
        max_line_bytes: 512,
        max_nesting: 8,
    }
}

fn typed(e: &BuildError) {
    let code = e.code();
    assert!(code.starts_with("corpus/"), "untyped build error {code}");
    if let BuildError::Refused { rule, .. } = e {
        assert_eq!(Rule::from_code(rule.code()), Some(*rule));
        assert_eq!(policy().action(*rule), reach_corpus::Action::Refuse);
    }
}

fn policy() -> Policy {
    Policy::default()
}

/// Process `tree` under the pinned paths `include` and check what came out.
fn check_processed(tree: &AcquiredTree, include: &[String]) -> Option<Processed> {
    let c = ceilings();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = match process_tree(tree, include, &c, &policy(), deadline, &mut |_| {}) {
        Ok(out) => out,
        Err(e) => {
            typed(&e);
            return None;
        }
    };
    assert!(out.accepted.len() as u64 <= c.max_files, "more files than the ceiling");
    let mut total = 0u64;
    for f in &out.accepted {
        assert_eq!(
            reach_corpus::process::normalize(&f.path).as_deref(),
            Ok(f.path.as_str()),
            "an accepted path is not normal"
        );
        assert!(f.path.matches('/').count() as u32 <= c.max_depth, "path past the depth");
        assert!(!f.path.split('/').any(|p| p == ".git"), "read repository internals");
        assert!(f.text.len() as u64 <= c.max_file_bytes, "file past the ceiling");
        assert!(!f.text.contains('\0'), "accepted a NUL byte");
        assert!(
            f.text.lines().all(|l| l.len() as u64 <= c.max_line_bytes),
            "accepted a line past the ceiling"
        );
        assert_eq!(f.digest, reach_digest::Sha256Digest::of(f.text.as_bytes()));
        total += f.text.len() as u64;
        let lines = f.text.lines().count().max(1) as u32;
        for p in passage::split(f) {
            assert_eq!(p.path, f.path);
            assert!(p.line_start >= 1 && p.line_start <= p.line_end, "bad line range");
            assert!(p.line_end <= lines + 1, "a passage past the file's end");
            assert_eq!(p.digest, reach_digest::Sha256Digest::of(p.text.as_bytes()));
        }
    }
    assert_eq!(total, out.bytes_accepted);
    assert!(total <= c.max_bytes);
    for r in &out.skipped {
        assert_eq!(policy().action(r.rule), reach_corpus::Action::Skip);
    }
    Some(out)
}
