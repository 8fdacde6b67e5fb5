#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/verifier/verify-ns' EXIT
PYTHONDONTWRITEBYTECODE=1 python3 - <<'PY'
import csv, json, sqlite3
want = {}
for row in csv.DictReader(open("/data/orders.csv")):
    want[row["region"]] = want.get(row["region"], 0) + int(row["quantity"]) * float(row["price"])
ok = False
try:
    got = json.load(open("/app/revenue.json"))
    n = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True).execute("select count(*) from orders").fetchone()[0]
    ok = n == 400000 and got.keys() == want.keys() and all(abs(got[k] - want[k]) < 0.01 for k in want)
except Exception as e:
    print("failed:", e)
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
