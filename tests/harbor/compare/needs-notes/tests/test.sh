#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && [ -f README.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
