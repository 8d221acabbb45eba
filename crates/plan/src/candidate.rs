//! `reach.plan.candidate.v1`: what a Solver may propose, and nothing else.
//!
//! A candidate is a diagnosis (inert prose) and a list of steps of four closed kinds: run an
//! admitted command profile, patch an admitted relative target by line edits, restart an
//! admitted service, run the verifier. Each names pack refs only. A field naming an effect
//! class, a digest, a HIL flag, a shell command or an absolute path does not exist in these
//! types, so a candidate carrying one is refused `plan/schema` at that field's path.
//!
//! The types derive serde (with `deny_unknown_fields` everywhere) for the stamped plan and for
//! tests; [`Candidate::parse`] is the one way the compiler reads candidate bytes, because it
//! names the exact JSON path of whatever it refuses (serde's internally tagged enums lose the
//! path inside a step) and refuses duplicate keys, which a JSON value would silently collapse.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::refusal::PlanRefusal;

/// The candidate's format tag.
pub const CANDIDATE_FORMAT: &str = "reach.plan.candidate.v1";

/// The largest candidate the compiler reads. A plan a reviewer can check line by line is a
/// few KiB; anything bigger is refused before it is parsed.
pub const MAX_CANDIDATE_BYTES: usize = 64 * 1024;

/// The longest diagnosis, in characters (Unicode scalar values, as JSON Schema's `maxLength`
/// counts them). It is inert prose shown to the reviewer and the operator.
pub const MAX_DIAGNOSIS_CHARS: usize = 2000;

/// The one admitted value of a candidate's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CandidateFormat {
    #[serde(rename = "reach.plan.candidate.v1")]
    V1,
}

/// A Solver's proposal, schema-checked but not yet resolved against a pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    pub format: CandidateFormat,
    /// Inert prose, at most [`MAX_DIAGNOSIS_CHARS`] characters.
    #[serde(deserialize_with = "diagnosis")]
    pub diagnosis: String,
    /// At least one step; the pack bounds how many.
    #[serde(deserialize_with = "steps")]
    pub steps: Vec<Step>,
}

/// One proposed step. Nothing here names how it runs: the compiler derives that from the pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// Run an admitted command profile with admitted positional arguments.
    Run {
        profile: String,
        #[serde(default)]
        args: Vec<String>,
    },
    /// Edit an admitted file of the prepared system, line by line.
    Patch {
        target: RelativeTarget,
        #[serde(deserialize_with = "edits")]
        edits: Vec<Edit>,
    },
    /// Restart an admitted service.
    Restart { service: String },
    /// Run the pack's verifier. (A struct variant, so `deny_unknown_fields` holds for it too.)
    Verify {},
}

/// One line edit. A line is addressed by its exact content, never by number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Edit {
    /// Replace the line equal to `line` (it must occur exactly once) with `with`.
    Replace { line: Line, with: Line },
    /// Add `with` as the file's new last line.
    Append { with: Line },
    /// Remove the line equal to `line` (it must occur exactly once).
    Delete { line: Line },
}

impl Edit {
    /// The line this edit adds, if any.
    pub fn added(&self) -> Option<&Line> {
        match self {
            Self::Replace { with, .. } | Self::Append { with } => Some(with),
            Self::Delete { .. } => None,
        }
    }

    /// The existing line this edit addresses, if any.
    pub fn addressed(&self) -> Option<&Line> {
        match self {
            Self::Replace { line, .. } | Self::Delete { line } => Some(line),
            Self::Append { .. } => None,
        }
    }
}

/// One line of text: no line break in it, so an edit cannot smuggle a second line past the
/// line shapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Line(String);

