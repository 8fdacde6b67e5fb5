#!/bin/bash
# Shared: graded in the agent's own sandbox, its whole workdir in sight.
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failed=1; fi; }
failed=0
check "the agent's file" '[ "$(cat /app/a.txt 2>/dev/null)" = one ]'
check "the task's image" '[ -f /app/from-task-image.txt ]'
[ "$failed" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
