#!/bin/sh
# Installs Reach on a host that has the platform floor (deploy/guest/image.toml): the operator's
# steps of deploy/README.md, in order, run as root from the directory this script is in, which
# holds `bin/reach` and the role binaries in `bins/`. The body's account is the lingering user
# `reach`; everything but copying the binaries runs as that user.
#
#   sh install.sh            (tests/tests/deployed_host.rs runs it in the deployment guest)
#
# Placeholder credentials stand for the Discord bot token, which a real operator sets with
# `reach secret set` from a file they keep; nothing here reaches Discord (the guest has no
# network device).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
user=reach
uid=$(id -u "$user")
state=/var/lib/reach
units=/home/reach/.config/containers/systemd

# Run as the body's user, with its manager's runtime directory and bus (systemctl --user and
# Podman's systemd cgroup manager need both).
as_body() {
    runuser -u "$user" -- env -i HOME=/home/reach XDG_RUNTIME_DIR="/run/user/$uid" \
        DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" \
        PATH=/usr/local/bin:/usr/bin:/bin "$@"
}

echo "install: binaries"
install -m 0755 "$here/bin/reach" /usr/local/bin/reach
install -d -m 0755 /usr/local/lib/reach
rm -rf /usr/local/lib/reach/bins
cp -r "$here/bins" /usr/local/lib/reach/bins
chmod -R a+rX /usr/local/lib/reach

echo "install: the user's manager"
i=0
until [ -S "/run/user/$uid/bus" ]; do
    i=$((i + 1))
    [ "$i" -lt 120 ] || { echo "install: no manager for $user (is it lingering?)" >&2; exit 1; }
    sleep 1
done

echo "install: role images"
work=$(as_body mktemp -d)
as_body env TMPDIR="$work" reach scribe images --bins /usr/local/lib/reach/bins \
    --digests-out /home/reach/digests.toml
as_body rm -rf "$work"

echo "install: identities and credentials"
as_body reach scribe identities --state "$state"
for role in egress-discord ingress-edge; do
    printf 'placeholder-discord-bot-token' | as_body reach secret set "$role" discord-bot-token --state "$state"
done

echo "install: units"
as_body reach scribe quadlet --state "$state" --digests /home/reach/digests.toml --out "$units"
as_body sh "$units/secrets.sh" "$state"
as_body systemctl --user daemon-reload
as_body systemctl --user link "$units/systemd/reach-renew.service" "$units/systemd/reach-renew.timer"
as_body systemctl --user enable --now reach-renew.timer

echo "install: start"
# shellcheck disable=SC2046
as_body systemctl --user start $(cd "$units" && ls reach-*.container | sed 's/\.container$/.service/')
echo "install: done"
