#!/bin/bash
# The image is the Dockerfile's, built on the mapped base (python3 is the base's marker).
pwd > /logs/verifier/cwd.txt
if [ "$(cat greeting.txt 2>/dev/null)" = hello ] && [ -f seed.txt ] \
   && [ "$(cat tool.txt)" = built-in-the-tools-stage ] && command -v python3 >/dev/null; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
