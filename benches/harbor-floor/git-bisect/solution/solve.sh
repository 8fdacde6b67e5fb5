#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
set -e
export PYTHONDONTWRITEBYTECODE=1
first=$(git rev-list --max-parents=0 HEAD)
git bisect start HEAD "$first" > /dev/null
git bisect run python3 -m pytest -q -x -p no:cacheprovider tests/test_stats.py > /tmp/bisect.log 2>&1
bad=$(git rev-parse refs/bisect/bad)
git bisect reset > /dev/null 2>&1
echo "$bad" > BAD_COMMIT
git revert --no-edit "$bad" > /dev/null
python3 -m pytest -q -p no:cacheprovider tests/test_stats.py
