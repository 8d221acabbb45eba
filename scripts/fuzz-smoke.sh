#!/usr/bin/env bash
# The fuzz smoke (issue #36), run by scripts/test.sh: builds every fuzz target under fuzz/
# (unoptimized: the `dev` profile of scripts/fuzz-lib.sh) and runs each for a short fixed
# budget on its committed corpus, so every target keeps building and running and a
# regression of a promised property fails the test command. A crash leaves its input under
# fuzz/artifacts/<target>/ and fails the run.
#
#   scripts/fuzz-smoke.sh [--build | --run] [seconds-per-target]
#       (default: both; 15 s per target, REACH_FUZZ_SECONDS also sets it)
# The runs are single-threaded, so scripts/test.sh starts `--run` beside the role binaries'
# build once `--build` is done.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz-lib.sh
fuzz_set_profile dev
build=1 run=1
case ${1:-} in
  --build) run=0; shift ;;
  --run) build=0; shift ;;
esac
seconds=${1:-${REACH_FUZZ_SECONDS:-15}}
start=$(date +%s)
if [ $build = 1 ]; then
  fuzz_build
  echo "fuzz-smoke: built in $(( $(date +%s) - start )) s"
fi
[ $run = 1 ] || exit 0
start=$(date +%s)
failed=()
logs=$(mktemp -d)
targets=$(fuzz_targets)
for t in $targets; do
  if ! fuzz_run "$t" "$seconds" "$logs/$t.log"; then
    failed+=("$t")
    echo "fuzz-smoke: $t FAILED; its log:" >&2
    grep -vE '^#[0-9]+' "$logs/$t.log" | tail -n 40 >&2
  fi
done
rm -rf "$logs"
echo "fuzz-smoke: $(wc -w <<<"$targets") targets × ${seconds} s ran in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: failed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
