#!/usr/bin/env bash
# The test command (README): prepares a fresh machine, then builds and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/reach-target}"
export CARGO_TERM_COLOR=never
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

# Role binaries first: the cross-service tests start them as separate processes.
cargo build --workspace --bins
smoke_rc=0
wait "$smoke" || smoke_rc=$?
cat "$smoke_log"
[ "$smoke_rc" = 0 ] || exit "$smoke_rc"
model_rc=0
wait "$model" || model_rc=$?
cat "$model_log"
[ "$model_rc" = 0 ] || exit "$model_rc"

cargo test --workspace --no-fail-fast "$@"
