//! What core reads of a failed model attempt: whether another attempt may follow. Offline (no
//! `net` feature): core judges by the code and the `transmitted` flag egress-provider returns,
//! codes this crate's adapter and `reach-destination` produce.

/// Whether a failed model attempt (its failure code and whether request bytes may have left, as
/// core receives them from egress-provider) may be followed by another: only when the failure
/// is proved (nothing left the body, or the provider answered with an error status, so no
/// answer exists to double) and its cause may pass (a name, a connection or a handshake that failed; the
/// provider overloaded or briefly down). A refusal of policy, a bound the return broke or a
/// quarantined return would fail the same way again.
pub fn worth_another_attempt(transmitted: bool, code: &str) -> bool {
    if transmitted {
        matches!(
            code,
            "provider/http-429"
                | "provider/http-500"
                | "provider/http-502"
                | "provider/http-503"
                | "provider/http-504"
        )
    } else {
        matches!(
            code,
            "destination/resolution-failed" | "destination/dial-failed" | "destination/tls"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::worth_another_attempt;

    #[test]
    fn only_a_proved_failure_that_may_pass_is_tried_again() {
        // The provider answered with an error status: overloaded or briefly down.
        for code in [
            "provider/http-429",
            "provider/http-503",
            "provider/http-502",
        ] {
            assert!(worth_another_attempt(true, code), "{code}");
        }
        // Nothing left the body: a name, a connection or a handshake failed.
        for code in ["destination/dial-failed", "destination/tls"] {
            assert!(worth_another_attempt(false, code), "{code}");
        }
        // The same request would fail the same way, or an answer may exist.
        for (transmitted, code) in [
            (true, "provider/http-400"),
            (true, "provider/http-401"),
            (true, "quarantine/citation-out-of-bundle"),
            (true, "bounded/idle-timeout"),
            (false, "destination/port-not-admitted"),
            (false, "ward/decision-expired"),
            (false, "provider/http-503"),
        ] {
            assert!(!worth_another_attempt(transmitted, code), "{code}");
        }
    }
}
