#!/bin/bash
. /tests/common.sh
echo marker > /logs/verifier/step-one-marker.txt
[ "$(cat one.txt)" = one ] && [ -f seed.txt ] && grep -q "setup ran in /app" setup.log
write_reward $?
