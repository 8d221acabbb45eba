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

# Every fuzz target builds (in its own target dir), then runs for a short budget on its
# corpus (issue #36). The runs are single-threaded, so they go beside the role binaries'
# build; their log is printed when both are done, before the tests, so cargo test's summary
# closes the log.
bash scripts/fuzz-smoke.sh --build
smoke_log=$(mktemp)
bash scripts/fuzz-smoke.sh --run >"$smoke_log" 2>&1 &
smoke=$!
trap 'kill "$smoke" 2>/dev/null || true; rm -f "$smoke_log"' EXIT

# The real-model runtime (issue #31) builds from source once per machine, beside the role
# binaries' build; a cached venv returns at once.
model_log=$(mktemp)
bash scripts/local-model-setup.sh >"$model_log" 2>&1 &
model=$!
trap 'kill "$smoke" "$model" 2>/dev/null || true; rm -f "$smoke_log" "$model_log"' EXIT

# Role binaries first: the cross-service tests start them as separate processes. Every
# unit the run uses is listed (fresh or not), so what a kept target dir holds beyond them is
# pruned before the tests need the disk.
units=$(mktemp)
trap 'kill "$smoke" "$model" 2>/dev/null || true; rm -f "$smoke_log" "$model_log" "$units"' EXIT
cargo build --workspace --bins --message-format=json-render-diagnostics >"$units"
# The test build goes on beside them too: on a kept target dir both builds take less than
# the fuzz runs (2026-12-06: role binaries 85 s, fuzz runs 340 s).
cargo test --workspace --no-run --message-format=json-render-diagnostics >>"$units"
smoke_rc=0
wait "$smoke" || smoke_rc=$?
cat "$smoke_log"
[ "$smoke_rc" = 0 ] || exit "$smoke_rc"
model_rc=0
wait "$model" || model_rc=$?
cat "$model_log"
[ "$model_rc" = 0 ] || exit "$model_rc"

python3 scripts/prune-target.py "$CARGO_TARGET_DIR/debug" "$units"
disk "before the tests"
cargo test --workspace --no-fail-fast "$@"
