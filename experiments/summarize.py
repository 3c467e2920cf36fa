#!/usr/bin/env python3
"""A markdown table of a set of dsgd runs (one row per metrics file), for the
experiment scripts.

usage: summarize.py OUT.md TARGET [--baseline SUBSTRING] [--title TEXT] METRICS.jsonl...

Columns: run (paradigm and flags, as dsgd-plot labels it), N workers, final
test accuracy, time to TARGET (training seconds and seconds since the common
start, from the first evaluation at or above it), speed-up to TARGET over the
baseline run (the first whose label contains SUBSTRING, at the same N) in
time since the start (the lead's training time would flatter paradigms
whose other workers train while the lead evaluates), sync
fraction, staleness mean/max, steps per worker (min..max), and why it
stopped. Times are simulated seconds for simulated runs."""
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_loader(
    "dsgd_plot", importlib.machinery.SourceFileLoader("dsgd_plot", os.path.join(HERE, "..", "scripts", "dsgd-plot")))
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)


def first_hit(run, target):
    for e in run["evals"]:
        if e.get("test_acc") is not None and e["test_acc"] >= target:
            return e.get("train_s", e.get("time")), e.get("run_s", e.get("time"))
    return None, None


def ttt(path, target, wall=False):
    """Seconds to the first evaluation at or above target (None: never): the
    lead's training time, or with wall=True the time since the common start
    (the fair clock when other workers train while the lead evaluates)."""
    return first_hit(plot.read_run(path), target)[1 if wall else 0]


def fmt(v, f="%.3f"):
    return "–" if v is None else f % v


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if argv else 2)
    out, target = argv[0], float(argv[1])
    rest = argv[2:]
    base, title = None, None
    if "--baseline" in rest:
        i = rest.index("--baseline"); base = rest[i + 1]; del rest[i:i + 2]
    if "--title" in rest:
        i = rest.index("--title"); title = rest[i + 1]; del rest[i:i + 2]
    runs = [plot.read_run(p) for p in rest]
    rows = []
    for r in runs:
        d = r["done"] or {}
        tt, tw = first_hit(r, target)
        rows.append({"run": r, "label": plot.label(r, {}, with_n=False), "N": r["config"].get("workers"),
                     "acc": d.get("test_acc"), "tt": tt, "tw": tw, "d": d})
    baselines = {}
    if base:
        for row in rows:
            if base in row["label"] and row["N"] not in baselines:
                baselines[row["N"]] = row["tw"]
    lines = []
    if title:
        lines += [f"### {title}", ""]
    lines.append(f"| run | N | final test acc | time to {target} (train s) | (wall s) | speed-up vs {base or '–'} (wall) "
                 "| sync fraction | staleness mean/max | steps per worker | stopped by |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        d = row["d"]
        b = baselines.get(row["N"])
        speed = b / row["tw"] if b and row["tw"] else None
        st = "–"
        if "staleness_mean" in d:
            st = f"{d['staleness_mean']:.2f}/{d.get('staleness_max', 0):.0f}"
        ws = d.get("worker_steps") or [d.get("steps")]
        steps = f"{min(ws)}..{max(ws)}" if ws and None not in ws else "–"
        lines.append(f"| {row['label']} | {row['N']} | {fmt(row['acc'], '%.4f')} | {fmt(row['tt'])} | {fmt(row['tw'])} "
                     f"| {fmt(speed, '%.2f')} | {fmt(d.get('sync_fraction'), '%.2f')} | {st} | {steps} "
                     f"| {d.get('stop_reason', '–')} |")
    text = "\n".join(lines) + "\n"
    with open(out + ".part", "w") as f:
        f.write(text)
    os.replace(out + ".part", out)
    print(text, end="")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except plot.PlotError as e:
        sys.exit(f"summarize: error: {e}")
