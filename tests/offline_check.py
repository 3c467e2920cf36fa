#!/usr/bin/env python3
"""Compare a run evaluated inline with the same run under --eval-offline.

Usage: offline_check.py INLINE.jsonl OFFLINE.jsonl

The evaluations must be the same ones (step, samples, test accuracy and
loss, training loss, the paradigm's figures), every offline one but the
final marked "offline"; the run's time stamps may differ. Prints one line;
exits 1 if they differ."""
import json
import sys

SAME = ("step", "samples", "test_acc", "test_loss", "train_loss", "staleness_mean", "staleness_max", "sync_fraction")


def evals(path):
    return [e for e in map(json.loads, open(path)) if e["event"] == "eval"]


a, b = evals(sys.argv[1]), evals(sys.argv[2])
problems = []
if len(a) != len(b) or len(a) < 2:
    problems.append(f"{len(a)} inline evaluations against {len(b)} offline")
for x, y in zip(a, b):
    for k in SAME:
        if x.get(k) != y.get(k):
            problems.append(f"step {x.get('step')}: {k} {x.get(k)} inline, {y.get(k)} offline")
marks = [e.get("offline") for e in b]
if marks != [1] * (len(b) - 1) + [None]:
    problems.append(f"offline marks {marks}")
if any(e.get("offline") for e in a):
    problems.append("an inline evaluation is marked offline")
times = [e["run_s"] for e in b]
if times != sorted(times):
    problems.append(f"offline run_s out of order: {times}")
if problems:
    print("; ".join(problems[:4]))
    sys.exit(1)
print(f"{len(a)} evaluations agree, {len(a) - 1} of them offline")
