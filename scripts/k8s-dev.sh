#!/bin/bash
# The project's Kubernetes control plane for development and tests, on loopback, with no root and
# no container: etcd (Debian's etcd-server) + kube-apiserver 1.20 (RBAC, a static token file, free
# ports, never 8080) and, optionally, kube-scheduler 1.20 with a KubeSchedulerConfiguration.
# No controller-manager and no kubelet: a test plays the kubelet where it needs one.
#
# Usage:
#   k8s-dev.sh start DIR [--tokens FILE] [--scheduler CONFIG] [--no-build]
#   k8s-dev.sh stop DIR
#   k8s-dev.sh bin [--no-build]         (prints the folder holding the binaries)
#
# start writes, in DIR: plane.env (APISERVER=https://127.0.0.1:PORT, PORT, ETCD, CA), tokens.csv
# (an admin in system:masters, the user system:kube-scheduler, then FILE's lines), admin.kubeconfig,
# scheduler.kubeconfig, the logs and *.pid; it returns once /readyz answers ok (exit 1 with the
# apiserver log's tail otherwise; exit 3 when binaries are missing and --no-build is given).
# --scheduler CONFIG: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1beta1) whose
# clientConnection.kubeconfig line is pointed at DIR/scheduler.kubeconfig (a copy is run).
# Binaries: $HORUS_K8S_BIN, else ../shared/k8s/bin beside the repository, else the build cache of
# scripts/k8s-build.sh (~/.cache/horus-k8s/1.20.2), else built there by it (about 17 minutes).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
ADMIN_TOKEN=${HORUS_K8S_ADMIN_TOKEN:-horus-test-admin}
SCHED_TOKEN=horus-test-kube-scheduler
START_S=${HORUS_K8S_START_S:-40}

die() { echo "k8s-dev.sh: $1" >&2; exit "${2:-1}"; }

