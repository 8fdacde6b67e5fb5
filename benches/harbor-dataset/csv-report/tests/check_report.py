import csv
import json

expected = {}
with open("/data/sales.csv") as f:
    for row in csv.DictReader(f):
        expected[row["category"]] = expected.get(row["category"], 0) + float(row["amount"])
try:
    got = json.load(open("/app/report.json"))
except (OSError, ValueError):
    got = {}
right = sum(1 for k, v in expected.items() if abs(got.get(k, -1) - v) < 0.01)
with open("/logs/verifier/reward.txt", "w") as out:
    out.write(str(right / len(expected)))
print(f"{right} of {len(expected)} categories right")
