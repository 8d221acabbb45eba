//! HTTPS git acquisition through gix: fetch a branch over smart HTTP, report its tip as a
//! CANDIDATE, and read only the operator-ADMITTED commit's tree from the object database.
//!
//! **Architecture Invariant:** there is no worktree checkout, so no hook, smudge filter, LFS or
//! submodule machinery ever runs; blobs are read straight from the object database and judged
//! by [`crate::process`]. The repository is opened isolated (no system/global git config, no
//! environment), proxies are disabled, redirects are not followed, credential requests are
//! refused, and TLS trusts exactly the roots in [`GitTls`].
//!
//! Redirects are judged before gix sees the URL: [`admit_redirects`] makes the smart-HTTP
//! discovery request itself with redirects off and admits each `Location` by the source's own
//! rules ([`crate::source::admit_redirect`]), so a redirect to plain HTTP or to a non-admitted
//! origin is a typed [`crate::SourceRefusal`]; the admitted end of the chain becomes the remote.
//! When the caller ran destination admission, every admitted host is pinned to its one
//! admitted address (`pins`), so the transport never resolves a name itself.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::client::blocking_io::http as gix_http;
use rustls_pki_types::CertificateDer;

use crate::error::BuildError;
use crate::source::{AdmittedUrl, Origin, SourceSpec, admit_redirect};
use crate::tree::{AcquiredTree, EntryKind, Revision, TreeEntry};

/// Connection timeout for the git transport.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Whole-request timeout: bounds a stalled server (the work-time ceiling bounds the build).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Most redirects one discovery chain may follow (each one admitted by the source's rules).
pub const MAX_REDIRECTS: usize = 5;
/// The smart-HTTP discovery path a redirect must keep.
const DISCOVERY: &str = "/info/refs?service=git-upload-pack";

/// The roots the git transport trusts.
#[derive(Debug, Clone)]
pub enum GitTls {
    /// The Mozilla root set compiled into `webpki-roots` (never the host's store, never env).
    WebPki,
    /// Exactly these roots (e.g. a test CA).
    Roots(Vec<CertificateDer<'static>>),
    /// Exactly this root store (the role's configured CA file).
    Store(rustls::RootCertStore),
}

impl GitTls {
    fn client_config(&self) -> Result<rustls::ClientConfig, BuildError> {
        let roots = match self {
            GitTls::WebPki => reach_destination::webpki_root_store(),
            GitTls::Store(store) => store.clone(),
            GitTls::Roots(certs) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs {
                    roots
                        .add(c.clone())
                        .map_err(|e| BuildError::Git(format!("trust root: {e}")))?;
                }
                roots
            }
        };
        // The one client configuration every egress uses (ring, TLS 1.2/1.3, `http/1.1`).
        Ok(reach_destination::client_config(roots))
    }
}

/// What a fetch found.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The branch tip: a candidate, shown by status, never activated by itself.
    pub candidate: String,
    /// The admitted commit's tree, if the source has an admitted commit.
    pub tree: Option<AcquiredTree>,
}

/// Fetch `spec`'s branch into the bare repository cache at `cache` (created if missing), record
/// the branch tip as the candidate, and read the admitted commit's tree if one is admitted.
pub fn fetch(spec: &SourceSpec, cache: &Path, tls: &GitTls) -> Result<Fetched, BuildError> {
    fetch_pinned(spec, cache, tls, &[])
}

