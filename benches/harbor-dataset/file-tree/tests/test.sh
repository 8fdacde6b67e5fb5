#!/bin/bash
txt=$(find src -type f -name '*.txt' | wc -l)
md=$(find src -type f -name '*.md' | wc -l)
cfg=$(find src -type f -name '*.cfg' | wc -l)
if [ "$txt" = 0 ] && [ "$md" = 1600 ] && [ "$cfg" = 400 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
echo "txt=$txt md=$md cfg=$cfg"
