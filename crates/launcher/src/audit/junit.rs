//! The receipt as JUnit XML (`reach audit --format junit`), the form CI systems read, as
//! kube-bench offers beside its JSON: one `<testsuite>` per receipt, one `<testcase>` per check
//! (its class the check's family, `health` of `health/core`), a failed check with a
//! `<failure>` carrying its detail, a skipped one with `<skipped>` carrying why. The host and
//! manifest facts are the suite's `<properties>`. Nothing is in it that the JSON does not hold.

use super::{Outcome, Receipt};

impl Receipt {
    /// The receipt as a JUnit XML document.
    pub fn to_junit(&self) -> String {
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        x.push_str(&format!(
            "<testsuites name=\"reach audit\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
            self.checks.len(),
            self.failed,
            self.skipped
        ));
        x.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" \
             timestamp_ms=\"{}\">\n",
            escape(&format!("{} {}", self.format, self.manifest.profile)),
            self.checks.len(),
            self.failed,
            self.skipped,
            self.generated_at_ms
        ));
        x.push_str("    <properties>\n");
        let h = &self.host;
        let facts: [(&str, Option<String>); 11] = [
            ("reach_version", Some(self.reach_version.to_owned())),
            ("host.os", h.os.clone()),
            ("host.kernel", h.kernel.clone()),
            ("host.uid", Some(h.uid.to_string())),
            ("host.podman", h.podman.clone()),
            ("host.systemd", h.systemd.clone()),
            ("host.cgroup", Some(h.cgroup.to_owned())),
            ("manifest.profile", Some(self.manifest.profile.clone())),
            ("manifest.digest", Some(self.manifest.digest.clone())),
            (
                "manifest.trust_domain",
                Some(self.manifest.trust_domain.clone()),
            ),
            (
                "manifest.recovery_policy",
                Some(self.manifest.recovery_policy.as_str().to_owned()),
            ),
        ];
        for (name, value) in facts {
            if let Some(v) = value {
                x.push_str(&format!(
                    "      <property name=\"{name}\" value=\"{}\"/>\n",
                    escape(&v)
                ));
            }
        }
        x.push_str("    </properties>\n");
        for c in &self.checks {
            let class = c.id.split('/').next().unwrap_or(&c.id);
            let open = format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                escape(class),
                escape(&c.id)
            );
            match c.outcome {
                Outcome::Pass => {
                    x.push_str(&open);
                    x.push_str(&format!(
                        ">\n      <system-out>{}</system-out>\n    </testcase>\n",
                        escape(&c.detail)
                    ));
                }
                Outcome::Fail => x.push_str(&format!(
                    "{open}>\n      <failure message=\"{0}\">{0}</failure>\n    </testcase>\n",
                    escape(&c.detail)
                )),
                Outcome::Skip => x.push_str(&format!(
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    escape(&c.detail)
                )),
            }
        }
        x.push_str("  </testsuite>\n</testsuites>\n");
        x
    }
}

/// Text for an XML attribute or element: the five markup characters as entities, and the
/// control characters XML 1.0 cannot hold at all replaced (a detail quotes what it observed).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("a<b>&\"c\"'\n\t\u{1}"),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;&#10;&#9;\u{FFFD}"
        );
    }
}
