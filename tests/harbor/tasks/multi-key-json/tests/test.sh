#!/bin/bash
n=0
[ -f a.txt ] && n=$((n+1))
[ -f b.txt ] && n=$((n+1))
if [ "$n" = 2 ]; then r=1.0; else r=0; fi
echo "0.5" > /logs/verifier/reward.txt   # reward.json wins over reward.txt
printf '{"reward": %s, "files": %s, "accuracy": 0.75}\n' "$r" "$n" > /logs/verifier/reward.json
mkdir -p /logs/artifacts && echo "kept" > /logs/artifacts/note.txt
