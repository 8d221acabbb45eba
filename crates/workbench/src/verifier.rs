//! The pack's verifier: its observations run confined and bounded, and a host evaluator
//! decides each check from the bounded observations alone (`docs/taskpacks.md`,
//! "verifier.toml", is the contract this implements).
//!
//! A run: every one of the seven checks must be present (`verifier/check-missing`); the
//! `verifier-start` snapshots are taken; then each check, in the seed's order, is attempted
//! up to `1 + retries` times, where only an attempt that timed out (an observation reported
//! `timed_out`, or the attempt overran the check's `timeout_s`) is retried. An attempt runs
//! its observations in order, each polled up to its `attempts`; the first unmet expectation
//! fails the check. The whole run is bounded by the verifier's `timeout_s`. The outcome is
//! `passed`, `failed` (naming the failed checks), or a refusal: `verifier/timeout` when a
//! check timed out on every attempt or the run overran, `verifier/mutation-not-admitted`
//! when `verifier-no-mutation` failed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reach_taskpack::source::{CHECKS, Check, Observe, Snapshot};
use regex::Regex;

use crate::guest::{Guest, Observation};
use crate::{Refusal, Workbench};

/// Observations taken at a snapshot, keyed by profile and arguments: their sorted lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshots(BTreeMap<(String, Vec<String>), Vec<String>>);

