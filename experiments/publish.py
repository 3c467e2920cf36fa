#!/usr/bin/env python3
"""Publish an experiment's runs beside docs/results.md.

usage: experiments/publish.py [--root DIR] RUN_DIR NAME

NAME is the experiment's folder under docs/results/, or EXPERIMENT/SUB for
runs made again and kept beside the experiment's first ones.

Copies RUN_DIR/summary.md and RUN_DIR/wall.tsv (what each run cost) to
docs/results/NAME/, and every RUN_DIR/metrics/*.jsonl (a subfolder of
metrics/ too, e.g. pilot runs kept apart) into the experiment's archive
docs/results/NAME/metrics.tar.gz, as metrics/FILE: the raw runs are data,
kept out of the way of the reader of docs/, and read in place by
scripts/dsgd-plot, summarize.py and results_tables.py. Runs already in the
archive stay unless a new run has their name, so several invocations of a
sweep may publish into one NAME. Each metrics file's recorded path (its
config event's "metrics", which is whatever --out gave, often a directory
of the machine that ran it) is rewritten to its place in the repository,
docs/results/NAME/metrics.tar.gz/metrics/FILE. Files are written whole (a
temporary, then a rename); the archive's bytes depend only on its files
(sorted, no times or owners), so publishing the same runs twice changes
nothing. Figures
are chosen by hand: copy the ones docs/results.md shows from
RUN_DIR/figures/. Then run experiments/results_tables.py --write to redraw
the tables and check the claims. --root: another repository (or a test's
folder) than this one."""
import gzip
import importlib.machinery
import importlib.util
import io
import os
import re
import sys
import tarfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# the archive is read as every reader of it reads it (scripts/dsgd-plot)
_spec = importlib.util.spec_from_loader(
    "dsgd_plot", importlib.machinery.SourceFileLoader("dsgd_plot", os.path.join(ROOT, "scripts", "dsgd-plot")))
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)


def write_whole(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".part", path)


def write_archive(path, files):
    """A gzipped tar of files (name -> bytes), reproducible: sorted, with no
    times, owners or modes but 0644."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            t.addfile(info, io.BytesIO(files[name]))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as z:
            z.write(raw.getvalue())
    os.replace(path + ".part", path)


def relocate(text, repo_path):
    """The metrics file's recorded path made repo_path."""
    return re.sub(r'"metrics":"[^"]*"', lambda _: '"metrics":"%s"' % repo_path, text)


def main(argv):
    root = ROOT
    if len(argv) > 2 and argv[1] == "--root":
        root, argv = argv[2], argv[:1] + argv[3:]
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    src, name = argv[1], argv[2]
    parts = name.split("/")
    if len(parts) > 2 or not all(re.fullmatch(r"[\w.-]+", x) and x not in (".", "..") for x in parts):
        print(f"publish: error: NAME '{name}' must be a folder name (letters, digits, '.', '-', '_'), or two for runs made again beside an experiment's (e.g. dssp-resnet/lanes)", file=sys.stderr)
        return 2
    mdir = os.path.join(src, "metrics")
    if not os.path.isdir(mdir):
        print(f"publish: error: '{mdir}' is not a directory; give the --out of an experiment's run", file=sys.stderr)
        return 1
    dest = os.path.join("docs", "results", name)
    archive = os.path.join(dest, "metrics.tar.gz")
    try:   # name -> bytes of the archive's files ({} when there is none yet)
        files = dict(plot.archive_files(os.path.join(root, archive))) if os.path.exists(os.path.join(root, archive)) else {}
    except plot.PlotError as e:
        print(f"publish: error: {e}", file=sys.stderr)
        return 1
    n = 0
    for top, _, names in os.walk(mdir):
        for f in sorted(names):
            if not f.endswith(".jsonl"):
                continue   # .part files of runs still going, logs
            member = "metrics/" + os.path.relpath(os.path.join(top, f), mdir).replace(os.sep, "/")
            with open(os.path.join(top, f), encoding="utf-8") as fh:
                files[member] = relocate(fh.read(), f"{archive}/{member}").encode("utf-8")
            n += 1
    write_archive(os.path.join(root, archive), files)
    copied = []
    for f in ("summary.md", "wall.tsv"):
        if os.path.exists(os.path.join(src, f)):
            with open(os.path.join(src, f), encoding="utf-8") as fh:
                write_whole(os.path.join(root, dest, f), fh.read())
            copied.append(f)
    also = f"; {' and '.join(copied)} to {dest}/" if copied else ""
    print(f"publish: {n} metrics files into {archive} ({len(files)} in all){also}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
