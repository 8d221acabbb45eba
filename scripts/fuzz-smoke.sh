#!/usr/bin/env bash
# The fuzz smoke (issue #36), run by scripts/test.sh: builds every fuzz target under fuzz/ and
# runs each for a short fixed budget on its committed corpus, so every target keeps building
# and running and a regression of a promised property fails the test command. A crash leaves
# its input under fuzz/artifacts/<target>/ and fails the run.
#
#   scripts/fuzz-smoke.sh [seconds-per-target]   (default 20; REACH_FUZZ_SECONDS also sets it)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz-lib.sh
seconds=${1:-${REACH_FUZZ_SECONDS:-20}}
start=$(date +%s)
fuzz_build
built=$(date +%s)
echo "fuzz-smoke: built in $((built - start)) s; ${seconds} s per target"
failed=()
logs=$(mktemp -d)
for t in $(fuzz_targets); do
  if ! fuzz_run "$t" "$seconds" "$logs/$t.log"; then
    failed+=("$t")
    echo "fuzz-smoke: $t FAILED; its log:" >&2
    grep -vE '^#[0-9]+' "$logs/$t.log" | tail -n 40 >&2
  fi
done
rm -rf "$logs"
echo "fuzz-smoke: $(( $(date +%s) - start )) s in all"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: failed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