impl Snapshots {
    fn get(&self, profile: &str, args: &[String]) -> Option<&Vec<String>> {
        self.0.get(&(profile.to_owned(), args.to_vec()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub name: String,
    pub passed: bool,
    /// Why it failed (the first unmet expectation), or why its last attempt timed out.
    pub reason: Option<String>,
    /// Attempts of the check (1 + the retries a timeout used).
    pub attempts: u32,
    pub timed_out: bool,
    /// Every observation of the last attempt, in order (polls included).
    pub observations: Vec<Observation>,
    pub elapsed_ms: u64,
}

/// The verifier's outcome.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "result", content = "checks")]
pub enum VerifierOutcome {
    Passed,
    /// The checks that failed, in the seed's order.
    Failed(Vec<String>),
}

/// A whole verifier run (`reach.taskpack.verifier-result.v1`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VerifierReport {
    pub outcome: VerifierOutcome,
    pub checks: Vec<CheckReport>,
    pub elapsed_ms: u64,
    /// The pack's unit-starts witness, read after the checks
    /// ([`crate::restart::STARTS_PROFILE`]); `None` when the pack has no such profile.
    pub unit_starts: Option<Observation>,
}

impl VerifierReport {
    pub fn passed(&self) -> bool {
        self.outcome == VerifierOutcome::Passed
    }

    /// The names of the failed checks.
    pub fn failed(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect()
    }

    pub fn check(&self, name: &str) -> Option<&CheckReport> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// Takes the snapshot `which`: every observation a check compares `same_as` it, run now.
pub async fn snapshot<G: Guest>(
    bench: &Workbench,
    guest: &G,
    which: Snapshot,
) -> Result<Snapshots, Refusal> {
    let mut snaps = Snapshots::default();
    for check in &bench.verifier().checks {
        for o in check.observe.iter().filter(|o| o.same_as == Some(which)) {
            let key = (o.profile.clone(), o.args.clone());
            if snaps.0.contains_key(&key) {
                continue;
            }
            let obs = bench.observe(guest, &o.profile, &o.args).await?;
            let mut lines = obs.lines();
            lines.sort();
            snaps.0.insert(key, lines);
        }
    }
    Ok(snaps)
}

/// Runs the verifier; `instance_start` is the snapshot taken when the instance was created.
pub async fn run<G: Guest>(
    bench: &Workbench,
    guest: &G,
    instance_start: &Snapshots,
) -> Result<VerifierReport, Refusal> {
    let v = bench.verifier();
    let started = Instant::now();
    let checks: Vec<&Check> = CHECKS
        .iter()
        .map(|name| {
            v.check(name).ok_or_else(|| Refusal::CheckMissing {
                check: (*name).to_owned(),
            })
        })
        .collect::<Result<_, _>>()?;
    let whole = Duration::from_secs(u64::from(v.timeout_s));
    let run = async {
        let verifier_start = snapshot(bench, guest, Snapshot::VerifierStart).await?;
        let mut reports = Vec::new();
        for check in checks {
            let r = run_check(bench, guest, check, instance_start, &verifier_start).await?;
            if r.timed_out {
                return Err(Refusal::VerifierTimeout {
                    check: r.name,
                    attempts: r.attempts,
                });
            }
            reports.push(r);
        }
        Ok(reports)
    };
    let reports =
        tokio::time::timeout(whole, run)
            .await
            .map_err(|_| Refusal::VerifierTimeout {
                check: "the whole verifier".to_owned(),
                attempts: 1,
            })??;
    if let Some(r) = reports
        .iter()
        .find(|r| r.name == "verifier-no-mutation" && !r.passed)
    {
        return Err(Refusal::MutationNotAdmitted {
            detail: r.reason.clone().unwrap_or_default(),
        });
    }
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.name.clone())
        .collect();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let unit_starts = crate::restart::starts(bench, guest).await?;
    Ok(VerifierReport {
        outcome: if failed.is_empty() {
            VerifierOutcome::Passed
        } else {
            VerifierOutcome::Failed(failed)
        },
        checks: reports,
        elapsed_ms,
        unit_starts,
    })
}

/// One attempt's end.
enum Attempt {
    Done(Result<(), String>, Vec<Observation>),
    TimedOut(String, Vec<Observation>),
}

async fn run_check<G: Guest>(
    bench: &Workbench,
    guest: &G,
    check: &Check,
    instance_start: &Snapshots,
    verifier_start: &Snapshots,
) -> Result<CheckReport, Refusal> {
    let started = Instant::now();
    let tries = 1 + check.retries(bench.verifier());
    let per_attempt = Duration::from_secs(u64::from(check.timeout_s));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let attempt = tokio::time::timeout(
            per_attempt,
            attempt(bench, guest, check, instance_start, verifier_start),
        )
        .await
        .unwrap_or_else(|_| {
            Ok(Attempt::TimedOut(
                format!("the attempt overran {} s", check.timeout_s),
                Vec::new(),
            ))
        })?;
        let report = |passed, reason, timed_out, observations| CheckReport {
            name: check.name.clone(),
            passed,
            reason,
            attempts,
            timed_out,
            observations,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        match attempt {
            Attempt::Done(Ok(()), obs) => return Ok(report(true, None, false, obs)),
            Attempt::Done(Err(why), obs) => return Ok(report(false, Some(why), false, obs)),
            Attempt::TimedOut(why, obs) if attempts >= tries => {
                return Ok(report(false, Some(why), true, obs));
            }
            Attempt::TimedOut(..) => continue,
        }
    }
}

async fn attempt<G: Guest>(
    bench: &Workbench,
    guest: &G,
    check: &Check,
    instance_start: &Snapshots,
    verifier_start: &Snapshots,
) -> Result<Attempt, Refusal> {
    let mut captures = BTreeMap::new();
    let mut seen = Vec::new();
    if let Some(want) = &check.broker_network {
        let got = guest.network().await?;
        if &got != want {
            return Ok(Attempt::Done(
                Err(format!("the broker reports the network {got}, not {want}")),
                seen,
            ));
        }
    }
    for o in &check.observe {
        let snapshot = match o.same_as {
            Some(Snapshot::InstanceStart) => instance_start.get(&o.profile, &o.args),
            Some(Snapshot::VerifierStart) => verifier_start.get(&o.profile, &o.args),
            None => None,
        };
        let mut verdict = Err(String::new());
        for poll in 0..o.attempts.max(1) {
            if poll > 0 {
                tokio::time::sleep(Duration::from_millis(o.interval_ms)).await;
            }
            let obs = bench.observe(guest, &o.profile, &o.args).await?;
            if obs.timed_out {
                let why = format!("{} timed out", o.profile);
                seen.push(obs);
                return Ok(Attempt::TimedOut(why, seen));
            }
            verdict = evaluate(o, &obs, &captures, snapshot);
            seen.push(obs);
            if verdict.is_ok() {
                break;
            }
        }
        match verdict {
            Ok(Some((name, value))) => {
                captures.insert(name, value);
            }
            Ok(None) => {}
            Err(why) => return Ok(Attempt::Done(Err(why), seen)),
        }
    }
    Ok(Attempt::Done(Ok(()), seen))
}

fn regex(pattern: &str) -> Result<Regex, String> {
    // The pack's parser compiled every pattern already; a failure here is a broken pack.
    Regex::new(pattern).map_err(|e| format!("pattern {pattern:?}: {e}"))
}

/// The host evaluator for one observation: whether `obs` meets every expectation of `o`,
/// and the value it captures. Pure: it reads only its arguments.
pub fn evaluate(
    o: &Observe,
    obs: &Observation,
    captures: &BTreeMap<String, String>,
    snapshot: Option<&Vec<String>>,
) -> Result<Option<(String, String)>, String> {
    let p = &o.profile;
    if obs.stdout_truncated {
        return Err(format!("{p}: stdout exceeded its bound"));
    }
    if obs.exit_code != Some(i64::from(o.exit)) {
        return Err(format!(
            "{p}: exit {}, expected {}",
            obs.exit_code.map_or("none".to_owned(), |c| c.to_string()),
            o.exit
        ));
    }
    let lines = obs.lines();
    for pat in &o.lines {
        let re = regex(pat)?;
        if !lines.iter().any(|l| re.is_match(l)) {
            return Err(format!("{p}: no line matches {pat:?}"));
        }
    }
    for pat in &o.no_lines {
        let re = regex(pat)?;
        if let Some(l) = lines.iter().find(|l| re.is_match(l)) {
            return Err(format!("{p}: line {l:?} matches {pat:?}"));
        }
    }
    if !o.only_lines.is_empty() {
        let res: Vec<Regex> = o
            .only_lines
            .iter()
            .map(|p| regex(p))
            .collect::<Result<_, _>>()?;
        if let Some(l) = lines.iter().find(|l| !res.iter().any(|re| re.is_match(l))) {
            return Err(format!("{p}: line {l:?} is not one of the admitted lines"));
        }
        if let Some((pat, _)) = o
            .only_lines
            .iter()
            .zip(&res)
            .find(|(_, re)| !lines.iter().any(|l| re.is_match(l)))
        {
            return Err(format!("{p}: no line matches {pat:?}"));
        }
    }
    if let Some(name) = &o.has_capture {
        let value = captures
            .get(name)
            .ok_or_else(|| format!("{p}: nothing was captured as `{name}`"))?;
        if !lines.iter().any(|l| l.contains(value.as_str())) {
            return Err(format!(
                "{p}: no line contains the captured {name} {value:?}"
            ));
        }
    }
    if let Some(which) = o.same_as {
        let ignore: Vec<Regex> = o
            .ignore
            .iter()
            .map(|p| regex(p))
            .collect::<Result<_, _>>()?;
        let keep = |v: &[String]| {
            let mut v: Vec<String> = v
                .iter()
                .filter(|l| !ignore.iter().any(|re| re.is_match(l)))
                .cloned()
                .collect();
            v.sort();
            v
        };
        let which = match which {
            Snapshot::InstanceStart => "instance-start",
            Snapshot::VerifierStart => "verifier-start",
        };
        let then = keep(snapshot.ok_or_else(|| format!("{p}: no {which} snapshot"))?);
        let now = keep(&lines);
        if then != now {
            let gone: Vec<&String> = then.iter().filter(|l| !now.contains(l)).collect();
            let new: Vec<&String> = now.iter().filter(|l| !then.contains(l)).collect();
            // Counts and the first of each first: a detail is bounded (300 characters in the
            // record), and what is new says most about what happened.
            return Err(format!(
                "{p}: differs from the {which} snapshot: {} of {} lines gone, {} new \
                 (exit {:?}, {} bytes); first new {:?}; first gone {:?}",
                gone.len(),
                then.len(),
                new.len(),
                obs.exit_code,
                obs.stdout.len(),
                new.first(),
                gone.first()
            ));
        }
    }
    if let Some(c) = &o.capture {
        let re = regex(&c.regex)?;
        let value = lines
            .iter()
            .find_map(|l| re.captures(l)?.get(1).map(|m| m.as_str().to_owned()))
            .ok_or_else(|| format!("{p}: nothing to capture as `{}`", c.name))?;
        return Ok(Some((c.name.clone(), value)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(stdout: &str) -> Observation {
        Observation {
            profile: "state-digests".into(),
            args: Vec::new(),
            argv: Vec::new(),
            exit_code: Some(0),
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            stdout_sha256: reach_digest::Sha256Digest::of(stdout.as_bytes()),
            stdout_truncated: false,
            timed_out: false,
            elapsed_ms: 1,
        }
    }

    #[test]
    fn a_snapshot_mismatch_says_how_much_changed_and_what_is_new_first() {
        let o: Observe = serde_json::from_value(serde_json::json!({
            "profile": "state-digests",
            "same_as": "verifier-start",
        }))
        .unwrap();
        let then: Vec<String> = (0..20).map(|i| format!("{i:064x}  /etc/f{i}")).collect();
        // Every line gone, one foreign line new: the detail must still show the new one
        // within a record's 300 characters.
        let why = evaluate(
            &o,
            &observed("something else\n"),
            &BTreeMap::new(),
            Some(&then),
        )
        .unwrap_err();
        assert!(
            why.starts_with(
                "state-digests: differs from the verifier-start snapshot: 20 of 20 lines gone, \
                 1 new (exit Some(0), 15 bytes); first new Some(\"something else\")"
            ),
            "{why}"
        );
        assert!(why.chars().count() < 300, "{why}");
        assert!(
            evaluate(
                &o,
                &observed(&then.join("\n")),
                &BTreeMap::new(),
                Some(&then)
            )
            .is_ok()
        );
    }
}
