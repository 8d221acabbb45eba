#!/usr/bin/env bash
# A fuzz campaign (issue #36): builds every target under fuzz/ and runs each in turn for a
# given time (default 600 s), printing per target its executions, executions per second and
# coverage (libFuzzer's `cov:`, edges reached, and `ft:`, features) at the end of its run.
#
#   scripts/fuzz-campaign.sh [seconds-per-target] [target...]
#   scripts/fuzz-campaign.sh --merge [seconds] [target...]   also merges what each run found
#                                                             into fuzz/corpus/<target>/,
#                                                             minimized (libFuzzer -merge=1)
# A crash stops nothing: its input is kept under fuzz/artifacts/<target>/ and the script exits
# non-zero at the end. Logs go to /var/tmp/reach-fuzz-campaign/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz-lib.sh
merge=0
if [ "${1:-}" = --merge ]; then
  merge=1
  shift
fi
seconds=${1:-600}
shift || true
fuzz_build
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(fuzz_targets)
logs=/var/tmp/reach-fuzz-campaign
mkdir -p "$logs"
echo "fuzz-campaign: $(date -u +%Y-%m-%dT%H:%MZ), ${seconds} s per target, $(nproc) cores"
failed=()
for t in "${targets[@]}"; do
  if [ $merge = 1 ]; then
    found=$(mktemp -d)
    fuzz_run_into "$t" "$seconds" "$logs/$t.log" "$found" || failed+=("$t")
    "$fuzz_bin_dir/$t" -merge=1 -max_len=65536 "fuzz/corpus/$t" "$found" >"$logs/$t.merge.log" 2>&1 \
      || failed+=("$t (merge)")
    rm -rf "$found"
  else
    fuzz_run "$t" "$seconds" "$logs/$t.log" || failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-campaign: failed: ${failed[*]} (inputs under fuzz/artifacts/, logs in $logs)" >&2
  exit 1
fi
