//! The admission filter of the ingress edge (seed 001, First E2E contract, step 1): a pure
//! function from a Gateway event to an [`EdgeEvent`] for core's admission port, or a typed
//! [`EdgeRefusal`].
//!
//! **Architecture Invariant:** the filter is pure: no I/O, no clock, no state. The same event
//! under the same policy always gives the same result, so a redelivered event yields the same
//! external id and payload digest, which is what the ledger's admission key relies on.

use std::collections::BTreeSet;

use reach_digest::Sha256Digest;

use crate::model::GatewayEvent;
use crate::model::{INTERACTION_APPLICATION_COMMAND, InteractionCreate, MessageCreate, Snowflake};

/// The platform name in admission keys.
pub const PLATFORM: &str = "discord";
/// The revision of this adapter (gateway parsing, filter and canonical bytes). It is part of
/// the admission key: a change of what the digest covers is a new revision.
pub const ADAPTER_REVISION: &str = "discord-gateway-v10@1";
/// The application command that triggers a question.
pub const ASK_COMMAND: &str = "ask";
/// Default question size bound in bytes (Discord's own message limit is 2,000 characters for
/// bots and 4,000 for some users; a question longer than 2,000 bytes is refused, not cut).
pub const DEFAULT_MAX_QUESTION_BYTES: usize = 2_000;

/// What the edge admits, from the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgePolicy {
    /// The application id events must be for.
    pub application_id: Snowflake,
    /// The bot's user id (a mention of it is the message trigger).
    pub bot_user_id: Snowflake,
    /// Admitted guilds.
    pub guilds: BTreeSet<Snowflake>,
    /// Admitted channels and threads (by their own id), within the admitted guilds.
    pub channels: BTreeSet<Snowflake>,
    /// Largest question, in bytes of UTF-8, after the trigger is removed.
    pub max_question_bytes: usize,
    /// Adapter revisions the manifest admits.
    pub adapter_revisions: BTreeSet<String>,
}

/// The kind of event that carried the question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A MESSAGE_CREATE that mentions the bot.
    MessageCreate,
    /// An INTERACTION_CREATE of the `/ask` command.
    InteractionCreate,
}

impl EventKind {
    /// The stable name used in keys (`MESSAGE_CREATE`, `INTERACTION_CREATE`).
    pub fn as_str(&self) -> &'static str {
        match self {
            EventKind::MessageCreate => "MESSAGE_CREATE",
            EventKind::InteractionCreate => "INTERACTION_CREATE",
        }
    }
}

/// An admitted event, ready for core's admission port (DiscordEventAdmission@1's key fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeEvent {
    /// Always [`PLATFORM`].
    pub platform: &'static str,
    /// Always [`ADAPTER_REVISION`].
    pub adapter_revision: &'static str,
    /// The application id.
    pub application_id: Snowflake,
    /// The event kind.
    pub kind: EventKind,
    /// The external event id: the message id or the interaction id.
    pub external_event_id: Snowflake,
    /// Digest of [`EdgeEvent::canonical_bytes`]: same id with another digest is a security fault.
    pub payload_digest: Sha256Digest,
    /// The guild.
    pub guild_id: Snowflake,
    /// The channel or thread.
    pub channel_id: Snowflake,
    /// The external subject (the author's user id).
    pub subject: Snowflake,
    /// The question, with the bot mention removed and whitespace trimmed.
    pub question: String,
    /// The message to reply to (the question message; `None` for an interaction).
    pub reply_to: Option<Snowflake>,
}

/// Why an event was not admitted. Each variant's code is stable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EdgeRefusal {
    /// `edge/adapter-not-admitted`: the manifest does not admit this adapter revision.
    #[error("edge/adapter-not-admitted")]
    AdapterNotAdmitted,
    /// `edge/application-mismatch`: the interaction is for another application.
    #[error("edge/application-mismatch")]
    ApplicationMismatch,
    /// `edge/dm`: direct messages are never admitted.
    #[error("edge/dm")]
    Dm,
    /// `edge/guild-not-admitted`.
    #[error("edge/guild-not-admitted")]
    GuildNotAdmitted,
    /// `edge/channel-not-admitted`.
    #[error("edge/channel-not-admitted")]
    ChannelNotAdmitted,
    /// `edge/bot-author`: bots and webhooks (including ourselves) never ask.
    #[error("edge/bot-author")]
    BotAuthor,
    /// `edge/no-trigger`: neither a mention of the bot nor the `/ask` command.
    #[error("edge/no-trigger")]
    NoTrigger,
    /// `edge/empty`: the trigger carried no question text.
    #[error("edge/empty")]
    Empty,
    /// `edge/oversized`: the question is longer than the policy admits.
    #[error("edge/oversized")]
    Oversized,
    /// `edge/not-a-question`: the event is not one the edge acts on (READY, RESUMED…).
    #[error("edge/not-a-question")]
    NotAQuestion,
}

impl EdgeRefusal {
    /// The stable code (`edge/...`).
    pub fn code(&self) -> String {
        self.to_string()
    }
}

/// The filter: check `event` against `policy`. Order: adapter, application, DM, guild,
/// channel, author, trigger, size; the first failing check names the refusal.
pub fn admit(policy: &EdgePolicy, event: &GatewayEvent) -> Result<EdgeEvent, EdgeRefusal> {
    if !policy.adapter_revisions.contains(ADAPTER_REVISION) {
        return Err(EdgeRefusal::AdapterNotAdmitted);
    }
    match event {
        GatewayEvent::MessageCreate { message, .. } => admit_message(policy, message),
        GatewayEvent::InteractionCreate { interaction, .. } => {
            admit_interaction(policy, interaction)
        }
        _ => Err(EdgeRefusal::NotAQuestion),
    }
}

