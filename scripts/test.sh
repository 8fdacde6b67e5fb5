#!/usr/bin/env bash
# The tests: the whole workspace against the local engine, then the lifecycle
# and environment suites against each extra engine scripts/engines.sh starts
# (a second dockerd over TLS and over SSH, and Podman, the last beside the
# first two), which it stops again.
# Without root, `ip` or `dockerd`, the extra engines are skipped (the engine
# tests say so; REEVAL_REQUIRE_ENGINES=1 makes that a failure).
# The Kubernetes backend (feature `kubernetes`) runs beside the extra engines'
# passes (another engine, nothing shared; its output is printed after
# theirs): its unit tests on a fake API server always, then tests/kubernetes.rs
# and reeval-cli's against the real API server and kubelet of scripts/kube.sh
# when its cached binaries are present (`scripts/kube.sh build` makes them,
# once per machine; `have-binaries` waits for a build under way).
set -euo pipefail
cd "$(dirname "$0")/.."

# One run at a time per machine: the extra engines and the test cluster use
# fixed names, ports and state under /tmp, so a second run would stop the
# first one's engines. A second run waits for the first.
exec 9>/tmp/reeval-test.lock
if ! flock -n 9; then
  echo "scripts/test.sh: another run is using this machine's test engines; waiting for it" >&2
  flock 9
fi

engines=0
podman_pid= kube_pid=
cleanup() {
  # Interrupted while a pass ran beside the others: it ends before its engine does.
  for pid in $podman_pid $kube_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [ "$engines" = 1 ]; then scripts/engines.sh stop; fi
  if [ -f "${kube_started:-}" ]; then scripts/kube.sh stop; fi
  rm -f "${kube_started:-}"
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v dockerd >/dev/null; then
  eval "$(scripts/engines.sh start 9>&-)"  # the engines must not hold the lock
  engines=1
elif [ "${REEVAL_REQUIRE_ENGINES:-}" = 1 ]; then
  echo "REEVAL_REQUIRE_ENGINES=1 but the extra engines cannot start here (they need root, ip and dockerd)" >&2
  exit 1
fi

# The disk's free space between passes (a full disk fails far from its cause).
disk_free() { echo "== $1: $(df -h --output=avail / | tail -1 | tr -d ' ') free on /"; }
disk_free "before the workspace's tests"
cargo test --workspace
disk_free "after the workspace's tests"

# The Kubernetes pass (see above); `kube_started` exists once it started the cluster.
kube_started=$(mktemp -u)
kubernetes() {
  echo "== the Kubernetes backend: unit tests on a fake API server"
  # One build for both crates' Kubernetes unit tests (the backend's, and core's preflight on it).
  cargo test -p reeval-sandbox -p reeval-core --features kubernetes --lib kubernetes
  if [ "$(id -u)" = 0 ] && scripts/kube.sh have-binaries; then
    echo "== the Kubernetes backend against a real API server and kubelet (v1.20)"
    disk_free "before the cluster's tests"
    touch "$kube_started"
    eval "$(scripts/kube.sh start 9>&-)"
    # The backend's tests and the `reeval` tool's, in one build.
    KUBECONFIG=$REEVAL_TEST_KUBECONFIG REEVAL_REQUIRE_KUBE=1 cargo test -p reeval -p reeval-cli \
      --features reeval/kubernetes,reeval-cli/kubernetes --test kubernetes
  elif [ "${REEVAL_REQUIRE_KUBE:-}" = 1 ]; then
    echo "REEVAL_REQUIRE_KUBE=1 but the test cluster cannot start here (root and scripts/kube.sh build needed)" >&2
    return 1
  else
    echo "== skipping the Kubernetes backend against a real cluster: no cached binaries (scripts/kube.sh build)"
  fi
}
kube_log=$(mktemp)
kubernetes >"$kube_log" 2>&1 &
kube_pid=$!
status=0

if [ "$engines" = 1 ]; then
  # Podman's pass runs beside the second dockerd's two: another engine, with
  # nothing shared, and the passes mostly wait on containers (about a minute
  # and a half of CI saved). Its output is printed after theirs, and a failure
  # of either side is reported only once both have ended.
  if [ -n "${REEVAL_TEST_PODMAN:-}" ]; then
    podman_log=$(mktemp)
    DOCKER_HOST=$REEVAL_TEST_PODMAN cargo test --test lifecycle --test environment >"$podman_log" 2>&1 &
    podman_pid=$!
  fi
  for host in ${REEVAL_TEST_ENGINE2:-} ${REEVAL_TEST_ENGINE2_SSH:-}; do
    echo "== the lifecycle and environment suites on $host"
    DOCKER_HOST=$host cargo test --test lifecycle --test environment || status=$?
  done
  if [ -n "${podman_pid:-}" ]; then
    wait "$podman_pid" || status=$?
    podman_pid=
    echo "== the lifecycle and environment suites on $REEVAL_TEST_PODMAN"
    cat "$podman_log"
    rm -f "$podman_log"
  fi
fi

wait "$kube_pid" || status=$?
kube_pid=
cat "$kube_log"
rm -f "$kube_log"
exit "$status"
