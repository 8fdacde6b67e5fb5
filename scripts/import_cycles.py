#!/usr/bin/env python3
"""Import circles inside a crate: the strongly connected components of the
graph of its files, with an edge a -> b when a names `crate::<module of b>`
(or `super::`), through the names modules re-export (`pub use a::B` in
lib.rs: `crate::B` is an import of `a`). Test modules (`#[cfg(test)] mod …` blocks and files named
*tests.rs) are left out unless --tests is given.

Usage: scripts/import_cycles.py [--tests] [--edges] [--top] CRATE_SRC_DIR   (e.g. reeval-core/src)
--edges also lists each circle's edges (the imports that make it).
--top merges the files of each top-level module (`attempt/`, `runner/`,
`report/`, …) into one node: circles between the crate's modules, as a
crate split would meet them.
Exits 1 when there is a circle (CI runs it over every crate, both ways).
"""
import os
import re
import sys

def module_of(path, src):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)

def path_attr_modules(src):
    """`#[path = "10_turn.rs"] mod turn;` names a module unlike its file."""
    names = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f)
            text = open(p, encoding="utf-8").read()
            for m in re.finditer(r'#\[path = "([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+);', text):
                target = os.path.normpath(os.path.join(os.path.dirname(p), m.group(1)))
                names[target] = module_of(p, src) + (m.group(2),)
    return names

def strip_tests(text):
    out, depth, skipping = [], 0, False
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not skipping and line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r"\s*(pub(\(crate\))?\s+)?mod \w+\s*\{", lines[i + 1]):
            skipping, depth = True, 0
            i += 1
            continue
        if skipping:
            depth += line.count("{") - line.count("}")
            if depth <= 0 and "}" in line:
                skipping = False
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)

def use_paths(body):
    """The paths one `use` names, braces expanded: `a::{b, c::{d, e as f}}`
    gives (a, b) b, (a, c, d) d, (a, c, e) f: each path with the name it is
    known by."""
    body = body.strip()
    i = body.find("{")
    if i < 0:
        path, _, alias = body.partition(" as ")
        segs = [x for x in path.strip().split("::") if x]
        return [(segs, alias.strip() or segs[-1])] if segs else []
    prefix = [x for x in body[:i].split("::") if x]
    inner, depth, parts, start = body[i + 1 : body.rfind("}")], 0, [], 0
    for k, ch in enumerate(inner):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    out = []
    for part in parts:
        if part.strip() and part.strip() != "self":
            out += [(prefix + segs, name) for segs, name in use_paths(part)]
    return out

def absolute(segs, mod):
    """`segs` as written in module `mod`, from the crate's root (`None`: another crate's)."""
    if segs[0] == "crate":
        return tuple(segs[1:])
    if segs[0] == "self":
        return tuple(mod) + tuple(segs[1:])
    if segs[0] == "super":
        up = 0
        while up < len(segs) and segs[up] == "super":
            up += 1
        return tuple(mod[: len(mod) - up]) + tuple(segs[up:])
    return tuple(mod) + tuple(segs)

def reexports(files, strip):
    """Names a module re-exports (`pub use a::B;`), each mapped to the path it
    names: `crate::B` is then an import of `a`, not of the crate's root."""
    aliases = {}
    for p, mod in files.items():
        text = strip(open(p, encoding="utf-8").read())
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
            for segs, name in use_paths(m.group(1)):
                if name != "*":
                    aliases[tuple(mod) + (name,)] = absolute(segs, mod)
    return aliases

def main():
    args = sys.argv[1:]
    tests = "--tests" in args
    show_edges = "--edges" in args
    top = "--top" in args
    src = [a for a in args if not a.startswith("--")][0]
    renamed = path_attr_modules(src)
    files = {}
    for root, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.normpath(os.path.join(root, f))
                if not tests and f.endswith("tests.rs"):
                    continue
                files[p] = renamed.get(p, module_of(p, src))
    by_module = {m: p for p, m in files.items()}
    aliases = reexports(files, (lambda t: t) if tests else strip_tests)

    def resolve(r, depth=0):
        """The file a path names: its deepest module, through re-exports."""
        for n in range(len(r), 0, -1):
            key = tuple(r[:n])
            if key in by_module:
                return by_module[key]
            if key in aliases and depth < 8 and aliases[key] != key:
                found = resolve(aliases[key] + tuple(r[n:]), depth + 1)
                if found:
                    return found
        return None

    edges = {p: set() for p in files}
    for p, mod in files.items():
        text = open(p, encoding="utf-8").read()
        if not tests:
            text = strip_tests(text)
        text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
        refs = []
        # `use crate::{a::b, c}` groups: expand the first level.
        for m in re.finditer(r"crate::\{([^}]*)\}", text):
            refs += [tuple(x.strip().split("::")) for x in m.group(1).split(",") if x.strip()]
        refs += [tuple(m.group(1).split("::")) for m in re.finditer(r"crate::((?:\w+::)*\w+)", text)]
        for m in re.finditer(r"\b((?:super::)+)\{([^}]*)\}", text):
            base = mod[: len(mod) - m.group(1).count("super::")]
            refs += [tuple(base) + tuple(x.strip().split("::")) for x in m.group(2).split(",") if x.strip()]
        for m in re.finditer(r"\b((?:super::)+)((?:\w+::)*\w+)", text):
            up = m.group(1).count("super::")
            base = mod[: len(mod) - up]
            refs.append(tuple(base) + tuple(m.group(2).split("::")))
        for r in refs:
            target = resolve(r)
            if target and target != p:
                edges[p].add(target)
    if top:
        # One node per top-level module; an edge keeps the file-level edges that make it.
        def top_of(p):
            rel = os.path.relpath(p, src).split(os.sep)
            return rel[0][:-3] if len(rel) == 1 else rel[0]
        merged, why = {}, {}
        for p, ws in edges.items():
            a = top_of(p)
            merged.setdefault(a, set())
            for w in ws:
                b = top_of(w)
                if a != b:
                    merged[a].add(b)
                    why.setdefault((a, b), []).append((p, w))
        files = {m: (m,) for m in merged}
        edges = merged
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            sccs.append(comp)
    for v in files:
        if v not in index:
            visit(v)
    circles = sorted((c for c in sccs if len(c) > 1), key=len, reverse=True)
    unit = "modules" if top else "files"
    print(f"{src}: {len(files)} {unit}, {sum(map(len, edges.values()))} edges, {len(circles)} circle(s)")
    for c in circles:
        print(f"\ncircle of {len(c)} files:")
        for p in sorted(c):
            print("  " + (p if top else os.path.relpath(p, src)))
            if show_edges:
                for w in sorted(edges[p] & set(c)):
                    print("      -> " + (w if top else os.path.relpath(w, src)))
                    if top:
                        for a, b in why[(p, w)]:
                            print("           " + os.path.relpath(a, src) + " -> " + os.path.relpath(b, src))
    return 1 if circles else 0

sys.exit(main())
