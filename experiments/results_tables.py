#!/usr/bin/env python3
"""The tables of docs/results.md, drawn from the metrics files beside it
(docs/results/EXP/metrics.tar.gz, read in place).

usage: experiments/results_tables.py [--check | --write] [DOC...]

A DOC (default: docs/results.md and README.md) holds each generated table
between a line "<!-- table NAME -->" and a line "<!-- end table -->", and
the claims of its file name: sentences of its prose whose numbers are
drawn from the metrics (CLAIMS below). --check (the default) exits 1
naming every table and claim whose text differs from what the metrics give
(tests/experiments.sh runs it); --write replaces the numbers in place. Times to a
target are the time since the common start ("wall s" in the experiments'
summaries: in the asynchronous paradigms the other workers train while the
lead evaluates), taken at the first evaluation at or above the target, so
known to the evaluation grid; two runs within half a grid step of each
other reached it at the same evaluation and tie. Bold marks the best
accuracy and the shortest time of a row when one run alone has it.

Tables: jin, jin-resnet, jin-resnet-why, lc-speedup, dssp, dssp-transient, dssp-ratios, dssp-resnet, dssp-resnet-lanes, selsync, selsync-resnet, distbelief, distbelief-resnet, distbelief-resnet-lanes."""
import functools
import os
import re
import statistics
import sys
from decimal import ROUND_HALF_UP, Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summarize import first_among, first_hit, fmt, median, plot, spread  # noqa: E402

ROOT = os.path.join(HERE, "..")
RES = os.path.join(ROOT, "docs", "results")


class Missing(Exception):
    pass


def r3(v, places=3):
    """v to `places` decimals, halves up, as written by hand: accuracies are
    multiples of 1/2000 (0.8955 is 0.896, not the float's 0.895)."""
    return str(Decimal(repr(round(v, 6))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP))


def metrics_path(exp, name):
    """Where experiment exp keeps run name: its archive's metrics/NAME.jsonl."""
    return os.path.join(RES, exp, "metrics.tar.gz", "metrics", name + ".jsonl")


@functools.lru_cache(maxsize=None)   # the claims read the same runs many times
def run(exp, name):
    path = metrics_path(exp, name)
    if not plot.exists(path):
        raise Missing(path)
    return plot.read_run(path)


def present(exp, names):
    """The runs of names that exist (a sweep still running has some), in order."""
    return [run(exp, x) for x in names if plot.exists(metrics_path(exp, x))]


def acc(r):
    return (r["done"] or {}).get("test_acc")


def tw(r, target):
    return first_hit(r, target)[1]


def failure(exp, name):
    """What the experiment's summary says about a run that left no metrics."""
    try:
        text = open(os.path.join(RES, exp, "summary.md"), encoding="utf-8").read()
    except OSError:
        return "failed"
    m = re.search(rf"- {re.escape(name)} failed: .*?diverged at step (\d+)", text)
    return f"diverged (step {int(m.group(1)):,})".replace(",", " ") if m else "failed"


def unique_best(vals, better, tol):
    """Index of the one value better than all others by more than tol (None: a tie or nothing)."""
    got = [(v, i) for i, v in enumerate(vals) if v is not None]
    if not got:
        return None
    best = min(got) if better == "low" else max(got)
    rivals = [v for v, i in got if i != best[1] and abs(v - best[0]) <= tol]
    return None if rivals else best[1]


def cells(pairs, grid, acc_tol=0.0):
    """'acc / time s' cells of one row, the unique best of each in bold;
    pairs: (acc, time) or a string for a run that failed."""
    accs = [p[0] if isinstance(p, tuple) else None for p in pairs]
    times = [p[1] if isinstance(p, tuple) else None for p in pairs]
    ba, bt = unique_best(accs, "high", acc_tol), unique_best(times, "low", grid / 2)
    out = []
    for i, p in enumerate(pairs):
        if not isinstance(p, tuple):
            out.append(p)
            continue
        a, t = r3(p[0]), "–" if p[1] is None else f"{r3(p[1], 2)} s"
        if i == ba and i == bt:
            out.append(f"**{a} / {t}**")
        else:
            out.append(f"{'**' + a + '**' if i == ba else a} / {'**' + t + '**' if i == bt else t}")
    return out


