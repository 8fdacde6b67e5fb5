#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
set -e
cd /app
python3 -m compileall -q -j 0 -o 0 -o 1 src
mkdir -p dist
python3 - <<'PY'
import os
import zipfile

with zipfile.ZipFile("dist/vendor.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for root, dirs, files in os.walk("src"):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            z.write(path, os.path.relpath(path, "src"))
PY
(cd dist && sha256sum vendor.zip > SHA256SUMS)
