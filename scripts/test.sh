#!/usr/bin/env bash
# The tests: the whole workspace against the local engine, then the lifecycle
# and environment suites against each extra engine scripts/engines.sh starts
# (a second dockerd over TLS and over SSH, and Podman, the last beside the
# first two), which it stops again.
# Without root, `ip` or `dockerd`, the extra engines are skipped (the engine
# tests say so; REEVAL_REQUIRE_ENGINES=1 makes that a failure).
# Then the Kubernetes backend (feature `kubernetes`): its unit tests on a fake
# API server always, and tests/kubernetes.rs against the real API server and
# kubelet of scripts/kube.sh when its cached binaries are present
# (`scripts/kube.sh build` makes them, once per machine).
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

engines=0 kube=0
podman_pid=
cleanup() {
  # Interrupted while Podman's pass ran beside the others: it ends before its engine does.
  if [ -n "$podman_pid" ]; then kill "$podman_pid" 2>/dev/null || true; wait "$podman_pid" 2>/dev/null || true; fi
  if [ "$engines" = 1 ]; then scripts/engines.sh stop; fi
  if [ "$kube" = 1 ]; then scripts/kube.sh stop; fi
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v dockerd >/dev/null; then
  eval "$(scripts/engines.sh start 9>&-)"  # the engines must not hold the lock
  engines=1
elif [ "${REEVAL_REQUIRE_ENGINES:-}" = 1 ]; then
  echo "REEVAL_REQUIRE_ENGINES=1 but the extra engines cannot start here (they need root, ip and dockerd)" >&2
  exit 1
fi

cargo test --workspace

if [ "$engines" = 1 ]; then
  # Podman's pass runs beside the second dockerd's two: another engine, with
  # nothing shared, and the passes mostly wait on containers (about a minute
  # and a half of CI saved). Its output is printed after theirs, and a failure
  # of either side is reported only once both have ended.
  status=0
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
  if [ "$status" != 0 ]; then exit "$status"; fi
fi

echo "== the Kubernetes backend: unit tests on a fake API server"
# One build for both crates' Kubernetes unit tests (the backend's, and core's preflight on it).
cargo test -p reeval-sandbox -p reeval-core --features kubernetes --lib kubernetes
if [ "$(id -u)" = 0 ] && scripts/kube.sh have-binaries; then
  echo "== the Kubernetes backend against a real API server and kubelet (v1.20)"
  kube=1
  eval "$(scripts/kube.sh start 9>&-)"
  KUBECONFIG=$REEVAL_TEST_KUBECONFIG REEVAL_REQUIRE_KUBE=1 cargo test --features kubernetes --test kubernetes
elif [ "${REEVAL_REQUIRE_KUBE:-}" = 1 ]; then
  echo "REEVAL_REQUIRE_KUBE=1 but the test cluster cannot start here (root and scripts/kube.sh build needed)" >&2
  exit 1
else
  echo "== skipping the Kubernetes backend against a real cluster: no cached binaries (scripts/kube.sh build)"
fi
