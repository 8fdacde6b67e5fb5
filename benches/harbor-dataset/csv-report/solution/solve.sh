#!/bin/bash
python3 - <<'PY'
import csv, json
totals = {}
with open("/data/sales.csv") as f:
    for row in csv.DictReader(f):
        totals[row["category"]] = totals.get(row["category"], 0) + float(row["amount"])
json.dump({k: round(v, 2) for k, v in totals.items()}, open("/app/report.json", "w"), indent=2)
PY
