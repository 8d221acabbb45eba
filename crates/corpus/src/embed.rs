//! A static word-piece embedding: retrieval's second first stage, beside BM25 (issue #34).
//!
//! A table of one vector per word piece of a sentence-embedding model's vocabulary, distilled
//! once from the model (`scripts/distil-embedding.py`: each piece's outputs averaged over the
//! sentences of a local text that hold it, or its output alone where none does; PCA,
//! int8 rows). A text's vector is the IDF-weighted sum of its pieces' rows, so a question costs
//! a tokenization and one dot product per passage (microseconds), with no model run in core.
//! It finds sections that say what a question asks in other words, which BM25 cannot.
//!
//! **Invariant:** the table is data read from a file an operator (or the test host's setup)
//! placed; it is never fetched, and a table that does not parse is refused whole.

use std::collections::HashMap;
use std::path::Path;

use reach_digest::Sha256Digest;

/// Where `scripts/embedding-setup.sh` writes the table by default: the test host's cache, which
/// the corpus tests, the CLI's tests and the answers bench read.
pub const TEST_HOST_TABLE: &str = "/var/tmp/reach-cache/embedding/static-128.bin";

/// The magic a `ReachStaticEmbedding@1` file starts with.
const MAGIC: &[u8; 8] = b"REACHSE1";

/// Bounds a table's header must keep (all-MiniLM-L6-v2's is 128 × 30,522).
const MAX_DIMS: usize = 4096;
const MAX_VOCAB: usize = 1 << 20;
/// A row's scale bound: with int8 values and IDF weights, sums stay far from overflow.
const MAX_SCALE: f32 = 1e6;

/// The longest word WordPiece splits; a longer one is unknown (as BERT's tokenizer does).
const MAX_WORD_CHARS: usize = 100;

/// A static embedding table: a vocabulary of word pieces (`##` marks a continuation) and one
/// int8 row with its scale per piece.
pub struct StaticEmbedding {
    dims: usize,
    vocab: HashMap<String, u32>,
    scales: Vec<f32>,
    rows: Vec<i8>,
    unknown: Option<u32>,
    /// Digest of the file, which names the table in a bundle's retrieval method.
    digest: Sha256Digest,
}

impl std::fmt::Debug for StaticEmbedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbedding")
            .field("dims", &self.dims)
            .field("vocab", &self.vocab.len())
            .field("digest", &self.digest)
            .finish()
    }
}

