#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
cd /repo
ok=1
[ "$(git rev-parse --abbrev-ref HEAD)" = main ] || ok=0
[ "$(git rev-list --count --no-merges main)" = 41 ] || ok=0
[ "$(git rev-list --merges --count main)" = 1 ] || ok=0
for n in $(seq 1 40); do
  [ "$(git show main:notes/note-$n.md 2>/dev/null)" = "note $n" ] || ok=0
done
git fsck --no-progress --no-dangling >/dev/null 2>&1 || ok=0
echo $ok > /logs/verifier/reward.txt