impl Line {
    pub fn new(text: impl Into<String>) -> Result<Self, LineError> {
        let text = text.into();
        if text.contains(['\n', '\r']) {
            return Err(LineError);
        }
        Ok(Self(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// a line must not contain a line break (`\n` or `\r`)
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a line must not contain a line break (`\\n` or `\\r`)")]
pub struct LineError;

impl TryFrom<String> for Line {
    type Error = LineError;
    fn try_from(s: String) -> Result<Self, LineError> {
        Self::new(s)
    }
}

impl From<Line> for String {
    fn from(l: Line) -> String {
        l.0
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A patch target: a path relative to the prepared system's root, in normal form. Absolute
/// paths, `.` and `..` components, empty components (`a//b`, a trailing `/`), backslashes, NUL
/// and other ASCII control characters are unrepresentable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelativeTarget(String);

/// Why a text is not a [`RelativeTarget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// a target must not be empty
    #[error("a target must not be empty")]
    Empty,
    /// a target must be relative, not start with `/`
    #[error("a target must be relative, not start with `/`")]
    Absolute,
    /// a target must not contain a backslash
    #[error("a target must not contain a backslash")]
    Backslash,
    /// a target must not contain NUL or another control character
    #[error("a target must not contain NUL or another control character")]
    Control,
    /// a target must not have an empty component
    #[error("a target must not have an empty component")]
    EmptyComponent,
    /// a target must not have a `.` or `..` component
    #[error("a target must not have a `.` or `..` component")]
    DotComponent,
}

impl RelativeTarget {
    pub fn new(text: impl Into<String>) -> Result<Self, TargetError> {
        let text = text.into();
        if text.is_empty() {
            return Err(TargetError::Empty);
        }
        if text.starts_with('/') {
            return Err(TargetError::Absolute);
        }
        if text.contains('\\') {
            return Err(TargetError::Backslash);
        }
        if text.bytes().any(|b| b.is_ascii_control()) {
            return Err(TargetError::Control);
        }
        for component in text.split('/') {
            match component {
                "" => return Err(TargetError::EmptyComponent),
                "." | ".." => return Err(TargetError::DotComponent),
                _ => {}
            }
        }
        Ok(Self(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RelativeTarget {
    type Error = TargetError;
    fn try_from(s: String) -> Result<Self, TargetError> {
        Self::new(s)
    }
}

impl From<RelativeTarget> for String {
    fn from(t: RelativeTarget) -> String {
        t.0
    }
}

impl AsRef<str> for RelativeTarget {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RelativeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn diagnosis_error(text: &str) -> Option<String> {
    let chars = text.chars().count();
    (chars > MAX_DIAGNOSIS_CHARS)
        .then(|| format!("is {chars} characters; at most {MAX_DIAGNOSIS_CHARS} are admitted"))
}

const NO_STEPS: &str = "a candidate has at least one step";

fn diagnosis<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    match diagnosis_error(&text) {
        Some(e) => Err(serde::de::Error::custom(e)),
        None => Ok(text),
    }
}

fn steps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Step>, D::Error> {
    let steps: Vec<Step> = string_tagged(d, "kind")?;
    if steps.is_empty() {
        return Err(serde::de::Error::custom(NO_STEPS));
    }
    Ok(steps)
}

impl Candidate {
    /// Parses candidate bytes, refusing anything that is not exactly a
    /// `reach.plan.candidate.v1` with `plan/schema` naming the offending value's JSON path.
    pub fn parse(bytes: &[u8]) -> Result<Self, PlanRefusal> {
        if bytes.len() > MAX_CANDIDATE_BYTES {
            return Err(PlanRefusal::schema(
                "$",
                format!(
                    "the candidate is {} bytes; at most {MAX_CANDIDATE_BYTES} are read",
                    bytes.len()
                ),
            ));
        }
        let value = strict_value(bytes)?;
        walk_candidate(&value)
    }
}

// ---- JSON paths -------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

fn render<'a>(segs: impl IntoIterator<Item = Seg<'a>>) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
            Seg::Key(k) if is_identifier(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Key(k) => {
                out.push('[');
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(']');
            }
        }
    }
    if out.is_empty() { "$".to_owned() } else { out }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where the walker is: a chain of borrowed segments, rendered only when something is refused.
#[derive(Clone, Copy)]
struct At<'a> {
    parent: Option<&'a At<'a>>,
    seg: Option<Seg<'a>>,
}

impl<'a> At<'a> {
    const ROOT: At<'static> = At {
        parent: None,
        seg: None,
    };

    fn key(&'a self, key: &'a str) -> At<'a> {
        At {
            parent: Some(self),
            seg: Some(Seg::Key(key)),
        }
    }

    fn index(&'a self, index: usize) -> At<'a> {
        At {
            parent: Some(self),
            seg: Some(Seg::Index(index)),
        }
    }

    fn path(&self) -> String {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            segs.extend(a.seg);
            at = a.parent;
        }
        segs.reverse();
        render(segs)
    }

    fn refuse(&self, reason: impl Into<String>) -> PlanRefusal {
        PlanRefusal::schema(self.path(), reason)
    }
}

// ---- A JSON value without duplicate keys ------------------------------------------------

#[derive(Debug, Clone)]
enum OwnedSeg {
    Key(String),
    Index(usize),
}

/// Builds a [`Value`] while tracking the path, refusing a duplicate key instead of keeping the
/// last one (a reviewer and the compiler must read the same candidate).
struct ValueSeed<'s> {
    stack: &'s RefCell<Vec<OwnedSeg>>,
    duplicate: &'s Cell<bool>,
}

impl ValueSeed<'_> {
    fn child(&self) -> Self {
        Self {
            stack: self.stack,
            duplicate: self.duplicate,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            self.stack.borrow_mut().push(OwnedSeg::Index(out.len()));
            match seq.next_element_seed(self.child())? {
                Some(v) => out.push(v),
                None => {
                    self.stack.borrow_mut().pop();
                    return Ok(Value::Array(out));
                }
            }
            self.stack.borrow_mut().pop();
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let duplicate = out.contains_key(&key);
            self.stack.borrow_mut().push(OwnedSeg::Key(key.clone()));
            if duplicate {
                self.duplicate.set(true);
                return Err(serde::de::Error::custom("duplicate field"));
            }
            let value = map.next_value_seed(self.child())?;
            self.stack.borrow_mut().pop();
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

fn strict_value(bytes: &[u8]) -> Result<Value, PlanRefusal> {
    let stack = RefCell::new(Vec::new());
    let duplicate = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = ValueSeed {
        stack: &stack,
        duplicate: &duplicate,
    };
    let result = seed
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    result.map_err(|e| {
        let stack = stack.borrow();
        let path = render(stack.iter().map(|s| match s {
            OwnedSeg::Key(k) => Seg::Key(k),
            OwnedSeg::Index(i) => Seg::Index(*i),
        }));
        if duplicate.get() {
            PlanRefusal::schema(path, "duplicate field")
        } else {
            PlanRefusal::schema(path, format!("not valid JSON: {e}"))
        }
    })
}

// ---- Internally tagged enums through serde ---------------------------------------------

/// Reads a `T` (an internally tagged enum, or a list of them) whose tag field is `tag`,
/// refusing a tag that is not a string and any duplicate key first.
///
/// serde's derived internally tagged enums accept a variant's *index* as their tag
/// (`{"op": 1, "with": "x"}` reads as the second variant, `append`), which the schema and
/// [`Candidate::parse`] refuse. Every field holding such an enum reads through this, so serde
/// agrees with them (tests/schema.rs compares the three).
pub(crate) fn string_tagged<'de, D, T>(d: D, tag: &str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let stack = RefCell::new(Vec::new());
    let duplicate = Cell::new(false);
    let value = ValueSeed {
        stack: &stack,
        duplicate: &duplicate,
    }
    .deserialize(d)?;
    let tags = match &value {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for item in tags {
        if let Some(t) = item.get(tag).filter(|t| !t.is_string()) {
            return Err(serde::de::Error::custom(format!(
                "`{tag}` must be a string, found {}",
                type_name(t)
            )));
        }
    }
    T::deserialize(value).map_err(serde::de::Error::custom)
}

/// A patch's edits, through [`string_tagged`].
pub(crate) fn edits<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Edit>, D::Error> {
    string_tagged(d, "op")
}

// ---- The walker: exactly the schema of the types above ----------------------------------

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'v>(v: &'v Value, at: &At<'_>) -> Result<&'v Map<String, Value>, PlanRefusal> {
    v.as_object()
        .ok_or_else(|| at.refuse(format!("expected an object, found {}", type_name(v))))
}

fn array<'v>(v: &'v Value, at: &At<'_>) -> Result<&'v [Value], PlanRefusal> {
    v.as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| at.refuse(format!("expected an array, found {}", type_name(v))))
}

fn string<'v>(v: &'v Value, at: &At<'_>) -> Result<&'v str, PlanRefusal> {
    v.as_str()
        .ok_or_else(|| at.refuse(format!("expected a string, found {}", type_name(v))))
}

/// Refuses the first (in sorted order, so the report does not depend on map order) key that
/// is not one of `allowed`.
fn only_keys(
    map: &Map<String, Value>,
    at: &At<'_>,
    what: &str,
    allowed: &[&str],
) -> Result<(), PlanRefusal> {
    let unknown = map.keys().filter(|k| !allowed.contains(&k.as_str())).min();
    match unknown {
        None => Ok(()),
        Some(key) => {
            let expected = allowed
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            Err(at.key(key).refuse(format!(
                "unknown field of {what}; expected one of {expected}"
            )))
        }
    }
}

fn required<'v>(
    map: &'v Map<String, Value>,
    at: &At<'_>,
    key: &str,
) -> Result<&'v Value, PlanRefusal> {
    map.get(key)
        .ok_or_else(|| at.key(key).refuse("missing field"))
}

fn walk_candidate(v: &Value) -> Result<Candidate, PlanRefusal> {
    let at = At::ROOT;
    let map = object(v, &at)?;
    only_keys(map, &at, "a candidate", &["format", "diagnosis", "steps"])?;

    let at_format = at.key("format");
    let format = string(required(map, &at, "format")?, &at_format)?;
    if format != CANDIDATE_FORMAT {
        return Err(at_format.refuse(format!("expected `{CANDIDATE_FORMAT}`")));
    }

    let at_diagnosis = at.key("diagnosis");
    let diagnosis = string(required(map, &at, "diagnosis")?, &at_diagnosis)?;
    if let Some(e) = diagnosis_error(diagnosis) {
        return Err(at_diagnosis.refuse(e));
    }

    let at_steps = at.key("steps");
    let raw_steps = array(required(map, &at, "steps")?, &at_steps)?;
    if raw_steps.is_empty() {
        return Err(at_steps.refuse(NO_STEPS));
    }
    let steps = raw_steps
        .iter()
        .enumerate()
        .map(|(i, s)| walk_step(s, &at_steps.index(i)))
        .collect::<Result<_, _>>()?;

    Ok(Candidate {
        format: CandidateFormat::V1,
        diagnosis: diagnosis.to_owned(),
        steps,
    })
}

fn walk_step(v: &Value, at: &At<'_>) -> Result<Step, PlanRefusal> {
    let map = object(v, at)?;
    let at_kind = at.key("kind");
    let kind = string(required(map, at, "kind")?, &at_kind)?;
    match kind {
        "run" => {
            only_keys(map, at, "a `run` step", &["kind", "profile", "args"])?;
            let at_profile = at.key("profile");
            let profile = string(required(map, at, "profile")?, &at_profile)?.to_owned();
            let args = match map.get("args") {
                None => Vec::new(),
                Some(args) => {
                    let at_args = at.key("args");
                    array(args, &at_args)?
                        .iter()
                        .enumerate()
                        .map(|(i, a)| string(a, &at_args.index(i)).map(str::to_owned))
                        .collect::<Result<_, _>>()?
                }
            };
            Ok(Step::Run { profile, args })
        }
        "patch" => {
            only_keys(map, at, "a `patch` step", &["kind", "target", "edits"])?;
            let at_target = at.key("target");
            let target = string(required(map, at, "target")?, &at_target)?;
            let target =
                RelativeTarget::new(target).map_err(|e| at_target.refuse(e.to_string()))?;
            let at_edits = at.key("edits");
            let edits = array(required(map, at, "edits")?, &at_edits)?
                .iter()
                .enumerate()
                .map(|(i, e)| walk_edit(e, &at_edits.index(i)))
                .collect::<Result<_, _>>()?;
            Ok(Step::Patch { target, edits })
        }
        "restart" => {
            only_keys(map, at, "a `restart` step", &["kind", "service"])?;
            let at_service = at.key("service");
            let service = string(required(map, at, "service")?, &at_service)?.to_owned();
            Ok(Step::Restart { service })
        }
        "verify" => {
            only_keys(map, at, "a `verify` step", &["kind"])?;
            Ok(Step::Verify {})
        }
        other => Err(at_kind.refuse(format!(
            "unknown step kind `{other}`; expected one of `run`, `patch`, `restart`, `verify`"
        ))),
    }
}

fn walk_line(map: &Map<String, Value>, at: &At<'_>, key: &str) -> Result<Line, PlanRefusal> {
    let at_key = at.key(key);
    let text = string(required(map, at, key)?, &at_key)?;
    Line::new(text).map_err(|e| at_key.refuse(e.to_string()))
}

fn walk_edit(v: &Value, at: &At<'_>) -> Result<Edit, PlanRefusal> {
    let map = object(v, at)?;
    let at_op = at.key("op");
    let op = string(required(map, at, "op")?, &at_op)?;
    match op {
        "replace" => {
            only_keys(map, at, "a `replace` edit", &["op", "line", "with"])?;
            Ok(Edit::Replace {
                line: walk_line(map, at, "line")?,
                with: walk_line(map, at, "with")?,
            })
        }
        "append" => {
            only_keys(map, at, "an `append` edit", &["op", "with"])?;
            Ok(Edit::Append {
                with: walk_line(map, at, "with")?,
            })
        }
        "delete" => {
            only_keys(map, at, "a `delete` edit", &["op", "line"])?;
            Ok(Edit::Delete {
                line: walk_line(map, at, "line")?,
            })
        }
        other => Err(at_op.refuse(format!(
            "unknown edit op `{other}`; expected one of `replace`, `append`, `delete`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    #[test]
    fn relative_targets() {
        let cases = [
            "etc/app.conf",
            "a",
            ".hidden",
            "a/...",
            "a b/c",
            "",
            "/etc/app.conf",
            "..",
            "../x",
            "a/../x",
            "a/..",
            ".",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a\tb",
        ];
        let out: String = cases
            .iter()
            .map(|c| match RelativeTarget::new(*c) {
                Ok(t) => format!("{c:?}: ok {t}\n"),
                Err(e) => format!("{c:?}: {e}\n"),
            })
            .collect();
        expect![[r#"
            "etc/app.conf": ok etc/app.conf
            "a": ok a
            ".hidden": ok .hidden
            "a/...": ok a/...
            "a b/c": ok a b/c
            "": a target must not be empty
            "/etc/app.conf": a target must be relative, not start with `/`
            "..": a target must not have a `.` or `..` component
            "../x": a target must not have a `.` or `..` component
            "a/../x": a target must not have a `.` or `..` component
            "a/..": a target must not have a `.` or `..` component
            ".": a target must not have a `.` or `..` component
            "./a": a target must not have a `.` or `..` component
            "a/./b": a target must not have a `.` or `..` component
            "a//b": a target must not have an empty component
            "a/": a target must not have an empty component
            "a\\b": a target must not contain a backslash
            "a\0b": a target must not contain NUL or another control character
            "a\tb": a target must not contain NUL or another control character
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn paths_quote_keys_that_are_not_identifiers() {
        let out: String = [
            br#"{"format":"reach.plan.candidate.v1","diagnosis":"","steps":[{"kind":"run","a b":1}]}"#
                .as_slice(),
            br#"{"format":"reach.plan.candidate.v1","diagnosis":"","steps":[{"kind":"run","profile":"p","\"x\"":1}]}"#,
            br#"{"a":1,"a":2}"#,
            br#"{"format":"reach.plan.candidate.v1","diagnosis":"","steps":[{"kind":"patch","target":"a","edits":[{"op":"append","with":"x","with":"y"}]}]}"#,
            br#"{"format":"reach.plan.candidate.v1","diagnosis":"","steps":[{"kind":"verify"}]} {}"#,
            b"\xff",
        ]
        .iter()
        .map(|c| match Candidate::parse(c) {
            Ok(_) => "ok\n".to_owned(),
            Err(e) => format!("{e}\n"),
        })
        .collect();
        expect![[r#"
            candidate refused at `steps[0]["a b"]`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
            candidate refused at `steps[0]["\"x\""]`: unknown field of a `run` step; expected one of `kind`, `profile`, `args`
            candidate refused at `a`: duplicate field
            candidate refused at `steps[0].edits[0].with`: duplicate field
            candidate refused at `$`: not valid JSON: trailing characters at line 1 column 81
            candidate refused at `$`: not valid JSON: expected value at line 1 column 1
        "#]].assert_eq(&out);
    }
}
