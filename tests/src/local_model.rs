//! The real-model class's local runtime for the tests: `reach-local-runtime`, which
//! `reach demo task-pack --model local` starts too.

pub use reach_local_runtime::{KEY, LocalRuntime as LocalModel, installed};

/// Starts the runtime; a test that needs it fails saying what to install.
pub fn start() -> LocalModel {
    LocalModel::start().unwrap_or_else(|e| panic!("{e}"))
}