def md(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def jin():
    target, grid, rows = 0.82, 0.1, []
    for n in (4, 8, 16, 32, 64, 128):
        rs = [run("jin", f"{p}-{n}") for p in ("bsp", "easgd", "gossip")]
        ts = [tw(r, target) for r in rs]
        b = ts[0]
        first = "–"
        if b is not None:
            if all(o is None or b < o - grid / 2 for o in ts[1:]):
                first = "bsp"
            else:
                tied = [p for p, o in zip(("easgd", "gossip"), ts[1:]) if o is not None and abs(o - b) <= grid / 2]
                first = f"bsp and {' and '.join(tied)} (same evaluation)" if tied else "–"
        rows.append([n] + [f"{r3(acc(r))} / {'–' if t is None else f'{r3(t, 2)} s'}" for r, t in zip(rs, ts)] + [first])
    return md(["N", "bsp: acc / time to 0.82", "easgd", "gossip", "first to 0.82"], rows)


def secs(ts):
    """Times to a target over seeds, in seconds: "2.51 [1.76, 2.76] s",
    "5.75 [5.01, 5.75] s, 2 of 3 reached", or "–" where none reached it."""
    t = spread(ts, "%.2f")
    if t == "–":
        return t
    return t.replace("], ", "] s, ", 1) if "reached" in t else t + " s"


def jin_resnet():
    """The regime rerun: per N and step size, each method's final accuracy and
    time to 0.80 over its seeds, and who was first (summarize.first_among)."""
    target, grid, rows = 0.80, 0.25, []
    meths = ("bsp", "easgd", "gossip")
    for lr in ("0.1", "0.025"):
        for n in (4, 8, 16, 32, 64, 128):
            rs = {p: present("jin-resnet", [f"{p}-{n}-lr{lr}-seed{sd}" for sd in SEEDS]) for p in meths}
            if not all(rs.values()):
                continue
            ts = {p: [tw(r, target) for r in v] for p, v in rs.items()}
            first, ahead = first_among(ts, "bsp", grid)
            who = "bsp" if first else " and ".join(ahead) if ahead else "a tie"
            cells = [f"{spread([acc(r) for r in rs[p]], '%.3f')} / {secs(ts[p])}"
                     + (f" ({len(rs[p])} of {len(SEEDS)} seeds)" if len(rs[p]) < len(SEEDS) else "") for p in meths]
            rows.append([n, lr] + cells + [who])
    return md(["N", "step size", "bsp: acc / time to 0.80", "easgd", "gossip", "first to 0.80"], rows)


def jin_resnet_why():
    """Why the methods part as N grows (step size 0.1), per N over the
    seeds: the workers' mean steps in the 6 s; bsp's milliseconds a step
    computing and communicating; each method's communicating share of its
    (lead's) step; gossip's replicas' consensus distance; EASGD's centre's
    final accuracy."""
    rows = []
    for n in (4, 8, 16, 32, 64, 128):
        rs = {p: present("jin-resnet", [f"{p}-{n}-lr0.1-seed{sd}" for sd in SEEDS]) for p in ("bsp", "easgd", "gossip")}
        if not all(rs.values()):
            continue
        wsteps = lambda r: statistics.mean(done_of(r, "worker_steps") or [done_of(r, "steps")])
        steps = lambda p: spread([wsteps(r) for r in rs[p]], "%.0f")
        share = lambda p: spread([done_of(r, "comm_s_per_step") / (done_of(r, "comm_s_per_step") + done_of(r, "compute_s_per_step"))
                                  for r in rs[p]], "%.2f")
        ms = lambda p, k: spread([1e3 * done_of(r, k) for r in rs[p]], "%.1f")
        rows.append([n, steps("bsp"), ms("bsp", "compute_s_per_step"), ms("bsp", "comm_s_per_step"), share("bsp"),
                     steps("gossip"), share("gossip"), spread([done_of(r, "consensus_distance") for r in rs["gossip"]], "%.2f"),
                     steps("easgd"), share("easgd"), spread([acc(r) for r in rs["easgd"]], "%.3f")])
    return md(["N", "bsp steps", "bsp ms computing a step", "bsp ms communicating", "bsp comm share", "gossip steps",
               "gossip comm share", "gossip consensus distance", "easgd steps", "easgd comm share", "easgd centre's acc"],
              rows)


DSSP = ("bsp-ps", "ssp", "dssp", "asp")
CLUSTERS = (("hetero", "link-bound, mixed"), ("homo", "link-bound, uniform"),
            ("cpu-hetero", "compute-bound, mixed"), ("cpu-homo", "compute-bound, uniform"))


def dssp():
    target, rows = 0.82, []
    for cl, name in CLUSTERS:
        for n in (8, 16):
            grid = 2.0 if cl.startswith("cpu") else 0.5
            pairs = []
            for p in DSSP:
                try:
                    r = run("dssp", f"{cl}-{n}-{p}")
                    pairs.append((acc(r), tw(r, target)))
                except Missing:
                    pairs.append(failure("dssp", f"{cl}-{n}-{p}"))
            rows.append((n, cl.startswith("cpu"), [name, n] + cells(pairs, grid)))
    rows.sort(key=lambda x: (x[1], x[0]))
    return md(["cluster", "N", "bsp-ps", "ssp (s = 3)", "dssp (3…15)", "asp"], [r[2] for r in rows])


SEEDS = (1, 2, 3)


def dssp_transient():
    target, rows = 0.82, []
    for n in (8, 16):
        row = [n]
        for p in DSSP:
            rs = [run("dssp", f"cpu-transient-{n}-{p}-seed{s}") for s in SEEDS]
            row.append(f"{spread([acc(r) for r in rs], '%.3f')} / {spread([tw(r, target) for r in rs], '%.2f')} s")
        rows.append(row)
    return md(["N", "bsp-ps", "ssp (s = 3)", "dssp (3…15)", "asp"], rows)


def dssp_ratios():
    target = 0.82
    ratio = lambda a, b: a / b if a is not None and b is not None else None
    rows = []
    for cl, name in (("hetero", "link-bound, mixed"), ("cpu-hetero", "compute-bound, mixed"),
                     ("cpu-transient", "compute-bound, transient stragglers")):
        for n in (8, 16):
            suffixes = [f"-seed{s}" for s in SEEDS] if cl == "cpu-transient" else [""]
            ds, bs = [], []
            for suf in suffixes:
                d, s, b = (tw(run("dssp", f"{cl}-{n}-{p}{suf}"), target) for p in ("dssp", "ssp", "bsp-ps"))
                ds.append(ratio(d, s))
                bs.append(ratio(d, b))
            rows.append([f"{name}, {n} workers"] + [spread(v, "%.2f") for v in (ds, bs)])
    return md(["cluster", "dssp / ssp", "dssp / bsp-ps"], rows)


DSSP_RN = (("rn-transient", "transient stragglers"), ("rn-hetero", "mixed"), ("rn-homo", "uniform"))


def dssp_resnet_runs(cl, n, exp="dssp-resnet"):
    """Paradigm -> the seeds' runs on one regime cluster, those that exist."""
    return {p: present(exp, [f"{cl}-{n}-{p}-seed{sd}" for sd in SEEDS]) for p in DSSP}


def dssp_over(ts, other):
    """dssp's times to the target against another paradigm's, seed by seed
    (None where either never reached it)."""
    return [d / x if d is not None and x is not None else None for d, x in zip(ts["dssp"], ts[other])]


def dssp_resnet(exp="dssp-resnet"):
    """The regime rerun: per cluster and N, each paradigm's final accuracy
    and time to 0.80 over the seeds, and dssp's time against ssp's and
    bsp-ps's, seed by seed (below 1: dssp first). A configuration whose
    seeds have not all run is left out. exp: dssp-resnet/lanes holds the
    runs made again once a shard took as many gradients at once as there
    are shards."""
    target, rows = 0.80, []
    for cl, name in DSSP_RN:
        for n in (8, 16):
            rs = dssp_resnet_runs(cl, n, exp)
            if not all(len(v) == len(SEEDS) for v in rs.values()):
                continue
            ts = {p: [tw(r, target) for r in v] for p, v in rs.items()}
            row = [name, n] + [f"{spread([acc(r) for r in rs[p]], '%.3f')} / {secs(ts[p])}" for p in DSSP]
            row += [spread(dssp_over(ts, p), "%.2f") for p in ("ssp", "bsp-ps")]
            rows.append(row)
    return md(["cluster", "N", "bsp-ps", "ssp (s = 3)", "dssp (3…15)", "asp", "dssp / ssp", "dssp / bsp-ps"], rows)


SELSYNC = (("iid", 8, "1Gbps", "IID, 8, 1 GbE"), ("iid", 16, "1Gbps", "IID, 16, 1 GbE"),
           ("iid", 8, "10Gbps", "IID, 8, 10 GbE"), ("iid", 16, "10Gbps", "IID, 16, 10 GbE"),
           ("label-skew", 8, "1Gbps", "label skew, 8, 1 GbE"), ("label-skew", 8, "10Gbps", "label skew, 8, 10 GbE"),
           ("label-skew+inject", 8, "1Gbps", "skew + injection, 8, 1 GbE"),
           ("label-skew+inject", 8, "10Gbps", "skew + injection, 8, 10 GbE"))
DELTAS = ("0.01", "0.02", "0.03", "0.05", "0.1")


def selsync():
    target, rows = 0.80, []
    for part, n, net, name in SELSYNC:
        pre = f"{net}-{n}-{part}"
        b, loc = run("selsync", f"{pre}-bsp"), run("selsync", f"{pre}-localsgd")
        sel = {d: run("selsync", f"{pre}-selsync-{d}") for d in DELTAS}
        sync = {d: (r["done"] or {}).get("sync_fraction") for d, r in sel.items()}
        best = max(DELTAS, key=lambda d: (acc(sel[d]), -float(d)))
        a = r3(acc(sel[best]))
        if acc(sel[best]) >= acc(b) - 0.005 and sync[best] < 0.5:   # within half a point, syncing less than half
            a = f"**{a}**"
        high = [d for d in DELTAS if float(d) >= 0.03]
        lo, hi = min(acc(sel[d]) for d in high), max(acc(sel[d]) for d in high)
        fr = {r3(sync[d], 2) for d in high}
        rng = f"{r3(lo)}–{r3(hi)}" + (f" ({fr.pop()})" if len(fr) == 1 else "")
        t = lambda r: "–" if tw(r, target) is None else r3(tw(r, target), 2)
        rows.append([name, r3(acc(b)), f"{best}: {a} ({r3(sync[best], 2)})", rng, r3(acc(loc)),
                     f"{t(b)} / {t(sel[best])} / {t(loc)}"])
    return md(["setting", "bsp acc", "best selsync δ: acc (sync fraction)", "selsync at δ ≥ 0.03", "localsgd H=8",
               "time since the start to 0.80: bsp / best selsync / localsgd (s)"], rows)


SELSYNC_RN = (("1.27Gbps", "10 GbE (1.27 Gb/s)"), ("0.127Gbps", "1 GbE (0.127 Gb/s)"))
SELSYNC_RN_PARTS = (("iid", "IID"), ("label-skew", "label skew"), ("label-skew+inject", "skew + injection"))
RN_DELTAS = ("0.01", "0.0125", "0.015", "0.02", "0.3")


def selsync_resnet_runs(net, part, meth):
    """The seeds' runs of one method (bsp, selsync-δ, localsgd) in one setting,
    those that exist (a sweep still running has some)."""
    return present("selsync-resnet", [f"{net}-8-{part}-{meth}-seed{sd}" for sd in SEEDS])


def selsync_resnet_best(sel):
    """The δ whose seeds' median final accuracy is highest (a tie: the larger δ, which synchronizes less)."""
    return max(sel, key=lambda d: (median([acc(r) for r in sel[d]]), float(d)))


def selsync_resnet():
    """The regime rerun: per link and partition, bsp's final accuracy after
    400 steps (and with --sync-bn, where it ran: on label skew); at δ = 0.3 and at the best δ, the accuracy difference to bsp
    (seed by seed) and the sync fraction; the sync fraction at every δ;
    local SGD's difference; the times to 0.80 since the start. Median
    [min, max] over the seeds."""
    lo = " / ".join(d for d in RN_DELTAS if d != "0.3")
    head = ["setting", "bsp acc", "bsp --sync-bn acc", "δ = 0.3: acc − bsp / sync fraction",
            "best δ: acc − bsp / sync fraction", f"sync fraction at δ = {lo}", "localsgd H=8: acc − bsp",
            "time since the start to 0.80: bsp / δ = 0.3 / best δ / localsgd (s)"]
    rows = []
    for net, nname in SELSYNC_RN:
        for part, pname in SELSYNC_RN_PARTS:
            b = selsync_resnet_runs(net, part, "bsp")
            sel = {d: selsync_resnet_runs(net, part, f"selsync-{d}") for d in RN_DELTAS}
            loc = selsync_resnet_runs(net, part, "localsgd")
            if len(b) < len(SEEDS) or not all(len(v) == len(b) for v in list(sel.values()) + [loc]):
                continue
            diff = lambda rs: spread([100 * (acc(r) - acc(x)) for r, x in zip(rs, b)], "%+.2f").replace("-", "−")
            sync = lambda rs: spread([sync_of(r) for r in rs], "%.2f")
            best = selsync_resnet_best(sel)
            t = lambda rs: spread([tw(r, 0.80) for r in rs], "%.2f")
            fracs = " / ".join(r3(median([sync_of(r) for r in sel[d]]), 2) for d in RN_DELTAS if d != "0.3")
            sbn = selsync_resnet_runs(net, part, "bsp-syncbn")
            rows.append(dict(zip(head, [
                f"{pname}, {nname}", spread([acc(r) for r in b], "%.3f"),
                spread([acc(r) for r in sbn], "%.3f") if sbn else "–",
                f"{diff(sel['0.3'])} pt / {sync(sel['0.3'])}",
                f"{best}: {diff(sel[best])} pt / {sync(sel[best])}", fracs, f"{diff(loc)} pt",
                f"{t(b)} / {t(sel['0.3'])} / {t(sel[best])} / {t(loc)}"])))
    # no --sync-bn runs yet: no such column
    head = [h for h in head if h != "bsp --sync-bn acc" or any(r[h] != "–" for r in rows)]
    return md(head, [[r[h] for h in head] for r in rows])


def distbelief():
    target, grid, rows = 0.82, 0.5, []
    for n in (1, 2, 4, 8, 16, 32):
        pairs = []
        for p in ("bsp", "downpour-sgd", "downpour-adagrad", "downpour-adagrad-warm", "sandblaster"):
            r = run("distbelief", f"{p}-{n}")
            pairs.append((acc(r), tw(r, target)))
        rows.append([n] + [f"{r3(a)} / {'–' if t is None else f'{r3(t, 2)} s'}" for a, t in pairs])
    return md(["replicas", "bsp", "Downpour SGD", "Downpour + Adagrad", "+ Adagrad + warm start", "Sandblaster"], rows)


DB_RN = (("bsp", "bsp"), ("downpour-sgd-Ss", "Downpour SGD"), ("downpour-adagrad-Ss-g0.1", "+ Adagrad γ 0.1"),
         ("downpour-adagrad-Ss-g0.01", "+ Adagrad γ 0.01"),
         ("downpour-adagrad-warm-Ss-g0.01", "+ Adagrad γ 0.01 + warm start"),
         ("downpour-adagrad-S1-g0.01", "Adagrad γ 0.01, one shard"), ("sandblaster", "Sandblaster"))
DB_RN_NS = (1, 4, 16, 32)


def distbelief_resnet_runs(v, n, exp="distbelief-resnet"):
    """The seeds' runs of one variant at N replicas, those that exist."""
    return present(exp, [f"{v}-{n}-seed{sd}" for sd in SEEDS])


def distbelief_resnet(exp="distbelief-resnet"):
    """The regime rerun: per N, each variant's final accuracy and time to 0.80
    since the start over the seeds ("–" in a column a replica count does not
    run: one shard is S shards at N = 1). An N whose runs have not all
    finished is left out. exp: distbelief-resnet/lanes holds the 16 replicas
    again once a shard took as many gradients at once as there are shards."""
    target, rows = 0.80, []
    for n in DB_RN_NS:
        rs = {v: distbelief_resnet_runs(v, n, exp) for v, _ in DB_RN}
        if n == 1:
            rs.pop("downpour-adagrad-S1-g0.01")
        if not all(len(x) == len(SEEDS) for x in rs.values()):
            continue
        rows.append([n] + [f"{spread([acc(r) for r in rs[v]], '%.3f')} / {secs([tw(r, target) for r in rs[v]])}"
                           if v in rs else "–" for v, _ in DB_RN])
    return md(["replicas"] + [name for _, name in DB_RN], rows)


# ---- claims: numbers in the prose, each drawn from the metrics ----------
# A claim is a sentence of README.md or docs/results.md with its numbers
# left out ("{}"); the metrics fill them in. The sentence must appear in the
# document (line breaks and spaces as they fall) with exactly these numbers.


def points(v):
    """A difference of accuracies in points, signed as written (+0.85, −0.25)."""
    s = r3(100 * v, 2)
    return s.replace("-", "−") if s.startswith("-") else "+" + s


def jin_first():
    """Per N, the methods that reached 0.82 first (bsp's ties included)."""
    target, grid, out = 0.82, 0.1, {}
    for n in (4, 8, 16, 32, 64, 128):
        ts = dict(zip(("bsp", "easgd", "gossip"), (tw(run("jin", f"{p}-{n}"), target) for p in ("bsp", "easgd", "gossip"))))
        b = ts["bsp"]
        out[n] = {p for p, t in ts.items() if t is not None and b is not None and abs(t - b) <= grid / 2}
        if b is None or any(t is not None and t < b - grid / 2 for t in ts.values()):
            out[n] = set()
    return out


def jin_claim():
    first = jin_first()
    ns = sorted(first)
    alone = [n for n in ns if first[n] == {"bsp"}]
    cross = next(n for n in ns if all(first[m] == {"bsp"} for m in ns if m >= n))
    ties = [n for n in ns if "bsp" in first[n] and len(first[n]) > 1]
    assert alone and ties
    return str(cross), ", ".join(str(n) for n in ties), str(ns[-1])


def selsync_runs(part, n, net):
    pre = f"{net}-{n}-{part}"
    sel = {d: run("selsync", f"{pre}-selsync-{d}") for d in DELTAS}
    best = max(DELTAS, key=lambda d: (acc(sel[d]), -float(d)))
    return run("selsync", f"{pre}-bsp"), run("selsync", f"{pre}-localsgd"), sel, best


def sync_of(r):
    return (r["done"] or {}).get("sync_fraction")


def selsync_iid():
    """IID on 1 GbE, 8 and 16 workers: best δ's accuracy against bsp, its
    sync fraction, and local SGD's speed-up over bsp to 0.80."""
    gains, fracs, speeds = [], [], []
    for n in (8, 16):
        b, loc, sel, best = selsync_runs("iid", n, "1Gbps")
        gains.append(points(acc(sel[best]) - acc(b)))
        fracs.append(f"{round(100 * sync_of(sel[best]))}%")
        speeds.append(tw(b, 0.80) / tw(loc, 0.80))
    return gains, fracs, speeds


def selsync_skew():
    """Label skew (no injection), 1 and 10 GbE: points lost against bsp at the
    best δ, and at the δs that synchronize every step (min, max each)."""
    best, every = [], []
    for net in ("1Gbps", "10Gbps"):
        b, _, sel, d = selsync_runs("label-skew", 8, net)
        best.append(100 * (acc(b) - acc(sel[d])))
        every.append([100 * (acc(b) - acc(r)) for r in sel.values() if sync_of(r) >= 0.995])
    return best, every


def claim_selsync_brief():
    gains, fracs, speeds = selsync_iid()
    best, every = selsync_skew()
    allev = [v for e in every for v in e]
    return (gains[0], gains[1], fracs[0], fracs[1], r3(min(speeds), 1), r3(max(speeds), 1),
            str(round(min(best))), str(round(max(best))), str(round(min(allev))), str(round(max(allev))))


def claim_selsync_holds():
    gains, fracs, _ = selsync_iid()
    return fracs[0], fracs[1], gains[0], gains[1]


def claim_selsync_skew():
    best, every = selsync_skew()
    return (r3(best[0], 1), r3(best[1], 1), r3(min(every[0]), 1), r3(max(every[0]), 1),
            r3(min(every[1]), 1), r3(max(every[1]), 1))


def claim_localsgd():
    _, _, speeds = selsync_iid()
    return r3(speeds[0], 1), r3(speeds[1], 1)


def dssp_ratio(cl, n, over, seed=""):
    d, o = (tw(run("dssp", f"{cl}-{n}-{p}{seed}"), 0.82) for p in ("dssp", over))
    return d / o if d is not None and o is not None else None


def claim_dssp_brief():
    transient = [dssp_ratio("cpu-transient", 16, "ssp", f"-seed{s}") for s in SEEDS]
    return (r3(dssp_ratio("cpu-hetero", 8, "bsp-ps"), 2), r3(dssp_ratio("cpu-hetero", 16, "ssp"), 2),
            spread(transient, "%.2f"))


def distbelief_acc(p, n):
    return acc(run("distbelief", f"{p}-{n}"))


def claim_distbelief_brief():
    ns = (1, 2, 4, 8, 16, 32)
    chance = [n for n in ns if distbelief_acc("downpour-sgd", n) < 0.25]   # 10 classes: chance is 0.10
    ada = [distbelief_acc("downpour-adagrad", n) for n in chance]
    sb = {n: tw(run("distbelief", f"sandblaster-{n}"), 0.82) for n in ns}
    fastest = min(t for t in sb.values() if t is not None)
    top = [n for n, t in sb.items() if t is not None and t <= fastest * 1.05]   # within 5% of the fastest
    return (str(min(chance)), str(max(chance)), r3(min(ada), 2), r3(max(ada), 2), str(min(top)), str(max(top)))


def claim_distbelief_resnet():
    """The regime rerun: one replica alone (bsp, no communication) against
    Downpour + Adagrad γ 0.01 on N/4 shards by median time to 0.80 at 4, 16
    and 32 replicas (asserting the rule's verdict: later at 4, tied with
    one replica at 16 and 32); one shard's steps and final accuracies at 16
    and 32; γ 0.1's final accuracies from 4 replicas up; Sandblaster's
    final accuracies; Downpour's measured compute-to-communication ratio."""
    t80 = lambda rs: [tw(r, 0.80) for r in rs]
    one = t80(distbelief_resnet_runs("bsp", 1))
    ada = {n: t80(distbelief_resnet_runs("downpour-adagrad-Ss-g0.01", n)) for n in (4, 16, 32)}
    assert first_among({"one": one, "ada": ada[4]}, "one", 0.05)[0], "one replica no longer first against 4"
    for n in (16, 32):
        assert first_among({"one": one, "ada": ada[n]}, "one", 0.05) == (False, []), f"not a tie at {n}"
    s1 = [r for n in (16, 32) for r in distbelief_resnet_runs("downpour-adagrad-S1-g0.01", n)]
    g1 = [acc(r) for n in (4, 16, 32) for r in distbelief_resnet_runs("downpour-adagrad-Ss-g0.1", n)]
    g2 = [acc(r) for n in (4, 16, 32) for r in distbelief_resnet_runs("downpour-adagrad-Ss-g0.01", n)]
    sb = [acc(r) for n in DB_RN_NS for r in distbelief_resnet_runs("sandblaster", n)]
    cr = [done_of(r, "compute_comm_ratio") for n in (4, 16, 32) for r in distbelief_resnet_runs("downpour-adagrad-Ss-g0.01", n)]
    med = lambda ts: r3(median(ts), 2)
    return (med(one), med(ada[4]), med(ada[16]), med(ada[32]),
            str(min(done_of(r, "steps") for r in s1)), str(max(done_of(r, "steps") for r in s1)),
            r3(min(acc(r) for r in s1), 2), r3(max(acc(r) for r in s1), 2),
            r3(min(g1), 2), r3(max(g1), 2), r3(min(g2), 2), r3(max(g2), 2),
            r3(min(sb), 2), r3(max(sb), 2), r3(min(cr), 2), r3(max(cr), 2))


def claim_distbelief_resnet_more():
    """Sandblaster's iterations and final accuracies; a step's computing
    time (one replica alone, median of compute s per step); how soon γ = 1
    diverged at 4 replicas (the pilot's runs, gamma1/)."""
    sb = [r for n in DB_RN_NS for r in distbelief_resnet_runs("sandblaster", n)]
    it = [done_of(r, "steps") for r in sb]
    return (str(min(it)), str(max(it)), r3(min(acc(r) for r in sb), 2), r3(max(acc(r) for r in sb), 2))


def claim_distbelief_resnet_step():
    one = distbelief_resnet_runs("bsp", 1)
    g1 = present("distbelief-resnet", [f"gamma1/downpour-adagrad-Ss-g1-4-seed{sd}" for sd in SEEDS])
    assert len(g1) == 2 and all(acc(r) is None for r in g1), "γ = 1 at 4 replicas: two seeds, both diverged"
    return (r3(1000 * median([done_of(r, "compute_s") / done_of(r, "steps") for r in one]), 2),
            str(max(done_of(r, "steps") for r in g1)))


def lc_speedups():
    """lc_speedup's speedup.tsv: model -> {M: speed-up over M = 1}."""
    path = os.path.join(RES, "lc_speedup", "speedup.tsv")
    if not os.path.exists(path):
        raise Missing(path)
    steps = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(head, line.rstrip("\n").split("\t")))
            steps.setdefault(row["model"], {})[int(row["M"])] = float(row["step_s"])
    # from the step times (the file's own speed-up column is rounded)
    return {k: {m: v[1] / t for m, t in v.items()} for k, v in steps.items()}


