#!/bin/bash
# The word the agent wrote, and the service still answering the verifier by
# its names (the service name, and its container_name as an alias).
live=$(curl -sf http://api:8000/word)
alias=$(curl -sf http://word-api:8000/word)
echo "live=$live alias=$alias written=$(cat /app/word.txt 2>/dev/null)"
if [ "$(cat /app/word.txt 2>/dev/null)" = swordfish ] && [ "$live" = swordfish ] && [ "$alias" = swordfish ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
