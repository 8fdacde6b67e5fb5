#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
set -e
git checkout -q -b feature
mkdir -p notes
for n in $(seq 1 40); do
  echo "note $n" > notes/note-$n.md
  git add notes/note-$n.md
  git commit -qm "Add note $n"
done
git checkout -q main
git merge -q --no-ff -m "Merge feature" feature
