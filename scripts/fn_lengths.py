#!/usr/bin/env python3
"""Function lengths in Rust sources: every `fn` with a body, its length in
lines from the line of `fn` to the line of its closing brace. Strings, raw
strings, char literals and comments are skipped when matching braces.

Usage: scripts/fn_lengths.py [--max N] [--top K] PATH...   (files or directories)
With --max, prints each function longer than N lines and exits 1 if there is
one (test functions included: a test too long to read is split like any
other function). Without it, lists the K longest (default 10).
"""
import os
import re
import sys

FN = re.compile(r"\bfn\s+(\w+)")


def blank_literals(text):
    """`text` with every comment, string and char literal's content replaced by
    spaces (newlines kept), so that braces and `fn` inside them are not seen."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and (m := re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:])):
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of every function with a body in `path`."""
    text = blank_literals(open(path, encoding="utf-8").read())
    found = []
    for m in FN.finditer(text):
        # The body's brace: the first `{` after the signature, unless a `;` ends it first (a trait's declaration).
        j = m.end()
        depth_paren = 0
        while j < len(text):
            ch = text[j]
            if ch in "([<":
                depth_paren += 1
            elif ch in ")]>":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                j = -1
                break
            elif ch == "{" and depth_paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(text):
            continue
        depth, k = 0, j
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = text.count("\n", 0, m.start()) + 1
        last = text.count("\n", 0, k) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def rust_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in sorted(os.walk(p)):
                for f in sorted(files):
                    if f.endswith(".rs"):
                        yield os.path.join(root, f)
        else:
            yield p


def main():
    args = sys.argv[1:]
    limit = top = None
    if "--max" in args:
        i = args.index("--max")
        limit = int(args[i + 1])
        del args[i : i + 2]
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i : i + 2]
    if not args:
        sys.exit(__doc__)
    every = [(length, path, line, name) for path in rust_files(args) for name, line, length in functions(path)]
    every.sort(key=lambda f: (-f[0], f[1], f[2]))
    if limit is None:
        for length, path, line, name in every[: top or 10]:
            print(f"{length:5} {path}:{line} {name}")
        return
    over = [f for f in every if f[0] > limit]
    for length, path, line, name in over:
        print(f"{path}:{line}: fn {name} is {length} lines, more than {limit}")
    print(f"{len(every)} functions, {len(over)} over {limit} lines; the longest: {every[0][0] if every else 0}")
    sys.exit(1 if over else 0)


main()
