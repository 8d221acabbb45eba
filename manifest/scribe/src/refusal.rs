//! Scribe's refusals: every arrangement Scribe will not materialize, with a stable code and the
//! manifest path it concerns.
//!
//! The same rules run on units Scribe derives from a manifest and on units read back from disk
//! (`reach scribe check`), so a hand edit that adds `--privileged` is refused with the same code
//! as a manifest that asks for it.

use std::collections::BTreeMap;

/// A refused arrangement: where, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {path}: {kind}", code = self.kind.code())]
pub struct Refusal {
    /// The manifest path (`roles[3].podman_args[0]`) or unit file (`reach-core.container`).
    pub path: String,
    pub kind: RefusalKind,
}

impl Refusal {
    pub fn new(path: impl Into<String>, kind: RefusalKind) -> Self {
        Self {
            path: path.into(),
            kind,
        }
    }
    /// The stable code, e.g. `scribe/cap-add`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

/// Why Scribe refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefusalKind {
    /// `--privileged` gives the container every capability and every device
    #[error("`{0}` gives the container every capability and device")]
    Privileged(String),
    /// a capability is added back; every role runs with none
    #[error("`{0}` adds a capability; every role runs with none")]
    CapAdd(String),
    /// a security option that weakens confinement (seccomp, AppArmor, labels, no-new-privileges)
    #[error("`{0}` weakens the container's security options")]
    SecurityOpt(String),
    /// the container would join a host namespace
    #[error("`{0}` joins a host namespace")]
    HostNamespace(String),
    /// a volume or mount the manifest does not declare
    #[error("`{0}` mounts a volume the manifest does not declare")]
    VolumeOutsideManifest(String),
    /// a pod, or another container's namespaces, shared between roles
    #[error("`{0}` shares a pod or another container's namespaces")]
    SharedPod(String),
    /// a credential in the environment; credentials are secret files only
    #[error("`{0}` puts a credential in the environment; credentials are secret files")]
    CredentialInEnvironment(String),
    /// one volume mounted writable into two or more roles
    #[error("volume `{volume}` is mounted writable into roles {roles}")]
    SharedWritableVolume { volume: String, roles: String },
    /// a secret (or secret directory) mounted into a role that does not own it
    #[error("`{secret}` belongs to `{owner}`, not to role `{role}`")]
    ForeignSecret {
        secret: String,
        owner: String,
        role: String,
    },
    /// an image reference without an `@sha256:` digest, and no pin for it
    #[error(
        "image `{0}` is not pinned by digest (pin it in the manifest as `name@sha256:…`, in a digests file, or build it and pass --pin-local-images)"
    )]
    ImageWithoutDigest(String),
    /// the manifest's digest and the digests file (or local image) disagree
    #[error("image `{image}` is pinned to {pinned} but {source_name} says {found}")]
    ImageDigestMismatch {
        image: String,
        pinned: String,
        found: String,
        source_name: String,
    },
    /// a malformed digest
    #[error("`{0}` is not a `sha256:` digest of 64 lowercase hex digits")]
    BadDigest(String),
    /// a digests file that cannot be used: unreadable, not a TOML table, or naming a role the
    /// manifest does not have
    #[error("unusable digests file: {0}")]
    BadDigestsFile(String),
    /// a `podman run` argument Scribe does not pass through
    #[error(
        "`{0}` is not an allowed podman argument (Scribe sets network, mounts, secrets, limits and security itself)"
    )]
    PodmanArgNotAllowed(String),
    /// a user namespace mode Scribe does not know
    #[error(
        "user namespace `{0}` is not one of auto, auto:<options>, nomap, keep-id, keep-id:<options>"
    )]
    UnknownUserNs(String),
    /// a word for the unit file (an `Exec=` or `PodmanArgs=` argument, an `Environment=`
    /// entry) that cannot be quoted safely for systemd: a newline would start a new line, or
    /// section, of the unit
    #[error("argument `{0}` contains a control character")]
    BadArgument(String),
    /// a host path a generated unit names (the renewal service's binary, state directory or
    /// manifest) that is not absolute: the service runs from no particular directory
    #[error("`{0}` is not an absolute path; a generated unit runs from no particular directory")]
    RelativePath(String),
    /// the manifest asks for what this build cannot do (its code is the build refusal's)
    #[error(transparent)]
    NotBuilt(reach_manifest::schema::BuildRefusal),
}

