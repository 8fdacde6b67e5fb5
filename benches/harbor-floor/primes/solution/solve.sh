#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
cat > primes.py <<'PY'
import sys

def count(n):
    sieve = bytearray([1]) * n
    sieve[0:2] = b"\0\0"
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytes(len(range(i * i, n, i)))
    return sum(sieve)

print(count(int(sys.argv[1])))
PY
python3 primes.py 20000000 > answer.txt