def claim_lc():
    s = lc_speedups()
    small = [v for m, v in s["small"].items() if m > 1]
    return r3(s["medium"][64], 1), r3(s["large"][64], 1), r3(min(small), 1), r3(max(small), 1)


def claim_lc_holds():
    s = lc_speedups()
    small = [v for m, v in s["small"].items() if m > 1]
    return r3(min(small), 1), r3(max(small), 1), r3(s["medium"][64], 1), r3(s["large"][64], 1)


def jin_resnet_runs(p, n, seeds=SEEDS, lr="0.1"):
    return [run("jin-resnet", f"{p}-{n}-lr{lr}-seed{sd}") for sd in seeds]


def done_of(r, key):
    return (r["done"] or {}).get(key)


def claim_jin_resnet():
    b16, g16 = (jin_resnet_runs(p, 16) for p in ("bsp", "gossip"))
    ratio = {n: [done_of(r, "compute_comm_ratio") for r in jin_resnet_runs("bsp", n)] for n in (4, 16, 32)}
    e32 = [acc(r) for r in jin_resnet_runs("easgd", 32)]
    return (r3(median([tw(r, 0.80) for r in b16]), 2), r3(median([tw(r, 0.80) for r in g16]), 2),
            str(round(min(ratio[4]))), str(round(max(ratio[4]))),
            str(round(min(ratio[16] + ratio[32]))), str(round(max(ratio[16] + ratio[32]))),
            r3(min(e32), 2), r3(max(e32), 2))


