#!/bin/bash
# A verifier that installs what it needs, as many do: from PyPI, through the
# sandbox's proxy (the egress gateway). No retries, so a refusal fails fast.
pip install --no-cache-dir --retries 0 --timeout 30 --target /tmp/six six==1.16.0 > /logs/verifier/pip.txt 2>&1
if PYTHONPATH=/tmp/six python3 -c 'import six; assert six.__version__ == "1.16.0"'; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
cat /logs/verifier/pip.txt
