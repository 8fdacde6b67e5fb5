#!/bin/bash
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failed=1; fi; }
failed=0
check "the healthcheck passed before the agent" '[ -f /app/saw-ready.txt ]'
check "main's hook ran in the workdir" '[ "$(cat /app/main-hook.txt)" = "main hook in /app" ]'
check "the sidecar's hook snapshotted its state" '[ "$(cat /srv/state/snapshot.txt)" = requests=3 ]'
check ".harborignore kept the answer key out" '[ ! -e /tests/answer-key.txt ] && [ -f /tests/helper.txt ] && [ ! -e /tests/.harborignore ]'
[ "$failed" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
