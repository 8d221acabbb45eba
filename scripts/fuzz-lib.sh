# Shared by scripts/fuzz-smoke.sh and scripts/fuzz-campaign.sh (sourced, not run): the
# toolchain settings, the build, and one libFuzzer run of one target with its figures.
#
# Stable Rust only: cargo-fuzz needs `-Z` flags, which RUSTC_BOOTSTRAP=1 admits on stable.
# No sanitizer: every crate fuzzed here forbids unsafe code, so AddressSanitizer would find
# nothing that a panic does not, at several times the cost per execution.

export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${REACH_FUZZ_TARGET_DIR:-/var/tmp/reach-fuzz-target}"
export CARGO_TERM_COLOR=never
# cargo-fuzz, installed by scripts/setup-test-host.sh into a cache outside the clone.
export PATH="${REACH_TOOLS:-/var/tmp/reach-tools}/bin:$PATH"

# The build profile: `release` for a campaign (optimized, as libFuzzer is meant to run) or
# `dev` for the smoke run (unoptimized, fuzz/Cargo.toml's [profile.dev]: a cold build takes
# about a third of the release one's time, and each execution is 10-30 times slower).
fuzz_profile=${REACH_FUZZ_PROFILE:-release}
fuzz_set_profile() {
  fuzz_profile=$1
  case $fuzz_profile in
    release) fuzz_bin_dir="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release" ;;
    dev) fuzz_bin_dir="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/debug" ;;
    *) echo "fuzz: profile is release or dev, not '$fuzz_profile'" >&2; return 1 ;;
  esac
}
fuzz_set_profile "$fuzz_profile"

fuzz_build() {
  if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: cargo-fuzz is not installed (scripts/setup-test-host.sh installs it)" >&2
    return 1
  fi
  if [ "$fuzz_profile" = dev ]; then
    cargo fuzz build --sanitizer none --dev
  else
    cargo fuzz build --sanitizer none
  fi
}

fuzz_targets() {
  cargo fuzz list
}

# fuzz_run TARGET SECONDS LOG: runs TARGET for SECONDS on a scratch copy of its committed
# corpus (the committed one is never written), crash inputs under fuzz/artifacts/TARGET/.
# Prints one line: target, runs, executions per second, edges covered, features, corpus size.
fuzz_run() {
  local work
  work=$(mktemp -d)
  local rc=0
  fuzz_run_into "$1" "$2" "$3" "$work" || rc=$?
  rm -rf "$work"
  return $rc
}

# fuzz_run_into TARGET SECONDS LOG DIR: as fuzz_run, new inputs written to DIR (kept).
fuzz_run_into() {
  local target=$1 seconds=$2 log=$3 work=$4
  mkdir -p "fuzz/artifacts/$target"
  local rc=0
  "$fuzz_bin_dir/$target" "$work" "fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" >"$log" 2>&1 || rc=$?
  local last runs execs cov ft corp
  last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -n1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last")
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n1)
  execs=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n1)
  printf '%-18s runs %10s  exec/s %7s  cov %6s  ft %7s  corpus %5s\n' \
    "$target" "${runs:-?}" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
  return $rc
}
