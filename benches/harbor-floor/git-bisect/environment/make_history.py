"""A history of 240 commits of a small statistics module; commit 157 breaks `median`."""
import subprocess

STATS = '''"""Summary statistics."""


def mean(xs):
    return sum(xs) / len(xs)


def median(xs):
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2
'''

TESTS = '''import random

from stats import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_against_sorting():
    r = random.Random(1)
    for _ in range(3000):
        xs = [r.randint(-50, 50) for _ in range(r.randint(1, 40))]
        s = sorted(xs)
        n = len(s)
        want = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        assert median(xs) == want, xs
'''


def git(*args):
    subprocess.run(["git", *args], check=True)


open("stats.py", "w").write(STATS)
import os
os.makedirs("tests", exist_ok=True)
open("tests/test_stats.py", "w").write(TESTS)
open("conftest.py", "w").write("")
git("add", ".")
git("commit", "-qm", "stats: mean and median")
for n in range(1, 240):
    if n == 157:
        # The regression: an even-length median takes the upper middle only.
        text = open("stats.py").read().replace(
            "return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2",
            "return s[mid] if n % 2 or n > 30 else (s[mid - 1] + s[mid]) / 2",
        )
        open("stats.py", "w").write(text)
        git("commit", "-qam", "stats: faster median for large inputs")
        continue
    os.makedirs("docs", exist_ok=True)
    with open(f"docs/change-{n:03}.md", "w") as f:
        f.write(f"Change {n}: documentation and housekeeping.\n")
    git("add", f"docs/change-{n:03}.md")
    git("commit", "-qm", f"docs: change {n}")