impl RefusalKind {
    /// The stable code. These strings are API: tests and operators match on them.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Privileged(_) => "scribe/privileged",
            Self::CapAdd(_) => "scribe/cap-add",
            Self::SecurityOpt(_) => "scribe/security-opt",
            Self::HostNamespace(_) => "scribe/host-namespace",
            Self::VolumeOutsideManifest(_) => "scribe/volume-outside-manifest",
            Self::SharedPod(_) => "scribe/shared-pod",
            Self::CredentialInEnvironment(_) => "scribe/credential-in-environment",
            Self::SharedWritableVolume { .. } => "scribe/shared-writable-volume",
            Self::ForeignSecret { .. } => "scribe/foreign-secret",
            Self::ImageWithoutDigest(_) => "scribe/image-without-digest",
            Self::ImageDigestMismatch { .. } => "scribe/image-digest-mismatch",
            Self::BadDigest(_) => "scribe/bad-digest",
            Self::BadDigestsFile(_) => "scribe/bad-digests-file",
            Self::PodmanArgNotAllowed(_) => "scribe/podman-arg-not-allowed",
            Self::UnknownUserNs(_) => "scribe/unknown-userns",
            Self::BadArgument(_) => "scribe/bad-argument",
            Self::RelativePath(_) => "scribe/relative-path",
            Self::NotBuilt(r) => r.code(),
        }
    }
}

/// `podman run` flags passed through as they are: none of them widens what the container may
/// reach or hold. Everything else is refused; the dangerous ones with their own code.
const ALLOWED_FLAGS: &[&str] = &[
    "--annotation",
    "--init",
    "--label",
    "--log-opt",
    "--shm-size",
    "--stop-signal",
    "--tz",
];

/// Flags without a value.
const BOOLEAN_FLAGS: &[&str] = &[
    "--init",
    "--privileged",
    "--env-host",
    "--read-only",
    "--read-only-tmpfs",
    "--rm",
];

/// Words that mark an environment variable as a credential.
const CREDENTIAL_NAME_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "ACCESS_KEY",
    "AUTH",
    "BEARER",
    "COOKIE",
    "SESSION",
];

/// Value shapes that are credentials whatever the variable is called.
const CREDENTIAL_VALUE_PREFIXES: &[&str] = &[
    "Bot ",
    "Bearer ",
    "Basic ",
    "sk-",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "-----BEGIN",
];

/// Whether an environment entry carries a credential.
pub fn looks_like_credential(key: &str, value: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    if CREDENTIAL_NAME_WORDS.iter().any(|w| upper.contains(w)) {
        return true;
    }
    if CREDENTIAL_VALUE_PREFIXES
        .iter()
        .any(|p| value.trim_start().starts_with(p))
        || value.contains("-----BEGIN")
    {
        return true;
    }
    // A URL with userinfo (`https://user:pass@host`).
    if let Some((_, rest)) = value.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return true;
        }
    }
    false
}

/// Vets one piece of manifest text Scribe writes into a unit line (an `Exec=` or `PodmanArgs=`
/// word, an `Environment=` entry, `UserNS=`, a `Volume=`, `Image=`, the description): a
/// control character would end the line and start a key, or a section, of the manifest
/// author's choosing. `shown` is how the refusal names it.
pub fn vet_unit_word(word: &str, shown: impl FnOnce() -> String) -> Result<(), RefusalKind> {
    if word.chars().any(char::is_control) {
        return Err(RefusalKind::BadArgument(shown()));
    }
    Ok(())
}

/// Who owns which Podman secret, for [`vet_podman_args`].
pub type SecretOwners = BTreeMap<String, String>;

/// Vets one role's extra `podman run` arguments. `at(j)` names the manifest path of argument `j`.
pub fn vet_podman_args(
    role: &str,
    args: &[String],
    secrets: &SecretOwners,
    at: impl Fn(usize) -> String,
) -> Result<(), Refusal> {
    let mut j = 0;
    while j < args.len() {
        let arg = &args[j];
        let path = at(j);
        if let Err(kind) = vet_unit_word(arg, || arg.clone()) {
            return Err(Refusal::new(path, kind));
        }
        let (flag, inline) = split_flag(arg);
        let Some(flag) = flag else {
            // A positional would become the image or its command.
            return Err(Refusal::new(
                path,
                RefusalKind::PodmanArgNotAllowed(arg.clone()),
            ));
        };
        let takes_value = !BOOLEAN_FLAGS.contains(&flag.as_str());
        let (value, shown) = match (inline, takes_value) {
            (Some(v), _) => (Some(v), arg.clone()),
            (None, true) => match args.get(j + 1) {
                Some(v) => {
                    j += 1;
                    (Some(v.clone()), format!("{arg} {v}"))
                }
                None => (None, arg.clone()),
            },
            (None, false) => (None, arg.clone()),
        };
        vet_flag(role, &flag, value.as_deref(), &shown, secrets)
            .map_err(|kind| Refusal::new(path, kind))?;
        j += 1;
    }
    Ok(())
}

