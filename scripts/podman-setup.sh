#!/bin/sh
# Rootless Podman for Scribe's container end-to-end test (issue #3), on a fresh Debian 12
# machine, as root. Idempotent: run it again at will.
#
#   * installs podman (4.3.1 from bookworm), runc, uidmap, slirp4netns, fuse-overlayfs;
#   * creates the unprivileged test user `reach-ci` (override with REACH_PODMAN_USER) with
#     /etc/subuid and /etc/subgid ranges (useradd's 65536 ids are enough: Scribe's units ask
#     `--userns=auto:size=2048`, so thirty containers fit);
#   * writes that user's containers.conf (runc: crun fails here with "cgroups in hybrid mode
#     not supported"; cgroupfs: there is no systemd user session; `default_ulimits = []`:
#     the sandbox lacks CAP_SYS_RESOURCE, so raising RLIMIT_NOFILE fails every start) and
#     storage.conf (vfs: works everywhere, no fuse needed);
#   * creates the user's runtime directory (/run/user/UID, 0700): XDG_RUNTIME_DIR for podman.
#
# All output goes to stderr (setup-test-host.sh prints only the database URL on stdout).
set -eu
exec 1>&2

USER_NAME="${REACH_PODMAN_USER:-reach-ci}"
# Sub-id range written only if useradd did not allocate one (Debian's useradd does).
SUB_START=200000
SUB_COUNT=65536

need=""
for tool in podman:podman runc:runc newuidmap:uidmap slirp4netns:slirp4netns fuse-overlayfs:fuse-overlayfs; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need="$need ${tool#*:}"
done
if [ -n "$need" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "podman-setup: need root to install:$need"
        exit 1
    fi
    echo "podman-setup: installing$need"
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

if ! id "$USER_NAME" >/dev/null 2>&1; then
    echo "podman-setup: creating user $USER_NAME"
    useradd --create-home --shell /usr/sbin/nologin --user-group "$USER_NAME"
fi
uid="$(id -u "$USER_NAME")"
gid="$(id -g "$USER_NAME")"
home="$(getent passwd "$USER_NAME" | cut -d: -f6)"

for f in /etc/subuid /etc/subgid; do
    touch "$f"
    if ! grep -q "^$USER_NAME:" "$f"; then
        echo "podman-setup: $f: $USER_NAME:$SUB_START:$SUB_COUNT"
        echo "$USER_NAME:$SUB_START:$SUB_COUNT" >> "$f"
    fi
done

conf="$home/.config/containers"
install -d -o "$uid" -g "$gid" -m 0755 "$home/.config" "$conf"
write_conf() {
    # Replace only when the bytes differ, owned by the user.
    tmp="$(mktemp)"
    cat > "$tmp"
    if ! cmp -s "$tmp" "$1"; then
        echo "podman-setup: writing $1"
        install -o "$uid" -g "$gid" -m 0644 "$tmp" "$1"
    fi
    rm -f "$tmp"
}
write_conf "$conf/containers.conf" <<CONF
# Written by scripts/podman-setup.sh (see MACHINE-NOTES.md, Podman).
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
write_conf "$conf/storage.conf" <<CONF
# Written by scripts/podman-setup.sh.
[storage]
driver = "vfs"
CONF

run="/run/user/$uid"
# Rootless networks (the egress roles' `.network` units) go through slirp4netns, which opens
# /dev/net/tun. Debian's udev makes it 0666; this sandbox's device node is 0600 root.
if [ ! -e /dev/net/tun ]; then
    echo "podman-setup: creating /dev/net/tun"
    mkdir -p /dev/net
    mknod /dev/net/tun c 10 200
fi
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
    echo "podman-setup: /dev/net/tun to 0666 (Debian's default)"
    chmod 0666 /dev/net/tun
fi
install -d -o "$uid" -g "$gid" -m 0700 "$run"

# A smoke check as the user: podman answers and sees runc and vfs.
if ! out="$(cd / && runuser -u "$USER_NAME" -- env XDG_RUNTIME_DIR="$run" HOME="$home" \
        podman info --format '{{.Host.OCIRuntime.Name}} {{.Store.GraphDriverName}}' 2>/dev/null)"; then
    # Loud, but not fatal for the rest of the suite: the container test then fails on its own.
    echo "podman-setup: WARNING: podman info failed as $USER_NAME: $out"
    exit 0
fi
echo "podman-setup: $USER_NAME (uid $uid): podman $(podman --version | cut -d' ' -f3), $out"
