#!/bin/bash
# The verifier has the environment's allowlist too.
curl -s -m 10 http://plain.test/verifier > /logs/verifier/verifier-allowed.txt
if [ "$(cat allowed.txt)" = "hello from upstream" ] && grep -q "not on this sandbox's allowlist" refused.txt \
   && [ "$(cat /logs/verifier/verifier-allowed.txt)" = "hello from upstream" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
