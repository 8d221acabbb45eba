//! Release archives over HTTPS against a real local rustls server on loopback, whose test CA
//! only this test's builder trusts, reached through an exact local road (destination admission
//! refuses loopback otherwise). Every build runs through the admin port's handlers: the good
//! archive activates; a digest mismatch, a redirect to plain HTTP and a redirect to another
//! origin are refused by code with the previous snapshot still active.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use reach_corpus::git::GitTls;
use reach_corpus::{CorpusStore, SystemClock, pack_entries};
use reach_corpus_builder::admin::Builder;
use reach_corpus_builder::embedded::Source;
use reach_corpus_builder::fetch::ArchiveFetcher;
use reach_corpus_builder::settings::Settings;
use reach_destination::roads::{Road, Roads};
use reach_destination::testing::{TestCa, serve_tls};
use reach_digest::Sha256Digest;
use reach_proto::corpus::v1 as pb;
use reach_proto::corpus::v1::build_event::Event;
use reach_proto::corpus::v1::corpus_admin_server::CorpusAdmin;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_stream::StreamExt as _;
use tonic::Request;

const HOST: &str = "releases.corpus.test";
const BASE: &str = "https://git.example.org/reach/docs";

/// What the server answers for a path.
#[derive(Clone, Debug)]
enum Reply {
    Archive(Vec<u8>),
    Redirect(String),
    /// A redirect status without a Location header.
    Bare302,
}

type Routes = Arc<Mutex<HashMap<String, Reply>>>;

/// A minimal HTTPS/1.1 server: one request per connection, answers from `routes`.
async fn serve(ca: &TestCa, routes: Routes) -> SocketAddr {
    let (addr, _task) = serve_tls(ca.server_config(&[HOST]), move |mut tls| {
        let routes = routes.clone();
        async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head).to_string();
            let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
            let reply = routes.lock().unwrap().get(&path).cloned();
            let (status, headers, body) = match reply {
                Some(Reply::Archive(b)) => (
                    "200 OK",
                    "Content-Type: application/gzip\r\n".to_string(),
                    b,
                ),
                Some(Reply::Bare302) => (
                    "302 Found",
                    "Content-Type: text/plain\r\n".to_string(),
                    b"moved".to_vec(),
                ),
                Some(Reply::Redirect(to)) => (
                    "302 Found",
                    format!("Location: {to}\r\nContent-Type: text/plain\r\n"),
                    b"moved".to_vec(),
                ),
                None => (
                    "404 Not Found",
                    "Content-Type: text/plain\r\n".to_string(),
                    b"no".to_vec(),
                ),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = tls.write_all(resp.as_bytes()).await;
            let _ = tls.write_all(&body).await;
            let _ = tls.shutdown().await;
        }
    })
    .await;
    addr
}

fn archive(version: &str) -> Vec<u8> {
    let install = format!(
        "# Installing Reach {version}\n\nReach runs as rootless Podman containers, one unit per role.\n\n## Requirements\n\nYou need Podman 4.4 or newer and a service account.\n"
    );
    let corpus = "# Public corpus\n\nThe corpus builder downloads an admitted release archive over HTTPS and verifies its digest.\n\n## Freshness\n\nA snapshot is fresh for 24 hours after activation.\n";
    pack_entries([
        ("docs/install.md", install.as_bytes()),
        ("docs/corpus.md", corpus.as_bytes()),
        ("docs/logo.png", &b"\x89PNG\r\n\x1a\n\0\0binary"[..]),
    ])
    .unwrap()
}

struct Fixture {
    builder: Builder,
    store_root: std::path::PathBuf,
    routes: Routes,
    port: u16,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let ca = TestCa::new();
    let routes: Routes = Arc::default();
    let addr = serve(&ca, routes.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        roads: Roads {
            local_roads: vec![Road {
                host: HOST.into(),
                addr,
            }],
            ..Roads::default()
        },
        ..Settings::default()
    };
    let fetcher = ArchiveFetcher::new(settings.admission().unwrap(), ca.root_store());
    let store_root = dir.path().join("corpus");
    let store = CorpusStore::new(&store_root, Arc::new(SystemClock)).unwrap();
    let builder = Builder::new(
        store,
        Source::pack().unwrap(),
        dir.path(),
        fetcher,
        GitTls::WebPki,
    );
    builder.ensure_embedded_active().await.unwrap();
    Fixture {
        builder,
        store_root,
        routes,
        port: addr.port(),
        _dir: dir,
    }
}

