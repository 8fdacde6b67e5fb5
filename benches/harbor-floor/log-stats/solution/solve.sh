#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
cut -d' ' -f1 /var/log/app/access.log | LC_ALL=C sort | uniq -c | LC_ALL=C sort -k1,1nr -k2,2 | head -10 \
  | awk '{ print $1, $2 }' > top.txt
