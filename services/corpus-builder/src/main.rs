//! reach-corpus-builder: load settings, activate the default corpus before readiness, serve the
//! admin port.

use std::sync::Arc;

use reach_corpus::{CorpusStore, SystemClock};
use reach_corpus_builder::{admin, embedded, fetch, settings};

fn main() -> std::process::ExitCode {
    reach_runtime::run("corpus-builder", async |role| {
        let settings = settings::Settings::from_table(&role.config.settings)?;
        let store = CorpusStore::new(
            role.config
                .data_dir
                .join(reach_manifest::plan::CORPUS_STORE_DIR),
            Arc::new(SystemClock),
        )?;
        let store = match settings.freshness()? {
            Some(f) => store.with_freshness(f),
            None => store,
        };
        let fetcher = fetch::ArchiveFetcher::new(settings.admission()?, settings.roots()?);
        let docs = match &settings.docs_dir {
            Some(dir) => embedded::Source::pack_dir(dir)?,
            None => embedded::Source::pack()?,
        };
        let builder = admin::Builder::new(
            store,
            docs,
            &role.config.data_dir,
            fetcher,
            settings.git_tls()?,
        );
        // Activate the embedded docs before readiness, so core never starts without a corpus.
        builder.ensure_embedded_active().await?;
        role.serve("corpus-builder.admin", builder.into_server())?;
        Ok(())
    })
}
