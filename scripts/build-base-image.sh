#!/usr/bin/env bash
# Builds reeval's offline base image from Debian packages (no registry needed):
# a debootstrap minbase rootfs with the tools agents and checks expect, loaded
# with `docker import`. The tag carries a hash of this recipe, so a second run
# is a no-op, and `reeval/base:latest` points at the current build.
set -euo pipefail

SUITE=bookworm
MIRROR=${REEVAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a team's first checks use: git, the usual shell tools, and Python 3 with
# pip and pytest (`python -m pytest -q` as in the README's first eval; `python`
# is python3).
PACKAGES=bash,coreutils,git,python3,python3-pip,python3-pytest,python-is-python3,ca-certificates,curl,procps,util-linux,findutils,diffutils,less
# v2: pip may install into the sandbox's Python (its EXTERNALLY-MANAGED marker is removed).
RECIPE="v2 $SUITE $PACKAGES"
HASH=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)
TAG="reeval/base:$HASH"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" reeval/base:latest
  echo "reeval base image present: $TAG"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "building $TAG with debootstrap (about 1-2 minutes)"
CACHE=${REEVAL_DEBOOTSTRAP_CACHE:-/var/cache/reeval-debootstrap}
mkdir -p "$CACHE"
debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE" \
  "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -40 "$WORK/debootstrap.log"; exit 1; }
rm -rf "$WORK"/root/var/cache/apt/archives/*.deb "$WORK"/root/var/lib/apt/lists/* \
  "$WORK"/root/usr/share/doc/* "$WORK"/root/usr/share/man/* "$WORK"/root/usr/share/locale/* \
  "$WORK"/root/usr/share/info/*
# A sandbox is thrown away after each attempt: `pip install` there needs no virtualenv.
rm -f "$WORK"/root/usr/lib/python3*/EXTERNALLY-MANAGED
mkdir -p "$WORK/root/workspace"
tar --numeric-owner -C "$WORK/root" -cf "$WORK/rootfs.tar" .
docker import \
  -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' -c 'WORKDIR /workspace' \
  -c "LABEL dev.reeval.recipe=$HASH" \
  "$WORK/rootfs.tar" "$TAG" >/dev/null
docker tag "$TAG" reeval/base:latest
echo "built $TAG"
