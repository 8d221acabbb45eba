//! `reach corpus` end to end: the real `reach` binary against the whole body. The operator adds
//! a release-archive source served by a loopback HTTPS server (its test CA trusted only through
//! corpus-builder's settings, its address admitted only as an exact local road: production
//! admission refuses loopback), admits the published digest, and reads status and search.
//! Output is piped, so the progress bars stay hidden and only the summary table is printed.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use reach_digest::Sha256Digest;
use reach_tests::TestBody;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const HOST: &str = "releases.corpus.test";
const BASE: &str = "https://git.example.org/reach/docs";

/// Mint a CA and a leaf for [`HOST`]; returns the CA's PEM and the server configuration.
fn mint() -> (String, Arc<rustls::ServerConfig>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![HOST.to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
    .unwrap();
    (ca.pem(), Arc::new(config))
}

/// Serve `archive` at `/reach/docs-v1.tar.gz` over HTTPS on loopback (404 elsewhere).
async fn serve(config: Arc<rustls::ServerConfig>, archive: Vec<u8>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let archive = Arc::new(archive);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, archive) = (acceptor.clone(), archive.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let found = String::from_utf8_lossy(&head).contains("GET /reach/docs-v1.tar.gz ");
                let (status, body): (&str, &[u8]) = if found {
                    ("200 OK", &archive)
                } else {
                    ("404 Not Found", b"no")
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// A release archive of two Markdown pages, packed by the system `tar`.
fn archive(dir: &Path) -> Vec<u8> {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("corpus.md"),
        "# Public corpus\n\nThe corpus builder downloads an admitted release archive over HTTPS.\n\n## Freshness\n\nA snapshot is fresh for 24 hours after activation.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("install.md"),
        "# Installing Reach\n\nReach runs as rootless Podman containers.\n",
    )
    .unwrap();
    let out = std::process::Command::new("tar")
        .args(["-czf", "-", "docs"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

async fn reach(body: &TestBody, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"));
    cmd.arg("corpus")
        .args(args)
        .arg("--state")
        .arg(body.layout.root());
    cmd.output().await.unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_adds_admits_and_searches_a_release_archive() {
    let work = tempfile::tempdir().unwrap();
    let bytes = archive(work.path());
    let digest = Sha256Digest::of(&bytes);
    let (ca_pem, config) = mint();
    let addr = serve(config, bytes).await;

    let body = TestBody::start_configured(|m, layout| {
        let ca = layout.root().join("corpus-source-ca.pem");
        std::fs::write(&ca, &ca_pem).unwrap();
        let role = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "corpus-builder")
            .unwrap();
        // The settings table, parsed from TOML text (this crate does not name toml itself).
        role.settings = format!(
            "[roads]\nca_file = {:?}\nlocal_roads = [{{ host = {HOST:?}, addr = {:?} }}]\n",
            ca.display().to_string(),
            addr.to_string()
        )
        .parse()
        .unwrap();
    })
    .await;

    let url = format!("https://{HOST}:{}/reach/docs-v1.tar.gz", addr.port());
    let digest_arg = digest.to_string();
    let out = reach(
        &body,
        &[
            "add",
            "docs",
            &url,
            "--digest",
            &digest_arg,
            "--include",
            "docs/**",
            "--citation-base",
            BASE,
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{stdout}{stderr}{}",
        body.log("corpus-builder")
    );
    assert!(
        stdout.contains("added source docs (release_archive)"),
        "{stdout}"
    );

    // A refused source: the typed code reaches the operator.
    let out = reach(
        &body,
        &[
            "add",
            "plain",
            "http://example.org/d.tar.gz",
            "--digest",
            &digest_arg,
        ],
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out).1.contains("refused: corpus/source-not-https"),
        "{:?}",
        text(&out)
    );

    let out = reach(&body, &["admit", "docs", &digest_arg]).await;
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{stdout}{stderr}{}",
        body.log("corpus-builder")
    );
    println!("{stdout}");
    for row in [
        "| snapshot",
        "| files accepted | 2",
        "| passages",
        "| elapsed",
        "| fresh until",
    ] {
        assert!(stdout.contains(row), "no `{row}` in\n{stdout}");
    }
    assert!(
        stdout.contains(&format!("| revision       | {}", digest.hex())),
        "{stdout}"
    );
    // Piped stderr: no bars drawn.
    assert!(
        !stderr.contains("passages ") && !stderr.contains("fetch ["),
        "{stderr}"
    );
    // The summary shows the include the build pinned its paths with (issue #34).
    assert!(stdout.contains("| include        | docs/**"), "{stdout}");

    // A refused admit: its code once, on stderr; nothing on stdout (issue #34).
    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = reach(&body, &["admit", "docs", &wrong]).await;
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert_eq!(
        stderr.matches("corpus/revision-not-published").count(),
        1,
        "{stderr}"
    );
    assert!(!stdout.contains("refused"), "{stdout}");

    let out = reach(&body, &["status"]).await;
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    println!("{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("docs ")).unwrap();
    assert!(
        line.starts_with(&format!(
            "docs (release_archive) admitted {} candidate - active snap-",
            digest.hex()
        )),
        "{line}"
    );
    assert!(
        line.contains(" fresh until ") && line.ends_with("last-failure -"),
        "{line}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("reach-docs (release_archive)")),
        "{stdout}"
    );

    let out = reach(&body, &["search", "how long is a snapshot fresh"]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("{BASE}/blob/{}/docs/corpus.md", digest.hex())),
        "{stdout}"
    );
    println!("{stdout}");
    assert!(stdout.contains("Freshness"), "{stdout}");

    body.stop().await;
}
