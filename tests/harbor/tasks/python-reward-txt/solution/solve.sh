#!/bin/bash
sed -i 's/return a - b/return a + b/' calc.py
python3 - <<'PY'
src = open("calc.py").read().split("def mul")
open("calc.py", "w").write(src[0] + "def mul(a, b):\n    return a * b\n")
PY
