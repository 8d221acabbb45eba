#!/usr/bin/env bash
# Installs and starts what the test suite needs on a fresh Debian 12 machine (as root):
# PostgreSQL (the Phylactery's scale path), nftables/iproute2 (firewall tests in network
# namespaces), and the Quadlet generator. Idempotent; prints the database URL to use.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the URL goes to stdout (the caller captures it); every tool's chatter goes to stderr.
exec 3>&1 1>&2

need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# systemd-analyze verifies Scribe's renewal timer (tests/quadlet_generator.rs).
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# The VM broker's tests build a Debian guest image and boot it (TCG where KVM cannot boot).
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v qemu-img >/dev/null 2>&1 || need+=(qemu-utils)
# The observation protocol test holds a client's redirection window open with strace's
# syscall delay injection (crates/vm/tests/observe_protocol.rs).
command -v strace >/dev/null 2>&1 || need+=(strace)
# The fuzz smoke (scripts/fuzz-smoke.sh) links libFuzzer, which libfuzzer-sys compiles (C++).
command -v c++ >/dev/null 2>&1 || need+=(g++)
# The A2A interop test runs a peer built from the official SDK (PyPI a2a-sdk) in a venv.
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need root to install: ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# A machine may ship a newer qemu-utils (a backport) than the distribution's qemu-system-x86;
# installing the latter then removes the former as incompatible. Put back the matching one.
if ! command -v qemu-img >/dev/null 2>&1; then
  echo "setup: installing qemu-utils (matching qemu-system-x86)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-utils >/dev/null
fi

# PostgreSQL: start the cluster (no systemd here) and make a trust-auth database for root.
ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)
if [ -z "$ver" ]; then
  echo "setup: no PostgreSQL cluster found" >&2
  exit 1
fi
# The server daemonizes and keeps whatever descriptors it inherits: give it none of ours, or
# the caller's $(…) capture (and CI's log pipe) would stay open for as long as it runs.
if ! pg_ctlcluster "$ver" main status >/dev/null 2>&1; then
  log=/var/tmp/reach-pg-start.log
  pg_ctlcluster "$ver" main start </dev/null >"$log" 2>&1 3>&- || { cat "$log"; exit 1; }
fi
for _ in $(seq 1 50); do
  su postgres -c "psql -Atqc 'select 1'" >/dev/null 2>&1 && break
  sleep 0.2
done
su postgres -c "psql -Atqc \"select 1 from pg_roles where rolname='root'\"" | grep -q 1 \
  || su postgres -c "psql -qc 'CREATE ROLE root SUPERUSER LOGIN'"
su postgres -c "psql -Atqc \"select 1 from pg_database where datname='reach_test'\"" | grep -q 1 \
  || createdb reach_test

if [ -x scripts/quadlet-setup.sh ]; then
  scripts/quadlet-setup.sh
fi
# Rootless Podman for the container end-to-end tests (issue #3): its own script, idempotent.
if [ -x scripts/podman-setup.sh ]; then
  scripts/podman-setup.sh
fi

# The official A2A SDK (1.x speaks A2A 1.0) for the interop test (issue #33), in a venv outside
# the clone so a checkout stays clean and a rerun reuses it. Built in place (a venv's scripts
# name their own path, so it cannot be renamed) with the stamp written last: a half-finished
# install has no stamp and is rebuilt; the stamp names the requirement, so a new pin rebuilds.
a2a_venv=/var/tmp/reach-venvs/a2a
a2a_req='a2a-sdk[http-server]>=1,<2'
if [ "$(cat "$a2a_venv/.reach-requirement" 2>/dev/null)" != "$a2a_req" ]; then
  echo "setup: installing $a2a_req in $a2a_venv" >&2
  rm -rf "$a2a_venv"
  mkdir -p "$(dirname "$a2a_venv")"
  python3 -m venv "$a2a_venv"
  "$a2a_venv/bin/pip" install -q --disable-pip-version-check "$a2a_req" uvicorn
  echo "$a2a_req" >"$a2a_venv/.reach-requirement"
fi

# The static embedding table the corpus tests and the answers bench rank with (issue #34).
scripts/embedding-setup.sh

# cargo-fuzz for the fuzz smoke (issue #36), from crates.io into a cache outside the clone so a
# rerun or a fresh checkout reuses it; the version is pinned, and a different one reinstalls.
fuzz_tools=/var/tmp/reach-tools
fuzz_version=0.13.2
if [ "$("$fuzz_tools/bin/cargo-fuzz" --version 2>/dev/null)" != "cargo-fuzz $fuzz_version" ]; then
  echo "setup: installing cargo-fuzz $fuzz_version in $fuzz_tools" >&2
  cargo install -q cargo-fuzz --locked --version "$fuzz_version" --root "$fuzz_tools" \
    --target-dir "$fuzz_tools/build"
fi

echo "postgres://root@%2Fvar%2Frun%2Fpostgresql/reach_test" >&3
