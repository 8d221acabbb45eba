#!/bin/sh
# Installs Reach on a host that has the platform floor (deploy/guest/image.toml): the operator's
# steps of deploy/README.md, in order, run as root from the directory this script is in, which
# holds `bin/reach` and either the role images Scribe built elsewhere (`images/*.tar`, OCI
# archives saved uncompressed, with `digests.toml` pinning them) or the role binaries to build
# them from here (`bins/`). The body's account is the lingering user `reach`; everything but
# copying files and the system unit of its orderly stop runs as that user.
#
#   sh install.sh            (tests/tests/deployed_host.rs runs it in the deployment guest)
#   sh install.sh rebuild    a clean rebuild after a root, operator or host compromise
#
# `rebuild` is the seed's "destroy and reprovision from a trusted pinned image": it stops the
# body, destroys its containers, volumes, networks, Podman secrets, units and state directory
# (the trust root and every leaf with it), then provisions again from the images pinned at
# install (`digests.toml`; nothing is rebuilt or pulled): a new root and disjoint leaves, empty
# vaults and a corpus built again. The operator reconciles the new vault before it serves.
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
digests=/home/reach/digests.toml
mode=${1:-install}
case "$mode" in
install | rebuild) ;;
*)
    echo "usage: install.sh [rebuild]" >&2
    exit 2
    ;;
esac

# Run as the body's user, with its manager's runtime directory and bus (systemctl --user and
# Podman's systemd cgroup manager need both).
as_body() {
    runuser -u "$user" -- env -i HOME=/home/reach XDG_RUNTIME_DIR="/run/user/$uid" \
        DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" \
        PATH=/usr/local/bin:/usr/bin:/bin "$@"
}

if [ "$mode" = install ]; then
    echo "install: binaries"
    install -m 0755 "$here/bin/reach" /usr/local/bin/reach
    if [ -d "$here/bins" ]; then
        install -d -m 0755 /usr/local/lib/reach
        rm -rf /usr/local/lib/reach/bins
        cp -r "$here/bins" /usr/local/lib/reach/bins
        chmod -R a+rX /usr/local/lib/reach
    fi
fi

echo "install: the user's manager"
i=0
until [ -S "/run/user/$uid/bus" ]; do
    i=$((i + 1))
    [ "$i" -lt 120 ] || { echo "install: no manager for $user (is it lingering?)" >&2; exit 1; }
    sleep 1
done

if [ "$mode" = install ] && [ -d "$here/images" ]; then
    echo "install: role images, carried in and pinned by their digests"
    for archive in "$here"/images/*.tar; do
        as_body podman load --quiet -i "$archive"
    done
    install -m 0644 -o "$user" -g "$user" "$here/digests.toml" "$digests"
elif [ "$mode" = install ]; then
    echo "install: role images, built here"
    work=$(as_body mktemp -d)
    as_body env TMPDIR="$work" reach scribe images --bins /usr/local/lib/reach/bins \
        --digests-out "$digests"
    as_body rm -rf "$work"
else
    [ -s "$digests" ] || { echo "rebuild: no $digests: run install first" >&2; exit 1; }
    echo "rebuild: stop the body"
    as_body systemctl --user disable --now reach-renew.timer || true
    as_body systemctl --user stop 'reach-*.service'
    echo "rebuild: destroy its containers, volumes, networks, secrets, units and state"
    as_body podman rm --all --force >/dev/null
    as_body sh -c 'podman volume ls -q --filter name=reach- | xargs -r podman volume rm' >/dev/null
    as_body sh -c 'podman network ls -q --filter name=reach- | xargs -r podman network rm' >/dev/null
    as_body sh -c 'podman secret ls --noheading --format "{{.Name}}" | grep "^reach\." | xargs -r podman secret rm' >/dev/null
    as_body systemctl --user disable reach-renew.service >/dev/null 2>&1 || true
    systemctl disable --now "reach-shutdown@$uid.service" >/dev/null 2>&1 || true
    find "$units" -mindepth 1 -delete
    as_body podman unshare find "$state" -mindepth 1 -delete
    as_body systemctl --user daemon-reload
    as_body systemctl --user reset-failed
    echo "rebuild: from the images pinned in $digests"
fi

echo "install: identities and credentials"
as_body reach scribe identities --state "$state"
for role in egress-discord ingress-edge; do
    printf 'placeholder-discord-bot-token' | as_body reach secret set "$role" discord-bot-token --state "$state"
done

echo "install: units"
as_body reach scribe quadlet --state "$state" --digests "$digests" --out "$units"
as_body sh "$units/secrets.sh"
as_body systemctl --user daemon-reload
as_body systemctl --user link "$units/systemd/reach-renew.service" "$units/systemd/reach-renew.timer"
as_body systemctl --user enable --now reach-renew.timer
# As root: the system unit that stops the body in order before the user's manager exits at a
# host's shutdown (manifest/scribe/src/shutdown.rs says why).
install -m 0644 "$units/systemd/system/reach-shutdown@.service" /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now "reach-shutdown@$uid.service"

echo "install: start"
# shellcheck disable=SC2046
as_body systemctl --user start $(cd "$units" && ls reach-*.container | sed 's/\.container$/.service/')
echo "install: done"
