#!/bin/bash
# Builds the real kube-apiserver and kube-scheduler of Kubernetes 1.20.2 from Debian bookworm's
# `kubernetes` source package, offline: the package's vendor/ tree is complete, so Debian's Go
# builds it with GOPROXY=off (about 17 minutes and 2 GB of disk on 2 cores). The recipe of
# ../shared/k8s/README.md; scripts/k8s-dev.sh runs it when no built copy is found.
# Usage: k8s-build.sh [OUT_DIR]   (default ~/.cache/horus-k8s/1.20.2; $WORK: the scratch folder)
# deb-src entries are derived from this machine's own apt sources into a private folder: /etc is
# never changed. Needs apt-get (as root, or through sudo) for golang-go, make, rsync, dpkg-dev.
set -euo pipefail
OUT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/horus-k8s/1.20.2}
WORK=${WORK:-${TMPDIR:-/tmp}/horus-k8s-src}
VERSION=1.20.5+really1.20.2-1.1+deb12u1
if [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/kube-scheduler" ]; then echo "cached in $OUT"; exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq --no-install-recommends golang-go rsync make dpkg-dev \
  golang-github-modern-go-reflect2-dev >/dev/null
mkdir -p "$WORK/parts" "$WORK/lists/partial" "$OUT"
cd "$WORK"
# deb-src twins of the binary sources in use (deb822 .sources files and one-line lists)
for f in /etc/apt/sources.list.d/*.sources; do
  if [ -f "$f" ]; then sed 's/^Types: deb$/Types: deb-src/' "$f" >"parts/$(basename "$f")"; fi
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  if [ -f "$f" ]; then grep -E '^deb ' "$f" | sed 's/^deb /deb-src /' >"parts/$(basename "$f").list" || true; fi
done
O=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$WORK/parts" -o "Dir::State::Lists=$WORK/lists")
apt-get "${O[@]}" update -qq >/dev/null
apt-get "${O[@]}" source --download-only "kubernetes=$VERSION" >/dev/null
rm -rf src
dpkg-source -x "kubernetes_$VERSION.dsc" src >/dev/null  # the orig tarball + Debian's patches
cd src
# Kubernetes 1.20 vendors modern-go/reflect2 1.0.1, whose map iteration faults under Go >= 1.18
# (modern-go/reflect2 issue 24, fixed in 1.0.2: an apiserver built by Debian's Go 1.19 dies with
# "fatal error: fault" in UnsafeMapType.UnsafeIterate under load). Debian ships reflect2 1.0.2.
R=/usr/share/gocode/src/github.com/modern-go/reflect2
if [ -f "$R/reflect2.go" ]; then
  rm -rf vendor/github.com/modern-go/reflect2 && cp -r "$R" vendor/github.com/modern-go/reflect2
  sed -i 's|^# github.com/modern-go/reflect2 v1.0.1$|# github.com/modern-go/reflect2 v1.0.2|' vendor/modules.txt
fi
mkdir -p .go/src/k8s.io
[ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
env GOPATH="$PWD/.go" CGO_ENABLED=0 HOME="$WORK/home" GOPROXY=off \
  make WHAT="cmd/kube-apiserver cmd/kube-scheduler"
cp _output/local/bin/linux/amd64/kube-apiserver _output/local/bin/linux/amd64/kube-scheduler "$OUT/"
"$OUT/kube-apiserver" --version
"$OUT/kube-scheduler" --version
