//! A probe that runs inside a role's container for the container end-to-end test
//! (`tests/containers.rs`): with the role's own leaf it calls methods of a port and reports
//! each gRPC status, and it tries to open paths and reports what the kernel said.
//!
//! Usage: `port_probe SECRET_DIR TRUST_DOMAIN [call SOCKET SERVER METHOD_PATH | open PATH]…`
//! One line per step on stdout: `call METHOD_PATH CODE` or `open PATH ok|<error kind>`.
//! It is an example, not a role: it never ships in a role image.

use std::path::PathBuf;
use std::process::ExitCode;

use reach_identity::{Principal, TrustDomain};
use reach_port::{PortAddress, PortMaterial, connect};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!(
            "usage: port_probe SECRET_DIR TRUST_DOMAIN [call SOCKET SERVER METHOD | open PATH]…"
        );
        return ExitCode::from(2);
    }
    let domain = TrustDomain::new(args[1].clone()).expect("trust domain");
    let mut steps = args[2..].iter();
    let mut material = None;
    while let Some(step) = steps.next() {
        match step.as_str() {
            "call" => {
                let (Some(socket), Some(server), Some(method)) =
                    (steps.next(), steps.next(), steps.next())
                else {
                    eprintln!("call needs SOCKET SERVER METHOD");
                    return ExitCode::from(2);
                };
                let m = material.get_or_insert_with(|| {
                    PortMaterial::load(&PathBuf::from(&args[0]), domain.clone())
                        .expect("the role's own material")
                });
                let server = Principal::new(domain.clone(), server.clone()).expect("principal");
                let code = match connect(PortAddress::Unix(socket.into()), m, server).await {
                    Ok(channel) => format!("{:?}", call(channel, method).await),
                    Err(e) => format!("unreachable({})", error_chain(&e)),
                };
                println!("call {method} {code}");
            }
            "open" => {
                let Some(path) = steps.next() else {
                    eprintln!("open needs PATH");
                    return ExitCode::from(2);
                };
                let result = match std::fs::File::open(path) {
                    Ok(_) => "ok".to_owned(),
                    Err(e) => format!("{:?}", e.kind()),
                };
                println!("open {path} {result}");
            }
            other => {
                eprintln!("unknown step `{other}`");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

/// The chain on one word, as each output line wants it.
fn error_chain(e: &dyn std::error::Error) -> String {
    reach_port::probe::error_chain(e).replace(' ', "_")
}

/// Calls `path` with an empty message; the status code.
async fn call(channel: tonic::transport::Channel, path: &str) -> tonic::Code {
    let path = http::uri::PathAndQuery::try_from(path).expect("method path");
    match reach_port::probe::call_empty(channel, path, tonic::Request::new(())).await {
        Ok(()) => tonic::Code::Ok,
        Err(s) => s.code(),
    }
}
