//! `reach.room.execution-record.v1`: what one experiment did, as the Room keeps and signs it,
//! and the evidence the next passage is given from it.
//!
//! The record holds bounded, already redacted outputs and digests; it names the instance by its
//! opaque id, never a path. [`ExecutionRecord::evidence`] gives exactly three inputs: the
//! record without outputs, the verifier result and the observations.

use reach_digest::Sha256Digest;
use reach_passage::Evidence;
use reach_taskpack::source::EvidenceKind;
use serde::{Deserialize, Serialize};

use crate::fact::RunId;

pub const RECORD_FORMAT: &str = "reach.room.execution-record.v1";
pub const VERIFIER_RESULT_FORMAT: &str = "reach.room.verifier-result.v1";
pub const OBSERVATIONS_FORMAT: &str = "reach.room.observations.v1";
pub const REVISION_REQUEST_FORMAT: &str = "reach.room.revision-request.v1";

/// The most bytes of an observation's output kept.
pub const MAX_OUTPUT_BYTES: usize = 4096;
/// The most lines of an observation's output kept.
pub const MAX_OUTPUT_LINES: usize = 200;
/// The most characters of a check's detail kept.
pub const MAX_DETAIL_CHARS: usize = 300;
/// The line that ends a truncated output (counted in the bounds).
pub const TRUNCATED_MARKER: &str = "[reach: output truncated]";

/// The one admitted value of the record's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordFormat {
    #[serde(rename = "reach.room.execution-record.v1")]
    V1,
}

/// One experiment's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRecord {
    pub format: RecordFormat,
    pub room: RunId,
    /// The experiment's number in the Room, from 1.
    pub n: u32,
    /// The instance's opaque id (never a path).
    pub instance: String,
    pub plan_digest: Sha256Digest,
    pub steps: Vec<StepRecord>,
    pub verifier: Option<VerifierResult>,
    pub destroyed: bool,
    /// The broker's confirmation as it reported it.
    pub destroy_confirmation: String,
    pub timings_ms: RecordTimings,
    pub resources: Resources,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    pub index: usize,
    pub step_digest: Sha256Digest,
    /// `run`, `patch`, `restart` or `verify`.
    pub kind: String,
    /// `ok`, `failed`, `refused:<code>`, `denied`, `expired` or `not-run`.
    pub outcome: String,
    /// The HIL request's id, when the step asked.
    pub hil_request: Option<String>,
    pub observation: Option<Observation>,
}

/// A step's bounded observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    pub profile: String,
    pub args: Vec<String>,
    pub exit: i32,
    /// SHA-256 of the whole (redacted) output, before bounding.
    pub output_digest: Sha256Digest,
    /// At most [`MAX_OUTPUT_BYTES`] bytes and [`MAX_OUTPUT_LINES`] lines.
    pub output: String,
}

impl Observation {
    /// An observation of `output`, which the caller has already redacted: its digest, and the
    /// output bounded.
    pub fn new(profile: impl Into<String>, args: Vec<String>, exit: i32, output: &str) -> Self {
        Self {
            profile: profile.into(),
            args,
            exit,
            output_digest: Sha256Digest::of(output.as_bytes()),
            output: bound_output(output),
        }
    }
}

/// `output` if within the bounds, else as many whole lines as fit (a last line cut at a char
/// boundary) and then [`TRUNCATED_MARKER`] on its own line, all within the bounds.
pub fn bound_output(output: &str) -> String {
    let lines = output.split_inclusive('\n').count();
    if output.len() <= MAX_OUTPUT_BYTES && lines <= MAX_OUTPUT_LINES {
        return output.to_owned();
    }
    let budget = MAX_OUTPUT_BYTES - TRUNCATED_MARKER.len() - 1;
    let mut kept = String::new();
    for line in output.split_inclusive('\n').take(MAX_OUTPUT_LINES - 1) {
        if kept.len() + line.len() > budget {
            let mut end = budget - kept.len();
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            kept.push_str(&line[..end]);
            break;
        }
        kept.push_str(line);
    }
    if !kept.is_empty() && !kept.ends_with('\n') {
        kept.push('\n');
    }
    kept.push_str(TRUNCATED_MARKER);
    kept
}

