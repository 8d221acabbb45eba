//! The Discord values Reach reads: snowflakes, the bot token, and the two events the edge acts
//! on, parsed from Gateway v10 JSON by hand-written serde types that keep only what Reach uses.
//!
//! **Architecture Invariant:** nothing here holds more of a Discord object than the admission
//! filter or the delivery adapter needs; unknown fields are ignored, never stored.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Discord snowflake id. Discord writes them as decimal strings in JSON.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Snowflake(pub u64);

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds: a snowflake's top 42 bits
/// count milliseconds from it.
pub const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// How long an interaction's token authorizes its webhook (callback, `@original`, follow-ups):
/// Discord documents 15 minutes from the interaction's creation.
pub const INTERACTION_TOKEN_LIFETIME: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Snowflake {
    /// When Discord minted this id, in Unix milliseconds (its top 42 bits).
    pub const fn created_at_ms(self) -> u64 {
        (self.0 >> 22) + DISCORD_EPOCH_MS
    }

    /// Whether an interaction with this id still has a live token at `now_ms` (Unix ms), with
    /// `margin` to spare: created no later than now (plus the margin, for clock skew) and at
    /// most [`INTERACTION_TOKEN_LIFETIME`] less `margin` ago.
    pub fn token_alive_at(self, now_ms: u64, margin: std::time::Duration) -> bool {
        let margin = margin.as_millis() as u64;
        let created = self.created_at_ms();
        let lifetime = INTERACTION_TOKEN_LIFETIME.as_millis() as u64;
        created <= now_ms.saturating_add(margin)
            && now_ms.saturating_sub(created) < lifetime.saturating_sub(margin)
    }
}

impl fmt::Debug for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Snowflake {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Snowflake)
    }
}

impl Serialize for Snowflake {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(u64),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
            Raw::Number(n) => Ok(Snowflake(n)),
        }
    }
}

/// The bot credential. It is read by the caller from its secret file and handed over as bytes;
/// it is never printed (its `Debug` is redacted) and only written into the IDENTIFY/RESUME
/// payload and the REST `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct BotToken(String);

impl fmt::Debug for BotToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BotToken(<redacted>)")
    }
}

/// The token bytes are not a usable bot token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bot token must be 1 to {MAX_TOKEN_BYTES} bytes of printable ASCII without spaces")]
pub struct InvalidToken;

/// Longest token accepted (Discord tokens are about 70 bytes).
pub const MAX_TOKEN_BYTES: usize = 256;

impl BotToken {
    /// Validate token bytes as read from a secret file. One trailing newline is tolerated
    /// because editors add it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, InvalidToken> {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let ok = !bytes.is_empty()
            && bytes.len() <= MAX_TOKEN_BYTES
            && bytes.iter().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(InvalidToken);
        }
        // Printable ASCII is valid UTF-8.
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| InvalidToken)?;
        Ok(BotToken(text))
    }

    /// The token text, for the payloads that must carry it.
    #[cfg(feature = "net")]
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// The author of a message or the user of an interaction.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Author {
    /// User id.
    pub id: Snowflake,
    /// Whether the user is a bot (absent means false).
    #[serde(default)]
    pub bot: bool,
}

/// A MESSAGE_CREATE dispatch, reduced to what the edge uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageCreate {
    /// Message id (the external event id of a mention trigger).
    pub id: Snowflake,
    /// Channel or thread id.
    pub channel_id: Snowflake,
    /// Guild id; `None` for a direct message.
    pub guild_id: Option<Snowflake>,
    /// The author.
    pub author: Author,
    /// Whether a webhook posted it (webhooks are never questions).
    pub webhook: bool,
    /// The text (empty for messages not addressed to the bot unless MESSAGE_CONTENT is on).
    pub content: String,
    /// Ids of the users mentioned.
    pub mentions: Vec<Snowflake>,
    /// The sender's nonce, as text (our replies carry the delivery intent's nonce).
    pub nonce: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    id: Snowflake,
    channel_id: Snowflake,
    #[serde(default)]
    guild_id: Option<Snowflake>,
    author: Author,
    #[serde(default)]
    webhook_id: Option<Snowflake>,
    #[serde(default)]
    content: String,
    #[serde(default)]
    mentions: Vec<RawUser>,
    #[serde(default)]
    nonce: Option<RawNonce>,
}

