//! Source admission: which origins a corpus may come from, and which redirects it may follow.
//!
//! **Architecture Invariant:** nothing here reads the environment, git configuration, credential
//! helpers or proxy settings. A source is exactly what the operator wrote, and an origin that
//! needs any of those is refused instead of being helped along.

use std::time::Duration;

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// Why a source (or a redirect while acquiring it) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceRefusal {
    /// corpus source must be an https URL
    #[error("corpus source must be an https URL, got scheme `{0}`")]
    NotHttps(String),
    /// git:// sources are refused
    #[error("git:// sources are refused")]
    GitProtocol,
    /// SSH and scp-like sources are refused
    #[error("SSH and scp-like sources are refused")]
    Ssh,
    /// file:// and local path sources are refused
    #[error("file:// and local path sources are refused")]
    Local,
    /// embedded credentials are refused
    #[error("URLs with embedded credentials are refused")]
    Userinfo,
    /// query strings and fragments are refused (they carry tokens)
    #[error("source URLs with a query or fragment are refused")]
    QueryOrFragment,
    /// credential helpers are never consulted
    #[error("credential helpers and credential settings are refused: `{0}`")]
    CredentialHelper(String),
    /// ambient proxies are never used
    #[error("proxy settings are refused: `{0}`")]
    AmbientProxy(String),
    /// a redirect left the admitted origin
    #[error("redirect to a non-admitted origin `{0}`")]
    RedirectOrigin(String),
    /// the URL could not be parsed
    #[error("malformed source: {0}")]
    Malformed(String),
}

impl SourceRefusal {
    pub const fn code(&self) -> &'static str {
        match self {
            SourceRefusal::NotHttps(_) => "corpus/source-not-https",
            SourceRefusal::GitProtocol => "corpus/source-git-protocol",
            SourceRefusal::Ssh => "corpus/source-ssh",
            SourceRefusal::Local => "corpus/source-local",
            SourceRefusal::Userinfo => "corpus/userinfo",
            SourceRefusal::QueryOrFragment => "corpus/source-query",
            SourceRefusal::CredentialHelper(_) => "corpus/credential-helper",
            SourceRefusal::AmbientProxy(_) => "corpus/ambient-proxy",
            SourceRefusal::RedirectOrigin(_) => "corpus/redirect-origin",
            SourceRefusal::Malformed(_) => "corpus/source-malformed",
        }
    }
}

/// An https URL that passed [`admit_url`]. Cannot be built any other way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AdmittedUrl(url::Url);

impl AdmittedUrl {
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }
    pub fn port(&self) -> u16 {
        self.0.port_or_known_default().unwrap_or(443)
    }
    pub fn path(&self) -> &str {
        self.0.path()
    }
    /// `https://host[:port]`, the origin redirects must stay on.
    pub fn origin(&self) -> String {
        self.0.origin().ascii_serialization()
    }
}

impl std::fmt::Display for AdmittedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl TryFrom<String> for AdmittedUrl {
    type Error = SourceRefusal;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        admit_url(&s)
    }
}

impl From<AdmittedUrl> for String {
    fn from(u: AdmittedUrl) -> Self {
        u.0.into()
    }
}

/// Admit a source URL: canonical `https://host[:port]/path` only.
pub fn admit_url(raw: &str) -> Result<AdmittedUrl, SourceRefusal> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(SourceRefusal::Malformed("empty".into()));
    }
    // Local paths: absolute, relative, home-relative, Windows drive paths.
    if raw.starts_with('/')
        || raw.starts_with("./")
        || raw.starts_with("../")
        || raw.starts_with('~')
        || raw.starts_with('.')
        || raw.as_bytes().get(1) == Some(&b':') && raw.as_bytes()[0].is_ascii_alphabetic()
    {
        return Err(SourceRefusal::Local);
    }
    match raw.split_once("://") {
        None => {
            // scp-like `user@host:path` or `host:path`.
            if raw.contains(':') {
                return Err(SourceRefusal::Ssh);
            }
            return Err(SourceRefusal::Local);
        }
        Some((scheme, _)) => {
            let scheme = scheme.to_ascii_lowercase();
            match scheme.as_str() {
                "https" => {}
                "git" => return Err(SourceRefusal::GitProtocol),
                "ssh" | "git+ssh" | "ssh+git" | "sftp" => return Err(SourceRefusal::Ssh),
                "file" => return Err(SourceRefusal::Local),
                other => return Err(SourceRefusal::NotHttps(other.to_string())),
            }
        }
    }
    let url = url::Url::parse(raw).map_err(|e| SourceRefusal::Malformed(e.to_string()))?;
    if url.scheme() != "https" {
        return Err(SourceRefusal::NotHttps(url.scheme().to_string()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SourceRefusal::Userinfo);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(SourceRefusal::QueryOrFragment);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(SourceRefusal::Malformed("no host".into()));
    }
    Ok(AdmittedUrl(url))
}

