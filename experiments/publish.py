#!/usr/bin/env python3
"""Publish an experiment's runs beside docs/results.md.

usage: experiments/publish.py [--root DIR] RUN_DIR NAME

Copies RUN_DIR/summary.md, RUN_DIR/wall.tsv (what each run cost) and every
RUN_DIR/metrics/*.jsonl (a subfolder of metrics/ too, e.g. pilot runs kept
apart) to docs/results/NAME/, each metrics file's recorded path (its
config event's "metrics", which is whatever --out gave, often a directory
of the machine that ran it) rewritten to the file's place in the
repository. Files are written whole (a temporary, then a rename). Figures
are chosen by hand: copy the ones docs/results.md shows from
RUN_DIR/figures/. Then run experiments/results_tables.py --write to redraw
the tables and check the claims. --root: another repository (or a test's
folder) than this one."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write_whole(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".part", path)


def main(argv):
    root = ROOT
    if len(argv) > 2 and argv[1] == "--root":
        root, argv = argv[2], argv[:1] + argv[3:]
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    src, name = argv[1], argv[2]
    if not re.fullmatch(r"[\w.-]+", name):
        print(f"publish: error: NAME '{name}' must be one folder name (letters, digits, '.', '-', '_')", file=sys.stderr)
        return 2
    mdir = os.path.join(src, "metrics")
    if not os.path.isdir(mdir):
        print(f"publish: error: '{mdir}' is not a directory; give the --out of an experiment's run", file=sys.stderr)
        return 1
    dest = os.path.join("docs", "results", name)
    n = 0
    for top, _, files in os.walk(mdir):
        for f in sorted(files):
            if not f.endswith(".jsonl"):
                continue   # .part files of runs still going, logs
            rel = os.path.relpath(os.path.join(top, f), mdir)
            repo_path = os.path.join(dest, "metrics", rel)
            with open(os.path.join(top, f), encoding="utf-8") as fh:
                text = fh.read()
            text = re.sub(r'"metrics":"[^"]*"', lambda _: '"metrics":"%s"' % repo_path, text)
            write_whole(os.path.join(root, repo_path), text)
            n += 1
    copied = []
    for f in ("summary.md", "wall.tsv"):
        if os.path.exists(os.path.join(src, f)):
            with open(os.path.join(src, f), encoding="utf-8") as fh:
                write_whole(os.path.join(root, dest, f), fh.read())
            copied.append(f)
    print(f"publish: {n} metrics files{''.join(' and ' + f for f in copied)} to {dest}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
