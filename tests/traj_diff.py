#!/usr/bin/env python3
"""Largest relative difference between the loss trajectories of two dsgd
metrics files: train_loss and test_loss of every eval event, paired by step.
Prints one number (or an error if the steps differ).
Usage: traj_diff.py A.jsonl B.jsonl"""
import json, sys

def evals(path):
    return [r for r in map(json.loads, open(path)) if r["event"] == "eval"]

a, b = evals(sys.argv[1]), evals(sys.argv[2])
if not a or [r["step"] for r in a] != [r["step"] for r in b]:
    sys.exit("eval steps differ: %s vs %s" % ([r["step"] for r in a], [r["step"] for r in b]))
print("%.3g" % max(abs(x[k] - y[k]) / max(abs(x[k]), 1e-12)
                   for x, y in zip(a, b) for k in ("train_loss", "test_loss")))