def claim_selsync_syncbn():
    """bsp --sync-bn in the regime, 1.27 Gb/s: the median training time of
    400 steps on label skew against bsp's, and the final accuracy with
    injection."""
    net = "1.27Gbps"
    t = lambda m: r3(median([done_of(r, "train_s") for r in selsync_resnet_runs(net, "label-skew", m)]), 2)
    inj = [acc(r) for r in selsync_resnet_runs(net, "label-skew+inject", "bsp-syncbn")]
    return t("bsp-syncbn"), t("bsp"), spread(inj, "%.3f")


def claim_jin_easgd_comm():
    """EASGD at 16 and 32 workers, both step sizes, every seed: the lead's
    communication and computing per step (ms), and the largest share of its
    step that communication took (%)."""
    rs = [r for n in (16, 32) for lr in ("0.1", "0.025") for r in jin_resnet_runs("easgd", n, lr=lr)]
    comm = [1e3 * done_of(r, "comm_s_per_step") for r in rs]
    comp = [1e3 * done_of(r, "compute_s_per_step") for r in rs]
    share = max(100 * c / (c + k) for c, k in zip(comm, comp))
    return r3(min(comm), 2), r3(max(comm), 2), str(round(min(comp))), str(round(max(comp))), r3(share, 1)


def claim_dssp_resnet():
    """Transient stragglers, 8 workers: dssp's time against ssp's and
    bsp-ps's (seed by seed), asp's and bsp-ps's median times, bsp-ps's
    measured ratio, the range of final accuracies, asp's largest staleness."""
    rs = dssp_resnet_runs("rn-transient", 8)
    ts = {p: [tw(r, 0.80) for r in v] for p, v in rs.items()}
    first, _ = first_among(ts, "asp", 0.05)
    assert not first, "asp first by the rule: the sentence no longer fits"
    ratio = lambda o: spread(dssp_over(ts, o), "%.2f")
    med = lambda p: r3(median(ts[p]), 2)
    cr = [done_of(r, "compute_comm_ratio") for r in rs["bsp-ps"]]
    accs = [acc(r) for v in rs.values() for r in v]
    return (ratio("ssp"), ratio("bsp-ps"), med("asp"), med("bsp-ps"), r3(min(cr), 2), r3(max(cr), 2),
            r3(min(accs), 2), r3(max(accs), 2), str(max(done_of(r, "staleness_max") for r in rs["asp"])))

