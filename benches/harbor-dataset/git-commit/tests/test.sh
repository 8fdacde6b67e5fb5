#!/bin/bash
git config --global --add safe.directory '*'
if [ "$(git log -1 --format=%s)" = "Add notes" ] && git ls-files --error-unmatch NOTES.md >/dev/null 2>&1 \
   && [ -z "$(git status --porcelain)" ] && [ "$(git rev-list --count HEAD)" = 2 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
