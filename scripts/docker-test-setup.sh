#!/usr/bin/env bash
# Make a local Docker engine and a tiny offline test image available for the `docker` tests.
#
# Idempotent: installs docker.io + busybox-static only if missing, starts dockerd only if the socket
# does not answer, imports the image only if it is missing. Needs root (it installs packages and
# starts a daemon). Image registries are not reachable here, so the image is built from a rootfs
# holding Debian's static busybox.
#
# Environment knobs:
#   HORUS_DOCKER_LOG       where dockerd logs (default /tmp/horus-dockerd.log)
#   HORUS_DOCKER_DATA      dockerd --data-root (default /var/lib/docker)
#   HORUS_DOCKER_STORAGE   force a storage driver (e.g. vfs); default: try overlay2, fall back to vfs
#   HORUS_TEST_IMAGE       image name (default horus-test-busybox:latest)
set -euo pipefail

SOCK=/var/run/docker.sock
LOG=${HORUS_DOCKER_LOG:-/tmp/horus-dockerd.log}
DATA=${HORUS_DOCKER_DATA:-/var/lib/docker}
IMAGE=${HORUS_TEST_IMAGE:-horus-test-busybox:latest}

say() { echo "docker-test-setup: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (installs packages, starts dockerd)"
    exit 1
fi

engine_up() { docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    [ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx sh || missing+=(busybox-static)
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

wait_engine() {
    local pid=$1 i
    for i in $(seq 1 60); do
        engine_up && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.5
    done
    return 1
}

start_dockerd() {
    local driver=$1 pid
    say "starting dockerd (storage driver: ${driver:-default}, log: $LOG)"
    local args=(--iptables=false --ip6tables=false --bridge=none --host "unix://$SOCK" --data-root "$DATA")
    [ -n "$driver" ] && args+=(--storage-driver "$driver")
    # setsid: the daemon outlives this script and the CI step that ran it.
    setsid dockerd "${args[@]}" >>"$LOG" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >/tmp/horus-dockerd.pid
    if wait_engine "$pid"; then
        return 0
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
}

smoke_run() {
    # A container must actually run (storage driver and cgroups both work), not only the API answer.
    docker run --rm --network none "$IMAGE" /bin/echo ok 2>>"$LOG" | grep -qx ok
}

import_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        return 0
    fi
    say "importing $IMAGE from /bin/busybox"
    local root
    root=$(mktemp -d)
    mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/proc" "$root/sys" "$root/dev" "$root/work"
    cp /bin/busybox "$root/bin/busybox"
    local applet
    for applet in sh echo sleep cat env ls true false printf id kill ps mkdir rm touch pwd grep wc head tail yes seq; do
        ln -sf busybox "$root/bin/$applet"
    done
    echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
    echo 'root:x:0:' >"$root/etc/group"
    tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
    rm -rf "$root"
}

stop_ours() {
    local pid
    pid=$(cat /tmp/horus-dockerd.pid 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
}

install_packages

started=""
if ! engine_up; then
    if [ -n "${HORUS_DOCKER_STORAGE:-}" ]; then
        start_dockerd "$HORUS_DOCKER_STORAGE" || { say "dockerd failed; see $LOG"; exit 1; }
        started=forced
    elif start_dockerd ""; then
        started=default
    else
        say "dockerd with the default storage driver failed; retrying with vfs"
        start_dockerd vfs || { say "dockerd failed; see $LOG"; exit 1; }
        started=vfs
    fi
fi

import_image

if ! smoke_run; then
    if [ "$started" != default ]; then
        say "the engine answers but a container does not run; see $LOG"
        exit 1
    fi
    say "a container does not run with $(docker info --format '{{.Driver}}'); restarting dockerd with vfs"
    stop_ours
    start_dockerd vfs || { say "dockerd failed; see $LOG"; exit 1; }
    import_image
    smoke_run || { say "a container does not run even with vfs; see $LOG"; exit 1; }
fi
say "engine $(docker version --format '{{.Server.Version}}') ready, storage $(docker info --format '{{.Driver}}'), image $IMAGE"
