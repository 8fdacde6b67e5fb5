#!/usr/bin/env bash
# Harbor 0.26.0 from PyPI in a venv of its own, cached: the side-by-side
# (scripts/harbor-side-by-side.sh) runs it, and reeval-cli's tests read a
# `reeval harbor run -o DIR` job directory with its pydantic models
# (reeval-cli/tests/harbor_jobs.rs). Prints the venv's directory.
#
#   scripts/harbor-venv.sh
#
# Harbor needs Python 3.12 or newer: HARBOR_PYTHON, else the first of
# python3.13, python3.12, pyenv's 3.13/3.12, python3 that is new enough.
# The cache: $REEVAL_HARBOR_CACHE (default /var/cache/reeval-harbor); the venv
# is $REEVAL_HARBOR_CACHE/venv-0.26.0, made once (PyPI is needed only then).
set -euo pipefail

HARBOR_VERSION=0.26.0
CACHE=${REEVAL_HARBOR_CACHE:-/var/cache/reeval-harbor}
VENV=$CACHE/venv-$HARBOR_VERSION

have() { [ "$("$VENV/bin/harbor" --version 2>/dev/null)" = "$HARBOR_VERSION" ]; }
if ! have; then
  # One install at a time (a CI run and a benchmark may ask at once): the
  # second waits for the first and finds the venv made.
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.install.lock"
  flock 9
fi
if ! have; then
  PY=${HARBOR_PYTHON:-}
  if [ -z "$PY" ]; then
    for c in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python \
             /root/.pyenv/versions/3.12*/bin/python python3; do
      if command -v "$c" >/dev/null 2>&1 \
         && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        PY=$c; break
      fi
    done
  fi
  if [ -z "$PY" ]; then
    echo "error: Harbor needs Python 3.12 or newer; set HARBOR_PYTHON" >&2
    exit 1
  fi
  echo "== installing harbor==$HARBOR_VERSION into $VENV (with $PY)" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "harbor==$HARBOR_VERSION" >&2
fi
echo "$VENV"
