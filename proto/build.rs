//! Compiles every `.proto` under `reach/` with protox (pure Rust), so no system `protoc` is needed.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let mut files = Vec::new();
    collect(&root.join("reach"), &mut files)?;
    files.sort();
    // The directory too: cargo then rescans it, so a new `.proto` file also reruns this script.
    println!("cargo:rerun-if-changed={}", root.join("reach").display());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&root])?;
    write_method_table(&fds)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

fn collect(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

/// Writes `methods.rs`: every (service, method) pair, so the manifest can refuse a port-table
/// entry naming a method that does not exist.
fn write_method_table(
    fds: &prost_types::FileDescriptorSet,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = String::from(
        "/// Every gRPC service with its methods.\npub const SERVICES: &[(&str, &[&str])] = &[\n",
    );
    for file in &fds.file {
        let package = file.package();
        for service in &file.service {
            out.push_str(&format!("    (\"{package}.{}\", &[", service.name()));
            for m in &service.method {
                out.push_str(&format!("\"{}\", ", m.name()));
            }
            out.push_str("]),\n");
        }
    }
    out.push_str("];\n");
    std::fs::write(
        PathBuf::from(std::env::var("OUT_DIR")?).join("methods.rs"),
        out,
    )?;
    Ok(())
}