/// Admit a redirect `location` received while fetching `from`: it must itself be an admitted URL
/// on one of `admitted_origins` (the source's own origin is always admitted). Relative locations
/// are resolved against `from` first.
pub fn admit_redirect(
    from: &AdmittedUrl,
    location: &str,
    admitted_origins: &[String],
) -> Result<AdmittedUrl, SourceRefusal> {
    let resolved = match from.0.join(location) {
        Ok(u) => u.to_string(),
        Err(_) => location.to_string(),
    };
    // A scheme-relative or absolute location keeps its own scheme; re-run full admission on it.
    let target = admit_url(if location.contains("://") {
        location
    } else {
        &resolved
    })?;
    let origin = target.origin();
    if origin == from.origin() || admitted_origins.contains(&origin) {
        Ok(target)
    } else {
        Err(SourceRefusal::RedirectOrigin(origin))
    }
}

/// Ceilings enforced while acquiring and processing a source. Each is enforced where the bytes
/// are read, not after the fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ceilings {
    /// Maximum number of tree entries (files, links, directories excluded).
    pub max_files: u64,
    /// Maximum total expanded bytes.
    pub max_bytes: u64,
    /// Maximum expanded/compressed ratio of an archive.
    pub max_expansion_ratio: u64,
    /// Maximum directory depth of any path.
    pub max_depth: u32,
    /// Maximum wall time for a whole build.
    pub max_work_time_secs: u64,
    /// Maximum size of one file.
    pub max_file_bytes: u64,
    /// Maximum length of one line (parser bomb ceiling).
    pub max_line_bytes: u64,
    /// Maximum nesting of lists / quotes / elements (parser bomb ceiling).
    pub max_nesting: u32,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self {
            max_files: 20_000,
            max_bytes: 512 * 1024 * 1024,
            max_expansion_ratio: 200,
            max_depth: 24,
            max_work_time_secs: 600,
            max_file_bytes: 8 * 1024 * 1024,
            max_line_bytes: 64 * 1024,
            max_nesting: 64,
        }
    }
}

impl Ceilings {
    pub fn max_work_time(&self) -> Duration {
        Duration::from_secs(self.max_work_time_secs)
    }
}

/// Where the bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Origin {
    /// Smart-HTTP git over https. The branch may move; only `admitted_commit` is ever built.
    Git {
        url: AdmittedUrl,
        branch: String,
        /// 40-hex commit id admitted by the operator (`reach corpus admit`).
        admitted_commit: Option<String>,
    },
    /// An immutable release archive (`.tar.gz`) with its published digest.
    ReleaseArchive {
        url: AdmittedUrl,
        digest: Sha256Digest,
    },
}