def claim_selsync_resnet():
    """The regime on the fast link: δ = 0.3 and the best δ on IID data
    against bsp, δ = 0.015's sync fraction; bsp's range on label skew; with
    injection bsp's accuracy and the sync fractions of the δs that keep it
    (every seed at most 0.5 points below)."""
    net = "1.27Gbps"
    b = selsync_resnet_runs(net, "iid", "bsp")
    sel = {d: selsync_resnet_runs(net, "iid", f"selsync-{d}") for d in RN_DELTAS}
    pts = lambda rs, f: spread([100 * (acc(r) - acc(x)) for r, x in zip(rs, b)], f)
    best = selsync_resnet_best(sel)
    sync = lambda rs: spread([sync_of(r) for r in rs], "%.2f")
    skew = [acc(r) for r in selsync_resnet_runs(net, "label-skew", "bsp")]
    bi = selsync_resnet_runs(net, "label-skew+inject", "bsp")
    keep = [sync_of(r) for d in RN_DELTAS
            for rs in [selsync_resnet_runs(net, "label-skew+inject", f"selsync-{d}")]
            if all(acc(r) >= acc(x) - 0.005 for r, x in zip(rs, bi)) for r in rs]
    return (r3(median([sync_of(r) for r in sel["0.3"]]), 2),
            spread([100 * (acc(x) - acc(r)) for r, x in zip(sel["0.3"], b)], "%.1f"),
            best, pts(sel[best], "%+.2f"), sync(sel[best]), r3(median([sync_of(r) for r in sel["0.015"]]), 2),
            r3(min(skew), 2), r3(max(skew), 2), spread([acc(r) for r in bi], "%.3f"),
            r3(min(keep), 2), r3(max(keep), 2))

def claim_regime_ratios():
    """bsp's (bsp-ps's) measured compute-to-communication ratio in each
    regime rerun: Jin et al. at 4 and at 16-32 workers, SelSync on either
    link (IID), DSSP (transient stragglers, 8 workers)."""
    j = claim_jin_resnet()[2:6]
    sel = [[done_of(r, "compute_comm_ratio") for r in selsync_resnet_runs(net, "iid", "bsp")] for net, _ in SELSYNC_RN]
    d = claim_dssp_resnet()[4:6]
    return j + (r3(min(sel[0]), 2), r3(max(sel[0]), 2), r3(min(sel[1]), 3), r3(max(sel[1]), 3)) + d

RN_CLUSTERS = (("rn-transient", 8), ("rn-transient", 16), ("rn-hetero", 8), ("rn-homo", 8))


def dssp_rn(cl, n):
    """The regime's runs of one cluster and their times to 0.80, by paradigm."""
    rs = dssp_resnet_runs(cl, n)
    return rs, {p: [tw(r, 0.80) for r in v] for p, v in rs.items()}


def dssp_rn_firsts(ts):
    """Every ordered pair (a, b) of paradigms where a reaches 0.80 first by
    the rule, as "a<b"."""
    return [f"{a}<{b}" for a in DSSP for b in DSSP if a != b and first_among({a: ts[a], b: ts[b]}, a, 0.05)[0]]


def claim_dssp_rn_ties():
    """dssp against ssp and bsp-ps (seed by seed) on the transient clusters
    at 8 and 16 workers and the mixed one; asserts that no paradigm is
    first against another on any of them."""
    out = []
    for cl, n in RN_CLUSTERS[:3]:
        _, ts = dssp_rn(cl, n)
        assert not dssp_rn_firsts(ts), (cl, n, dssp_rn_firsts(ts))
        out += [spread(dssp_over(ts, o), "%.2f") for o in ("ssp", "bsp-ps")]
    return tuple(out)


def claim_dssp_rn_room():
    """Over every cluster of the regime: dssp's largest staleness, the mean
    staleness of ssp's and dssp's updates, and at 8 workers the steps a
    worker of dssp and of ssp."""
    runs = {p: [r for cl, n in RN_CLUSTERS for r in dssp_rn(cl, n)[0][p]] for p in ("ssp", "dssp")}
    eight = {p: [done_of(r, "steps") for cl, n in RN_CLUSTERS if n == 8 for r in dssp_rn(cl, n)[0][p]] for p in runs}
    stale = [done_of(r, "staleness_mean") for v in runs.values() for r in v]
    return (str(max(done_of(r, "staleness_max") for r in runs["dssp"])), r3(min(stale), 1), r3(max(stale), 1),
            str(min(eight["dssp"])), str(max(eight["dssp"])), str(min(eight["ssp"])), str(max(eight["ssp"])))


def claim_dssp_rn_ratio():
    """bsp-ps's measured compute-to-communication ratio over every cluster."""
    cr = [done_of(r, "compute_comm_ratio") for cl, n in RN_CLUSTERS for r in dssp_rn(cl, n)[0]["bsp-ps"]]
    return r3(min(cr), 2), r3(max(cr), 2)


def claim_dssp_rn_uniform():
    """The uniform cluster: dssp against bsp-ps and ssp; asserts the
    verdicts the sentence states."""
    _, ts = dssp_rn("rn-homo", 8)
    assert sorted(dssp_rn_firsts(ts)) == ["asp<bsp-ps", "asp<ssp", "dssp<bsp-ps"], dssp_rn_firsts(ts)
    return spread(dssp_over(ts, "bsp-ps"), "%.2f"), spread(dssp_over(ts, "ssp"), "%.2f")


def claim_dssp_rn_asp():
    """asp: asserts its median time is the shortest on every cluster; its
    steps against ssp's and dssp's (seed by seed), its largest staleness,
    the range of every run's final accuracy."""
    steps, stale, accs = [], [], []
    for cl, n in RN_CLUSTERS:
        rs, ts = dssp_rn(cl, n)
        assert all(median(ts["asp"]) <= median(ts[p]) for p in DSSP), (cl, n)
        for p in ("ssp", "dssp"):
            steps += [done_of(a, "steps") / done_of(b, "steps") for a, b in zip(rs["asp"], rs[p])]
        stale += [done_of(r, "staleness_max") for r in rs["asp"]]
        accs += [acc(r) for v in rs.values() for r in v]
    return r3(min(steps), 1), r3(max(steps), 1), str(max(stale)), r3(min(accs), 2), r3(max(accs), 2)


def claim_dssp_rn_eager():
    """The first (rendezvous) runs against these: steps a simulated second,
    eager over rendezvous, seed by seed, over every paradigm and cluster;
    its median for bsp-ps and dssp with transient stragglers at 8 workers;
    dssp against bsp-ps on the mixed cluster under rendezvous."""
    rate = lambda r: done_of(r, "steps") / done_of(r, "train_s")
    gain = {}
    for cl, n in RN_CLUSTERS:
        for p in DSSP:
            old = [run("dssp-resnet", f"rendezvous/{cl}-{n}-{p}-seed{sd}") for sd in SEEDS]
            gain[cl, n, p] = [rate(b) / rate(a) for a, b in zip(old, dssp_rn(cl, n)[0][p])]
    every = [g for v in gain.values() for g in v]
    old = {p: [tw(run("dssp-resnet", f"rendezvous/rn-hetero-8-{p}-seed{sd}"), 0.80) for sd in SEEDS] for p in DSSP}
    return (r3(min(every), 1), r3(max(every), 1), r3(median(gain["rn-transient", 8, "bsp-ps"]), 1),
            r3(median(gain["rn-transient", 8, "dssp"]), 1), spread(dssp_over(old, "bsp-ps"), "%.2f"))


def claim_dssp_rn_brief():
    """In brief: dssp against ssp (medians) with transient stragglers at 8
    and 16 workers, and dssp's largest bound."""
    med = lambda cl, n: fmt(median(dssp_over(dssp_rn(cl, n)[1], "ssp")), "%.2f")
    claim_dssp_rn_ties()
    return med("rn-transient", 8), med("rn-transient", 16), claim_dssp_rn_room()[0]


def claim_selsync_resnet_medians():
    """The fast link, IID: the median points δ = 0.3 loses against bsp (seed
    by seed), and the best δ's median sync fraction."""
    b = selsync_resnet_runs("1.27Gbps", "iid", "bsp")
    sel = {d: selsync_resnet_runs("1.27Gbps", "iid", f"selsync-{d}") for d in RN_DELTAS}
    lost = median([100 * (acc(x) - acc(r)) for r, x in zip(sel["0.3"], b)])
    return fmt(lost, "%.1f"), fmt(median([sync_of(r) for r in sel[selsync_resnet_best(sel)]]), "%.2f")


