//! `reach hil …`: the operator's answers to HIL requests, on ward's `ward.authority` port with
//! the operator's own leaf (the only principal ward lets read or answer them).
//!
//! An answer binds the digest of the request exactly as it was fetched and shown: `approve`
//! and `deny` read the request first and send its digest, so a request that changed (or
//! another one) is refused by ward (`hil/other-request`), and one already answered keeps its
//! first answer (`hil/answered`). Nothing here answers on its own; `watch` only prints.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_proto::ward::v1 as pb;
use reach_proto::ward::v1::ward_client::WardClient;
use tokio_stream::StreamExt as _;

use crate::BodyTarget;

#[derive(clap::Subcommand, Debug)]
pub enum HilCommand {
    /// Pending requests (with `--all`, answered and expired ones too), oldest first.
    List {
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// One request in full: the step, its effect class and where it came from, the diff, the
    /// command or the unit, the rollback, the run and the expiry.
    Show {
        id: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Approve exactly the request shown by `show` (its digest is bound); nothing else.
    Approve {
        id: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Deny a request; the run it belongs to ends with `hil/denied`.
    Deny {
        id: String,
        /// Why (required; kept with the answer).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        body: BodyTarget,
    },
    /// Wait for requests and print each pending one as it arrives (Ctrl-C to stop).
    Watch {
        #[command(flatten)]
        body: BodyTarget,
    },
}

async fn client(body: &BodyTarget) -> anyhow::Result<WardClient<tonic::transport::Channel>> {
    let m: Manifest = body.manifest()?;
    let layout: StateLayout = body.layout(&m)?;
    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "ward.authority")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(WardClient::new(ch))
}

/// A refusal from ward: its message leads with the stable code.
fn refused(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{}", s.message())
}

pub async fn run(command: HilCommand) -> anyhow::Result<ExitCode> {
    // Colour marks diff lines at a terminal only; piped output is plain text.
    let color = std::io::stdout().is_terminal();
    match command {
        HilCommand::List { all, body } => {
            let list = client(&body)
                .await?
                .list_hil_requests(pb::ListHilRequestsRequest { all })
                .await
                .map_err(refused)?
                .into_inner()
                .requests;
            if list.is_empty() {
                println!(
                    "{}",
                    if all {
                        "no HIL requests"
                    } else {
                        "no pending HIL requests"
                    }
                );
            }
            for h in &list {
                println!("{}", summary(h, now_ms()));
            }
            Ok(ExitCode::SUCCESS)
        }
        HilCommand::Show { id, body } => {
            let h = client(&body)
                .await?
                .get_hil_request(pb::GetHilRequestRequest { id })
                .await
                .map_err(refused)?
                .into_inner();
            print!("{}", render(&h, now_ms(), color));
            Ok(ExitCode::SUCCESS)
        }
        HilCommand::Approve { id, body } => answer(&body, id, true, String::new(), color).await,
        HilCommand::Deny { id, reason, body } => {
            if reason.trim().is_empty() {
                anyhow::bail!("hil/bad-request: a denial says why (--reason)");
            }
            answer(&body, id, false, reason, color).await
        }
        HilCommand::Watch { body } => {
            let mut ward = client(&body).await?;
            let mut stream = ward
                .watch_hil_requests(pb::WatchHilRequestsRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            eprintln!("waiting for HIL requests (Ctrl-C to stop)");
            while let Some(h) = stream.next().await {
                let h = h.map_err(refused)?;
                let mut out = std::io::stdout().lock();
                write!(out, "{}", render(&h, now_ms(), color))?;
                writeln!(
                    out,
                    "answer: reach hil approve {id}   or   reach hil deny {id} --reason …\n",
                    id = h.id
                )?;
                out.flush()?;
            }
            anyhow::bail!("ward ended the watch")
        }
    }
}

/// Fetches the request, then answers it by the digest just read.
async fn answer(
    body: &BodyTarget,
    id: String,
    approve: bool,
    reason: String,
    color: bool,
) -> anyhow::Result<ExitCode> {
    let mut ward = client(body).await?;
    let shown = ward
        .get_hil_request(pb::GetHilRequestRequest { id: id.clone() })
        .await
        .map_err(refused)?
        .into_inner();
    let h = ward
        .answer_hil_request(pb::AnswerHilRequestRequest {
            id,
            request_digest: shown.digest.clone(),
            approve,
            reason,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print!("{}", render(&h, now_ms(), color));
    Ok(ExitCode::SUCCESS)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn utc(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.replace_millisecond(0)
                .ok()?
                .format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// `3m 05s`, `1h 02m`, or `45s`.
fn span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The step's action in a few words: `patch /etc/x`, `run service-status a b`, `restart u`.
fn action(h: &pb::HilRequestView) -> String {
    let mut words = vec![h.action.clone()];
    if !h.target.is_empty() {
        words.push(h.target.clone());
    }
    words.extend(h.argv.iter().cloned());
    words.join(" ")
}

fn when(h: &pb::HilRequestView, now: u64) -> String {
    match h.state.as_str() {
        "pending" if h.expires_at_unix_ms > now => {
            format!("expires in {}", span(h.expires_at_unix_ms - now))
        }
        "pending" | "expired" => format!("expired at {}", utc(h.expires_at_unix_ms)),
        _ => format!(
            "{} at {} by {}",
            h.state,
            utc(h.answered_at_unix_ms),
            h.answered_by
        ),
    }
}

/// One line for `list`.
pub fn summary(h: &pb::HilRequestView, now: u64) -> String {
    format!(
        "{}  {:<8}  {} step {} ({})  {}  [{}]",
        h.id,
        h.state,
        h.pack_name,
        h.step_index,
        h.effect_class,
        action(h),
        when(h, now)
    )
}

/// The whole request, as `show` and `watch` print it.
pub fn render(h: &pb::HilRequestView, now: u64, color: bool) -> String {
    let paint = |code: &str, line: &str| {
        if color {
            format!("\x1b[{code}m{line}\x1b[0m")
        } else {
            line.to_owned()
        }
    };
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        out.push_str(&format!("{name:<10}{value}\n"));
    };
    field(
        "request",
        format!("{}  {}  ({})", h.id, h.state, when(h, now)),
    );
    field("digest", h.digest.clone());
    field(
        "pack",
        format!("{}, generation {}", h.pack_name, h.pack_generation),
    );
    field(
        "run",
        format!("experiment {}, instance {}", h.experiment_id, h.instance_id),
    );
    field(
        "step",
        format!(
            "{} of plan {} ({})",
            h.step_index, h.plan_digest, h.step_digest
        ),
    );
    field(
        "effect",
        format!("{} (the mode of {})", h.effect_class, h.class_source),
    );
    field("action", action(h));
    field("rollback", h.rollback.clone());
    field("filed", utc(h.filed_at_unix_ms));
    if !h.reason.is_empty() {
        field("reason", h.reason.clone());
    }
    if !h.diff.is_empty() {
        out.push('\n');
        for line in h.diff.lines() {
            let painted = if line.starts_with("+++") || line.starts_with("---") {
                paint("1", line)
            } else if line.starts_with('+') {
                paint("32", line)
            } else if line.starts_with('-') {
                paint("31", line)
            } else if line.starts_with("@@") {
                paint("36", line)
            } else {
                line.to_owned()
            };
            out.push_str(&painted);
            out.push('\n');
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> pb::HilRequestView {
        pb::HilRequestView {
            id: "hil_0123".into(),
            digest: "sha256:ab".into(),
            state: "pending".into(),
            experiment_id: "exp-1".into(),
            instance_id: "vm-1".into(),
            plan_digest: "sha256:cd".into(),
            step_index: 2,
            step_digest: "sha256:ef".into(),
            pack_name: "demo".into(),
            pack_generation: 3,
            effect_class: "contained-mutation".into(),
            class_source: "patch-policy.toml#main".into(),
            action: "patch".into(),
            target: "/etc/app/app.conf".into(),
            argv: Vec::new(),
            diff: "--- a/etc/app/app.conf\n+++ b/etc/app/app.conf\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
                .into(),
            rollback: "recreate-prepared-system".into(),
            filed_at_unix_ms: 1_000,
            expires_at_unix_ms: 1_000 + 15 * 60 * 1000,
            answered_at_unix_ms: 0,
            answered_by: String::new(),
            reason: String::new(),
        }
    }

    #[test]
    fn show_names_what_the_operator_decides_on() {
        let text = render(&request(), 1_000 + 32_000, false);
        for want in [
            "hil_0123  pending  (expires in 14m 28s)",
            "sha256:ab",
            "demo, generation 3",
            "experiment exp-1, instance vm-1",
            "2 of plan sha256:cd (sha256:ef)",
            "contained-mutation (the mode of patch-policy.toml#main)",
            "patch /etc/app/app.conf",
            "recreate-prepared-system",
            "-a = 1\n+a = 2\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        // Colour only marks lines; it never changes them.
        let painted = render(&request(), 1_000, true);
        assert!(painted.contains("\x1b[31m-a = 1\x1b[0m"), "{painted}");
        assert!(painted.contains("\x1b[32m+a = 2\x1b[0m"), "{painted}");
    }

    #[test]
    fn list_lines_say_state_and_time() {
        let mut h = request();
        assert!(summary(&h, 1_000 + 16 * 60 * 1000).contains("[expired at 1970-01-01T00:15:01Z]"));
        h.state = "denied".into();
        h.answered_at_unix_ms = 61_000;
        h.answered_by = "operator".into();
        h.argv = vec!["-n".into()];
        h.action = "run".into();
        h.target = "service-status".into();
        let line = summary(&h, 0);
        assert!(line.contains("run service-status -n"), "{line}");
        assert!(
            line.contains("[denied at 1970-01-01T00:01:01Z by operator]"),
            "{line}"
        );
    }
}
