#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
t=$(mktemp -d)
ok=0
if tar -xzf /out/site.tar.gz -C "$t" && (cd "$t/site" && sha256sum --quiet -c /out/SHA256SUMS) \
  && [ "$(wc -l < /out/SHA256SUMS)" = "$(find /data/site -type f | wc -l)" ]; then ok=1; fi
rm -rf "$t"
echo $ok > /logs/verifier/reward.txt
