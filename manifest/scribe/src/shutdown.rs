//! The body's orderly stop at a host's shutdown: one system unit, installed by root beside the
//! lingering user, that stops the body's user units, callers before what they need, while that
//! user's service manager is still whole.
//!
//! Without it, the body stops when the host's shutdown stops `user@UID.service`: the user's
//! manager queues its exit transaction and stops everything at once, Podman's rootless network
//! helper (slirp4netns or pasta, in a scope of its own) included. A role on a Podman network
//! still drains and exits 0, but `podman rm` in its unit's `ExecStop=` then finds the helper
//! gone, cannot start it again (the manager refuses new units while it exits) and fails with
//! status 125, so the unit ends `Failed with result 'exit-code'` (podman#29419). The
//! deployment guest showed exactly this for the four roles with an egress network. An
//! explicit `systemctl --user stop` has no such race, so this unit runs one before the user's
//! manager is asked to exit: systemd stops units in the reverse of their start order, and it is
//! ordered after `user@UID.service`.
//!
//! It is a template, instantiated with the body's uid (`reach-shutdown@1500.service`), so the
//! file is the same on every host and `reach scribe check` can hold it to the manifest.

use crate::quadlet::STOP_TIMEOUT_SECS;

/// The unit, relative to the output directory: `systemd/system/`, because root installs it
/// into the system manager (`/etc/systemd/system`), unlike the renewal units beside it.
pub const UNIT_FILE: &str = "systemd/system/reach-shutdown@.service";
/// The template's name, to instantiate with the body's uid.
pub const TEMPLATE: &str = "reach-shutdown@.service";

/// The instance for the body run by `uid`.
pub fn instance(uid: u32) -> String {
    format!("reach-shutdown@{uid}.service")
}

/// The unit, as (file, text), for `header` (Scribe's generated-file header), the profile and
/// how many roles the body has (its stop may take each role's stop timeout in turn).
pub fn render(header: &str, profile: &str, roles: usize) -> (&'static str, String) {
    // Every role in a chain, each given its stop timeout and Podman's removal after it.
    let timeout = roles as u32 * (STOP_TIMEOUT_SECS + 15);
    let text = format!(
        "{header}[Unit]\n\
         Description=Stops Reach ({profile}) of user %i in order before that user's manager exits\n\
         # Stopped before the user's manager at shutdown (the reverse of this order).\n\
         After=user@%i.service\n\
         Requires=user@%i.service\n\
         \n[Service]\n\
         Type=oneshot\n\
         RemainAfterExit=yes\n\
         User=%i\n\
         Environment=XDG_RUNTIME_DIR=/run/user/%i\n\
         ExecStart=/bin/true\n\
         # A failure here leaves the stop to the user's manager, as without this unit.\n\
         ExecStop=-/usr/bin/systemctl --user stop reach-*.service\n\
         TimeoutStopSec={timeout}\n\
         \n[Install]\n\
         WantedBy=multi-user.target\n"
    );
    (UNIT_FILE, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_stops_the_body_before_its_users_manager() {
        let (file, text) = render("# h\n", "p@1", 8);
        assert_eq!(file, UNIT_FILE);
        assert!(file.ends_with(TEMPLATE));
        assert_eq!(instance(1500), "reach-shutdown@1500.service");
        assert!(text.contains("\nAfter=user@%i.service\n"), "{text}");
        assert!(text.contains("\nUser=%i\n"), "{text}");
        assert!(
            text.contains("\nExecStop=-/usr/bin/systemctl --user stop reach-*.service\n"),
            "{text}"
        );
        assert!(text.contains("\nTimeoutStopSec=240\n"), "{text}");
        assert!(text.contains("\nWantedBy=multi-user.target\n"), "{text}");
    }
}