/// [`fetch`] with every admitted host pinned to the address destination admission chose.
pub fn fetch_pinned(
    spec: &SourceSpec,
    cache: &Path,
    tls: &GitTls,
    pins: &[(String, SocketAddr)],
) -> Result<Fetched, BuildError> {
    let Origin::Git {
        url,
        branch,
        admitted_commit,
    } = &spec.origin
    else {
        return Err(BuildError::Git("source is not a git origin".into()));
    };
    if branch.is_empty() || branch.contains("..") || branch.starts_with('-') || branch.contains(':')
    {
        return Err(BuildError::Git(format!("invalid branch `{branch}`")));
    }
    let tls_config = tls.client_config()?;
    let pins = pins.to_vec();
    let configure = {
        let (tls_config, pins) = (tls_config.clone(), pins.clone());
        move |b: reqwest::blocking::ClientBuilder| {
            let mut b = b
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(REQUEST_TIMEOUT)
                .https_only(true)
                .tls_backend_preconfigured(tls_config.clone());
            for (host, addr) in &pins {
                b = b.resolve(host, *addr);
            }
            b
        }
    };
    let probe = configure(reqwest::blocking::ClientBuilder::new().connect_timeout(CONNECT_TIMEOUT))
        .build()
        .map_err(git_err)?;
    let url = admit_redirects(&probe, url, &spec.redirect_origins)?;
    let repo = open_cache(cache)?;

    let remote_ref = format!("refs/heads/{branch}");
    let tracking = format!("refs/reach/candidates/{branch}");
    let remote = repo
        .remote_at(url.as_str())
        .map_err(git_err)?
        .with_refspecs(
            Some(format!("+{remote_ref}:{tracking}").as_str()),
            gix::remote::Direction::Fetch,
        )
        .map_err(git_err)?;

    let mut http = gix_http::Options {
        follow_redirects: gix_http::options::FollowRedirects::None,
        // An empty proxy string disables proxying entirely.
        proxy: Some(String::new()),
        user_agent: Some(format!("reach-corpus/{}", env!("CARGO_PKG_VERSION"))),
        connect_timeout: Some(CONNECT_TIMEOUT),
        ..Default::default()
    };
    let backend = gix_http::reqwest::Options {
        configure_client: Some(Box::new(move |b: reqwest::blocking::ClientBuilder| {
            Ok(configure(b))
        })),
        configure_request: None,
    };
    http.backend = Some(Arc::new(Mutex::new(backend)));

    let connection = remote
        .connect(gix::remote::Direction::Fetch)
        .map_err(git_err)?
        .with_credentials(|_action| {
            use gix::error::ErrorExt as _;
            Err(gix::error::message("credential requests are refused").raise())
        })
        .with_transport_options(Box::new(http));
    let interrupt = AtomicBool::new(false);
    connection
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(git_err)?
        .receive(gix::progress::Discard, &interrupt)
        .map_err(git_err)?;

    let candidate = repo
        .find_reference(tracking.as_str())
        .map_err(|e| BuildError::Git(format!("branch `{branch}` not fetched: {e}")))?
        .into_fully_peeled_id()
        .map_err(git_err)?
        .detach()
        .to_string();

    let tree = match admitted_commit {
        None => None,
        Some(commit) => Some(read_commit(&repo, commit, spec)?),
    };
    Ok(Fetched { candidate, tree })
}

/// Follow the discovery request's redirects by the source's rules: each `Location` must keep
/// the discovery path and pass [`admit_redirect`] (https, no credentials, an admitted origin).
/// Returns the repository URL at the end of the chain.
pub fn admit_redirects(
    client: &reqwest::blocking::Client,
    url: &AdmittedUrl,
    redirect_origins: &[String],
) -> Result<AdmittedUrl, BuildError> {
    let mut current = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let discovery = format!("{}{DISCOVERY}", current.as_str().trim_end_matches('/'));
        let response = client.get(&discovery).send().map_err(git_err)?;
        if !response.status().is_redirection() {
            return Ok(current);
        }
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| BuildError::Git("redirect without a Location".into()))?
            .to_string();
        // The discovery query is ours, not the location's: judge the location without it.
        let Some(base) = location.strip_suffix(DISCOVERY) else {
            // Judge scheme and origin first, so a downgrade or a foreign origin is typed.
            let bare = location.split(['?', '#']).next().unwrap_or_default();
            admit_redirect(&current, bare, redirect_origins)?;
            return Err(BuildError::Git(format!(
                "redirect to `{location}` does not keep the discovery path"
            )));
        };
        current = admit_redirect(&current, base, redirect_origins)?;
    }
    Err(BuildError::Git(format!(
        "more than {MAX_REDIRECTS} redirects"
    )))
}

fn open_cache(cache: &Path) -> Result<gix::Repository, BuildError> {
    let open = gix::open::Options::isolated();
    if cache.join("HEAD").exists() {
        gix::open_opts(cache, open).map_err(git_err)
    } else {
        std::fs::create_dir_all(cache)?;
        gix::ThreadSafeRepository::init_opts(
            cache,
            gix::create::Kind::Bare,
            Default::default(),
            open,
        )
        .map(|r| r.to_thread_local())
        .map_err(git_err)
    }
}

