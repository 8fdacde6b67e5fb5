#!/bin/bash
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failed=1; fi; }
failed=0
check "the answer, in the workdir" '[ "$(cat result.txt 2>/dev/null)" = "$EXPECTED" ] && [ "$PWD" = /app ]'
check "no undeclared file of the agent" '[ ! -e /app/agent-only.txt ]'
check "a fresh copy of the task's image" '[ -f /app/from-task-image.txt ]'
check "tests copied in" '[ -x /tests/test.sh ]'
check "its way out is the gateway's" '[ -n "$HTTPS_PROXY$https_proxy" ]'
[ "$failed" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