/// Why a table file was refused.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingRefusal {
    #[error("embedding table unreadable: {0}")]
    Io(#[from] std::io::Error),
    #[error("embedding table malformed: {0}")]
    Malformed(&'static str),
}

impl StaticEmbedding {
    /// Read a `ReachStaticEmbedding@1` file.
    pub fn load(path: &Path) -> Result<StaticEmbedding, EmbeddingRefusal> {
        Self::parse(&std::fs::read(path)?)
    }

    /// Parse the bytes of a `ReachStaticEmbedding@1` file; anything short or left over refuses.
    pub fn parse(bytes: &[u8]) -> Result<StaticEmbedding, EmbeddingRefusal> {
        use EmbeddingRefusal::Malformed;
        let mut r = Cursor { bytes, at: 0 };
        if r.take(8)? != MAGIC {
            return Err(Malformed("not a ReachStaticEmbedding@1 file"));
        }
        let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let dims = u32_at(r.take(4)?);
        let size = u32_at(r.take(4)?);
        // Every token takes a byte and every row `4 + dims`: a header claiming more than the
        // file holds is refused before anything is allocated for it.
        if dims == 0 || dims > MAX_DIMS || size == 0 || size > MAX_VOCAB {
            return Err(Malformed("dimensions or vocabulary size out of range"));
        }
        if size.saturating_mul(5 + dims) > bytes.len() {
            return Err(Malformed("truncated"));
        }
        let mut vocab = HashMap::with_capacity(size);
        for id in 0..size as u32 {
            let len = r.take(1)?[0] as usize;
            let word =
                std::str::from_utf8(r.take(len)?).map_err(|_| Malformed("token not UTF-8"))?;
            vocab.insert(word.to_owned(), id);
        }
        if r.rest() != size * (4 + dims) {
            return Err(Malformed("rows do not fill the rest of the file"));
        }
        let mut scales = Vec::with_capacity(size);
        let mut rows = Vec::with_capacity(size * dims);
        for _ in 0..size {
            let s = r.take(4)?;
            let scale = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            if !scale.is_finite() || scale.abs() > MAX_SCALE {
                return Err(Malformed("row scale out of range"));
            }
            scales.push(scale);
            rows.extend(r.take(dims)?.iter().map(|&b| b as i8));
        }
        let unknown = vocab.get("[UNK]").copied();
        Ok(StaticEmbedding {
            dims,
            vocab,
            scales,
            rows,
            unknown,
            digest: Sha256Digest::of(bytes),
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many word pieces the vocabulary holds.
    pub fn vocab_len(&self) -> usize {
        self.scales.len()
    }

    /// Bytes the table takes in memory: rows, scales and the vocabulary (approximate).
    pub fn heap_bytes(&self) -> usize {
        let words: usize = self.vocab.keys().map(|w| w.len() + 24 + 4 + 8).sum();
        self.rows.len() + self.scales.len() * 4 + words
    }

    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }

    /// The word-piece ids of `text`, as BERT's uncased tokenizer splits it: lower-cased, split
    /// at white space and at every punctuation character, each word greedily into the longest
    /// pieces the vocabulary holds (a word with no such split is one unknown piece).
    pub fn pieces(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        let mut word = String::new();
        for c in text.chars().flat_map(char::to_lowercase) {
            if c.is_whitespace() || c.is_control() {
                self.word_pieces(&word, &mut out);
                word.clear();
            } else if c.is_ascii_punctuation() || (!c.is_alphanumeric() && !c.is_ascii()) {
                self.word_pieces(&word, &mut out);
                word.clear();
                let mut b = [0u8; 4];
                self.word_pieces(c.encode_utf8(&mut b), &mut out);
            } else {
                word.push(c);
            }
        }
        self.word_pieces(&word, &mut out);
        out
    }

    fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        let unknown = |out: &mut Vec<u32>| out.extend(self.unknown);
        if word.chars().count() > MAX_WORD_CHARS {
            return unknown(out);
        }
        let start_len = out.len();
        let mut start = 0;
        let mut piece = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                if word.is_char_boundary(end) {
                    piece.clear();
                    if start > 0 {
                        piece.push_str("##");
                    }
                    piece.push_str(&word[start..end]);
                    if let Some(&id) = self.vocab.get(&piece) {
                        found = Some(id);
                        break;
                    }
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(start_len);
                    return unknown(out);
                }
            }
        }
    }

    /// The unit vector of `pieces`, each piece's row weighed by `weight(piece)`; all zeros when
    /// nothing weighs.
    pub fn encode(&self, pieces: &[u32], weight: impl Fn(u32) -> f32) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        for &p in pieces {
            let k = p as usize;
            let w = weight(p) * self.scales[k];
            for (x, &r) in v
                .iter_mut()
                .zip(&self.rows[k * self.dims..(k + 1) * self.dims])
            {
                *x += w * r as f32;
            }
        }
        // Scaled by its largest component first, so a vector of tiny components (a table's
        // tiny scales) does not lose its norm's precision among subnormal squares.
        let largest = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        if largest > 0.0 && largest.is_finite() {
            v.iter_mut().for_each(|x| *x /= largest);
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
        } else {
            v.iter_mut().for_each(|x| *x = 0.0);
        }
        v
    }
}

/// A read position in a table file.
struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    /// The next `n` bytes, refused as truncated when the file ends first.
    fn take(&mut self, n: usize) -> Result<&'b [u8], EmbeddingRefusal> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let s = &self.bytes[self.at..end.ok_or(EmbeddingRefusal::Malformed("truncated"))?];
        self.at += n;
        Ok(s)
    }

    /// How many bytes are left.
    fn rest(&self) -> usize {
        self.bytes.len() - self.at
    }
}

/// Every passage's vector under one table, with the IDF of each word piece over the passages.
pub struct PassageVectors {
    dims: usize,
    vectors: Vec<f32>,
    idf: Vec<f32>,
}

impl std::fmt::Debug for PassageVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassageVectors")
            .field("dims", &self.dims)
            .field("passages", &self.len())
            .finish()
    }
}

impl PassageVectors {
    /// Vectors of `texts` (each a passage's headings and text), weighted by the IDF of each
    /// piece over these texts.
    pub fn build<'t>(
        table: &StaticEmbedding,
        texts: impl Iterator<Item = &'t str> + Clone,
    ) -> PassageVectors {
        let pieces: Vec<Vec<u32>> = texts.map(|t| table.pieces(t)).collect();
        let mut df = vec![0u32; table.scales.len()];
        let mut seen = vec![u32::MAX; table.scales.len()];
        for (i, ps) in pieces.iter().enumerate() {
            for &p in ps {
                if seen[p as usize] != i as u32 {
                    seen[p as usize] = i as u32;
                    df[p as usize] += 1;
                }
            }
        }
        let n = pieces.len() as f32;
        // A piece no passage holds weighs as the rarest do (it is rarer still).
        let idf: Vec<f32> = df
            .iter()
            .map(|&d| ((n + 1.0) / (d.max(1) as f32 + 0.5)).ln().max(0.0))
            .collect();
        let mut vectors = Vec::with_capacity(pieces.len() * table.dims);
        for ps in &pieces {
            vectors.extend(table.encode(ps, |p| idf[p as usize]));
        }
        PassageVectors {
            dims: table.dims,
            vectors,
            idf,
        }
    }

    pub fn len(&self) -> usize {
        self.vectors.len() / self.dims.max(1)
    }

    /// Bytes the vectors and the IDF take.
    pub fn heap_bytes(&self) -> usize {
        (self.vectors.len() + self.idf.len()) * 4
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The question's vector under this set's IDF.
    pub fn query(&self, table: &StaticEmbedding, question: &str) -> Vec<f32> {
        table.encode(&table.pieces(question), |p| self.idf[p as usize])
    }

    /// Cosine of `q` with passage `i`.
    pub fn cosine(&self, q: &[f32], i: usize) -> f32 {
        dot(&self.vectors[i * self.dims..(i + 1) * self.dims], q)
    }

    /// The `k` passages nearest `q`, nearest first, as `(index, cosine)`.
    pub fn nearest(&self, q: &[f32], k: usize) -> Vec<(usize, f32)> {
        let mut all: Vec<(usize, f32)> = (0..self.len()).map(|i| (i, self.cosine(q, i))).collect();
        let k = k.min(all.len());
        if k == 0 {
            return Vec::new();
        }
        all.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
        all.truncate(k);
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all
    }
}

