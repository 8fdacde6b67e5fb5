#!/usr/bin/env bash
# A real Kubernetes API server and kubelet on this machine, for the Kubernetes
# backend's tests, without ever touching the main Docker engine:
#
#   scripts/kube.sh build   # builds kube-apiserver and kubelet once per machine (cached)
#   scripts/kube.sh start   # etcd, kube-apiserver, a second dockerd and a kubelet
#   scripts/kube.sh env     # prints the variables that point the tests at it
#   scripts/kube.sh stop    # stops what `start` started, by PID, and removes it
#
# `build` compiles Debian 12's `kubernetes` source package (1.20.2, vendored)
# with Debian's Go; the binaries are cached in $REEVAL_KUBE_CACHE (default
# /var/cache/reeval-k8s), outside the checkout, and `build` is a no-op when
# they are there. The recipe and its workarounds are in
# shared/reference/engines-here.md, section 3.
set -euo pipefail

CACHE=${REEVAL_KUBE_CACHE:-/var/cache/reeval-k8s}
DIR=${REEVAL_KUBE_DIR:-/tmp/reeval-kube}
DEBIAN=http://deb.debian.org/debian
SRC_VERSION=1.20.5+really1.20.2
DEB_VERSION=$SRC_VERSION-1.1+deb12u1
ORIG_SHA256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
DEBIAN_SHA256=9b6e5fd41769d2b5badf2e73b274e3bcd90f85e13d06a1a4a845ccce018127d8

log() { printf 'kube: %s\n' "$*" >&2; }

have_binaries() { [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/kubelet" ]; }

build() {
  if have_binaries; then
    log "kube-apiserver and kubelet already cached in $CACHE"
    return 0
  fi
  for tool in go rsync jq dpkg-source curl; do
    command -v "$tool" >/dev/null || { log "missing $tool (apt-get install golang-go rsync jq dpkg-dev curl)"; exit 1; }
  done
  local work=$CACHE/build
  mkdir -p "$work"
  cd "$work"
  # The source package straight from the pool (no deb-src line needed), checked.
  local orig=kubernetes_$SRC_VERSION.orig.tar.gz deb=kubernetes_$DEB_VERSION.debian.tar.xz
  [ -f "$orig" ] || curl -fsSLo "$orig" "$DEBIAN/pool/main/k/kubernetes/$orig"
  [ -f "$deb" ] || curl -fsSLo "$deb" "$DEBIAN/pool/main/k/kubernetes/$deb"
  echo "$ORIG_SHA256  $orig" | sha256sum -c --quiet
  echo "$DEBIAN_SHA256  $deb" | sha256sum -c --quiet
  if [ ! -d src ]; then
    rm -rf src.tmp && mkdir src.tmp
    tar -xzf "$orig" -C src.tmp
    # The orig tarball has one top directory; Debian's patches go on top.
    mv src.tmp/* src && rmdir src.tmp
    tar -xJf "$deb" -C src
    (cd src && while read -r patch; do
      case "$patch" in ''|'#'*) continue ;; esac
      patch -p1 -s <"debian/patches/$patch"
    done <debian/patches/series)
  fi
  cd src
  log "building kube-apiserver and kubelet (about 9 minutes of 2 cores)"
  # Debian's own build sets these: vendored modules, no network.
  CGO_ENABLED=0 GOFLAGS=-mod=vendor GO111MODULE=on GOPROXY=off \
    KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
    nice -n 10 make WHAT="cmd/kube-apiserver cmd/kubelet"
  install -m 0755 _output/local/bin/linux/*/kube-apiserver _output/local/bin/linux/*/kubelet "$CACHE/"
  cd /
  rm -rf "$work"
  log "cached in $CACHE: $(ls "$CACHE" | tr '\n' ' ')"
}

case "${1:-}" in
  build) build ;;
  *) echo "usage: $0 build|start|env|stop" >&2; exit 2 ;;
esac
