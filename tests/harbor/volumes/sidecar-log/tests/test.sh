#!/bin/bash
# The log is the sidecar's, untouched; the fixture is the task's.
expected=$'tool: started\ntool: 2 requests served'
if [ "$(cat /var/log/tool/tool.log)" = "$expected" ] && [ "$(cat /opt/fixtures/data.txt)" = "fixture v1" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "log: $(cat /var/log/tool/tool.log)"
  echo 0 > /logs/verifier/reward.txt
fi
