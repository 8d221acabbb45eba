// Shared by the task-pack targets (included with `include!`).

#[allow(unused_imports)]
use reach_taskpack::{InstallRefusal, PackFiles, PackKey, TrustedKeys};

/// Every install refusal code (conform.rs).
#[allow(dead_code)]
const INSTALL_CODES: &[&str] = &[
    "package/archive-malformed",
    "package/schema",
    "verifier/check-missing",
    "verifier/mutation-not-admitted",
    "package/facts-mismatch",
    "package/unknown-signer",
    "package/bad-signature",
    "package/rollback",
    "package/expired",
    "package/conformance-failed",
];

#[allow(dead_code)]
fn install_typed(r: &InstallRefusal) {
    assert!(INSTALL_CODES.contains(&r.code()), "untyped install refusal {}", r.code());
}

/// The fuzz signing key (fresh per process: nothing outside signs with it) and its trust.
fn key() -> &'static (PackKey, TrustedKeys) {
    static KEY: std::sync::OnceLock<(PackKey, TrustedKeys)> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let key = PackKey::from_pkcs8(&PackKey::generate().expect("a key")).expect("its bytes");
        let mut trusted = TrustedKeys::new();
        trusted.insert("fuzz", key.public());
        (key, trusted)
    })
}

#[allow(dead_code)]
/// The MTA-neutral test pack (crates/taskpack/tests/data/app-local).
fn app_local() -> &'static PackFiles {
    static FILES: std::sync::OnceLock<PackFiles> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/taskpack/tests/data/app-local");
        PackFiles::read_dir(std::path::Path::new(dir)).expect("the app-local test pack")
    })
}
