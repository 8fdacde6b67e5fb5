#!/bin/bash
. /tests/common.sh
env | grep -E '^(SHARED|STEP)=' | sort > /logs/verifier/env.txt
ls /tests > /logs/verifier/tests.txt
[ "$(cat two.txt)" = two ] && [ -f one.txt ] && [ ! -e /logs/verifier/step-one-marker.txt ] && [ ! -e /tests/only-in-write.txt ]
write_reward $?
