#!/usr/bin/env bash
# The tests: the whole workspace against the local engine, then the lifecycle
# and environment suites against each extra engine scripts/engines.sh starts
# (a second dockerd over TLS and over SSH, and Podman), which it stops again.
# Without root, `ip` or `dockerd`, the extra engines are skipped (the engine
# tests say so; REEVAL_REQUIRE_ENGINES=1 makes that a failure).
set -euo pipefail
cd "$(dirname "$0")/.."

engines=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v dockerd >/dev/null; then
  eval "$(scripts/engines.sh start)"
  engines=1
  trap 'scripts/engines.sh stop' EXIT
elif [ "${REEVAL_REQUIRE_ENGINES:-}" = 1 ]; then
  echo "REEVAL_REQUIRE_ENGINES=1 but the extra engines cannot start here (they need root, ip and dockerd)" >&2
  exit 1
fi

cargo test --workspace

if [ "$engines" = 1 ]; then
  for host in ${REEVAL_TEST_ENGINE2:-} ${REEVAL_TEST_ENGINE2_SSH:-} ${REEVAL_TEST_PODMAN:-}; do
    echo "== the lifecycle and environment suites on $host"
    DOCKER_HOST=$host cargo test --test lifecycle --test environment
  done
fi
