//! reach-corpus-builder: acquires admitted sources and atomically activates snapshots that core
//! reads. The default source is the project's own documentation, embedded in this binary and
//! packed as an immutable release archive with its digest, so the body needs no network for it.

mod admin;
mod embedded;

use std::sync::Arc;

use reach_corpus::{CorpusStore, SystemClock};

fn main() -> std::process::ExitCode {
    reach_runtime::run("corpus-builder", async |role| {
        let store = CorpusStore::new(
            role.config
                .data_dir
                .join(reach_manifest::plan::CORPUS_STORE_DIR),
            Arc::new(SystemClock),
        )?;
        let source = embedded::Source::pack()?;
        let builder = admin::Builder::new(store, source);
        // Activate the embedded docs before readiness, so core never starts without a corpus.
        builder.ensure_embedded_active().await?;
        role.serve("corpus-builder.admin", builder.into_server())?;
        Ok(())
    })
}
