#!/usr/bin/env bash
# The fuzz smoke (issue #36), run by scripts/test.sh: builds every fuzz target under fuzz/
# (unoptimized: the `dev` profile of scripts/fuzz-lib.sh) and runs each for a short fixed
# budget on its committed corpus, so every target keeps building and running and a
# regression of a promised property fails the test command. A crash leaves its input under
# fuzz/artifacts/<target>/ and fails the run.
#
#   scripts/fuzz-smoke.sh [--build | --run] [seconds-per-target]
#       (default: both; 15 s per target, REACH_FUZZ_SECONDS also sets it)
#   scripts/fuzz-smoke.sh --queue DIR      lists every target in DIR, one file each
#   scripts/fuzz-smoke.sh --lane DIR [s]   runs targets taken from DIR until none is left
# Each run is single-threaded. scripts/test.sh queues the targets once `--build` is done,
# starts one lane beside the role binaries' build and a second once the builds are done:
# a lane takes a target by renaming its file, which only one lane can do.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz-lib.sh
fuzz_set_profile dev
build=1 run=1 queue= lane=
case ${1:-} in
  --build) run=0; shift ;;
  --run) build=0; shift ;;
  --queue) queue=${2:?--queue DIR}; build=0; run=0; shift 2 ;;
  --lane) lane=${2:?--lane DIR}; build=0; shift 2 ;;
esac
seconds=${1:-${REACH_FUZZ_SECONDS:-15}}
start=$(date +%s)
if [ $build = 1 ]; then
  fuzz_build
  echo "fuzz-smoke: built in $(( $(date +%s) - start )) s"
fi
# Lists every target in directory $1, a file each, for lanes to take.
queue_targets() {
  mkdir -p "$1"
  for t in $(fuzz_targets); do : >"$1/$t"; done
}
if [ -n "$queue" ]; then
  queue_targets "$queue"
  exit 0
fi
[ $run = 1 ] || exit 0
if [ -z "$lane" ]; then
  # One lane of its own: every target, in order.
  lane=$(mktemp -d)
  trap 'rm -rf "$lane"' EXIT
  queue_targets "$lane"
fi
start=$(date +%s)
failed=() ran=0
logs=$(mktemp -d)
while :; do
  t=
  for f in "$lane"/*; do
    [ -e "$f" ] || break
    name=$(basename "$f")
    if mv "$f" "$lane/.taken-$name" 2>/dev/null; then t=$name; break; fi
  done
  [ -n "$t" ] || break
  ran=$((ran + 1))
  if ! fuzz_run "$t" "$seconds" "$logs/$t.log"; then
    failed+=("$t")
    echo "fuzz-smoke: $t FAILED; its log:" >&2
    grep -vE '^#[0-9]+' "$logs/$t.log" | tail -n 40 >&2
  fi
done
rm -rf "$logs"
echo "fuzz-smoke: $ran targets × ${seconds} s ran in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: failed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