/// Read the admitted commit's tree from the object database (no checkout).
fn read_commit(
    repo: &gix::Repository,
    commit: &str,
    spec: &SourceSpec,
) -> Result<AcquiredTree, BuildError> {
    if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(BuildError::Git(format!(
            "admitted commit `{commit}` is not a full 40-hex id"
        )));
    }
    let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(git_err)?;
    let object = repo
        .try_find_object(id)
        .map_err(git_err)?
        .ok_or_else(|| BuildError::CommitNotFound(commit.into()))?;
    let tree = object
        .try_into_commit()
        .map_err(git_err)?
        .tree()
        .map_err(git_err)?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(git_err)?;
    let mut entries = Vec::new();
    let (mut total, mut count) = (0u64, 0u64);
    for r in recorder.records {
        let path = String::from_utf8_lossy(&r.filepath).into_owned();
        let mode = r.mode;
        let kind = if mode.is_tree() {
            continue;
        } else if mode.is_commit() {
            EntryKind::Submodule {
                commit: r.oid.to_string(),
            }
        } else {
            count += 1;
            // Ceilings are enforced while reading, before any blob is held.
            if count > spec.ceilings.max_files.saturating_mul(4).max(1024) {
                return Err(BuildError::refused(
                    crate::rules::Rule::TooManyFiles,
                    path,
                    "tree has too many entries",
                ));
            }
            let header = repo.find_header(r.oid).map_err(git_err)?;
            total += header.size();
            if total > spec.ceilings.max_bytes {
                return Err(BuildError::refused(
                    crate::rules::Rule::TooManyBytes,
                    path,
                    "tree exceeds the byte ceiling",
                ));
            }
            let data = repo.find_object(r.oid).map_err(git_err)?.detach().data;
            if mode.is_link() {
                EntryKind::Symlink {
                    target: String::from_utf8_lossy(&data).into_owned(),
                }
            } else {
                EntryKind::File {
                    bytes: data,
                    executable: mode.is_executable(),
                }
            }
        };
        entries.push(TreeEntry { path, kind });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(AcquiredTree {
        revision: Revision {
            commit: Some(commit.to_ascii_lowercase()),
            archive_digest: None,
            citation_rev: commit.to_ascii_lowercase(),
        },
        entries,
        compressed_bytes: 0,
        expanded_bytes: total,
    })
}

fn git_err(e: impl std::fmt::Display) -> BuildError {
    BuildError::Git(e.to_string())
}

impl crate::store::CorpusStore {
    /// Fetch a git source, record its branch tip as the candidate, and build the admitted commit
    /// if there is one. A source without an admitted commit refuses with `corpus/not-admitted`
    /// (and the candidate is visible in status). Failures keep the previous snapshot.
    pub fn refresh_git(
        &self,
        spec: &SourceSpec,
        cache: &Path,
        tls: &GitTls,
        policy: &crate::rules::Policy,
        progress: &mut dyn crate::store::Progress,
    ) -> Result<(crate::store::BuildSummary, Fetched), BuildError> {
        self.refresh_git_pinned(spec, cache, tls, &[], policy, progress)
    }

    /// [`Self::refresh_git`] with admitted hosts pinned (see [`fetch_pinned`]).
    pub fn refresh_git_pinned(
        &self,
        spec: &SourceSpec,
        cache: &Path,
        tls: &GitTls,
        pins: &[(String, SocketAddr)],
        policy: &crate::rules::Policy,
        progress: &mut dyn crate::store::Progress,
    ) -> Result<(crate::store::BuildSummary, Fetched), BuildError> {
        progress.start(crate::store::Stage::Fetch, None);
        let fetched = match fetch_pinned(spec, cache, tls, pins) {
            Ok(f) => f,
            Err(e) => {
                self.record_failure(&spec.name, &e)?;
                return Err(e);
            }
        };
        progress.finish(crate::store::Stage::Fetch);
        if let Origin::Git { branch, .. } = &spec.origin {
            self.record_candidate(&spec.name, branch, &fetched.candidate)?;
        }
        let Some(tree) = &fetched.tree else {
            // Not a failed refresh: the branch moved and awaits the operator's admission.
            return Err(BuildError::NotAdmitted {
                candidate: fetched.candidate.clone(),
            });
        };
        let summary = self.build(spec, tree, policy, progress)?;
        Ok((summary, fetched))
    }
}
