//! The refusal inventory of `docs/taskpacks.md` holds (issue #30): every one of the seed's
//! thirteen case ids has rows, there are at least the seed's twenty-six variants, and each row's
//! test exists, is a test, and its body still holds every string the row says it observes.

use std::path::{Path, PathBuf};

const CASES: [&str; 13] = [
    "candidate-shell",
    "candidate-authority",
    "first-step",
    "patch-policy",
    "hil",
    "containment",
    "environment",
    "verifier",
    "interruption",
    "active-pause",
    "package-generation",
    "profile-change",
    "remote-profile",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The backticked spans of a table cell.
fn ticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The text of test fn `name` in `src`, from its attribute to its closing brace; `None`
/// unless it is a test.
fn test_body<'a>(src: &'a str, name: &str) -> Option<&'a str> {
    let at = src
        .find(&format!("\nfn {name}("))
        .or_else(|| src.find(&format!("\nasync fn {name}(")))?;
    let before = &src[..at];
    let attribute = before.lines().rev().take(3).any(|l| {
        let l = l.trim_start();
        l.starts_with("#[test]") || l.starts_with("#[tokio::test")
    });
    let body = &src[at..];
    let end = body.find("\n}\n").unwrap_or(body.len());
    attribute.then_some(&body[..end])
}

#[test]
fn every_case_is_reached_by_a_listed_test_that_observes_its_code() {
    let doc = std::fs::read_to_string(root().join("docs/taskpacks.md")).unwrap();
    let start = doc
        .find("<!-- refusal-inventory:start -->")
        .expect("the inventory");
    let end = doc.find("<!-- refusal-inventory:end -->").expect("its end");
    let rows: Vec<&str> = doc[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    assert!(rows.len() >= 26, "{} variants listed", rows.len());
    let mut seen = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 4, "{row}");
        let case = ticked(cells[0]);
        assert!(
            case.len() == 1 && CASES.contains(&case[0]),
            "not a seed case: {row}"
        );
        seen.push(case[0]);
        let test = ticked(cells[2]);
        assert_eq!(test.len(), 2, "`file` `fn`: {row}");
        let src = std::fs::read_to_string(root().join(test[0]))
            .unwrap_or_else(|e| panic!("{}: {e} ({row})", test[0]));
        let body = test_body(&src, test[1])
            .unwrap_or_else(|| panic!("{} is not a test in {} ({row})", test[1], test[0]));
        let observes = ticked(cells[3]);
        assert!(!observes.is_empty(), "{row}");
        for o in observes {
            assert!(body.contains(o), "{} no longer holds `{o}`", test[1]);
        }
    }
    for c in CASES {
        assert!(seen.contains(&c), "no row for the case `{c}`");
    }
}

/// The checker itself refuses what it must: a fn that is not a test, and a missing one.
#[test]
fn the_checker_refuses_a_helper_and_a_missing_fn() {
    let src = "\n#[test]\nfn a() {\n    x\n}\n\nfn helper() {\n    y\n}\n";
    assert!(test_body(src, "a").is_some_and(|b| b.contains('x')));
    assert!(test_body(src, "helper").is_none());
    assert!(test_body(src, "gone").is_none());
}
