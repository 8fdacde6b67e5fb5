#!/bin/bash
if [ "$(cat mark.txt 2>/dev/null)" = from-solution-env ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