def claim_selsync_resnet_time():
    """The slow link, IID: median times to 0.80 of bsp, δ = 0.015 (and its
    speed-up over bsp, seed by seed, and its accuracy against bsp), δ = 0.3,
    local SGD (and its accuracy against bsp)."""
    run_of = lambda m: selsync_resnet_runs("0.127Gbps", "iid", m)
    b, mid, top, loc = run_of("bsp"), run_of("selsync-0.015"), run_of("selsync-0.3"), run_of("localsgd")
    med = lambda rs: r3(median([tw(r, 0.80) for r in rs]), 2)
    pts = lambda rs: spread([100 * (acc(r) - acc(x)) for r, x in zip(rs, b)], "%+.1f").replace("-", "−")
    speed = median([tw(x, 0.80) / tw(r, 0.80) for r, x in zip(mid, b)])
    return med(b), med(mid), r3(speed, 1), pts(mid), med(top), med(loc), pts(loc)

def claim_selsync_change():
    """The range of the smoothed relative change (the lead's, at its
    evaluations) over the IID selsync runs on the fast link."""
    v = [e["smoothed_change"] for d in RN_DELTAS for r in selsync_resnet_runs("1.27Gbps", "iid", f"selsync-{d}")
         for e in r["evals"] if e.get("smoothed_change") is not None]
    return r3(min(v), 3), r3(max(v), 3)

def claim_bucketing():
    lay, one = run("jin-resnet", "perlayer-bsp-32-lr0.1-seed1"), run("jin-resnet", "bsp-32-lr0.1-seed1")
    ms = lambda r: r3(1e3 * done_of(r, "comm_s_per_step"), 1)
    steps = lambda r: str(done_of(r, "worker_steps")[0])
    return ms(lay), ms(one), steps(lay), steps(one), r3(tw(lay, 0.80), 2), r3(tw(one, 0.80), 2)


CLAIMS = [
    ("README.md", "(`experiments/jin.sh`): all-reduce is first from {} workers on.", lambda: jin_claim()[:1]),
    ("results.md", "all-reduce first from {} workers (a tie with EASGD at {}) up to {};", jin_claim),
    ("results.md", "accuracy kept ({} / {} points) at {} / {} of steps synchronized on 1 GbE; no faster to 0.80; "
     "local SGD (H = 8) {}–{}× faster; loses {}–{} points on label-skewed data at its best δ, {}–{} when it "
     "synchronizes every step", claim_selsync_brief),
    ("results.md", "as accurate as bsp while synchronizing on {} (8 workers) or {} (16 workers) of the steps: {} and "
     "{} points", claim_selsync_holds),
    ("results.md", "dominates it on every IID setting: {}× (8 workers) and {}× (16 workers) faster than bsp to 0.80 on "
     "1 GbE", claim_localsgd),
    ("results.md", "selsync loses {} (1 GbE) and {} (10 GbE) points against bsp at its best δ, and {}–{} and {}–{} "
     "points at the δ where it synchronizes every step", claim_selsync_skew),
    ("results.md", "dssp reaches 0.82 in {}× bsp-ps's time (8 workers) and {}× ssp's (16), but ties ssp at 8",
     lambda: claim_dssp_brief()[:2]),
    ("results.md", "dssp is never later than ssp at 16 workers ({}×)", lambda: claim_dssp_brief()[2:]),
    ("results.md", "plain Downpour collapses to chance at {}–{} replicas, Adagrad keeps it learning ({}–{}); with one "
     "shard Downpour is never faster than one replica; Sandblaster steady, scales to {}–{} |", claim_distbelief_brief),
    ("results.md", "59 M and 142 M parameters reach {}× and {}× on 64 blocks, a 4 M model stays at {}–{}×", claim_lc),
    ("results.md", "the small model stops paying at once ({}–{}× at any M: its 2.9 ms step is soon as short as one "
     "halo exchange over 1 Gb/s), while the two large ones keep gaining to 64 blocks ({}× and {}×)", claim_lc_holds),
]
def jin_resnet_verdicts(lr="0.1"):
    """N -> (bsp first, methods ahead of bsp) at a step size."""
    out = {}
    for n in (4, 8, 16, 32):
        ts = {p: [tw(r, 0.80) for r in jin_resnet_runs(p, n, lr=lr)] for p in ("bsp", "easgd", "gossip")}
        out[n] = first_among(ts, "bsp", 0.25)
    return out


def claim_jin_resnet_brief():
    v = jin_resnet_verdicts()
    ties = [n for n, (first, ahead) in v.items() if not first and not ahead]
    firsts = [n for n, (first, _) in v.items() if first]
    assert not any(ahead for _, ahead in v.values()), "a method ahead of bsp: the sentence no longer fits"
    return " and ".join(str(n) for n in ties[:2]), str(firsts[0]), str(ties[-1])


def claim_jin_resnet_small():
    """Step size 0.025: the Ns where bsp is first, and at the largest of
    them bsp's and gossip's median times to 0.80."""
    v = jin_resnet_verdicts("0.025")
    firsts = [n for n, (first, _) in v.items() if first]
    assert not any(ahead for _, ahead in v.values()), "a method ahead of bsp: the sentence no longer fits"
    n = firsts[-1]
    med = lambda p: r3(median([tw(r, 0.80) for r in jin_resnet_runs(p, n, lr="0.025")]), 2)
    return " and ".join(str(m) for m in firsts), med("bsp"), med("gossip")


@functools.lru_cache(maxsize=None)   # two claims quote it
def claim_jin_resnet_64():
    """64 workers: at each step size gossip's and bsp's median times to 0.80,
    each a tie (neither first by first_among); EASGD's final accuracies'
    range over both step sizes."""
    out = []
    for lr in ("0.1", "0.025"):
        ts = {p: [tw(r, 0.80) for r in jin_resnet_runs(p, 64, lr=lr)] for p in ("bsp", "easgd", "gossip")}
        first, ahead = first_among(ts, "bsp", 0.25)
        assert not first and not ahead, f"64 workers, step size {lr}: no longer a tie"
        out += [r3(median(ts["gossip"]), 2), r3(median(ts["bsp"]), 2)]
    e = [acc(r) for lr in ("0.1", "0.025") for r in jin_resnet_runs("easgd", 64, lr=lr)]
    assert max(e) < 0.80
    return out + [r3(min(e)), r3(max(e))]


@functools.lru_cache(maxsize=None)
def claim_jin_resnet_128():
    """128 workers, step size 0.1: a tie by first_among (the spreads touch)
    with bsp's median the earlier; bsp's and gossip's median times to 0.80;
    bsp's slowest seed and gossip's fastest; how many of bsp's seeds were an
    evaluation or more ahead of gossip's fastest; EASGD's final accuracies'
    range; gossip's consensus distance at 64 and at 128 (medians); bsp's
    milliseconds communicating a step at 64 and 128 (medians)."""
    ts = {p: [tw(r, 0.80) for r in jin_resnet_runs(p, 128)] for p in ("bsp", "easgd", "gossip")}
    first, ahead = first_among(ts, "bsp", 0.25)
    assert not first and not ahead, "128 workers, step size 0.1: no longer a tie"
    assert median(ts["bsp"]) < median(ts["gossip"]), "bsp's median no longer the earlier"
    assert abs(max(ts["bsp"]) - min(ts["gossip"])) < 0.125, "bsp's slowest and gossip's fastest at different evaluations"
    lead = sum(t is not None and t < min(ts["gossip"]) - 0.125 for t in ts["bsp"])
    e = [acc(r) for r in jin_resnet_runs("easgd", 128)]
    assert max(e) < 0.80
    cd = lambda n: r3(median([done_of(r, "consensus_distance") for r in jin_resnet_runs("gossip", n)]), 2)
    comm = lambda n: r3(median([1e3 * done_of(r, "comm_s_per_step") for r in jin_resnet_runs("bsp", n)]), 1)
    words = {0: "none", 1: "one", 2: "two", 3: "three"}
    return (r3(median(ts["bsp"]), 2), r3(median(ts["gossip"]), 2), r3(max(ts["bsp"]), 2), r3(min(ts["gossip"]), 2),
            words[lead], r3(min(e)), r3(max(e)), cd(64), cd(128), comm(64), comm(128))


def claim_jin_resnet_128_small():
    """128 workers, step size 0.025: a tie by first_among; bsp's and
    gossip's median times to 0.80; EASGD's final accuracies' range."""
    ts = {p: [tw(r, 0.80) for r in jin_resnet_runs(p, 128, lr="0.025")] for p in ("bsp", "easgd", "gossip")}
    first, ahead = first_among(ts, "bsp", 0.25)
    assert not first and not ahead, "128 workers, step size 0.025: no longer a tie"
    e = [acc(r) for r in jin_resnet_runs("easgd", 128, lr="0.025")]
    assert max(e) < 0.80
    return r3(median(ts["bsp"]), 2), r3(median(ts["gossip"]), 2), r3(min(e)), r3(max(e))


