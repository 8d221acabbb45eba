#!/usr/bin/env bash
# The test command (README): prepares a fresh machine, then builds and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/reach-target}"
export CARGO_TERM_COLOR=never
# One build per run: incremental state only grows a target dir kept between runs.
export CARGO_INCREMENTAL=0
rm -rf "$CARGO_TARGET_DIR/debug/incremental"
# What the disk holds matters: guests, containers and the build all write to it.
disk() { echo "test: disk $1: $(df -h --output=avail /var/tmp | tail -n1 | tr -d ' ') free in /var/tmp, $(df -h --output=avail /tmp | tail -n1 | tr -d ' ') in /tmp"; }
disk "at start"
bash scripts/check-docs.sh # the documents name only real paths; SPECIFICATION rows stay short

REACH_TEST_DATABASE_URL=$(scripts/setup-test-host.sh)
case "$REACH_TEST_DATABASE_URL" in
  postgres://*) ;;
  *) echo "test: setup printed no database URL: '$REACH_TEST_DATABASE_URL'" >&2; exit 1 ;;
esac
export REACH_TEST_DATABASE_URL
# The container end-to-end test must run here (setup installed rootless Podman), not skip.
export REACH_REQUIRE_PODMAN=1

# Every background job's pid, and one scratch directory for their logs, the fuzz queue and
# the build's unit list: one trap ends and removes them all.
bg=
scratch=$(mktemp -d)
trap 'kill $bg 2>/dev/null || true; rm -rf "$scratch"' EXIT

# Every fuzz target builds (in its own target dir), then runs for a short budget on its
# corpus (issue #36). The runs are single-threaded: one lane goes beside the role binaries'
# build, and a second joins it once the builds are done. Their logs are printed when all
# are done, before the tests, so cargo test's summary closes the log.
bash scripts/fuzz-smoke.sh --build
bash scripts/fuzz-smoke.sh --queue "$scratch/fuzz-queue"
bash scripts/fuzz-smoke.sh --lane "$scratch/fuzz-queue" >"$scratch/smoke-1.log" 2>&1 &
smoke=$!
bg="$bg $smoke"

# The real-model runtime (issue #31) builds from source once per machine, beside the role
# binaries' build; a cached venv returns at once.
bash scripts/local-model-setup.sh >"$scratch/model.log" 2>&1 &
model=$!
bg="$bg $model"

# Role binaries first: the cross-service tests start them as separate processes. Every
# unit the run uses is listed (fresh or not), so what a kept target dir holds beyond them is
# pruned before the tests need the disk.
units=$scratch/units.json
cargo build --workspace --bins --message-format=json-render-diagnostics >"$units"
# The test build goes on beside them too: on a kept target dir both builds take less than
# the fuzz runs (2026-12-06: role binaries 85 s, fuzz runs 340 s), so a second lane takes
# what the first has not reached.
cargo test --workspace --no-run --message-format=json-render-diagnostics >>"$units"
bash scripts/fuzz-smoke.sh --lane "$scratch/fuzz-queue" >"$scratch/smoke-2.log" 2>&1 &
smoke2=$!
bg="$bg $smoke2"
smoke_rc=0
wait "$smoke" || smoke_rc=$?
wait "$smoke2" || smoke_rc=$?
cat "$scratch/smoke-1.log" "$scratch/smoke-2.log"
[ "$smoke_rc" = 0 ] || exit "$smoke_rc"
model_rc=0
wait "$model" || model_rc=$?
cat "$scratch/model.log"
[ "$model_rc" = 0 ] || exit "$model_rc"

python3 scripts/prune-target.py "$CARGO_TARGET_DIR/debug" "$units"
disk "before the tests"
if [ $# -gt 0 ]; then
  cargo test --workspace --no-fail-fast "$@"
  exit 0
fi

# The tests, in two phases. The deployed host's test boots a two-CPU guest for about ten
# minutes under TCG; it runs in the background beside every test that boots no guest (those
# mostly wait on their processes and sockets). The other guest tests come after it, when the
# CPUs are theirs. Each phase goes on past a failure; the run fails if any phase did. A name
# selects every package's test target of that name (`crash` is phylactery's too).
guests=(task_crash task_run task_real_model task_runtime_refusals hil_fence vm_port packs
  workbench workbench_run demo_task_pack image_prune taskpack build readiness
  crash image lifecycle observe observe_protocol prepared refusals guest)
light=$(python3 scripts/test-phases.py "$units" deployed_host "${guests[@]}")
mapfile -t light <<<"$light"
cargo test --workspace --test deployed_host >"$scratch/host.log" 2>&1 &
host=$!
bg="$bg $host"
rc_light=0 rc_doc=0 rc_host=0 rc_guests=0
cargo test --workspace --no-fail-fast --lib --bins "${light[@]}" || rc_light=$?
cargo test --workspace --doc || rc_doc=$?
wait "$host" || rc_host=$?
cat "$scratch/host.log"
test_args=()
for t in "${guests[@]}"; do test_args+=(--test "$t"); done
cargo test --workspace --no-fail-fast "${test_args[@]}" || rc_guests=$?
echo "test: exit codes: tests without guests $rc_light, doc tests $rc_doc, deployed host $rc_host, guest tests $rc_guests"
[ $rc_light = 0 ] && [ $rc_doc = 0 ] && [ $rc_host = 0 ] && [ $rc_guests = 0 ]