/// The verifier's result as the host evaluator decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierResult {
    pub passed: bool,
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    /// At most [`MAX_DETAIL_CHARS`] characters.
    pub detail: String,
}

impl Check {
    /// A check with its detail bounded to [`MAX_DETAIL_CHARS`] characters.
    pub fn new(name: impl Into<String>, passed: bool, detail: &str) -> Self {
        Self {
            name: name.into(),
            passed,
            detail: detail.chars().take(MAX_DETAIL_CHARS).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordTimings {
    pub create: u64,
    pub steps: u64,
    pub hil_wait: u64,
    pub verifier: u64,
    pub destroy: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    pub steps_run: u32,
    pub hil_requests: u32,
}

// The evidence views. Field order and names follow the structs above.

#[derive(Serialize)]
struct RecordView<'a> {
    format: RecordFormat,
    room: &'a RunId,
    n: u32,
    instance: &'a str,
    plan_digest: Sha256Digest,
    steps: Vec<StepView<'a>>,
    verifier: &'a Option<VerifierResult>,
    destroyed: bool,
    destroy_confirmation: &'a str,
    timings_ms: RecordTimings,
    resources: Resources,
}

#[derive(Serialize)]
struct StepView<'a> {
    index: usize,
    step_digest: Sha256Digest,
    kind: &'a str,
    outcome: &'a str,
    hil_request: &'a Option<String>,
    observation: Option<ObservationView<'a>>,
}

#[derive(Serialize)]
struct ObservationView<'a> {
    profile: &'a str,
    args: &'a [String],
    exit: i32,
    output_digest: Sha256Digest,
}

#[derive(Serialize)]
struct VerifierView<'a> {
    format: &'static str,
    passed: bool,
    checks: &'a [Check],
}

#[derive(Serialize)]
struct ObservationsView<'a> {
    format: &'static str,
    observations: Vec<ObservedView<'a>>,
}

#[derive(Serialize)]
struct ObservedView<'a> {
    step: usize,
    profile: &'a str,
    args: &'a [String],
    exit: i32,
    output: &'a str,
}

#[derive(Serialize)]
struct RevisionView<'a> {
    format: &'static str,
    round: u32,
    reason: &'a str,
}

fn json(value: &impl Serialize) -> String {
    // Cannot fail: string keys only, no float.
    serde_json::to_string(value).unwrap_or_default()
}

impl ExecutionRecord {
    /// `serde_json` of the record: fields in declaration order, no whitespace.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        json(self).into_bytes()
    }

    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }

    /// Reads a record strictly: no unknown field, and exactly its canonical bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let r: Self = serde_json::from_slice(bytes).ok()?;
        (r.canonical_bytes() == bytes).then_some(r)
    }

    /// The next passage's evidence from this experiment, exactly three inputs in the flow's
    /// order: `execution-record` (the record with every observation's `output` left out, its
    /// digest kept), `verifier-result` (`passed: false`, no checks, when the verifier did not
    /// run) and `observations` (each observed step's bounded output).
    pub fn evidence(&self) -> Vec<Evidence> {
        let record = RecordView {
            format: self.format,
            room: &self.room,
            n: self.n,
            instance: &self.instance,
            plan_digest: self.plan_digest,
            steps: self
                .steps
                .iter()
                .map(|s| StepView {
                    index: s.index,
                    step_digest: s.step_digest,
                    kind: &s.kind,
                    outcome: &s.outcome,
                    hil_request: &s.hil_request,
                    observation: s.observation.as_ref().map(|o| ObservationView {
                        profile: &o.profile,
                        args: &o.args,
                        exit: o.exit,
                        output_digest: o.output_digest,
                    }),
                })
                .collect(),
            verifier: &self.verifier,
            destroyed: self.destroyed,
            destroy_confirmation: &self.destroy_confirmation,
            timings_ms: self.timings_ms,
            resources: self.resources,
        };
        let verifier = VerifierView {
            format: VERIFIER_RESULT_FORMAT,
            passed: self.verifier.as_ref().is_some_and(|v| v.passed),
            checks: self.verifier.as_ref().map_or(&[][..], |v| &v.checks),
        };
        let observations = ObservationsView {
            format: OBSERVATIONS_FORMAT,
            observations: self
                .steps
                .iter()
                .filter_map(|s| {
                    s.observation.as_ref().map(|o| ObservedView {
                        step: s.index,
                        profile: &o.profile,
                        args: &o.args,
                        exit: o.exit,
                        output: &o.output,
                    })
                })
                .collect(),
        };
        vec![
            Evidence::new(EvidenceKind::ExecutionRecord, json(&record)),
            Evidence::new(EvidenceKind::VerifierResult, json(&verifier)),
            Evidence::new(EvidenceKind::Observations, json(&observations)),
        ]
    }
}

