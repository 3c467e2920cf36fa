#!/usr/bin/env python3
"""A circle of files in one folder of the build: file a uses file b when
a's object leaves undefined a symbol that b's defines (nm). Prints the
number of uses of one file by another, or exits 1 naming a circle.
Usage: file_circles.py OBJECT_DIR"""
import collections
import glob
import os
import subprocess
import sys

defs, uses = {}, collections.defaultdict(set)
for o in sorted(glob.glob(os.path.join(sys.argv[1], "*.o"))):
    f = os.path.basename(o)[:-2] + ".c"
    for line in subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBR":
            defs[p[2]] = f
        elif len(p) == 2 and p[0] == "U":
            uses[f].add(p[1])
edges = {f: sorted({defs[u] for u in us if u in defs and defs[u] != f}) for f, us in uses.items()}


def path(a, b, seen):
    """A chain of uses from a to b, or None."""
    for n in edges.get(a, []):
        if n == b:
            return [a, b]
        if n not in seen:
            seen.add(n)
            rest = path(n, b, seen)
            if rest:
                return [a] + rest
    return None


for a in sorted(edges):
    for b in edges[a]:
        back = path(b, a, {b})
        if back:
            sys.exit(" -> ".join([a] + back))
print(sum(len(v) for v in edges.values()))