/// An operator-admitted corpus source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Operator's name for the source (`reach corpus add <name> …`).
    pub name: String,
    pub origin: Origin,
    /// Pinned paths: include globs matched against tree paths (`docs/**/*.md`).
    pub include: Vec<String>,
    #[serde(default)]
    pub ceilings: Ceilings,
    /// Base of canonical citation URLs, e.g. `https://github.com/owner/repo`. For a git origin it
    /// defaults to the clone URL without `.git`.
    #[serde(default)]
    pub citation_base: Option<AdmittedUrl>,
    /// Where the source's static HTML site is published (`https://doc.rust-lang.org/cargo`).
    /// When set, a passage of an HTML page under [`SourceSpec::site_root`] is cited at its
    /// published page and section anchor (`{site_base}/{page}#{anchor}`) instead of the
    /// source file's lines; Markdown and other pages keep line citations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_base: Option<AdmittedUrl>,
    /// The directory of the tree the site is published from (`book`, empty for the root):
    /// a page's published path is its path below it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub site_root: String,
    /// Extra origins redirects may go to (`https://host[:port]`).
    #[serde(default)]
    pub redirect_origins: Vec<String>,
    /// A frozen historical source, admitted separately for explicitly historical questions.
    #[serde(default)]
    pub historical: bool,
}

