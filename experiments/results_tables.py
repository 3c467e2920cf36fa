#!/usr/bin/env python3
"""The tables of docs/results.md, drawn from the metrics files beside it.

usage: experiments/results_tables.py [--check | --write] [DOC]

DOC (default docs/results.md) holds each generated table between a line
"<!-- table NAME -->" and a line "<!-- end table -->". --check (the default)
exits 1 naming every table whose text differs from what the metrics give
(tests/experiments.sh runs it); --write replaces them in place. Times to a
target are the time since the common start ("wall s" in the experiments'
summaries: in the asynchronous paradigms the other workers train while the
lead evaluates), taken at the first evaluation at or above the target, so
known to the evaluation grid; two runs within half a grid step of each
other reached it at the same evaluation and tie. Bold marks the best
accuracy and the shortest time of a row when one run alone has it.

Tables: jin, dssp, dssp-transient, dssp-ratios, selsync, distbelief."""
import os
import re
import sys
from decimal import ROUND_HALF_UP, Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summarize import first_hit, median, plot, spread  # noqa: E402

ROOT = os.path.join(HERE, "..")
RES = os.path.join(ROOT, "docs", "results")


class Missing(Exception):
    pass


def r3(v, places=3):
    """v to `places` decimals, halves up, as written by hand: accuracies are
    multiples of 1/2000 (0.8955 is 0.896, not the float's 0.895)."""
    return str(Decimal(repr(round(v, 6))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP))


def run(exp, name):
    path = os.path.join(RES, exp, "metrics", name + ".jsonl")
    if not os.path.exists(path):
        raise Missing(path)
    return plot.read_run(path)


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


def distbelief():
    target, grid, rows = 0.82, 0.5, []
    for n in (1, 2, 4, 8, 16, 32):
        pairs = []
        for p in ("bsp", "downpour-sgd", "downpour-adagrad", "downpour-adagrad-warm", "sandblaster"):
            r = run("distbelief", f"{p}-{n}")
            pairs.append((acc(r), tw(r, target)))
        rows.append([n] + [f"{r3(a)} / {'–' if t is None else f'{r3(t, 2)} s'}" for a, t in pairs])
    return md(["replicas", "bsp", "Downpour SGD", "Downpour + Adagrad", "+ Adagrad + warm start", "Sandblaster"], rows)


TABLES = {"jin": jin, "dssp": dssp, "dssp-transient": dssp_transient, "dssp-ratios": dssp_ratios,
          "selsync": selsync, "distbelief": distbelief}
# a block's text never holds another block's start (an empty block is one newline)
BLOCK = re.compile(r"(<!-- table ([\w-]+) -->\n)((?:(?!<!-- table ).)*?)(\n?<!-- end table -->)", re.S)


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    mode = "--check"
    if argv and argv[0] in ("--check", "--write"):
        mode = argv.pop(0)
    doc = argv[0] if argv else os.path.join(ROOT, "docs", "results.md")
    try:
        text = open(doc, encoding="utf-8").read()
    except OSError as e:
        print(f"results_tables: error: cannot read '{doc}': {e.strerror}", file=sys.stderr)
        return 1
    bad, seen = [], set()

    def repl(m):
        name = m.group(2)
        seen.add(name)
        if name not in TABLES:
            bad.append(f"{name}: no such table (known: {', '.join(TABLES)})")
            return m.group(0)
        try:
            new = TABLES[name]()
        except Missing as e:
            bad.append(f"{name}: metrics file '{e}' is missing")
            return m.group(0)
        if new != m.group(3):
            bad.append(f"{name}: differs from its metrics")
        return m.group(1) + new + "\n<!-- end table -->"
    out = BLOCK.sub(repl, text)
    if mode == "--write":
        if out != text:
            with open(doc + ".part", "w", encoding="utf-8") as f:
                f.write(out)
            os.replace(doc + ".part", doc)
        unknown = [b for b in bad if "differs" not in b]
        for b in unknown:
            print(f"results_tables: error: {b}", file=sys.stderr)
        return 1 if unknown else 0
    for b in bad:
        print(f"results_tables: {b}", file=sys.stderr)
    if not seen:
        print(f"results_tables: '{doc}' has no generated table", file=sys.stderr)
        return 1
    print(f"results_tables: {len(seen) - len(bad)} of {len(seen)} tables agree with their metrics")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
