#!/bin/bash
# Apart: the task's and the step's artifacts are here, nothing else of the agent's.
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failed=1; fi; }
failed=0
check "the step's artifact" '[ "$(cat /app/b.txt 2>/dev/null)" = two ]'
check "the task's artifact" '[ "$(cat /app/kept.txt 2>/dev/null)" = kept ]'
check "no undeclared file of the agent" '[ ! -e /app/a.txt ]'
check "not the task's image" '[ ! -e /app/from-task-image.txt ]'
check "the step's own image" '[ -f /tests/marker ]'
[ "$failed" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
