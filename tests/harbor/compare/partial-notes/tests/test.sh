#!/bin/bash
# Partial credit: the share of the four facts listed, and how many.
found=0
for fact in alpha beta gamma delta; do grep -qx "$fact" /app/facts.txt 2>/dev/null && found=$((found + 1)); done
awk -v f="$found" 'BEGIN { printf "{\"reward\": %.2f, \"facts\": %d}\n", f / 4, f }' > /logs/verifier/reward.json
