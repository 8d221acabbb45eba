//! The strict TOML form of ApplicationDeploymentManifest@1. Unknown keys are errors.

use serde::{Deserialize, Serialize};

/// The only schema this crate accepts.
pub const SCHEMA: &str = "ApplicationDeploymentManifest@1";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawManifest {
    pub schema: String,
    /// The deployment profile, e.g. `reach.vps.public@1`.
    pub profile: String,
    /// SPIFFE trust domain of every principal in this deployment.
    pub trust_domain: String,
    pub habitat: Habitat,
    pub recovery: Recovery,
    #[serde(default)]
    pub destinations: Vec<Destination>,
    pub roles: Vec<RawRole>,
    #[serde(default)]
    pub ports: Vec<RawPort>,
}

/// The owner partition this deployment serves: one admitted corpus.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Habitat {
    pub id: String,
    pub corpus: String,
}

/// What happens if the Phylactery is lost (seed: "The manifest must choose a recovery policy").
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    pub policy: RecoveryPolicy,
    /// How long an external effect may still be live; a fresh vault inside it refuses to serve.
    pub idempotency_horizon_hours: u32,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryPolicy {
    /// Backups disabled; loss is declared unrecoverable and needs operator reconciliation.
    LossUnrecoverable,
    /// Encrypted off-host backups with an offline key.
    EncryptedBackup,
}

impl RecoveryPolicy {
    /// The manifest's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LossUnrecoverable => "loss-unrecoverable",
            Self::EncryptedBackup => "encrypted-backup",
        }
    }

    /// Whether this build can honour the policy. Both branches are valid manifests; a body
    /// whose build cannot keep the promise must not start (issue #32 item 3): this build has
    /// no backup (`reach vault backup` does not exist), so `encrypted-backup` is refused by
    /// everything that starts a body (the launcher, Scribe's units) and by the receipt.
    pub fn honoured_by_this_build(self) -> Result<(), BuildRefusal> {
        match self {
            Self::LossUnrecoverable => Ok(()),
            Self::EncryptedBackup => Err(BuildRefusal::EncryptedBackupNotBuilt),
        }
    }
}

/// Why this build refuses to start a body a valid manifest describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildRefusal {
    /// the manifest chooses `encrypted-backup` and this build keeps no backup
    #[error(
        "the manifest's [recovery] policy is encrypted-backup, and this build has no encrypted \
         backup; choose loss-unrecoverable or a build that keeps backups"
    )]
    EncryptedBackupNotBuilt,
}

impl BuildRefusal {
    /// The stable code. These strings are API: tests and operators match on them.
    pub fn code(self) -> &'static str {
        match self {
            Self::EncryptedBackupNotBuilt => "recovery/encrypted-backup-not-built",
        }
    }
}

/// An admitted outbound destination (canonical HTTPS origin and purpose).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    pub name: String,
    pub url: String,
    pub purpose: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRole {
    pub name: String,
    /// The role binary, `reach-<kind>`; the kind decides which rules apply.
    pub binary: String,
    /// OCI image reference (Scribe pins it by digest when it materializes units).
    pub image: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Roles that must be ready before this one starts.
    #[serde(default)]
    pub after: Vec<String>,
    /// `none`, or `egress:<destination>[,<destination>…]`.
    pub network: String,
    #[serde(default)]
    pub credentials: Vec<Credential>,
    pub limits: Limits,
    #[serde(default = "default_user_ns")]
    pub user_ns: String,
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// Role-specific non-secret settings, passed through to the role's config.
    #[serde(default)]
    pub settings: toml::Table,
    /// Extra `podman run` arguments. Scribe refuses every flag that weakens the container
    /// (privileges, capabilities, host namespaces, volumes or secrets outside the manifest).
    #[serde(default)]
    pub podman_args: Vec<String>,
    /// Non-secret environment variables. Scribe refuses anything that looks like a credential:
    /// credentials are files, never environment.
    #[serde(default)]
    pub environment: std::collections::BTreeMap<String, String>,
}

fn default_user_ns() -> String {
    "auto".to_owned()
}

/// A secret file the role owns, by kind.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    pub file: String,
    pub kind: CredentialKind,
    /// An optional credential may be absent; the capability it enables is then disabled.
    #[serde(default)]
    pub optional: bool,
}

