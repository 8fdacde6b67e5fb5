#!/bin/bash
curl -s -m 10 http://refused.test/public-verifier > /logs/verifier/v.txt
if [ "$(cat any.txt)" = "hello from upstream" ] && [ "$(cat any2.txt)" = "hello from upstream" ] && [ "$(cat /logs/verifier/v.txt)" = "hello from upstream" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
cat any.txt any2.txt /logs/verifier/v.txt
