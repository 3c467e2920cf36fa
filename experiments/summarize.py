#!/usr/bin/env python3
"""A markdown table of a set of dsgd runs (one row per metrics file), for the
experiment scripts.

usage: summarize.py OUT.md TARGET [--baseline SUBSTRING] [--title TEXT] [--label FILE=TEXT]... METRICS...

METRICS: metrics files, archives of them or paths through an archive, as
dsgd-plot takes them (docs/results/NAME/metrics.tar.gz).

Columns: run (paradigm and flags, as dsgd-plot labels it), N workers, final
test accuracy, time to TARGET (training seconds and seconds since the common
start, from the first evaluation at or above it), speed-up to TARGET over the
baseline run (the first whose label contains SUBSTRING, at the same N) in
time since the start (the lead's training time would flatter paradigms
whose other workers train while the lead evaluates), sync
fraction, staleness mean/max, steps per worker (min..max), the lead's
compute-to-communication ratio (its time computing gradients against its
time in or waiting for communication, per step: the regime of the run), and
why it stopped. Times are simulated seconds for simulated runs.

Repeats: runs with the same configuration and platform, seeds apart (every
flag but --seed and the output files, and for a simulated run the cluster it
ran on) make one row, with the number of runs, and each number as the median
and range over them, "median [min, max]". A time to target that some runs
never reached counts as infinite: the row says how many reached it, and
the median is "–" if fewer than half did. Configurations that would carry
the same label (a uniform and a slowed cluster, say) each say in brackets
what sets them apart; --label FILE=TEXT names a run's row (as dsgd-plot's). The speed-up is taken per seed
against the baseline's run of the same seed, then summarized the same
way (the ratio of the medians where the seeds do not match)."""
import importlib.machinery
import importlib.util
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_loader(
    "dsgd_plot", importlib.machinery.SourceFileLoader("dsgd_plot", next(
        p for p in (os.path.join(HERE, "dsgd-plot"), os.path.join(HERE, "..", "scripts", "dsgd-plot"))
        if os.path.exists(p) or p.endswith(os.path.join("scripts", "dsgd-plot")))))   # installed beside it, or the checkout's
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


def median(vals):
    """The median of numbers where None is infinite (never reached)."""
    v = sorted(vals, key=lambda x: math.inf if x is None else x)
    n = len(v)
    if n == 0:
        return None
    a, b = v[(n - 1) // 2], v[n // 2]
    return None if a is None or b is None else (a + b) / 2


def spread(vals, f="%.3f"):
    """One run's value, or the median [min, max] of repeats; with runs
    that never got there, how many did."""
    if len(vals) == 1:
        return fmt(vals[0], f)
    got = [v for v in vals if v is not None]
    if not got:
        return "–"
    text = f"{fmt(median(vals), f)} [{f % min(got)}, {f % max(got)}]"
    if len(got) < len(vals):
        text += f", {len(got)} of {len(vals)} reached"
    return text


def first_among(times, base, grid):
    """Which method reached the target first, with repeats: times maps each
    method to its seeds' times (None: never). base is first where its
    slowest seed was earlier than every other method's fastest by more than
    half the evaluation grid (runs within half a grid step reached it at the
    same evaluation); another method is ahead of base where its slowest seed
    was earlier than base's fastest by as much. Returns (base_first, the
    methods ahead of base); neither: the spreads overlap, a tie."""
    inf = math.inf
    lo = {p: min(inf if v is None else v for v in vs) for p, vs in times.items()}
    hi = {p: max(inf if v is None else v for v in vs) for p, vs in times.items()}
    others = [p for p in times if p != base]
    first = hi[base] < inf and all(hi[base] < lo[o] - grid / 2 for o in others)
    ahead = [o for o in others if hi[o] < inf and hi[o] < lo[base] - grid / 2]
    return first, ahead


def group(rows):
    """Rows of one configuration, in first-seen order. Configurations whose
    labels would be the same get, in brackets, the settings that tell them
    apart (dsgd-plot's rule, for its curves)."""
    names = plot.labels_apart([row["label"] for row in rows], [row["setting"] for row in rows], [row["N"] for row in rows])
    out = {}
    for row, name in zip(rows, names):
        row["label"] = name
        out.setdefault((name, row["N"]), []).append(row)
    return list(out.values())


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
    overrides = {}
    while "--label" in rest:
        i = rest.index("--label")
        if i + 1 >= len(rest) or "=" not in rest[i + 1]:
            raise plot.PlotError("--label wants FILE=TEXT")
        f, text = rest[i + 1].split("=", 1)
        overrides[os.path.abspath(f)] = text
        del rest[i:i + 2]
    runs = [plot.read_run(p) for p in plot.expand(rest)]
    rows = []
    for r in runs:
        d = r["done"] or {}
        tt, tw = first_hit(r, target)
        rows.append({"run": r, "label": overrides.get(os.path.abspath(r["path"])) or plot.label(r, {}, with_n=False),
                     "setting": plot.setting(r), "N": r["config"].get("workers"),
                     "seed": r["cfg"].get("seed"), "acc": d.get("test_acc"), "tt": tt, "tw": tw, "d": d})
    groups = group(rows)
    baselines = {}   # N -> {seed: the baseline's time since the start}
    if base:
        for g in groups:
            if base in g[0]["label"] and g[0]["N"] not in baselines:
                baselines[g[0]["N"]] = {row["seed"]: row["tw"] for row in g}
    repeats = any(len(g) > 1 for g in groups)
    lines = []
    if title:
        lines += [f"### {title}", ""]
    runs_col = " runs |" if repeats else ""
    lines.append(f"| run |{runs_col} N | final test acc | time to {target} (train s) | (wall s) | speed-up vs {base or '–'} (wall) "
                 "| sync fraction | staleness mean/max | steps per worker | compute/comm | stopped by |")
    lines.append("|---|" + ("---:|" if repeats else "") + "---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for g in groups:
        ds = [row["d"] for row in g]
        b = baselines.get(g[0]["N"], {})
        if b and all(row["seed"] in b for row in g):
            speeds = [b[row["seed"]] / row["tw"] if b[row["seed"]] and row["tw"] else None for row in g]
        else:   # no run of the baseline with the same seed: the ratio of the medians
            mb, mt = median(list(b.values())), median([row["tw"] for row in g])
            speeds = [mb / mt if mb and mt else None]
        st = "–"
        if all("staleness_mean" in d for d in ds):
            st = f"{spread([d['staleness_mean'] for d in ds], '%.2f')}/{max(d.get('staleness_max', 0) for d in ds):.0f}"
        ws = [w for d in ds for w in (d.get("worker_steps") or [d.get("steps")])]
        steps = f"{min(ws)}..{max(ws)}" if ws and None not in ws else "–"
        sync = [d.get("sync_fraction") for d in ds]
        ratio = [d.get("compute_comm_ratio") for d in ds]
        stops = sorted({str(d.get("stop_reason", "–")) for d in ds})
        runs_cell = f" {len(g)} |" if repeats else ""
        lines.append(f"| {g[0]['label']} |{runs_cell} {g[0]['N']} | {spread([row['acc'] for row in g], '%.4f')} "
                     f"| {spread([row['tt'] for row in g])} | {spread([row['tw'] for row in g])} "
                     f"| {spread(speeds, '%.2f')} | {spread(sync, '%.2f') if None not in sync else '–'} | {st} | {steps} "
                     f"| {spread(ratio, '%.3g') if None not in ratio else '–'} | {', '.join(stops)} |")
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