/// Splits `--flag=value`, `--flag`, `-v/a:/b` and `-e K=V` forms into a long flag and an
/// inline value. Non-flags give `None`.
fn split_flag(arg: &str) -> (Option<String>, Option<String>) {
    if let Some(long) = arg.strip_prefix("--") {
        return match long.split_once('=') {
            Some((f, v)) => (Some(format!("--{f}")), Some(v.to_owned())),
            None => (Some(arg.to_owned()), None),
        };
    }
    let Some(short) = arg.strip_prefix('-') else {
        return (None, None);
    };
    let mut chars = short.chars();
    let Some(c) = chars.next() else {
        return (None, None);
    };
    let rest: String = chars.collect();
    let rest = rest.strip_prefix('=').map(str::to_owned).unwrap_or(rest);
    let long = match c {
        'v' => "--volume",
        'e' => "--env",
        'p' => "--publish",
        'u' => "--user",
        'w' => "--workdir",
        'h' => "--hostname",
        'l' => "--label",
        _ => return (Some(format!("-{c}")), (!rest.is_empty()).then_some(rest)),
    };
    (Some(long.to_owned()), (!rest.is_empty()).then_some(rest))
}

fn vet_flag(
    role: &str,
    flag: &str,
    value: Option<&str>,
    shown: &str,
    secrets: &SecretOwners,
) -> Result<(), RefusalKind> {
    let shown = shown.to_owned();
    let value = value.unwrap_or("");
    match flag {
        "--privileged" => {
            if value == "false" {
                Err(RefusalKind::PodmanArgNotAllowed(shown))
            } else {
                Err(RefusalKind::Privileged(shown))
            }
        }
        "--cap-add" => Err(RefusalKind::CapAdd(shown)),
        "--security-opt" => Err(RefusalKind::SecurityOpt(shown)),
        "--network" | "--net" | "--pid" | "--ipc" | "--uts" | "--cgroupns" | "--userns" => {
            if value == "host" || value.starts_with("host:") {
                Err(RefusalKind::HostNamespace(shown))
            } else if value.starts_with("container:") || value.starts_with("ns:") {
                Err(RefusalKind::SharedPod(shown))
            } else {
                Err(RefusalKind::PodmanArgNotAllowed(shown))
            }
        }
        "--pod" | "--pod-id-file" => Err(RefusalKind::SharedPod(shown)),
        "--volume" | "--mount" | "--volumes-from" | "--tmpfs" | "--image-volume" => {
            Err(RefusalKind::VolumeOutsideManifest(shown))
        }
        "--env" => {
            let (k, v) = value.split_once('=').unwrap_or((value, ""));
            if looks_like_credential(k, v) {
                Err(RefusalKind::CredentialInEnvironment(shown))
            } else {
                Err(RefusalKind::PodmanArgNotAllowed(shown))
            }
        }
        "--env-host" | "--env-file" => Err(RefusalKind::CredentialInEnvironment(shown)),
        "--secret" => {
            let name = value.split(',').next().unwrap_or("");
            match secrets.get(name) {
                Some(owner) if owner != role => Err(RefusalKind::ForeignSecret {
                    secret: name.to_owned(),
                    owner: owner.clone(),
                    role: role.to_owned(),
                }),
                _ if value.contains("type=env") => Err(RefusalKind::CredentialInEnvironment(shown)),
                _ => Err(RefusalKind::PodmanArgNotAllowed(shown)),
            }
        }
        f if ALLOWED_FLAGS.contains(&f) => Ok(()),
        _ => Err(RefusalKind::PodmanArgNotAllowed(shown)),
    }
}

/// Vets a user namespace mode from the manifest.
pub fn vet_user_ns(value: &str) -> Result<(), RefusalKind> {
    let base = value.split(':').next().unwrap_or("");
    match base {
        "host" => Err(RefusalKind::HostNamespace(format!("UserNS={value}"))),
        "auto" | "keep-id" => Ok(()),
        "nomap" if value == "nomap" => Ok(()),
        _ => Err(RefusalKind::UnknownUserNs(value.to_owned())),
    }
}
