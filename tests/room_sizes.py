#!/usr/bin/env python3
"""Rooms of a size a reader can hold: no file of src/ over 600 lines (the
conv kernels' template, an .inc, excepted) and no function over 120 lines.
A function is what its opening brace alone on a line at column 0 and the
next closing one at column 0 enclose (the house style; a function written
otherwise is not seen, so keep the style).

usage: tests/room_sizes.py SRC_DIR   (prints the largest file and function;
exit 1 naming every one over its limit)"""
import os
import sys

FILE_MAX, FN_MAX = 600, 120


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    over, big_file, big_fn = [], (0, ""), (0, "")
    for top, _, names in os.walk(argv[1]):
        for n in sorted(names):
            if not n.endswith((".c", ".h", ".inc")):
                continue
            path = os.path.join(top, n)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            if not n.endswith(".inc"):
                big_file = max(big_file, (len(lines) - 1, path))
                if len(lines) - 1 > FILE_MAX:
                    over.append(f"{path}: {len(lines) - 1} lines (at most {FILE_MAX})")
            start = None
            for i, line in enumerate(lines):
                if line == "{" and i > 0:
                    start = i
                elif line == "}" and start is not None:
                    head = lines[start - 1].strip()
                    k = start - 1   # the line that names it: the first of its declaration
                    while k > 0 and lines[k - 1].strip() and not lines[k - 1].rstrip().endswith((";", "}", "*/")):
                        k -= 1
                    where = f"{path}:{k + 1} {lines[k].strip()[:60] or head[:60]}"
                    length = i - k + 1
                    big_fn = max(big_fn, (length, where))
                    if length > FN_MAX:
                        over.append(f"{where}: a function of {length} lines (at most {FN_MAX})")
                    start = None
    if over:
        print("; ".join(over))
        return 1
    print(f"largest file {big_file[1]} ({big_file[0]} lines), largest function {big_fn[1]} ({big_fn[0]} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
