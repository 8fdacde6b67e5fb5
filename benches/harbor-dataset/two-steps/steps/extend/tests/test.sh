#!/bin/bash
. /tests/common.sh
[ "$(cat two.txt)" = two ] && [ -f one.txt ]
write_reward $?