/// What the guests said of their restarts, over records of instances of one prepared system
/// ([`restarts_witnessed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartWitness {
    /// Records whose `verify` step kept the pack's unit-starts witness.
    pub instances: usize,
    /// The starts they saw beyond their prepared system's.
    pub restarts: usize,
}

/// Holds records to the guest's own witness that no restart was applied twice: a `verify`
/// step's observation of the pack's unit-starts profile
/// ([`reach_taskpack::source::STARTS_PROFILE`]), read in the guest after the verifier, has
/// one line per start of the restartable units in the guest's boot. A record with no restart
/// applied shows its prepared system's own starts (the same lines in every instance of it);
/// every record must show those lines first and then exactly one per restart step whose
/// outcome is `ok`. Records without the witness are left out; with no record free of
/// restarts to compare with, nothing is judged. `Err` names the record that breaks it.
pub fn restarts_witnessed(records: &[ExecutionRecord]) -> Result<RestartWitness, String> {
    use reach_taskpack::source::STARTS_PROFILE;
    let mut witnessed = Vec::new();
    for r in records {
        let Some(o) = r
            .steps
            .iter()
            .find(|s| s.kind == "verify")
            .and_then(|s| s.observation.as_ref())
            .filter(|o| o.profile == STARTS_PROFILE)
        else {
            continue;
        };
        if o.exit != 0 || o.output.ends_with(TRUNCATED_MARKER) {
            return Err(format!(
                "{} experiment {}: the witness exited {} or was truncated",
                r.room, r.n, o.exit
            ));
        }
        let restarts = r
            .steps
            .iter()
            .filter(|s| s.kind == "restart" && s.outcome == "ok")
            .count();
        let who = format!("{} experiment {}", r.room, r.n);
        witnessed.push((who, o.output.lines().collect::<Vec<_>>(), restarts));
    }
    let Some((_, baseline, _)) = witnessed.iter().find(|(_, _, n)| *n == 0) else {
        return Ok(RestartWitness {
            instances: 0,
            restarts: 0,
        });
    };
    if baseline.is_empty() {
        return Err("a record with no restart shows no start of its unit".into());
    }
    let mut restarts = 0;
    for (n, lines, applied) in &witnessed {
        if !lines.starts_with(baseline) {
            return Err(format!(
                "{n}: the prepared system's starts differ: {lines:?} vs {baseline:?}"
            ));
        }
        let seen = lines.len() - baseline.len();
        if seen != *applied {
            return Err(format!(
                "{n}: the guest saw {seen} start(s) beyond its prepared system's \
                 for {applied} restart step(s) recorded ok: {lines:?}"
            ));
        }
        restarts += seen;
    }
    Ok(RestartWitness {
        instances: witnessed.len(),
        restarts,
    })
}

/// The Chair's revision request of `round` as evidence.
pub fn revision_request_evidence(round: u32, reason: &str) -> Evidence {
    Evidence::new(
        EvidenceKind::RevisionRequest,
        json(&RevisionView {
            format: REVISION_REQUEST_FORMAT,
            round,
            reason,
        }),
    )
}

/// The Reviewer's latest review as evidence: its exact bytes.
pub fn review_evidence(review_bytes: &str) -> Evidence {
    Evidence::new(EvidenceKind::Review, review_bytes)
}
