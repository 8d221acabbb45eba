//! Test support (feature `test-support`): a real HTTPS git server — `git http-backend` (CGI)
//! behind a small rustls server on 127.0.0.1 — with a throwaway CA that only the test's builder
//! trusts, and a `git` runner with a fixed identity and no system or global configuration.
//! Paths under `/moved-<how>/` answer a redirect instead (to plain HTTP, to a non-admitted
//! origin, or within the origin). Nothing here is used in production builds.
#![allow(clippy::disallowed_methods)] // The CGI child needs PATH; test support, never secrets.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and the server's leaf (for `localhost` and `127.0.0.1`).
pub struct TestCa {
    pub ca: CertificateDer<'static>,
    pub leaf: CertificateDer<'static>,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

pub fn mint() -> TestCa {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reach corpus test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    TestCa {
        ca: ca.der().clone(),
        leaf: leaf.der().clone(),
        key: leaf_key.serialize_der(),
    }
}

/// Serve `git http-backend` for repositories under `root` over HTTPS on 127.0.0.1.
pub fn serve(root: PathBuf, ca: &TestCa) -> u16 {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ca.key.clone()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![ca.leaf.clone(), ca.ca.clone()], key)
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (config, root) = (config.clone(), root.clone());
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let _ = handle(&mut tls, &root, port);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    port
}

/// Paths under `/moved-<how>/` answer a redirect instead of running git: to plain HTTP, to a
/// non-admitted origin, or to the same repository on the same origin.
fn redirect_for(path: &str, query: &str, port: u16) -> Option<String> {
    let (how, rest) = path.strip_prefix("/moved-")?.split_once('/')?;
    let tail = format!("/{rest}?{query}");
    Some(match how {
        "http" => format!("http://localhost:{port}{tail}"),
        "away" => format!("https://mirror.example.org:{port}{tail}"),
        _ => tail,
    })
}

fn handle(stream: &mut (impl Read + Write), root: &Path, port: u16) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = header("content-length") {
        body.resize(len.parse().unwrap_or(0), 0);
        reader.read_exact(&mut body)?;
    } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    if let Some(location) = redirect_for(path, query, port) {
        let stream = reader.into_inner();
        stream.write_all(
            format!(
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )?;
        return stream.flush();
    }
    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(ct) = header("content-type") {
        cmd.env("CONTENT_TYPE", ct);
    }
    if let Some(p) = header("git-protocol") {
        cmd.env("GIT_PROTOCOL", p);
    }
    if let Some(enc) = header("content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", enc);
    }
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = child.wait_with_output()?;
    let _ = writer.join();
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)))
        .unwrap_or((raw.len(), 0));
    let head = String::from_utf8_lossy(&raw[..split.0]).to_string();
    let payload = &raw[(split.0 + split.1).min(raw.len())..];
    let mut status = "200 OK".to_string();
    let mut response = Vec::new();
    let mut out_headers = String::new();
    for line in head.lines() {
        if let Some(s) = line.strip_prefix("Status:") {
            status = s.trim().to_string();
        } else if !line.trim().is_empty() {
            out_headers.push_str(line.trim_end());
            out_headers.push_str("\r\n");
        }
    }
    response.extend_from_slice(
        format!(
            "HTTP/1.1 {status}\r\n{out_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            payload.len()
        )
        .as_bytes(),
    );
    response.extend_from_slice(payload);
    let stream = reader.into_inner();
    stream.write_all(&response)?;
    stream.flush()
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Reach Test")
        .env("GIT_AUTHOR_EMAIL", "test@reach.invalid")
        .env("GIT_COMMITTER_NAME", "Reach Test")
        .env("GIT_COMMITTER_EMAIL", "test@reach.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
