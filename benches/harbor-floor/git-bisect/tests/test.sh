#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
cd /repo
export PYTHONDONTWRITEBYTECODE=1
ok=1
bad=$(git log --format=%H --grep='^stats: faster median' main)
[ "$(cat BAD_COMMIT 2>/dev/null)" = "$bad" ] || ok=0
[ "$(git rev-parse --abbrev-ref HEAD)" = main ] || ok=0
# A revert of it on top, and nothing else changed against the commit before it.
git log -1 --format=%B main | grep -q "This reverts commit $bad" || ok=0
[ -z "$(git diff "$bad~1" main -- stats.py tests)" ] || ok=0
[ "$(git rev-list --count main)" = 241 ] || ok=0
git fsck --no-progress --no-dangling >/dev/null 2>&1 || ok=0
python3 -m pytest -q -p no:cacheprovider tests/test_stats.py || ok=0
echo $ok > /logs/verifier/reward.txt
