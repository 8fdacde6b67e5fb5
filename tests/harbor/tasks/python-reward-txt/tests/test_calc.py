import sys
sys.path.insert(0, ".")
import calc
checks = [calc.add(2, 3) == 5, calc.mul(2, 3) == 6]
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"  {sum(checks) / len(checks)}\n")
print("passed", sum(checks), "of", len(checks))
