#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
PYTHONDONTWRITEBYTECODE=1 python3 - <<'PY'
from collections import Counter
counts = Counter(line.split(" ", 1)[0] for line in open("/var/log/app/access.log"))
want = [f"{n} {ip}" for ip, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
try:
    got = open("/srv/report/top.txt").read().split("\n")[:10]
except OSError:
    got = []
open("/logs/verifier/reward.txt", "w").write("1" if got == want else "0")
PY
