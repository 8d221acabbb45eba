//! Ward's policy: rate-limit windows, per-task budgets, which principal may redeem a decision
//! for each purpose, and how long step grants live. Read from the `settings` table of ward's
//! role config; every field has a default fit for the public VPS profile.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::refusal::Dimension;

/// How a rate-limit window counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowKind {
    /// Counts reset at each multiple of the window length.
    Fixed,
    /// The previous window's count, weighted by how much of it still overlaps the sliding
    /// window, plus the current count. Two counters per key; no per-event history.
    Sliding,
}

/// At most `limit` admissions per `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub limit: u32,
    pub window_ms: u64,
    pub kind: WindowKind,
}

impl Window {
    pub const fn sliding(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window_ms: window.as_millis() as u64,
            kind: WindowKind::Sliding,
        }
    }
    pub const fn fixed(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window_ms: window.as_millis() as u64,
            kind: WindowKind::Fixed,
        }
    }
}

/// One window per dimension of a guest scope.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    pub application: Window,
    pub guild: Window,
    pub channel: Window,
    pub subject: Window,
}

impl RateLimits {
    pub fn window(&self, d: Dimension) -> Window {
        match d {
            Dimension::Application => self.application,
            Dimension::Guild => self.guild,
            Dimension::Channel => self.channel,
            Dimension::Subject => self.subject,
        }
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        const MINUTE: Duration = Duration::from_secs(60);
        Self {
            application: Window::sliding(600, MINUTE),
            guild: Window::sliding(120, MINUTE),
            channel: Window::sliding(30, MINUTE),
            subject: Window::sliding(5, MINUTE),
        }
    }
}

/// What one task (one Sigil, one run) may consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaskBudgets {
    /// Decisions live at once (issued or redeemed and not yet expired).
    pub concurrency: u32,
    /// Model tokens, summed over the `max_tokens` of every decision issued.
    pub tokens: u64,
    /// The longest a task may live; the Sigil expires at the earlier of this and the run's
    /// own deadline.
    pub time_ms: u64,
    /// Decisions per run. Every physical attempt needs one, so this bounds retries, fallbacks,
    /// redirects and polls together.
    pub retries: u32,
    /// Provider spend in micro-units of the billing currency, summed like tokens.
    pub spend_micros: u64,
}

impl Default for TaskBudgets {
    fn default() -> Self {
        Self {
            concurrency: 4,
            tokens: 16_384,
            time_ms: 120_000,
            retries: 8,
            spend_micros: 50_000,
        }
    }
}

/// What one duty Sigil (see [`crate::desk::DutySigil`]) may consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DutyBudgets {
    /// Decisions per duty Sigil: one per physical read (a reconciliation page).
    pub reads: u32,
    /// How long a duty Sigil lives. Its holder asks for a new one only once it expired, so
    /// `reads` per `time_ms` bounds how often one subject can be read.
    pub time_ms: u64,
    /// Decisions issued and not yet redeemed at once on one duty Sigil (reads in flight).
    pub concurrency: u32,
}

impl Default for DutyBudgets {
    fn default() -> Self {
        // A reconciliation reads at most 20 pages (`reach_discord::rest::MAX_RECONCILE_PAGES`)
        // and backs off between passes; 40 reads in 10 minutes covers a deep pass and a
        // dozen short ones.
        Self {
            reads: 40,
            time_ms: 600_000,
            concurrency: 2,
        }
    }
}

/// How long step grants live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StepGrantPolicy {
    /// A grant's life when core asks for none (`ttl_ms = 0`). Core mints right before it hands
    /// the step to the workbench, which redeems right before it runs it; a minute covers the
    /// hand-over, not a wait for an instance or an operator.
    pub default_ttl_ms: u64,
    /// The longest life core may ask for; more is refused (`grant/bad-request: ttl_ms`).
    pub max_ttl_ms: u64,
}

impl Default for StepGrantPolicy {
    fn default() -> Self {
        Self {
            default_ttl_ms: 60_000,
            max_ttl_ms: 600_000,
        }
    }
}

/// Who may redeem a decision for one purpose.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurposeRule {
    /// The role name (principal) that alone may redeem.
    pub redeemer: String,
    /// Whether a Privacy Cut receipt must be bound (remote formation).
    #[serde(default)]
    pub requires_cut_receipt: bool,
    /// A duty purpose: decisions for it are issued only on a duty Sigil minted for it, and a
    /// task Sigil cannot ask for one.
    #[serde(default)]
    pub duty: bool,
}

/// Ward's whole policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WardPolicy {
    pub rate_limits: RateLimits,
    pub budgets: TaskBudgets,
    /// Budgets of each duty Sigil.
    pub duty: DutyBudgets,
    pub purposes: BTreeMap<String, PurposeRule>,
    /// Payload labels that may never leave the body on this profile.
    pub refused_labels: Vec<String>,
    /// Lives of step grants.
    pub step_grants: StepGrantPolicy,
}

impl Default for WardPolicy {
    fn default() -> Self {
        let rule = |redeemer: &str, cut: bool| PurposeRule {
            redeemer: redeemer.into(),
            requires_cut_receipt: cut,
            duty: false,
        };
        Self {
            rate_limits: RateLimits::default(),
            budgets: TaskBudgets::default(),
            duty: DutyBudgets::default(),
            purposes: BTreeMap::from([
                ("discord-delivery".to_owned(), rule("egress-discord", false)),
                (
                    "discord-reconcile-read".to_owned(),
                    PurposeRule {
                        duty: true,
                        ..rule("egress-discord", false)
                    },
                ),
                ("model-completion".to_owned(), rule("egress-provider", true)),
                ("a2a-task".to_owned(), rule("egress-provider", true)),
            ]),
            refused_labels: vec!["private".into(), "context/private".into()],
            step_grants: StepGrantPolicy::default(),
        }
    }
}