bin_dir() {  # $1: "build" or "no-build"
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/horus-k8s/1.20.2 d
  for d in "${HORUS_K8S_BIN:-}" "$ROOT/../shared/k8s/bin" "$cache"; do
    if [ -n "$d" ] && [ -x "$d/kube-apiserver" ] && [ -x "$d/kube-scheduler" ]; then
      (cd "$d" && pwd); return 0
    fi
  done
  [ "$1" = build ] || die "no kube-apiserver/kube-scheduler in \$HORUS_K8S_BIN, ../shared/k8s/bin or $cache (scripts/k8s-build.sh builds them)" 3
  echo "k8s-dev.sh: building Kubernetes 1.20.2 from Debian's source package into $cache (about 17 minutes)" >&2
  bash "$HERE/k8s-build.sh" "$cache" >&2
  echo "$cache"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

spawn() {  # name argv...: in the background, in its own session, logs and pid in DIR
  local name=$1; shift
  setsid "$@" >"$DIR/$name.log" 2>&1 < /dev/null &
  echo $! >"$DIR/$name.pid"
}

kubeconfig() {  # file token
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:$PORT", certificate-authority: "$DIR/certs/apiserver.crt"}
users:
- name: dev
  user: {token: "$2"}
contexts:
- name: dev
  context: {cluster: dev, user: dev}
EOF
}

wait_ready() {
  local deadline=$((SECONDS + START_S)) pid
  while [ $SECONDS -lt $deadline ]; do
    for pid in "$DIR/etcd.pid" "$DIR/apiserver.pid"; do
      kill -0 "$(cat "$pid")" 2>/dev/null || { tail -c 2000 "$DIR/apiserver.log" "$DIR/etcd.log" >&2; stop; die "$(basename "$pid" .pid) exited"; }
    done
    if [ "$(curl -sk -m 2 -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$PORT/readyz" 2>/dev/null)" = ok ]; then
      return 0
    fi
    sleep 0.2
  done
  tail -c 2000 "$DIR/apiserver.log" >&2; stop; die "the apiserver was not ready in $START_S s"
}

start_scheduler() {  # config
  local bin=$1 config=$2
  [ -f "$config" ] || die "--scheduler $config: no such file"
  grep -qE '^\s*kubeconfig:' "$config" || die "--scheduler $config: no clientConnection.kubeconfig line"
  kubeconfig "$DIR/scheduler.kubeconfig" "$SCHED_TOKEN"
  sed -E "s#^(\s*kubeconfig:).*#\1 \"$DIR/scheduler.kubeconfig\"#" "$config" >"$DIR/scheduler-config.yaml"
  # no serving ports at all (1.20 defaults to 10251 and 10259, shared by every plane on a machine)
  spawn scheduler "$bin/kube-scheduler" --config="$DIR/scheduler-config.yaml" --port=0 --secure-port=0 -v=2
  sleep 1
  kill -0 "$(cat "$DIR/scheduler.pid")" 2>/dev/null || { tail -c 2000 "$DIR/scheduler.log" >&2; stop; die "kube-scheduler exited"; }
}

start() {
  local tokens="" config="" build=build bin etcd client peer
  while [ $# -gt 0 ]; do
    case $1 in
      --tokens) tokens=$2; shift 2 ;;
      --scheduler) config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
      --no-build) build=no-build; shift ;;
      *) die "start: unknown option $1" ;;
    esac
  done
  bin=$(bin_dir "$build") || exit $?
  etcd=$(command -v etcd) || die "no etcd on PATH (apt-get install etcd-server)" 3
  mkdir -p "$DIR"; DIR=$(cd "$DIR" && pwd)
  [ ! -f "$DIR/apiserver.pid" ] || ! kill -0 "$(cat "$DIR/apiserver.pid")" 2>/dev/null || die "$DIR: a plane is already running (k8s-dev.sh stop $DIR)"
  client=$(free_port); peer=$(free_port); PORT=$(free_port)
  printf '%s,admin,admin-uid,system:masters\n%s,system:kube-scheduler,kube-scheduler-uid\n' \
    "$ADMIN_TOKEN" "$SCHED_TOKEN" >"$DIR/tokens.csv"
  if [ -n "$tokens" ]; then cat "$tokens" >>"$DIR/tokens.csv"; fi
  [ -f "$DIR/sa.key" ] || openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
  spawn etcd "$etcd" --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "default=http://127.0.0.1:$peer"
  spawn apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$client" \
    --bind-address=127.0.0.1 --secure-port="$PORT" --insecure-port=0 --cert-dir="$DIR/certs" \
    --token-auth-file="$DIR/tokens.csv" --authorization-mode=RBAC \
    --service-account-key-file="$DIR/sa.key" --service-account-signing-key-file="$DIR/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --disable-admission-plugins=ServiceAccount  # no token controller here
  wait_ready
  kubeconfig "$DIR/admin.kubeconfig" "$ADMIN_TOKEN"
  printf 'APISERVER=https://127.0.0.1:%s\nPORT=%s\nETCD=http://127.0.0.1:%s\nCA=%s\nADMIN_TOKEN=%s\n' \
    "$PORT" "$PORT" "$client" "$DIR/certs/apiserver.crt" "$ADMIN_TOKEN" >"$DIR/plane.env"
  if [ -n "$config" ]; then start_scheduler "$bin" "$config"; fi
  echo "k8s-dev.sh: apiserver https://127.0.0.1:$PORT ready; KUBECONFIG=$DIR/admin.kubeconfig"
}

stop() {  # kill what start spawned, newest first; throwaway state, so no graceful shutdown
  local name pid n
  for name in scheduler apiserver etcd; do
    [ -f "$DIR/$name.pid" ] || continue
    pid=$(cat "$DIR/$name.pid")
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for n in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$DIR/$name.pid"
  done
}

cmd=${1:-}; shift || true
case $cmd in
  start) [ $# -ge 1 ] || die "usage: k8s-dev.sh start DIR [--tokens FILE] [--scheduler CONFIG] [--no-build]"
         DIR=$1; shift; start "$@" ;;
  stop) [ $# -eq 1 ] || die "usage: k8s-dev.sh stop DIR"; DIR=$1; if [ -d "$DIR" ]; then stop; fi ;;
  bin) if [ "${1:-}" = --no-build ]; then bin_dir no-build; else bin_dir build; fi ;;
  *) die "usage: k8s-dev.sh start DIR [--tokens FILE] [--scheduler CONFIG] [--no-build] | stop DIR | bin [--no-build]" ;;
esac
