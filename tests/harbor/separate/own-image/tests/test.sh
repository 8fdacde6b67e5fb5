#!/bin/bash
# Graded apart: the artifacts are here, the agent's workspace is not.
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failed=1; fi; }
failed=0
check "the answer" '[ "$(cat /app/result.txt 2>/dev/null)" = 42 ]'
check "the declared directory" '[ -f /app/out/a.txt ]'
check "its exclude" '[ ! -e /app/out/b.tmp ]'
check "/logs/artifacts" '[ -f /logs/artifacts/note.txt ]'
check "no undeclared file of the agent" '[ ! -e /app/agent-only.txt ]'
check "not the task's image" '[ ! -e /app/from-task-image.txt ]'
check "the verifier's own image" '[ -f /tests/marker ]'
check "no way out" '! python3 -c "import socket; socket.create_connection((\"1.1.1.1\", 53), 2)" 2>/dev/null'
[ "$failed" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