/// Keys that mean "use ambient authority"; a source config naming them is refused outright.
const CREDENTIAL_KEYS: &[&str] = &[
    "credential_helper",
    "credential",
    "credentials",
    "username",
    "password",
    "token",
    "netrc",
    "askpass",
];
const PROXY_KEYS: &[&str] = &[
    "proxy",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

impl SourceSpec {
    /// Parse an operator source config (JSON), refusing credential and proxy settings by name
    /// before anything else so the refusal is typed rather than "unknown field".
    pub fn from_json(text: &str) -> Result<SourceSpec, SourceRefusal> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SourceRefusal::Malformed(e.to_string()))?;
        fn scan(v: &serde_json::Value) -> Result<(), SourceRefusal> {
            if let serde_json::Value::Object(map) = v {
                for (k, v) in map {
                    let k = k.to_ascii_lowercase();
                    if CREDENTIAL_KEYS.contains(&k.as_str()) {
                        return Err(SourceRefusal::CredentialHelper(k));
                    }
                    if PROXY_KEYS.contains(&k.as_str()) {
                        return Err(SourceRefusal::AmbientProxy(k));
                    }
                    scan(v)?;
                }
            }
            Ok(())
        }
        scan(&value)?;
        // serde's internally tagged `Origin` would read a variant's index as its tag
        // (`"kind": 1` as `release_archive`); the tag must be the variant's name.
        if let Some(kind) = value.pointer("/origin/kind")
            && !kind.is_string()
        {
            return Err(SourceRefusal::Malformed(
                "`origin.kind` must be a string".into(),
            ));
        }
        // Admit URLs with their typed refusals before the structural parse.
        for at in ["/origin/url", "/site_base"] {
            if let Some(url) = value.pointer(at).and_then(|v| v.as_str()) {
                admit_url(url)?;
            }
        }
        let spec: SourceSpec =
            serde_json::from_value(value).map_err(|e| SourceRefusal::Malformed(e.to_string()))?;
        let root = &spec.site_root;
        if root.starts_with('/')
            || root.contains('\\')
            || root.split('/').any(|c| c == ".." || c == ".")
        {
            return Err(SourceRefusal::Malformed(format!(
                "`site_root` `{root}` must be a relative path inside the tree"
            )));
        }
        if !root.is_empty() && spec.site_base.is_none() {
            return Err(SourceRefusal::Malformed(
                "`site_root` needs a `site_base`".into(),
            ));
        }
        for o in &spec.redirect_origins {
            let u = admit_url(o)?;
            if u.origin() != *o {
                return Err(SourceRefusal::Malformed(format!("`{o}` is not an origin")));
            }
        }
        Ok(spec)
    }

    /// The form a stored copy keeps (corpus-builder's `sources.toml`): this source's JSON
    /// with every null left out, since TOML has no null and an absent optional field reads
    /// back as its default.
    pub fn to_stored(&self) -> serde_json::Value {
        fn strip_nulls(v: serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => serde_json::Value::Object(
                    m.into_iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| (k, strip_nulls(v)))
                        .collect(),
                ),
                serde_json::Value::Array(a) => {
                    serde_json::Value::Array(a.into_iter().map(strip_nulls).collect())
                }
                other => other,
            }
        }
        // A spec is strings, numbers, booleans and lists of them: its JSON cannot fail.
        strip_nulls(serde_json::to_value(self).unwrap_or_default())
    }

    /// Re-admits a stored copy (a `sources.toml` entry, any serializable value) through
    /// [`SourceSpec::from_json`], the one admission, so an edited file smuggles nothing in.
    pub fn from_stored(stored: &impl Serialize) -> Result<SourceSpec, SourceRefusal> {
        let json =
            serde_json::to_string(stored).map_err(|e| SourceRefusal::Malformed(e.to_string()))?;
        SourceSpec::from_json(&json)
    }

    pub fn url(&self) -> &AdmittedUrl {
        match &self.origin {
            Origin::Git { url, .. } | Origin::ReleaseArchive { url, .. } => url,
        }
    }

    /// The published site's base and root, when the source declares one.
    pub fn site(&self) -> Option<(String, String)> {
        self.site_base.as_ref().map(|b| {
            (
                b.as_str().trim_end_matches('/').to_string(),
                self.site_root.trim_end_matches('/').to_string(),
            )
        })
    }

    /// The base of canonical citation URLs (`…/blob/<rev>/path`).
    pub fn citation_base(&self) -> String {
        if let Some(b) = &self.citation_base {
            return b.as_str().trim_end_matches('/').to_string();
        }
        let u = self.url().as_str().trim_end_matches('/');
        u.strip_suffix(".git").unwrap_or(u).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_base_is_admitted_like_any_url_and_its_root_stays_inside() {
        let spec = |site: &str| {
            format!(
                r#"{{"name": "docs", "include": ["**"], "origin": {{"kind": "release_archive",
                "url": "https://example.org/docs.tar.gz", "digest": "sha256:{}"}}{site}}}"#,
                "ab".repeat(32)
            )
        };
        let verdict = |site: &str| match SourceSpec::from_json(&spec(site)) {
            Ok(s) => format!("ok {:?}", s.site()),
            Err(e) => e.code().to_string(),
        };
        let table = [
            "",
            r#", "site_base": "https://doc.example.org/book/""#,
            r#", "site_base": "https://doc.example.org", "site_root": "book/""#,
            r#", "site_base": "http://doc.example.org""#,
            r#", "site_base": "https://doc.example.org", "site_root": "../book""#,
            r#", "site_base": "https://doc.example.org", "site_root": "/srv/book""#,
            r#", "site_root": "book""#,
        ];
        let out: String = table
            .iter()
            .map(|t| format!("{t:?} {}\n", verdict(t)))
            .collect();
        expect_test::expect![[r#"
            "" ok None
            ", \"site_base\": \"https://doc.example.org/book/\"" ok Some(("https://doc.example.org/book", ""))
            ", \"site_base\": \"https://doc.example.org\", \"site_root\": \"book/\"" ok Some(("https://doc.example.org", "book"))
            ", \"site_base\": \"http://doc.example.org\"" corpus/source-not-https
            ", \"site_base\": \"https://doc.example.org\", \"site_root\": \"../book\"" corpus/source-malformed
            ", \"site_base\": \"https://doc.example.org\", \"site_root\": \"/srv/book\"" corpus/source-malformed
            ", \"site_root\": \"book\"" corpus/source-malformed
        "#]].assert_eq(&out);
        // A source without a site stores exactly as before the field existed.
        let plain = SourceSpec::from_json(&spec("")).unwrap().to_stored();
        assert!(plain.get("site_base").is_none() && plain.get("site_root").is_none());
    }

    fn verdict(raw: &str) -> String {
        match admit_url(raw) {
            Ok(u) => format!("ok {u}"),
            Err(e) => e.code().to_string(),
        }
    }

    /// The leniency of serde's internally tagged enums the plan crate guards against
    /// (`string_tagged`): a variant index as `origin.kind` is refused, not read as a variant.
    #[test]
    fn an_origin_tag_must_be_a_name_not_an_index() {
        let spec = |kind: &str| {
            format!(
                r#"{{"name": "docs", "include": ["**"], "origin": {{"kind": {kind},
                "url": "https://example.org/docs.tar.gz", "digest": "sha256:{}"}}}}"#,
                "ab".repeat(32)
            )
        };
        assert!(SourceSpec::from_json(&spec(r#""release_archive""#)).is_ok());
        for index in ["1", "0", "true", "null", "[1]"] {
            let refused = SourceSpec::from_json(&spec(index)).unwrap_err();
            assert_eq!(refused.code(), "corpus/source-malformed", "kind {index}");
        }
    }

    /// What a stored copy keeps reads back as the same source (corpus-builder's
    /// `sources.toml`; the fuzz target `corpus_source` also goes through TOML).
    #[test]
    fn a_stored_copy_reads_back_as_the_same_source() {
        let spec = SourceSpec::from_json(
            r#"{"name": "docs", "include": ["docs/**"], "origin": {"kind": "git",
            "url": "https://example.org/docs.git", "branch": "main"}}"#,
        )
        .unwrap();
        let stored = spec.to_stored();
        assert!(
            stored.pointer("/origin/admitted_commit").is_none(),
            "{stored}"
        );
        assert_eq!(SourceSpec::from_stored(&stored).unwrap(), spec);
    }

    #[test]
    fn admission_table() {
        let cases = [
            "https://example.org/owner/repo.git",
            "HTTPS://Example.org:8443/a",
            "http://example.org/repo.git",
            "git://example.org/repo.git",
            "ssh://git@example.org/repo.git",
            "git+ssh://example.org/repo.git",
            "git@example.org:owner/repo.git",
            "example.org:owner/repo.git",
            "file:///srv/repo.git",
            "/srv/repo.git",
            "./repo",
            "~/repo",
            "C:\\repo",
            "repo",
            "https://user:pass@example.org/repo.git",
            "https://token@example.org/repo.git",
            "https://example.org/repo.git?access_token=x",
            "ftp://example.org/x.tar.gz",
            "",
            "   ",
            "https://",
            "https://exa mple.org/repo.git",
            "https://[::1/repo.git",
            "https://example.org:99999/repo.git",
        ];
        let out: String = cases
            .iter()
            .map(|c| {
                // Blank inputs are shown quoted so the table row says which blank it was.
                let shown = if c.trim().is_empty() {
                    format!("{c:?}")
                } else {
                    c.to_string()
                };
                format!("{shown:<45} {}\n", verdict(c))
            })
            .collect();
        expect_test::expect![[r#"
            https://example.org/owner/repo.git            ok https://example.org/owner/repo.git
            HTTPS://Example.org:8443/a                    ok https://example.org:8443/a
            http://example.org/repo.git                   corpus/source-not-https
            git://example.org/repo.git                    corpus/source-git-protocol
            ssh://git@example.org/repo.git                corpus/source-ssh
            git+ssh://example.org/repo.git                corpus/source-ssh
            git@example.org:owner/repo.git                corpus/source-ssh
            example.org:owner/repo.git                    corpus/source-ssh
            file:///srv/repo.git                          corpus/source-local
            /srv/repo.git                                 corpus/source-local
            ./repo                                        corpus/source-local
            ~/repo                                        corpus/source-local
            C:\repo                                       corpus/source-local
            repo                                          corpus/source-local
            https://user:pass@example.org/repo.git        corpus/userinfo
            https://token@example.org/repo.git            corpus/userinfo
            https://example.org/repo.git?access_token=x   corpus/source-query
            ftp://example.org/x.tar.gz                    corpus/source-not-https
            ""                                            corpus/source-malformed
            "   "                                         corpus/source-malformed
            https://                                      corpus/source-malformed
            https://exa mple.org/repo.git                 corpus/source-malformed
            https://[::1/repo.git                         corpus/source-malformed
            https://example.org:99999/repo.git            corpus/source-malformed
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn redirect_table() {
        let from = admit_url("https://docs.example.org/owner/repo.git").unwrap();
        let extra = vec!["https://mirror.example.org".to_string()];
        let cases = [
            "/owner/repo2.git",
            "https://docs.example.org/other.git",
            "http://docs.example.org/owner/repo.git",
            "https://evil.example.net/owner/repo.git",
            "https://docs.example.org:444/owner/repo.git",
            "https://mirror.example.org/owner/repo.git",
            "https://user:pw@docs.example.org/owner/repo.git",
            "file:///etc/passwd",
            "git@docs.example.org:owner/repo.git",
        ];
        let out: String = cases
            .iter()
            .map(|c| {
                let v = match admit_redirect(&from, c, &extra) {
                    Ok(u) => format!("ok {u}"),
                    Err(e) => e.code().to_string(),
                };
                format!("{c:<50} {v}\n")
            })
            .collect();
        expect_test::expect![[r#"
            /owner/repo2.git                                   ok https://docs.example.org/owner/repo2.git
            https://docs.example.org/other.git                 ok https://docs.example.org/other.git
            http://docs.example.org/owner/repo.git             corpus/source-not-https
            https://evil.example.net/owner/repo.git            corpus/redirect-origin
            https://docs.example.org:444/owner/repo.git        corpus/redirect-origin
            https://mirror.example.org/owner/repo.git          ok https://mirror.example.org/owner/repo.git
            https://user:pw@docs.example.org/owner/repo.git    corpus/userinfo
            file:///etc/passwd                                 corpus/source-local
            git@docs.example.org:owner/repo.git                ok https://docs.example.org/owner/git@docs.example.org:owner/repo.git
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn config_refuses_credentials_and_proxies() {
        let base = r#"{"name":"d","origin":{"kind":"git","url":"https://h.example/r.git","branch":"main","admitted_commit":null},"include":["**/*.md"]"#;
        assert!(SourceSpec::from_json(&format!("{base}}}")).is_ok());
        let e =
            SourceSpec::from_json(&format!(r#"{base},"credential_helper":"store"}}"#)).unwrap_err();
        assert_eq!(e.code(), "corpus/credential-helper");
        let e = SourceSpec::from_json(&format!(r#"{base},"proxy":"http://p:3128"}}"#)).unwrap_err();
        assert_eq!(e.code(), "corpus/ambient-proxy");
        let e = SourceSpec::from_json(
            r#"{"name":"d","origin":{"kind":"git","url":"https://u:p@h.example/r.git","branch":"main","admitted_commit":null},"include":[]}"#,
        )
        .unwrap_err();
        assert_eq!(e.code(), "corpus/userinfo");
    }

    #[test]
    fn config_refuses_malformed_json_fields_and_origins() {
        let base = r#"{"name":"d","origin":{"kind":"git","url":"https://h.example/r.git","branch":"main","admitted_commit":null},"include":["**/*.md"]"#;
        let malformed = |text: &str| match SourceSpec::from_json(text) {
            Err(SourceRefusal::Malformed(reason)) => reason,
            other => panic!("{text}: expected corpus/source-malformed, got {other:?}"),
        };
        assert!(
            SourceSpec::from_json(&format!(
                r#"{base},"redirect_origins":["https://m.example"]}}"#
            ))
            .is_ok()
        );
        // Not JSON at all.
        malformed(base);
        // An unknown field, and a field of the wrong type.
        malformed(&format!(r#"{base},"mirror":"https://m.example"}}"#));
        malformed(&format!(r#"{base},"historical":"yes"}}"#));
        // An origin URL that is https but does not parse.
        let reason = malformed(
            r#"{"name":"d","origin":{"kind":"git","url":"https://","branch":"main","admitted_commit":null},"include":[]}"#,
        );
        assert!(reason.contains("host"), "{reason}");
        // A redirect origin that is an admitted URL but not an origin (a path, a trailing slash).
        for o in ["https://m.example/mirror", "https://m.example/"] {
            let reason = malformed(&format!(r#"{base},"redirect_origins":["{o}"]}}"#));
            assert_eq!(reason, format!("`{o}` is not an origin"));
        }
        assert_eq!(
            SourceRefusal::Malformed(String::new()).code(),
            "corpus/source-malformed"
        );
    }
}
