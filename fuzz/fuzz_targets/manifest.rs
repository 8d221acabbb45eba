//! The ApplicationDeploymentManifest@1 (manifest `reach_manifest::load`), structure-aware:
//! the checked-in profile with arbitrary edits at arbitrary key paths, plus raw text.
//!
//! Promised: a refusal names a manifest path (all but a TOML syntax error); an accepted
//! manifest gives no role a credential it may not hold and no offline role a network, has
//! a `<role>.health` port per role and one port per name; TOML text → table → text → load
//! gives the same verdict (the format's parse → serialize → parse is stable).
#![no_main]

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reach_manifest::{ManifestErrorKind, NetworkClass, VPS_PUBLIC, load};
use toml::{Table, Value};

#[derive(Debug, Arbitrary)]
enum Scalar {
    Str(String),
    Word(u8),
    Int(i64),
    Bool(bool),
    Array(Vec<u8>),
    Table,
}

#[derive(Debug, Arbitrary)]
enum Edit {
    Set {
        at: Vec<u8>,
        key: Option<u8>,
        value: Scalar,
    },
    Remove {
        at: Vec<u8>,
    },
    /// Copy one array element over another (a second ward, a duplicated port…).
    Duplicate {
        at: Vec<u8>,
    },
}

enum Input {
    Edits(Vec<Edit>),
    Text(String),
}

/// Words the manifest uses, so edits speak its vocabulary.
const WORDS: &[&str] = &[
    "none",
    "egress:model-provider",
    "egress:discord-rest",
    "ward",
    "core",
    "ward-key",
    "bot-token",
    "database",
    "provider-key",
    "operator",
    "Admit",
    "core.admission",
    "ward.authority",
    "reach.local",
    "ApplicationDeploymentManifest@1",
    "../x",
    "a/b",
    "",
];

fn value(s: Scalar) -> Value {
    match s {
        Scalar::Str(s) => Value::String(s),
        Scalar::Word(w) => Value::String(WORDS[w as usize % WORDS.len()].to_owned()),
        Scalar::Int(i) => Value::Integer(i),
        Scalar::Bool(b) => Value::Boolean(b),
        Scalar::Array(ws) => Value::Array(
            ws.iter()
                .take(4)
                .map(|w| Value::String(WORDS[*w as usize % WORDS.len()].into()))
                .collect(),
        ),
        Scalar::Table => Value::Table(Table::new()),
    }
}

/// Walks `at` (each byte picks a key or an index, four at most) to a container.
fn walk<'v>(v: &'v mut Value, at: &[u8]) -> &'v mut Value {
    let at = &at[..at.len().min(4)];
    let Some((b, rest)) = at.split_first() else {
        return v;
    };
    let container = |c: Option<&Value>| matches!(c, Some(Value::Table(_) | Value::Array(_)));
    match v {
        Value::Table(t) if !t.is_empty() => {
            let k = t
                .keys()
                .nth(*b as usize % t.len())
                .cloned()
                .expect("in range");
            if !container(t.get(&k)) {
                return v;
            }
            let Value::Table(t) = v else { unreachable!() };
            walk(t.get_mut(&k).expect("present"), rest)
        }
        Value::Array(a) if !a.is_empty() => {
            let i = *b as usize % a.len();
            if !container(a.get(i)) {
                return v;
            }
            let Value::Array(a) = v else { unreachable!() };
            walk(&mut a[i], rest)
        }
        _ => v,
    }
}

fn apply(root: &mut Value, e: Edit) {
    match e {
        Edit::Set { at, key, value: s } => match walk(root, &at) {
            Value::Table(t) => {
                let k = match key {
                    Some(k) if !t.is_empty() && k % 4 != 0 => {
                        t.keys().nth(k as usize % t.len()).cloned()
                    }
                    Some(k) => Some(WORDS[k as usize % WORDS.len()].to_owned()),
                    None => None,
                };
                if let Some(k) = k {
                    t.insert(k, value(s));
                }
            }
            Value::Array(a) => a.push(value(s)),
            _ => {}
        },
        Edit::Remove { at } => {
            let (last, head) = match at.split_last() {
                Some(x) => x,
                None => return,
            };
            match walk(root, head) {
                Value::Table(t) if !t.is_empty() => {
                    if let Some(k) = t.keys().nth(*last as usize % t.len()).cloned() {
                        t.remove(&k);
                    }
                }
                Value::Array(a) if !a.is_empty() => {
                    let n = a.len();
                    a.remove(*last as usize % n);
                }
                _ => {}
            }
        }
        Edit::Duplicate { at } => {
            if let Value::Array(a) = walk(root, &at)
                && let Some(first) = a.first().cloned()
            {
                a.push(first);
            }
        }
    }
}

fn verdict(text: &str) -> Result<(), String> {
    match load(text) {
        Ok(m) => {
            let mut names = BTreeSet::new();
            for p in &m.ports {
                assert!(names.insert(p.name.clone()), "two ports named {}", p.name);
            }
            for r in &m.roles {
                for c in &r.credentials {
                    assert!(
                        r.kind.may_hold(c.kind).is_ok(),
                        "{} holds a forbidden credential",
                        r.name
                    );
                }
                if r.kind.must_be_offline() {
                    assert_eq!(r.network, NetworkClass::None, "{} is online", r.name);
                }
                assert!(
                    names.contains(&format!("{}.health", r.name)),
                    "no health port for {}",
                    r.name
                );
            }
            Ok(())
        }
        Err(e) => {
            assert!(
                !e.path.is_empty() || matches!(e.kind, ManifestErrorKind::Schema(_)),
                "a refusal names no path: {e:?}"
            );
            Err(e.to_string())
        }
    }
}

// Bytes: a mode byte (even: the rest is manifest text; odd: edits built from the rest).
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let input = if mode % 2 == 0 {
        match std::str::from_utf8(rest) {
            Ok(t) => Input::Text(t.to_owned()),
            Err(_) => return,
        }
    } else {
        match <Vec<Edit> as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(rest),
        ) {
            Ok(e) => Input::Edits(e),
            Err(_) => return,
        }
    };
    let text = match input {
        Input::Edits(edits) => {
            let mut root = Value::Table(
                VPS_PUBLIC
                    .parse::<Table>()
                    .expect("the checked-in manifest"),
            );
            for e in edits.into_iter().take(8) {
                apply(&mut root, e);
            }
            match toml::to_string(&root) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        Input::Text(t) => t,
    };
    let first = verdict(&text);
    // parse → serialize → parse: the same table, the same verdict.
    if let Ok(table) = text.parse::<Table>()
        && let Ok(again) = toml::to_string(&table)
    {
        let reparsed = again.parse::<Table>().expect("toml reads what it wrote");
        assert_eq!(
            toml::to_string(&reparsed).ok(),
            Some(again.clone()),
            "toml round trip drifted"
        );
        assert_eq!(
            first.is_ok(),
            verdict(&again).is_ok(),
            "the verdict changed with formatting"
        );
    }
});
