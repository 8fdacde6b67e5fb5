#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
set -e
tar -czf /out/site.tar.gz -C /data site
(cd /data/site && find . -type f | sed 's|^\./||' | sort | xargs sha256sum) > /out/SHA256SUMS