impl Fixture {
    fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.port)
    }

    fn route(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.into(), reply);
    }

    async fn add(&self, name: &str, path: &str, digest: &Sha256Digest) -> pb::AddSourceResponse {
        self.builder
            .add_source(Request::new(pb::AddSourceRequest {
                name: name.into(),
                kind: "release_archive".into(),
                url: self.url(path),
                digest: digest.to_string(),
                include: vec!["docs/**".into()],
                citation_base: BASE.into(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner()
    }

    async fn admit(&self, name: &str, revision: &str) -> Vec<Event> {
        let stream = self
            .builder
            .admit(Request::new(pb::AdmitRequest {
                source: name.into(),
                revision: revision.into(),
            }))
            .await
            .unwrap()
            .into_inner();
        stream
            .map(|e| e.unwrap().event.unwrap())
            .collect::<Vec<_>>()
            .await
    }

    fn active(&self) -> String {
        std::fs::read_to_string(self.store_root.join("CURRENT"))
            .unwrap()
            .trim()
            .to_string()
    }

    async fn status(&self, name: &str) -> pb::SourceStatus {
        self.builder
            .status(Request::new(pb::StatusRequest {}))
            .await
            .unwrap()
            .into_inner()
            .sources
            .into_iter()
            .find(|s| s.source == name)
            .unwrap()
    }
}

fn refusal(events: &[Event]) -> String {
    match events.last() {
        Some(Event::Refusal(r)) => r.code.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_archive_behind_a_same_origin_redirect_activates_and_is_searchable() {
    let f = fixture().await;
    let bytes = archive("v1");
    let digest = Sha256Digest::of(&bytes);
    f.route("/v1/docs.tar.gz", Reply::Archive(bytes));
    f.route("/latest.tar.gz", Reply::Redirect("/v1/docs.tar.gz".into()));
    assert_eq!(
        f.add("docs", "/latest.tar.gz", &digest).await.refusal_code,
        ""
    );

    let events = f.admit("docs", &digest.to_string()).await;
    let phases: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Progress(p) if p.finished => Some(p.phase.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(phases, ["fetch", "parse", "index", "validate", "activate"]);
    let Some(Event::Summary(s)) = events.last() else {
        panic!("no summary: {events:?}");
    };
    assert_eq!(s.files_accepted, 2);
    assert_eq!(s.revision, digest.hex());
    assert_eq!(s.skipped.iter().map(|r| r.files).sum::<u64>(), 1, "{s:?}");
    assert_eq!(f.active(), s.snapshot_id);

    let st = f.status("docs").await;
    assert_eq!(st.active_snapshot_id, s.snapshot_id);
    assert_eq!(st.freshness, "fresh");
    assert_eq!(st.admitted_revision, digest.hex());

    let hits = f
        .builder
        .search(Request::new(pb::SearchRequest {
            query: "how long is a snapshot fresh".into(),
            limit: 3,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hits.refusal_code, "");
    assert!(!hits.hits.is_empty());
    for h in &hits.hits {
        assert!(
            h.url
                .starts_with(&format!("{BASE}/blob/{}/docs/", digest.hex())),
            "{}",
            h.url
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_mismatch_and_refused_redirects_keep_the_previous_snapshot() {
    let f = fixture().await;
    let before = f.active();
    let good = archive("v1");
    let published = Sha256Digest::of(archive("v2"));
    f.route("/v1/docs.tar.gz", Reply::Archive(good));
    f.route(
        "/to-http.tar.gz",
        Reply::Redirect(format!("http://{HOST}:{}/v1/docs.tar.gz", f.port)),
    );
    f.route(
        "/to-mirror.tar.gz",
        Reply::Redirect(format!(
            "https://mirror.corpus.test:{}/v1/docs.tar.gz",
            f.port
        )),
    );

    f.route("/loop.tar.gz", Reply::Redirect("/loop.tar.gz".into()));
    f.route("/bare.tar.gz", Reply::Bare302);

    // The server's bytes are not the published release.
    f.add("tampered", "/v1/docs.tar.gz", &published).await;
    let events = f.admit("tampered", &published.to_string()).await;
    assert_eq!(refusal(&events), "corpus/digest-mismatch");
    assert_eq!(f.active(), before);
    let st = f.status("tampered").await;
    assert!(
        st.last_failure.starts_with("corpus/digest-mismatch"),
        "{st:?}"
    );
    assert_eq!(st.active_snapshot_id, "");

    // Redirects are judged by the source rules before anything is re-admitted or dialed.
    let digest = Sha256Digest::of(archive("v1"));
    for (name, path, code) in [
        ("downgrade", "/to-http.tar.gz", "corpus/source-not-https"),
        ("elsewhere", "/to-mirror.tar.gz", "corpus/redirect-origin"),
        ("missing", "/nothing.tar.gz", "bounded/status"),
        ("circular", "/loop.tar.gz", "corpus/too-many-redirects"),
        (
            "nowhere",
            "/bare.tar.gz",
            "corpus/redirect-without-location",
        ),
    ] {
        f.add(name, path, &digest).await;
        let events = f.admit(name, &digest.to_string()).await;
        assert_eq!(refusal(&events), code, "{name}");
        assert_eq!(f.active(), before, "{name}");
        assert!(f.status(name).await.last_failure.starts_with(code));
    }
    // A host no road names: destination admission refuses before anything is dialed (the
    // controlled resolver knows no public name here, and loopback needs an exact road).
    let add = f
        .builder
        .add_source(Request::new(pb::AddSourceRequest {
            name: "unrouted".into(),
            kind: "release_archive".into(),
            url: "https://unrouted.corpus.test/docs.tar.gz".into(),
            digest: digest.to_string(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(add.refusal_code, "");
    let events = f.admit("unrouted", &digest.to_string()).await;
    assert!(refusal(&events).starts_with("destination/"), "{events:?}");
    assert_eq!(f.active(), before);

    // The embedded default is still the active, fresh snapshot.
    assert_eq!(f.status("reach-docs").await.freshness, "fresh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_are_refused_by_code_and_kept_in_a_strict_file() {
    let f = fixture().await;
    let d = Sha256Digest::of(b"x").to_string();
    let add = |name: &str, kind: &str, url: &str, digest: &str| pb::AddSourceRequest {
        name: name.into(),
        kind: kind.into(),
        url: url.into(),
        digest: digest.into(),
        ..Default::default()
    };
    let cases = [
        add(
            "plain",
            "release_archive",
            "http://example.org/d.tar.gz",
            &d,
        ),
        add("gitproto", "git", "git://example.org/r.git", ""),
        add("ssh", "git", "git@example.org:o/r.git", ""),
        add("local", "git", "file:///srv/r.git", ""),
        add("creds", "git", "https://user:token@example.org/r.git", ""),
        add(
            "nodigest",
            "release_archive",
            "https://example.org/d.tar.gz",
            "",
        ),
        add("Bad Name", "git", "https://example.org/r.git", ""),
        add("svn", "svn", "https://example.org/r", ""),
        add("reach-docs", "git", "https://example.org/r.git", ""),
        add("repo", "git", "https://example.org/r.git", ""),
        add("repo", "git", "https://example.org/r.git", ""),
        pb::AddSourceRequest {
            ceilings: Some(pb::SourceCeilings {
                max_files: 1_000_000,
                ..Default::default()
            }),
            ..add("huge", "git", "https://example.org/h.git", "")
        },
        pb::AddSourceRequest {
            ceilings: Some(pb::SourceCeilings {
                max_files: 50,
                max_depth: 4,
                ..Default::default()
            }),
            ..add("tight", "git", "https://example.org/t.git", "")
        },
        pb::AddSourceRequest {
            site_base: "http://doc.example.org".into(),
            ..add("site", "git", "https://example.org/s.git", "")
        },
        pb::AddSourceRequest {
            site_base: "https://doc.example.org".into(),
            site_root: "../book".into(),
            ..add("siteroot", "git", "https://example.org/s.git", "")
        },
    ];
    let mut out = String::new();
    for c in cases {
        let r = f
            .builder
            .add_source(Request::new(c.clone()))
            .await
            .unwrap()
            .into_inner();
        let verdict = if r.refusal_code.is_empty() {
            "added"
        } else {
            &r.refusal_code
        };
        out.push_str(&format!("{:<10} {:<40} {verdict}\n", c.name, c.url));
    }
    expect_test::expect![[r#"
        plain      http://example.org/d.tar.gz              corpus/source-not-https
        gitproto   git://example.org/r.git                  corpus/source-git-protocol
        ssh        git@example.org:o/r.git                  corpus/source-ssh
        local      file:///srv/r.git                        corpus/source-local
        creds      https://user:token@example.org/r.git     corpus/userinfo
        nodigest   https://example.org/d.tar.gz             corpus/digest-required
        Bad Name   https://example.org/r.git                corpus/source-name
        svn        https://example.org/r                    corpus/source-kind
        reach-docs https://example.org/r.git                corpus/source-exists
        repo       https://example.org/r.git                added
        repo       https://example.org/r.git                corpus/source-exists
        huge       https://example.org/h.git                corpus/ceiling-out-of-range
        tight      https://example.org/t.git                added
        site       https://example.org/s.git                corpus/source-not-https
        siteroot   https://example.org/s.git                corpus/source-malformed
    "#]]
    .assert_eq(&out);

    // Admission refusals, each before any fetch.
    let mut out = String::new();
    for (source, revision) in [
        ("nope", "abc"),
        ("repo", "main"),
        ("reach-docs", "sha256:00"),
    ] {
        let events = f.admit(source, revision).await;
        out.push_str(&format!(
            "{source:<10} {revision:<10} {}\n",
            refusal(&events)
        ));
    }
    expect_test::expect![[r#"
        nope       abc        corpus/unknown-source
        repo       main       corpus/revision-malformed
        reach-docs sha256:00  corpus/revision-not-published
    "#]]
    .assert_eq(&out);

    // The file holds at most MAX_SOURCES ("repo" and "tight" are two of them).
    for i in 2..reach_corpus_builder::sources::MAX_SOURCES {
        let r = f
            .builder
            .add_source(Request::new(add(
                &format!("s{i}"),
                "git",
                "https://example.org/r.git",
                "",
            )))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.refusal_code, "", "s{i}");
    }
    let r = f
        .builder
        .add_source(Request::new(add(
            "one-more",
            "git",
            "https://example.org/r.git",
            "",
        )))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.refusal_code, "corpus/too-many-sources");

    // The file is strict: an edited source that smuggles a credential is refused when read.
    let path = f._dir.path().join("sources.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("schema = \"CorpusSources@1\""), "{text}");
    std::fs::write(
        &path,
        text.replace("branch = \"main\"", "branch = \"main\"\ntoken = \"x\""),
    )
    .unwrap();
    let err = f
        .builder
        .status(Request::new(pb::StatusRequest {}))
        .await
        .unwrap_err();
    assert!(
        err.message().starts_with("corpus/credential-helper"),
        "{err:?}"
    );
    // And a file of another schema is not read as sources at all.
    std::fs::write(&path, "schema = \"CorpusSources@2\"\n").unwrap();
    let err = f
        .builder
        .status(Request::new(pb::StatusRequest {}))
        .await
        .unwrap_err();
    assert!(err.message().starts_with("corpus/sources-file"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_without_an_active_snapshot_is_refused_by_code() {
    let f = fixture().await;
    std::fs::remove_file(f.store_root.join("CURRENT")).unwrap();
    let r = f
        .builder
        .search(Request::new(pb::SearchRequest {
            query: "freshness".into(),
            limit: 3,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.refusal_code, "corpus/dependency-unavailable");
    assert!(r.hits.is_empty());
}
