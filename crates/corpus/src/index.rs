//! The offline BM25 index (tantivy): one document per passage.
//!
//! **Architecture Invariant:** the index is written only into a staging directory and is opened
//! read-only afterwards; nothing mutates an activated snapshot.

use std::path::Path;

use reach_digest::Sha256Digest;
use tantivy::schema::{
    Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexSettings, doc};

use crate::analysis::Analysis;
use crate::error::BuildError;
use crate::passage::Passage;

/// Revision of the index layout (schema and settings); recorded in every snapshot.
/// Schema 2: body and section are indexed with term frequencies but without positions, since
/// retrieval issues term queries only (BM25 needs frequencies, never positions). Snapshots built
/// with schema 1 (positions too) open and answer the same way.
/// Schema 3 adds, after the fields of schema 2 (so their ids stay put), the stored `context`
/// (section path) and two fields analyzed by [`crate::analysis`]: `content` (the passage's
/// visible text, markup stripped) and `headings` (section, section path and page name).
/// Snapshots of schema 1 or 2 still open and answer through `body` and `section`.
/// Schema 4 keeps schema 3's fields and analyzes them with [`Analysis::Irregular`] (irregular
/// forms and short stems' final `e`); a snapshot of schema 3 is still queried with the
/// analysis it was built with ([`Analysis::of_index`]), so its terms and the question's meet.
/// Schema 5 keeps the fields and analyzes them with [`Analysis::Derived`] (more irregular
/// forms, `-ise` as `-ize`, `-ation` and `-ate` at their stem); schema 4 keeps its analysis.
/// Schema 6 keeps schema 5's fields and analysis; its `headings` also hold the page's
/// directories ([`headings_text`]). A schema-5 snapshot is queried the same way.
/// Schema 7 keeps schema 6's fields and analyzes them with [`Analysis::Acronyms`] (an acronym
/// ends its camelCase hump: `JSONEncoder` holds `json`); schema 5 and 6 keep theirs.
pub const INDEX_REVISION: &str = "tantivy-0.27/reach-schema-7";

/// Writer memory budget. Tantivy splits it across threads and needs ≥ 15 MB per thread.
const WRITER_MEMORY_BYTES: usize = 96 * 1024 * 1024;
/// Two indexing threads: the target machine has two cores.
const WRITER_THREADS: usize = 2;

#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub path: Field,
    pub section: Field,
    pub anchor: Field,
    pub body: Field,
    pub digest: Field,
    pub line_start: Field,
    pub line_end: Field,
    /// Schema 3 and later; `None` in an older snapshot.
    pub context: Option<Field>,
    pub content: Option<Field>,
    pub headings: Option<Field>,
}

impl Fields {
    /// The fields of an index as it was built (older schemas lack the newer fields).
    pub fn of(schema: &Schema) -> Result<Fields, String> {
        let get = |name: &str| {
            schema
                .get_field(name)
                .map_err(|_| format!("index has no `{name}` field"))
        };
        Ok(Fields {
            id: get("id")?,
            path: get("path")?,
            section: get("section")?,
            anchor: get("anchor")?,
            body: get("body")?,
            digest: get("digest")?,
            line_start: get("line_start")?,
            line_end: get("line_end")?,
            context: schema.get_field("context").ok(),
            content: schema.get_field("content").ok(),
            headings: schema.get_field("headings").ok(),
        })
    }
}

/// Text analyzed by [`crate::analysis`], with frequencies, not stored.
fn text_analyzed() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(crate::analysis::TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    )
}

/// Register this crate's current analyzer on `index` (tantivy does not persist custom
/// tokenizers).
pub fn register_analyzer(index: &Index) {
    register_analyzer_for(index, Analysis::CURRENT);
}

/// Register the analyzer of revision `a` on `index`: the one its snapshot was built with.
pub fn register_analyzer_for(index: &Index, a: Analysis) {
    index.tokenizers().register(
        crate::analysis::TOKENIZER,
        crate::analysis::ReachTokenizer(a),
    );
}

/// The visible text of the passage `text` of the file at `path`, as indexed, embedded and
/// quoted: a Markdown passage's markup stripped ([`crate::markup`]), any other as it is.
pub fn visible_text<'t>(path: &str, text: &'t str) -> std::borrow::Cow<'t, str> {
    match crate::process::Media::of_path(path) {
        Some(crate::process::Media::Markdown) => crate::markup::clean_markdown(text).into(),
        _ => text.into(),
    }
}

/// The text of a passage's `headings` field: section, section path, and the page's place in
/// the site (its directories and name: `rust-2021/prelude.html` is the 2021 prelude page).
pub fn headings_text(p: &Passage) -> String {
    let (dirs, page) = p.path.rsplit_once('/').unwrap_or(("", &p.path));
    let page = page.rsplit_once('.').map_or(page, |(stem, _)| stem);
    let dirs = dirs.replace('/', " ");
    format!("{} \n{} \n{dirs} {page}", p.section, p.context)
}