fn place(
    policy: &EdgePolicy,
    guild: Option<Snowflake>,
    channel: Option<Snowflake>,
) -> Result<(Snowflake, Snowflake), EdgeRefusal> {
    let guild = guild.ok_or(EdgeRefusal::Dm)?;
    if !policy.guilds.contains(&guild) {
        return Err(EdgeRefusal::GuildNotAdmitted);
    }
    let channel = channel.ok_or(EdgeRefusal::ChannelNotAdmitted)?;
    if !policy.channels.contains(&channel) {
        return Err(EdgeRefusal::ChannelNotAdmitted);
    }
    Ok((guild, channel))
}

fn check_size(policy: &EdgePolicy, question: &str) -> Result<(), EdgeRefusal> {
    if question.len() > policy.max_question_bytes {
        return Err(EdgeRefusal::Oversized);
    }
    if question.is_empty() {
        return Err(EdgeRefusal::Empty);
    }
    Ok(())
}

fn admit_message(policy: &EdgePolicy, m: &MessageCreate) -> Result<EdgeEvent, EdgeRefusal> {
    let (guild_id, channel_id) = place(policy, m.guild_id, Some(m.channel_id))?;
    if m.author.bot || m.webhook || m.author.id == policy.bot_user_id {
        return Err(EdgeRefusal::BotAuthor);
    }
    if !m.mentions.contains(&policy.bot_user_id) {
        return Err(EdgeRefusal::NoTrigger);
    }
    // The raw content is bounded before any work on it.
    if m.content.len() > policy.max_question_bytes.saturating_add(64) {
        return Err(EdgeRefusal::Oversized);
    }
    let question = strip_mention(&m.content, policy.bot_user_id);
    check_size(policy, &question)?;
    Ok(finish(
        policy,
        EventKind::MessageCreate,
        m.id,
        guild_id,
        channel_id,
        m.author.id,
        question,
        Some(m.id),
    ))
}

fn admit_interaction(policy: &EdgePolicy, i: &InteractionCreate) -> Result<EdgeEvent, EdgeRefusal> {
    if i.application_id != policy.application_id {
        return Err(EdgeRefusal::ApplicationMismatch);
    }
    let (guild_id, channel_id) = place(policy, i.guild_id, i.channel_id)?;
    let user = i.user.as_ref().ok_or(EdgeRefusal::BotAuthor)?;
    if user.bot {
        return Err(EdgeRefusal::BotAuthor);
    }
    if i.kind != INTERACTION_APPLICATION_COMMAND || i.command_name.as_deref() != Some(ASK_COMMAND) {
        return Err(EdgeRefusal::NoTrigger);
    }
    let question = i.option_text.as_deref().unwrap_or("").trim().to_owned();
    check_size(policy, &question)?;
    Ok(finish(
        policy,
        EventKind::InteractionCreate,
        i.id,
        guild_id,
        channel_id,
        user.id,
        question,
        None,
    ))
}

/// Remove every `<@id>` and `<@!id>` mention of the bot and trim.
fn strip_mention(content: &str, bot: Snowflake) -> String {
    content
        .replace(&format!("<@{bot}>"), "")
        .replace(&format!("<@!{bot}>"), "")
        .trim()
        .to_owned()
}

#[allow(clippy::too_many_arguments)]
fn finish(
    policy: &EdgePolicy,
    kind: EventKind,
    external_event_id: Snowflake,
    guild_id: Snowflake,
    channel_id: Snowflake,
    subject: Snowflake,
    question: String,
    reply_to: Option<Snowflake>,
) -> EdgeEvent {
    let mut event = EdgeEvent {
        platform: PLATFORM,
        adapter_revision: ADAPTER_REVISION,
        application_id: policy.application_id,
        kind,
        external_event_id,
        payload_digest: Sha256Digest::of([]),
        guild_id,
        channel_id,
        subject,
        question,
        reply_to,
    };
    event.payload_digest = Sha256Digest::of(event.canonical_bytes());
    event
}

impl EdgeEvent {
    /// The canonical bytes the payload digest covers: a versioned header, then each field as
    /// `name=<byte length>:<value>\n` in a fixed order. Length prefixes make the encoding
    /// injective whatever the question contains.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let reply = self.reply_to.map(|r| r.to_string()).unwrap_or_default();
        let fields: [(&str, String); 10] = [
            ("platform", self.platform.to_owned()),
            ("adapter_revision", self.adapter_revision.to_owned()),
            ("application_id", self.application_id.to_string()),
            ("kind", self.kind.as_str().to_owned()),
            ("external_event_id", self.external_event_id.to_string()),
            ("guild_id", self.guild_id.to_string()),
            ("channel_id", self.channel_id.to_string()),
            ("subject", self.subject.to_string()),
            ("question", self.question.clone()),
            ("reply_to", reply),
        ];
        let mut out = b"reach.discord.edge-event@1\n".to_vec();
        for (name, value) in fields {
            out.extend_from_slice(format!("{name}={}:", value.len()).as_bytes());
            out.extend_from_slice(value.as_bytes());
            out.push(b'\n');
        }
        out
    }
}