/// The dot product in eight independent sums, which the compiler keeps in vector registers (one
/// running sum would be a chain of dependent additions it may not reorder: four times slower
/// over a corpus's vectors).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            lanes[k] += x[k] * y[k];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table over `words` in `dims` dimensions, row `i` the unit vector along `i % dims`.
    fn table(words: &[&str], dims: usize) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend((dims as u32).to_le_bytes());
        b.extend((words.len() as u32).to_le_bytes());
        for w in words {
            b.push(w.len() as u8);
            b.extend(w.as_bytes());
        }
        for i in 0..words.len() {
            b.extend(1.0f32.to_le_bytes());
            b.extend((0..dims).map(|d| if d == i % dims { 1u8 } else { 0 }));
        }
        b
    }

    #[test]
    fn word_pieces_split_as_bert_does() {
        let t = StaticEmbedding::parse(&table(
            &["[UNK]", "doc", "##test", "##s", "(", ")", "run", "é"],
            4,
        ))
        .unwrap();
        assert_eq!(t.pieces("Doctests RUN"), vec![1, 2, 3, 6]);
        assert_eq!(t.pieces("run()"), vec![6, 4, 5]);
        // No split of "xyz" exists: the whole word is one unknown piece, not a partial one.
        assert_eq!(t.pieces("docxyz run"), vec![0, 6]);
        assert_eq!(t.pieces("É"), vec![7]);
    }

    #[test]
    fn nearest_passages_share_pieces_with_the_question() {
        let t = StaticEmbedding::parse(&table(&["[UNK]", "alpha", "beta", "gamma"], 4)).unwrap();
        let texts = ["alpha alpha beta", "gamma", "beta gamma"];
        let v = PassageVectors::build(&t, texts.iter().copied());
        assert_eq!(v.len(), 3);
        let q = v.query(&t, "gamma");
        let near = v.nearest(&q, 2);
        assert_eq!(near[0].0, 1);
        assert!((near[0].1 - 1.0).abs() < 1e-5);
        assert_eq!(near[1].0, 2);
    }

    #[test]
    fn vectors_of_tiny_scales_are_still_unit_vectors() {
        // Found by the fuzz target: squares of components near 1e-21 are subnormal, and the
        // norm computed from them was off by a thousandth.
        let mut b = table(&["[UNK]", "a", "b"], 4);
        let rows = b.len() - 3 * 8;
        for k in 0..3 {
            let at = rows + k * 8;
            b[at..at + 4].copy_from_slice(&3.4e-23f32.to_le_bytes());
        }
        let t = StaticEmbedding::parse(&b).unwrap();
        let v = t.encode(&t.pieces("a b a"), |_| 1.0);
        let norm: f32 = v.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert!(t.encode(&[], |_| 1.0).iter().all(|x| *x == 0.0));
    }

    #[test]
    fn a_malformed_table_is_refused_whole() {
        let good = table(&["[UNK]", "a"], 2);
        assert!(StaticEmbedding::parse(&good).is_ok());
        for bad in [
            good[..good.len() - 1].to_vec(),
            [good.clone(), vec![0]].concat(),
            [b"NOTATABL".to_vec(), good[8..].to_vec()].concat(),
            // A header claiming the largest table over a few bytes: refused unallocated.
            [
                MAGIC.to_vec(),
                4096u32.to_le_bytes().to_vec(),
                (1u32 << 20).to_le_bytes().to_vec(),
            ]
            .concat(),
            // A row scale no distilled table has.
            {
                let mut b = good.clone();
                let at = b.len() - 2 * 6; // the first of two rows: scale (4) and 2 dims
                b[at..at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
                b
            },
        ] {
            assert!(matches!(
                StaticEmbedding::parse(&bad),
                Err(EmbeddingRefusal::Malformed(_))
            ));
        }
    }
}
