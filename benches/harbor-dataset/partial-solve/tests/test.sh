#!/bin/bash
n=0
[ -f left.txt ] && n=$((n+1))
[ -f right.txt ] && n=$((n+1))
python3 -c "print($n / 2)" > /logs/verifier/reward.txt
