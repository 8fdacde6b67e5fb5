import sys

sys.path.insert(0, ".")
import calc  # noqa: E402

cases = [(2, 3), (0, 7), (-4, 5), (10, 10)]
checks = [calc.add(a, b) == a + b for a, b in cases] + [calc.mul(a, b) == a * b for a, b in cases]
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{sum(checks) / len(checks)}\n")
print("passed", sum(checks), "of", len(checks))
