//! Why a run did not conclude, as the seed's run report names it ("Inference Classes"):
//! before a failed repair is put down to the model's capability, the runtime, the delivery of
//! evidence, the orchestration and the budget are ruled out, each by the code the run ended
//! with. The class is derived from the stored end code alone, so replaying or restarting a run
//! gives the same class.

/// The class of a run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The run concluded: nothing failed.
    None,
    /// The model runtime did not answer as a runtime must: unreachable, timed out, another
    /// model, a broken or incomplete return, an outcome lost after the request left.
    Runtime,
    /// The passage could not be put to the model: its prompt or evidence was refused before
    /// the call (rendering, fencing, size).
    EvidenceDelivery,
    /// Reach itself: a port unreachable, a crash's interruption, an instance not created or
    /// its outcome unknown, a journal that could not be written.
    Orchestration,
    /// A bound cut the run short: the wall clock, the experiments, a passage's tokens.
    Budget,
    /// The operator said no (a HIL denial or expiry, a pause).
    Operator,
    /// None of the above: the model's answers were read and refused or failed on their merits
    /// (not JSON, not the schema, not compilable, rejected by review, outside the patch policy,
    /// failed by the verifier), or its rounds ran out with every passage judged.
    ModelCapability,
}

impl FailureClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Runtime => "runtime",
            Self::EvidenceDelivery => "evidence-delivery",
            Self::Orchestration => "orchestration",
            Self::Budget => "budget",
            Self::Operator => "operator",
            Self::ModelCapability => "model-capability",
        }
    }

    /// The classes a model-capability finding had to rule out first.
    pub const RULED_OUT: [FailureClass; 4] = [
        Self::Runtime,
        Self::EvidenceDelivery,
        Self::Orchestration,
        Self::Budget,
    ];
}

/// The class of a run that ended with `code` (`None`: it concluded).
pub fn classify(code: Option<&str>) -> FailureClass {
    let Some(code) = code else {
        return FailureClass::None;
    };
    let has = |prefixes: &[&str]| prefixes.iter().any(|p| code.starts_with(p));
    if has(&[
        "provider/",
        "destination/",
        "bounded/",
        "tls/",
        "portal/",
        "passage/unknown",
        "inference/model-mismatch",
        "inference/runtime",
        "quarantine/incomplete",
        "quarantine/correlation",
    ]) {
        FailureClass::Runtime
    } else if has(&["render/", "fence/", "passage/too-large", "passage/schema"]) {
        FailureClass::EvidenceDelivery
    } else if has(&[
        "inference/over-token-bound",
        "quarantine/truncated",
        "room/wall-exhausted",
        "room/experiments-exhausted",
        "budget/",
    ]) {
        FailureClass::Budget
    } else if has(&["hil/", "local-binding/paused"]) {
        FailureClass::Operator
    } else if has(&[
        "ward/",
        "port/",
        "task/",
        "tasks/",
        "ledger/",
        "room/experiment-unknown",
        "room/experiment-not-created",
        "room/out-of-order",
        "room/chain-broken",
        "room/wrong-room",
        "room/after-end",
        "room/digest-mismatch",
        "room/bad-experiment-end",
        "environment/",
        "vm/",
        "workbench/unavailable",
        "package/",
    ]) {
        FailureClass::Orchestration
    } else {
        FailureClass::ModelCapability
    }
}

/// The report's `failure` object for a run that ended with `code`.
pub fn report(code: Option<&str>) -> serde_json::Value {
    let class = classify(code);
    serde_json::json!({
        "class": class.as_str(),
        "code": code,
        "ruled_out": if class == FailureClass::ModelCapability {
            FailureClass::RULED_OUT.iter().map(|c| c.as_str()).collect::<Vec<_>>()
        } else {
            Vec::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_is_put_down_to_the_first_cause_it_names() {
        for (code, class) in [
            (None, FailureClass::None),
            (Some("provider/http-503"), FailureClass::Runtime),
            (Some("destination/refused"), FailureClass::Runtime),
            (Some("passage/unknown-wall"), FailureClass::Runtime),
            (
                Some("passage/unknown: bounded/head-time"),
                FailureClass::Runtime,
            ),
            (Some("inference/model-mismatch"), FailureClass::Runtime),
            (
                Some("render/prompt-too-large"),
                FailureClass::EvidenceDelivery,
            ),
            (Some("passage/too-large"), FailureClass::EvidenceDelivery),
            (Some("inference/over-token-bound"), FailureClass::Budget),
            (Some("quarantine/truncated"), FailureClass::Budget),
            (Some("room/wall-exhausted"), FailureClass::Budget),
            (Some("hil/denied"), FailureClass::Operator),
            (Some("task/interrupted"), FailureClass::Orchestration),
            (Some("room/experiment-unknown"), FailureClass::Orchestration),
            (
                Some("ward/unavailable: Unavailable"),
                FailureClass::Orchestration,
            ),
            (Some("quarantine/not-json"), FailureClass::ModelCapability),
            (Some("quarantine/schema"), FailureClass::ModelCapability),
            (Some("plan/outside-profile"), FailureClass::ModelCapability),
            (
                Some("workbench/patch-outside-policy"),
                FailureClass::ModelCapability,
            ),
            (Some("room/rounds-exhausted"), FailureClass::ModelCapability),
        ] {
            assert_eq!(classify(code), class, "{code:?}");
        }
        let r = report(Some("quarantine/not-json"));
        assert_eq!(r["class"], "model-capability");
        assert_eq!(
            r["ruled_out"],
            serde_json::json!(["runtime", "evidence-delivery", "orchestration", "budget"])
        );
        assert_eq!(
            report(Some("provider/http-503"))["ruled_out"],
            serde_json::json!([])
        );
    }
}
