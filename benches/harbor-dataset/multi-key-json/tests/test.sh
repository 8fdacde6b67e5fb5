#!/bin/bash
n=0
for f in a b c; do [ "$(cat $f.txt 2>/dev/null)" = "$f.txt" ] && n=$((n+1)); done
if [ "$n" = 3 ]; then r=1.0; else r=0.0; fi
printf '{"reward": %s, "files": %s, "style": 0.75}\n' "$r" "$n" > /logs/verifier/reward.json
