#!/bin/bash
id -un > /logs/verifier/whoami.txt
if [ "$(cat /logs/agent/whoami.txt)" = nobody ] && [ "$(id -un)" = nobody ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
