#!/bin/bash
. /tests/common.sh
[ "$(cat one.txt)" = one ] && [ -f seed.txt ]
write_reward $?
