#!/bin/bash
# The task's own test.sh: the step "final" has none of its own.
. /tests/common.sh
[ -f three.txt ]
write_reward $?
