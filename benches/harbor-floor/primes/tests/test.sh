#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
# The answer, and the script giving it again for a smaller bound.
small=$(python3 /app/primes.py 2000000)
if [ "$(cat /app/answer.txt)" = 1270607 ] && [ "$small" = 148933 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
