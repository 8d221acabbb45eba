//! `reach … | head`: a reader that goes away early ends the output, not in a panic.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with EPIPE and `println!` panics
//! ("failed printing to stdout: Broken pipe"). Restoring SIGPIPE's default action needs
//! `unsafe` (`signal(2)`), which this workspace forbids, and every verb prints through
//! `println!`; so the panic hook recognises exactly that panic and ends the process as quietly
//! as SIGPIPE's default would, with success, as `reach manifest` already did. Every other
//! panic keeps the default hook.

/// The message of std's panic when a print to stdout fails.
const STDOUT_FAILED: &str = "failed printing to stdout";

/// Whether a panic message is a print to a stdout whose reader has gone.
pub fn is_closed_stdout(message: &str) -> bool {
    message.starts_with(STDOUT_FAILED) && message.contains("Broken pipe")
}

/// Install the hook; call once, first thing in `main`.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if is_closed_stdout(message) {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_print_to_a_closed_stdout_is_quiet() {
        assert!(is_closed_stdout(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!is_closed_stdout(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_stdout("failed printing to stderr: Broken pipe"));
        assert!(!is_closed_stdout("index out of bounds"));
    }
}