#[derive(Deserialize)]
struct RawUser {
    id: Snowflake,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawNonce {
    Text(String),
    Number(i64),
}

impl RawNonce {
    fn into_text(self) -> String {
        match self {
            RawNonce::Text(s) => s,
            RawNonce::Number(n) => n.to_string(),
        }
    }
}

impl MessageCreate {
    /// Parse a MESSAGE_CREATE `d` object (also a REST message object).
    pub fn from_json(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let raw: RawMessage = serde_json::from_value(value)?;
        Ok(MessageCreate {
            id: raw.id,
            channel_id: raw.channel_id,
            guild_id: raw.guild_id,
            author: raw.author,
            webhook: raw.webhook_id.is_some(),
            content: raw.content,
            mentions: raw.mentions.into_iter().map(|u| u.id).collect(),
            nonce: raw.nonce.map(RawNonce::into_text),
        })
    }
}

/// The secret-ish token that lets the application answer an interaction. Redacted in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct InteractionToken(pub String);

impl fmt::Debug for InteractionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InteractionToken(<redacted>)")
    }
}

/// An INTERACTION_CREATE dispatch of an application command, reduced to what the edge uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractionCreate {
    /// Interaction id (the external event id of a `/ask` trigger).
    pub id: Snowflake,
    /// The application the interaction is for.
    pub application_id: Snowflake,
    /// Interaction type (2 is APPLICATION_COMMAND).
    pub kind: u8,
    /// Channel or thread id.
    pub channel_id: Option<Snowflake>,
    /// Guild id; `None` in a DM.
    pub guild_id: Option<Snowflake>,
    /// The invoking user (`member.user` in a guild, `user` in a DM).
    pub user: Option<Author>,
    /// The command name (`ask`).
    pub command_name: Option<String>,
    /// The first string option's value (the question).
    pub option_text: Option<String>,
    /// The interaction token.
    pub token: InteractionToken,
}

/// Interaction type APPLICATION_COMMAND.
pub const INTERACTION_APPLICATION_COMMAND: u8 = 2;

#[derive(Deserialize)]
struct RawInteraction {
    id: Snowflake,
    application_id: Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    channel_id: Option<Snowflake>,
    #[serde(default)]
    guild_id: Option<Snowflake>,
    #[serde(default)]
    member: Option<RawMember>,
    #[serde(default)]
    user: Option<Author>,
    #[serde(default)]
    data: Option<RawCommandData>,
    token: String,
}

#[derive(Deserialize)]
struct RawMember {
    user: Option<Author>,
}

#[derive(Deserialize)]
struct RawCommandData {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    options: Vec<RawOption>,
}

#[derive(Deserialize)]
struct RawOption {
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    value: Option<serde_json::Value>,
}

/// Option type STRING.
const OPTION_STRING: u8 = 3;

impl InteractionCreate {
    /// Parse an INTERACTION_CREATE `d` object.
    pub fn from_json(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let raw: RawInteraction = serde_json::from_value(value)?;
        let user = raw.member.and_then(|m| m.user).or(raw.user);
        let (command_name, option_text) = match raw.data {
            Some(data) => {
                let text = data
                    .options
                    .into_iter()
                    .find(|o| o.kind == OPTION_STRING)
                    .and_then(|o| o.value)
                    .and_then(|v| v.as_str().map(str::to_owned));
                (data.name, text)
            }
            None => (None, None),
        };
        Ok(InteractionCreate {
            id: raw.id,
            application_id: raw.application_id,
            kind: raw.kind,
            channel_id: raw.channel_id,
            guild_id: raw.guild_id,
            user,
            command_name,
            option_text,
            token: InteractionToken(raw.token),
        })
    }
}

/// What the client reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayEvent {
    /// READY: a new session.
    Ready {
        /// The session id.
        session_id: String,
        /// The bot's user id (what a mention trigger must mention).
        user_id: Snowflake,
        /// The application id.
        application_id: Option<Snowflake>,
    },
    /// RESUMED: the session continued; missed dispatches were replayed before this.
    Resumed,
    /// A MESSAGE_CREATE dispatch.
    MessageCreate {
        /// The dispatch sequence number.
        seq: u64,
        /// The message.
        message: MessageCreate,
    },
    /// An INTERACTION_CREATE dispatch of an application command.
    InteractionCreate {
        /// The dispatch sequence number.
        seq: u64,
        /// The interaction.
        interaction: InteractionCreate,
    },
    /// The connection ended; the client reconnects (resuming when it can).
    Reconnecting {
        /// Why (`closed`, `zombie`, `reconnect-opcode`, `invalid-session`…).
        reason: &'static str,
        /// Whether the next connection will RESUME (true) or IDENTIFY (false).
        resume: bool,
    },
    /// The gateway refused the client for good (for example 4004, authentication failed).
    Fatal {
        /// The close code.
        code: u16,
    },
}