def claim_jin_comm_shares():
    """Step size 0.1, N = 4 to 128: the range of gossip's and of EASGD's
    median communicating share of a step (the lead's)."""
    def med(p, n):
        return median([done_of(r, "comm_s_per_step") / (done_of(r, "comm_s_per_step") + done_of(r, "compute_s_per_step"))
                       for r in jin_resnet_runs(p, n)])
    g = [med("gossip", n) for n in (4, 8, 16, 32, 64, 128)]
    e = [med("easgd", n) for n in (4, 8, 16, 32, 64, 128)]
    return r3(min(g), 2), r3(max(g), 2), r3(min(e), 2), r3(max(e), 2)


def claim_jin_selector():
    """bsp at step size 0.1 with the selector's all-reduce (metrics/selector-bsp-*)
    against the rerun with Rabenseifner's: at 64 workers the ranges of ms
    communicating a step and of the workers' steps, old then new, and the
    median times to 0.80, old then new; at 128 the selector's ms
    communicating (range), steps (range) and median time to 0.80."""
    def fig(name, n):
        rs = present("jin-resnet", [f"{name}-{n}-lr0.1-seed{sd}" for sd in SEEDS])
        comm = [1e3 * done_of(r, "comm_s_per_step") for r in rs]
        steps = [statistics.mean(done_of(r, "worker_steps") or [done_of(r, "steps")]) for r in rs]
        return (f"{r3(min(comm), 1)}–{r3(max(comm), 1)}", f"{min(steps):.0f}–{max(steps):.0f}",
                r3(median([tw(r, 0.80) for r in rs]), 2))
    o, n, s128 = fig("selector-bsp", 64), fig("bsp", 64), fig("selector-bsp", 128)
    return (o[0], n[0], o[1], n[1], o[2], n[2]) + s128


CLAIMS += [
    ("results.md", "bsp at 64 workers communicates {} ms a step instead of {}, makes {} steps instead of {}, and reaches "
     "0.80 at {} s (median) instead of {} s", lambda: (lambda c: (c[1], c[0], c[3], c[2], c[5], c[4]))(claim_jin_selector())),
    ("results.md", "At 128 the selector's all-reduce took {} ms a step; bsp made {} steps and reached 0.80 at {} s,",
     lambda: claim_jin_selector()[6:]),
    ("results.md", "At step size 0.1 gossip reaches 0.80 at {} s (median) against all-reduce's {} s, and at 0.025 at {} s "
     "against {} s: both times a tie within the seeds (the spreads overlap). EASGD's "
     "centre, on 8 shards, ends at {}–{} without reaching 0.80.", claim_jin_resnet_64),
    ("results.md", "At step size 0.1 all-reduce reaches 0.80 at {} s (median) against gossip's {} s, but its slowest "
     "seed reached it at {} s, the evaluation at which gossip's fastest did ({} s): a tie by this page's rule, with "
     "all-reduce an evaluation ahead on {} of its three seeds. EASGD's centre, on 16 shards, ends at {}–{} without "
     "reaching 0.80.",
     lambda: claim_jin_resnet_128()[:7]),
    ("results.md", "communication is a small share of their step at every N, gossip's {}–{} and EASGD's {}–{} "
     "(medians, step size 0.1, 4 to 128 workers)", claim_jin_comm_shares),
    ("results.md", "gossip's consensus distance grows from {} at 64 workers to {} at 128, while bsp's communication stays "
     "at {} and {} ms a step.", lambda: claim_jin_resnet_128()[7:]),
    ("results.md", "At step size 0.025 the two tie again: all-reduce reaches 0.80 at {} s (median) against gossip's {} "
     "s, and EASGD ends at {}–{} without reaching it.", claim_jin_resnet_128_small),
    ("results.md", "at 128 all-reduce leads on the medians but ties by the spread (step size 0.1, 1.76 against gossip's "
     "2.01 s) and ties at 0.025 ({} against {} s): at most", lambda: claim_jin_resnet_128_small()[:2]),
    ("results.md", "at 64 workers gossip ties all-reduce at both step sizes (medians {} against {} s, {} against {} s) "
     "and EASGD fails", lambda: claim_jin_resnet_64()[:4]),
    ("README.md", "the three methods tie at {} workers, all-reduce is first at {} and ties gossip at {}. At a quarter",
     claim_jin_resnet_brief),
    ("README.md", "At a quarter of that step size all-reduce is first at {}. At 64 workers gossip",
     lambda: claim_jin_resnet_small()[:1]),
    ("results.md", "At 0.025 it is first at {} ({} s against gossip's {} s).", claim_jin_resnet_small),
    ("results.md", "at 0.025 all-reduce first at {}; at 64 workers", lambda: claim_jin_resnet_small()[:1]),
    ("results.md", "measured, for bsp or bsp-ps: Jin et al. {}–{} at 4 workers and {}–{} at 16 and 32 (estimate: 12); "
     "SelSync {}–{} on the link standing for 10 GbE and {}–{} on the one for 1 GbE (0.29 and 0.029); DSSP {}–{} "
     "(0.095); DistBelief's Downpour {}–{} (0.21).", lambda: claim_regime_ratios() + claim_distbelief_resnet()[14:16]),
    ("results.md", "δ = 0.3 never synchronizes after warm-up and loses {} points; where selsync keeps bsp's accuracy it "
     "synchronizes {} of the steps;", claim_selsync_resnet_medians),
    ("results.md", "alone (no communication) reaches 0.80 at {} s. Downpour with Adagrad (γ = 0.01) on N/4 shards "
     "reaches it at {} s with 4 replicas, and at {} s with 16 and {} s with 32: a tie",
     lambda: claim_distbelief_resnet()[:4]),
    ("results.md", "made {}–{} steps each and ended at {}–{}. - *Adagrad", lambda: claim_distbelief_resnet()[4:8]),
    ("results.md", "(γ = 0.1) Downpour with 4 to 32 replicas ended at {}–{}; at γ = 0.01 at {}–{}. The paper's",
     lambda: claim_distbelief_resnet()[8:12]),
    ("results.md", "*Sandblaster* makes {}–{} L-BFGS iterations in 0.6 s and ends at {}–{}, at every size",
     claim_distbelief_resnet_more),
    ("results.md", "Each replica computes a step in {} ms and spends most", lambda: claim_distbelief_resnet_step()[:1]),
    ("results.md", "γ = 1 diverged within {} steps at 4 replicas", lambda: claim_distbelief_resnet_step()[1:]),
    ("results.md", "measured compute-to-communication ratio was {}–{}, below the estimate",
     lambda: claim_distbelief_resnet()[14:16]),
    ("results.md", "dssp reaches 0.80 in {} of ssp's time and {} of bsp-ps's at 8 workers with transient stragglers, "
     "in {} and {} at 16, and in {} and {} on the mixed cluster. By this", claim_dssp_rn_ties),
    ("results.md", "Its bound never rose above {} in any run (it may go to 15; ssp's is 3), the mean staleness of ssp's "
     "and dssp's updates is {}–{}, and dssp makes ssp's steps (at 8 workers {}–{} a worker against {}–{}). At",
     claim_dssp_rn_room),
    ("results.md", "bsp-ps's measured compute-to-communication ratio was {}–{} across the clusters", claim_dssp_rn_ratio),
    ("results.md", "*The uniform cluster*: dssp ({} of bsp-ps's time) and asp are each first against bsp-ps, asp "
     "against ssp too; dssp against ssp is a tie ({}). With", claim_dssp_rn_uniform),
    ("results.md", "its median time is the shortest on every cluster, at {}–{}× the steps of ssp and dssp, with "
     "updates up to {} clocks stale. Every run ends at {}–{}. *What the message model", claim_dssp_rn_asp),
    ("results.md", "Sent eagerly, the paradigms make {}–{}× the steps a simulated second, and not alike: bsp-ps {}× at 8 "
     "workers with transient stragglers, dssp {}×. So", lambda: claim_dssp_rn_eager()[:4]),
    ("results.md", "on the mixed cluster (dssp in {} of its time). Eagerly", lambda: claim_dssp_rn_eager()[4:]),
    ("results.md", "every paradigm ties every other on transient stragglers and on the mixed cluster (dssp {}× and {}× "
     "ssp's time at 8 and 16 workers, medians); dssp's bound never rises above {}, so", claim_dssp_rn_brief),
    ("results.md", "at δ = 0.015 it reaches 0.80 {}× sooner than bsp on 1 GbE, local SGD sooner still;",
     lambda: claim_selsync_resnet_time()[2:3]),
    ("results.md", "bsp reaches 0.80 at {} s, selsync at δ = 0.015 at {} s ({}× sooner, ending {} points from bsp), "
     "and at δ = 0.3 at {} s; local SGD at {} s, ending {} points from bsp.", claim_selsync_resnet_time),
    ("results.md", "is compared with stays at {}–{} on IID data here", claim_selsync_change),
    ("results.md", "each step, as PyTorch's SyncBatchNorm does) bsp's final accuracy is {}–{} on the same label-skewed",
     lambda: tuple(r3(f(acc(r) for r in selsync_resnet_runs("1.27Gbps", "label-skew", "bsp-syncbn")), 2)
                   for f in (min, max))),
    ("results.md", "only the 25 warm-up steps (sync fraction {}) and ends {} points below bsp on IID data",
     lambda: claim_selsync_resnet()[:2]),
    ("results.md", "at δ = {} it is {} points from bsp at a sync fraction of {}. One step of δ further, at 0.015, it "
     "synchronizes {} of the steps", lambda: claim_selsync_resnet()[2:6]),
    ("results.md", "bsp itself ends at {}–{} (the mlp", lambda: claim_selsync_resnet()[6:8]),
    ("results.md", "bsp ends at {}, and selsync matches it where it synchronizes {}–{} of the steps",
     lambda: claim_selsync_resnet()[8:]),
    ("results.md", "no asynchronous win at {} (a tie), all-reduce first at {} and tied with gossip at {}, EASGD behind",
     claim_jin_resnet_brief),
    ("results.md", "it is first at 16 workers ({} s against gossip's {} s, every seed)", lambda: claim_jin_resnet()[:2]),
    ("results.md", "not free: they made bsp's 400 steps take {} simulated s against {} s without them on this link.",
     lambda: claim_selsync_syncbn()[:2]),
    ("results.md", "With injection, bsp `--sync-bn` ends at {}, within injection's own spread",
     lambda: claim_selsync_syncbn()[2:]),
    ("results.md", "EASGD's lead spent {}–{} ms a step communicating against {}–{} ms computing at 16 and 32 workers "
     "(at most {}% of its step), so", claim_jin_easgd_comm),
    ("results.md", "bsp's measured compute-to-communication ratio was {}–{} at 4 workers, near the paper's 12, and {}–{} at "
     "16 and 32", lambda: claim_jin_resnet()[2:6]),
    ("results.md", "at 32 on 4 shards it ends at {}–{} without reaching 0.80", lambda: claim_jin_resnet()[6:]),
    ("results.md", "at 32 workers bsp then spent {} ms a step communicating against {} ms in one bucket, made {} steps in "
     "6 s instead of {}, and reached 0.80 at {} s instead of {} s", claim_bucketing),
]
# a number (or a short phrase such as "a tie"): never a table's "|", never a
# sentence's end (a full stop before a blank), so that a claim cannot match
# across sentences onto words another claim or sentence holds
NUMBER = r"((?:[^|.]|\.(?!\s))+?)"


