//! A static embedding table (crates/corpus `StaticEmbedding::parse`), read from the file an
//! operator places in the corpus root, and the word pieces and vectors core then makes of
//! every passage and question with it.
//!
//! Promised: never a panic, and nothing allocated for what the file does not hold; a parsed
//! table's pieces are ids of its vocabulary; every vector is a unit vector or all zeros, so
//! every cosine is finite and within [-1, 1] (up to rounding); the nearest passages are
//! distinct and in order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_corpus::embed::{PassageVectors, StaticEmbedding};

// Bytes: the text's length (2, big-endian), the text (lossy UTF-8: its lines are the
// passages, the first also the question), then the table file.
fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = (u16::from_be_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
    let text = String::from_utf8_lossy(&data[2..2 + n]);
    let Ok(table) = StaticEmbedding::parse(&data[2 + n..]) else {
        return;
    };
    let vocab = table.vocab_len() as u32;
    for line in text.lines() {
        assert!(table.pieces(line).iter().all(|&p| p < vocab), "piece out of the vocabulary");
    }
    let passages: Vec<&str> = text.lines().collect();
    let v = PassageVectors::build(&table, passages.iter().copied());
    assert_eq!(v.len(), passages.len());
    let q = v.query(&table, passages.first().copied().unwrap_or(""));
    let norm: f32 = q.iter().map(|x| x * x).sum();
    assert!(norm == 0.0 || (norm - 1.0).abs() < 1e-3, "query norm² {norm}");
    let near = v.nearest(&q, 3);
    for w in near.windows(2) {
        assert!(w[0].1 >= w[1].1, "nearest out of order");
        assert_ne!(w[0].0, w[1].0, "a passage twice");
    }
    for (_, c) in near {
        assert!(c.is_finite() && c.abs() <= 1.001, "cosine {c}");
    }
});