/// Tokenized text with BM25 statistics (frequencies and field norms) but no positions: no query
/// of ours is a phrase query, and positions are a large share of indexing work and index size.
fn text_for_bm25() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("default")
            .set_index_option(IndexRecordOption::WithFreqs),
    )
}

pub fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        path: b.add_text_field("path", STRING | STORED),
        section: b.add_text_field("section", text_for_bm25() | STORED),
        anchor: b.add_text_field("anchor", STORED),
        body: b.add_text_field("body", text_for_bm25() | STORED),
        digest: b.add_text_field("digest", STORED),
        line_start: b.add_u64_field("line_start", STORED | INDEXED),
        line_end: b.add_u64_field("line_end", STORED),
        context: Some(b.add_text_field("context", STORED)),
        content: Some(b.add_text_field("content", text_analyzed())),
        headings: Some(b.add_text_field("headings", text_analyzed())),
    };
    (b.build(), fields)
}

/// Write `passages` into a new index at `dir` (which must be empty).
pub fn write_index(
    dir: &Path,
    passages: &[Passage],
    on_passage: &mut dyn FnMut(u64),
) -> Result<(), BuildError> {
    write_index_with(dir, passages, Analysis::CURRENT, on_passage)
}

/// [`write_index`] analyzing with `analysis` (an older one only to test that older indexes
/// are still queried with theirs).
pub(crate) fn write_index_with(
    dir: &Path,
    passages: &[Passage],
    analysis: Analysis,
    on_passage: &mut dyn FnMut(u64),
) -> Result<(), BuildError> {
    let (schema, f) = schema();
    let settings = IndexSettings {
        docstore_compression: tantivy::store::Compressor::Lz4,
        ..IndexSettings::default()
    };
    let index = Index::builder()
        .schema(schema)
        .settings(settings)
        .create_in_dir(dir)?;
    register_analyzer_for(&index, analysis);
    let built = index.schema();
    let (context, content, headings) = (
        built.get_field("context")?,
        built.get_field("content")?,
        built.get_field("headings")?,
    );
    let mut writer: tantivy::IndexWriter =
        index.writer_with_num_threads(WRITER_THREADS, WRITER_MEMORY_BYTES)?;
    for p in passages {
        writer.add_document(doc!(
            f.id => p.id.as_str(),
            f.path => p.path.as_str(),
            f.section => p.section.as_str(),
            f.anchor => p.anchor.as_str(),
            f.body => p.text.as_str(),
            f.digest => p.digest.to_string(),
            f.line_start => u64::from(p.line_start),
            f.line_end => u64::from(p.line_end),
            context => p.context.as_str(),
            content => visible_text(&p.path, &p.text).as_ref(),
            headings => headings_text(p),
        ))?;
        on_passage(1);
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    Ok(())
}

/// A passage's stored fields as the doc store holds them, read without building a generic
/// document: each value is decoded once and moved, not copied, into the [`Passage`].
#[derive(Debug, Clone, Default)]
pub struct StoredDoc {
    values: Vec<(Field, StoredValue)>,
}

/// A stored value of this crate's schemas: text or an unsigned number (nothing else is stored).
#[derive(Debug, Clone)]
enum StoredValue {
    Str(String),
    U64(u64),
    Other,
}

impl StoredDoc {
    /// The first text value of `field`.
    pub fn str(&self, field: Field) -> Option<&str> {
        self.values.iter().find_map(|(f, v)| match v {
            StoredValue::Str(s) if *f == field => Some(s.as_str()),
            _ => None,
        })
    }

    fn u64(&self, field: Field) -> Option<u64> {
        self.values.iter().find_map(|(f, v)| match v {
            StoredValue::U64(n) if *f == field => Some(*n),
            _ => None,
        })
    }

    /// Take the first text value of `field` out.
    fn take(&mut self, field: Field) -> Option<String> {
        self.values.iter_mut().find_map(|(f, v)| match v {
            StoredValue::Str(s) if *f == field => Some(std::mem::take(s)),
            _ => None,
        })
    }
}

impl tantivy::schema::document::DocumentDeserialize for StoredDoc {
    fn deserialize<'de, D>(mut d: D) -> Result<Self, tantivy::schema::document::DeserializeError>
    where
        D: tantivy::schema::document::DocumentDeserializer<'de>,
    {
        let mut values = Vec::with_capacity(d.size_hint());
        while let Some(fv) = d.next_field::<StoredValue>()? {
            values.push(fv);
        }
        Ok(StoredDoc { values })
    }
}

impl tantivy::schema::document::ValueDeserialize for StoredValue {
    fn deserialize<'de, D>(d: D) -> Result<Self, tantivy::schema::document::DeserializeError>
    where
        D: tantivy::schema::document::ValueDeserializer<'de>,
    {
        struct Visit;
        impl tantivy::schema::document::ValueVisitor for Visit {
            type Value = StoredValue;
            fn visit_string(
                &self,
                v: String,
            ) -> Result<StoredValue, tantivy::schema::document::DeserializeError> {
                Ok(StoredValue::Str(v))
            }
            fn visit_u64(
                &self,
                v: u64,
            ) -> Result<StoredValue, tantivy::schema::document::DeserializeError> {
                Ok(StoredValue::U64(v))
            }
            fn visit_i64(
                &self,
                _: i64,
            ) -> Result<StoredValue, tantivy::schema::document::DeserializeError> {
                Ok(StoredValue::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Read a stored document back into a [`Passage`].
pub fn passage_of(mut doc: StoredDoc, f: &Fields) -> Result<Passage, String> {
    let missing = |name: &str| format!("stored field `{name}` missing");
    let n = |doc: &StoredDoc, field: Field, name: &str| {
        doc.u64(field)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| missing(name))
    };
    let digest: Sha256Digest = doc
        .str(f.digest)
        .ok_or_else(|| missing("digest"))?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let (line_start, line_end) = (
        n(&doc, f.line_start, "line_start")?,
        n(&doc, f.line_end, "line_end")?,
    );
    Ok(Passage {
        id: doc.take(f.id).ok_or_else(|| missing("id"))?,
        path: doc.take(f.path).ok_or_else(|| missing("path"))?,
        section: doc.take(f.section).ok_or_else(|| missing("section"))?,
        context: f.context.and_then(|c| doc.take(c)).unwrap_or_default(),
        anchor: doc.take(f.anchor).ok_or_else(|| missing("anchor"))?,
        line_start,
        line_end,
        text: doc.take(f.body).ok_or_else(|| missing("body"))?,
        digest,
    })
}

/// Re-open the index at `dir` and check every stored passage: count, unique ids, digests that
/// match the text, and the same `(id, digest)` set the builder intended to write.
pub fn validate_index(dir: &Path, expected: &[Passage]) -> Result<u64, BuildError> {
    let index = Index::open_in_dir(dir)?;
    let f = Fields::of(&index.schema()).map_err(BuildError::Validation)?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let count = searcher.num_docs();
    if count != expected.len() as u64 {
        return Err(BuildError::Validation(format!(
            "index holds {count} passages, expected {}",
            expected.len()
        )));
    }
    // Every stored passage is read back and re-hashed; segments are checked in parallel (the
    // writer produces one per indexing thread).
    let per_segment: Vec<Result<Vec<(String, Sha256Digest)>, BuildError>> =
        std::thread::scope(|scope| {
            let workers: Vec<_> = searcher
                .segment_readers()
                .iter()
                .map(|seg| scope.spawn(move || stored_passages(seg, &f)))
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(BuildError::Validation("validation worker panicked".into()))
                    })
                })
                .collect()
        });
    let mut seen: Vec<(String, Sha256Digest)> = Vec::with_capacity(expected.len());
    for part in per_segment {
        seen.extend(part?);
    }
    seen.sort();
    let mut want: Vec<(String, Sha256Digest)> =
        expected.iter().map(|p| (p.id.clone(), p.digest)).collect();
    want.sort();
    want.dedup();
    if want.len() != expected.len() {
        return Err(BuildError::Validation("duplicate passage ids".into()));
    }
    if seen != want {
        return Err(BuildError::Validation(
            "stored passages differ from the built passages".into(),
        ));
    }
    Ok(count)
}

/// Reads every live stored passage of one segment and checks its text against its digest.
fn stored_passages(
    seg: &tantivy::SegmentReader,
    f: &Fields,
) -> Result<Vec<(String, Sha256Digest)>, BuildError> {
    let store = seg.get_store_reader(64)?;
    let mut out = Vec::with_capacity(seg.num_docs() as usize);
    for doc in store.iter::<StoredDoc>(seg.alive_bitset()) {
        let doc = doc.map_err(|e| BuildError::Validation(e.to_string()))?;
        let p = passage_of(doc, f).map_err(BuildError::Validation)?;
        if Sha256Digest::of(p.text.as_bytes()) != p.digest {
            return Err(BuildError::Validation(format!(
                "passage {} text does not match its digest",
                p.id
            )));
        }
        out.push((p.id, p.digest));
    }
    Ok(out)
}

/// Total size of the files under `dir`.
pub fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let md = e.metadata()?;
        n += if md.is_dir() {
            dir_bytes(&e.path())?
        } else {
            md.len()
        };
    }
    Ok(n)
}
