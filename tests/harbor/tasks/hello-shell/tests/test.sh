#!/bin/bash
# Runs in the task's workdir, with [verifier].env.
pwd > /logs/verifier/cwd.txt
echo "$GREETING_SOURCE" > /logs/verifier/env.txt
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "$EXPECTED" ] && [ -f seed.txt ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
echo "checked greeting"
exit 7  # the exit status is not the verdict
