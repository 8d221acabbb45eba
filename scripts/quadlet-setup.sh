#!/bin/sh
# Installs what Scribe's tests need on a Debian 12 (bookworm) machine, idempotently:
#
#   * the `quadlet` generator, taken from Debian trixie's podman 5.x package. Bookworm's podman
#     4.3 has no Quadlet; the trixie binary needs only libc. Only that one binary is installed,
#     at /usr/local/libexec/reach/quadlet (override with REACH_QUADLET_DIR); nothing else from
#     trixie touches the system. The trixie index lives in a temporary directory that is
#     removed afterwards, so the system's own apt sources and lists are never changed.
#   * nftables and iproute2 (the firewall test builds network namespaces with `ip` and loads
#     rulesets with `nft`).
#
# Usage: scripts/quadlet-setup.sh   (as root; run again at will: it does nothing if all is there)
set -eu

DEST_DIR="${REACH_QUADLET_DIR:-/usr/local/libexec/reach}"
DEST="$DEST_DIR/quadlet"
MIRROR="${REACH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

need_pkgs=""
command -v nft >/dev/null 2>&1 || need_pkgs="$need_pkgs nftables"
command -v ip >/dev/null 2>&1 || need_pkgs="$need_pkgs iproute2"
if [ -n "$need_pkgs" ]; then
    echo "quadlet-setup: installing$need_pkgs"
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need_pkgs
fi

if [ -x "$DEST" ] && "$DEST" -version >/dev/null 2>&1; then
    echo "quadlet-setup: $DEST present ($("$DEST" -version 2>&1 | head -n1))"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/deb"
printf 'deb %s trixie main\n' "$MIRROR" > "$work/trixie.list"
# A private apt configuration: only the trixie index, in the temporary directory.
set -- -o "Dir::Etc::SourceList=$work/trixie.list" \
       -o "Dir::Etc::SourceParts=/dev/null" \
       -o "Dir::State::Lists=$work/lists" \
       -o "Dir::Cache=$work/cache" \
       -o "APT::Get::List-Cleanup=0" \
       -o "Debug::NoLocking=1" \
       -o "APT::Sandbox::User=root"
echo "quadlet-setup: fetching the trixie index"
apt-get "$@" update -qq
(cd "$work/deb" && apt-get "$@" download podman)
deb="$(ls "$work"/deb/podman_*.deb)"
echo "quadlet-setup: extracting quadlet from $(basename "$deb")"
dpkg -x "$deb" "$work/x"
install -d "$DEST_DIR"
install -m 0755 "$work/x/usr/libexec/podman/quadlet" "$DEST"
echo "quadlet-setup: installed $DEST ($("$DEST" -version 2>&1 | head -n1))"