/// What a secret file is. The kind decides which role may hold it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialKind {
    /// Phylactery access (a PostgreSQL password, or the SQLite file's key).
    Database,
    /// The Discord bot token.
    DiscordBot,
    /// A model provider API key.
    ProviderApiKey,
    /// An enrolled A2A peer credential.
    PeerCredential,
    /// Ward's signing or pseudonym key.
    WardKey,
    /// A task Sigil. Never provisioned as a file: ward mints them per task.
    Sigil,
    /// egress-discord's private key that opens sealed interaction tokens (Scribe mints it).
    InteractionSealKey,
    /// The public half, with which ingress-edge seals each interaction token (Scribe writes it).
    InteractionSealPublic,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Database => "database",
            Self::DiscordBot => "discord-bot",
            Self::ProviderApiKey => "provider-api-key",
            Self::PeerCredential => "peer-credential",
            Self::WardKey => "ward-key",
            Self::Sigil => "sigil",
            Self::InteractionSealKey => "interaction-seal-key",
            Self::InteractionSealPublic => "interaction-seal-public",
        }
    }
}

/// Resource ceilings of one role.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub memory_mib: u32,
    pub pids: u32,
    #[serde(default)]
    pub cpu_millis: Option<u32>,
}

/// A host path mounted into the role.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    pub source: String,
    pub target: String,
    #[serde(default = "yes")]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPort {
    pub name: String,
    pub server: String,
    /// Full gRPC service name, e.g. `reach.core.v1.Admission`.
    pub service: String,
    pub allow: Vec<RawGrant>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGrant {
    pub caller: String,
    pub methods: Vec<String>,
    /// Required when a role is granted a method on its own port.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A validated role name (also its principal name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoleName(pub(crate) String);

impl RoleName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The kinds of role Reach has; each binary is `reach-<kind>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleKind {
    IngressEdge,
    Core,
    Ward,
    EgressProvider,
    EgressDiscord,
    Workbench,
    VmBroker,
    CorpusBuilder,
}

impl RoleKind {
    pub const ALL: [RoleKind; 8] = [
        Self::IngressEdge,
        Self::Core,
        Self::Ward,
        Self::EgressProvider,
        Self::EgressDiscord,
        Self::Workbench,
        Self::VmBroker,
        Self::CorpusBuilder,
    ];

    pub fn binary(self) -> &'static str {
        match self {
            Self::IngressEdge => "reach-ingress-edge",
            Self::Core => "reach-core",
            Self::Ward => "reach-ward",
            Self::EgressProvider => "reach-egress-provider",
            Self::EgressDiscord => "reach-egress-discord",
            Self::Workbench => "reach-workbench",
            Self::VmBroker => "reach-vm-broker",
            Self::CorpusBuilder => "reach-corpus-builder",
        }
    }

    pub fn from_binary(b: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.binary() == b)
    }

    /// Roles that must never have a network: they hold the vault, authority, or run guests.
    pub fn must_be_offline(self) -> bool {
        matches!(
            self,
            Self::Core | Self::Ward | Self::Workbench | Self::VmBroker
        )
    }

    /// Which credential kinds this role may hold, and why not otherwise.
    pub fn may_hold(self, kind: CredentialKind) -> Result<(), &'static str> {
        use CredentialKind as C;
        match (self, kind) {
            (_, C::Sigil) => Err("Sigils are minted per task by ward and never provisioned"),
            (Self::Core, C::Database) => Ok(()),
            (Self::Core, _) => Err("core holds no credential or badge"),
            (_, C::Database) => Err("only core holds the database"),
            (Self::IngressEdge | Self::EgressDiscord, C::DiscordBot) => Ok(()),
            (_, C::DiscordBot) => Err("only the Discord edge roles hold the bot credential"),
            (Self::EgressProvider, C::ProviderApiKey | C::PeerCredential) => Ok(()),
            (_, C::ProviderApiKey | C::PeerCredential) => {
                Err("only egress-provider instances hold provider and peer credentials")
            }
            (Self::Ward, C::WardKey) => Ok(()),
            (_, C::WardKey) => Err("only ward holds ward keys"),
            (Self::EgressDiscord, C::InteractionSealKey) => Ok(()),
            (_, C::InteractionSealKey) => Err("only egress-discord opens interaction tokens"),
            (Self::IngressEdge, C::InteractionSealPublic) => Ok(()),
            (_, C::InteractionSealPublic) => Err("only ingress-edge seals interaction tokens"),
        }
    }
}

/// A role's network class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkClass {
    /// No network at all; the role reaches others only through port sockets.
    None,
    /// Outbound to exactly these admitted destinations.
    Egress(Vec<String>),
}

impl NetworkClass {
    pub fn parse(s: &str) -> Option<Self> {
        if s == "none" {
            return Some(Self::None);
        }
        let list = s.strip_prefix("egress:")?;
        let names: Vec<String> = list.split(',').map(|d| d.trim().to_owned()).collect();
        if names.iter().any(String::is_empty) {
            return None;
        }
        Some(Self::Egress(names))
    }
}