def claim_regex(template):
    """The template as a pattern: each "{}" a number, each space any run of blanks."""
    parts = template.split("{}")
    assert parts[0] and parts[-1], "a claim starts and ends with words, not a number (a last number would match one digit)"
    # "… at {}." would take "0.89." as "0" and ".89.": words after the full stop
    assert not re.fullmatch(r"\.\s*", parts[-1]), f"a claim ends with words after its last number's full stop: '{template}'"
    esc = [r"\s+".join(re.escape(w) for w in p.split(" ")) for p in parts]
    return re.compile(NUMBER.join(esc), re.S)


def check_claims(doc, text, write):
    """Returns (text, problems, how many claims were checked) for the claims of doc's file."""
    base, bad, n = os.path.basename(doc), [], 0
    for fname, template, values in CLAIMS:
        if fname != base:
            continue
        n += 1
        short = template.split("{}")[0].strip()[:40] or template[:40]
        try:
            want = values()
        except Missing as e:
            bad.append(f"error: claim '{short}…': metrics file '{e}' is missing")
            continue
        ms = list(claim_regex(template).finditer(text))
        if len(ms) != 1:
            bad.append(f"error: claim '{short}…': {'not found' if not ms else f'found {len(ms)} times'} in {base} "
                       f"(the metrics give: {template.format(*want)})")
            continue
        m = ms[0]
        if list(m.groups()) == list(want):
            continue
        if write:
            pieces, last = [], m.start()
            for i, v in enumerate(want, 1):
                pieces += [text[last:m.start(i)], v]
                last = m.end(i)
            text = text[:m.start()] + "".join(pieces) + text[last:]
        else:
            bad.append(f"claim '{short}…' differs from its metrics: {base} says {list(m.groups())}, "
                       f"the metrics give {list(want)}")
    return text, bad, n


LC_MODELS = (("small", "small `lc:8,16:k=5`, 1×64×64"), ("medium", "medium `lc:16,32:k=5`, 1×128×128"),
             ("large", "large `lc:16,32:k=7`, 3×128×128"))


def lc_speedup():
    s = lc_speedups()
    params = {}
    with open(os.path.join(RES, "lc_speedup", "speedup.tsv"), encoding="utf-8") as f:
        f.readline()
        for line in f:
            model, p = line.split("\t")[:2]
            params[model] = int(p)
    ms = sorted(m for m in s["small"] if m > 1)
    rows = [[name, f"{r3(params[k] / 1e6, 1)} M"] + [f"{r3(s[k][m], 2)}×" for m in ms] for k, name in LC_MODELS]
    return md(["model", "parameters", f"M = {ms[0]}"] + [str(m) for m in ms[1:]], rows)


TABLES = {"jin": jin, "jin-resnet": jin_resnet, "jin-resnet-why": jin_resnet_why, "lc-speedup": lc_speedup, "dssp": dssp, "dssp-transient": dssp_transient, "dssp-ratios": dssp_ratios,
          "dssp-resnet": dssp_resnet, "dssp-resnet-lanes": lambda: dssp_resnet("dssp-resnet/lanes"),
          "selsync": selsync, "selsync-resnet": selsync_resnet, "distbelief": distbelief,
          "distbelief-resnet": distbelief_resnet,
          "distbelief-resnet-lanes": lambda: distbelief_resnet("distbelief-resnet/lanes")}
# a block's text never holds another block's start (an empty block is one newline)
BLOCK = re.compile(r"(<!-- table ([\w-]+) -->\n)((?:(?!<!-- table ).)*?)(\n?<!-- end table -->)", re.S)


def check_doc(doc, write):
    """Checks (or rewrites) one document's tables and claims: (problems with
    tables, problems with claims, tables seen, claims seen)."""
    try:
        text = open(doc, encoding="utf-8").read()
    except OSError as e:
        return [f"error: cannot read '{doc}': {e.strerror}"], [], 0, 0
    bad, seen = [], set()

    def repl(m):
        name = m.group(2)
        seen.add(name)
        if name not in TABLES:
            bad.append(f"error: {name}: no such table (known: {', '.join(TABLES)})")
            return m.group(0)
        try:
            new = TABLES[name]()
        except Missing as e:
            bad.append(f"error: {name}: metrics file '{e}' is missing")
            return m.group(0)
        if new != m.group(3):
            bad.append(f"{name}: differs from its metrics")
        return m.group(1) + new + "\n<!-- end table -->"
    out = BLOCK.sub(repl, text)
    out, cbad, nclaims = check_claims(doc, out, write)
    if write and out != text:
        with open(doc + ".part", "w", encoding="utf-8") as f:
            f.write(out)
        os.replace(doc + ".part", doc)
    if not seen and not nclaims:
        bad.append(f"error: '{doc}' has no generated table and no claim")
    return bad, cbad, len(seen), nclaims


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    mode = "--check"
    if argv and argv[0] in ("--check", "--write"):
        mode = argv.pop(0)
    docs = argv or [os.path.join(ROOT, "docs", "results.md"), os.path.join(ROOT, "README.md")]
    write = mode == "--write"
    tbad, cbad, tables, claims = [], [], 0, 0
    for doc in docs:
        b, c, nt, nc = check_doc(doc, write)
        tbad += b
        cbad += c
        tables += nt
        claims += nc
    if write:   # a table or claim that only differed is rewritten; anything else is an error
        tbad = [b for b in tbad if b.startswith("error: ")]
        cbad = [b for b in cbad if b.startswith("error: ")]
    for b in tbad + cbad:
        print(f"results_tables: {b}", file=sys.stderr)
    if not write:
        tb = sum(1 for b in tbad if not b.startswith("error: '"))
        print(f"results_tables: {tables - tb} of {tables} tables and {claims - len(cbad)} of {claims} claims agree "
              "with their metrics")
    return 1 if tbad or cbad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
