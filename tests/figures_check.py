#!/usr/bin/env python3
"""What tests/figures.sh asserts about dsgd-plot's figures, read from the
SVG files gnuplot wrote (text positions, curve colours) and from the
plotting module itself (the samples axis). Prints one "ok TEXT" or
"FAIL TEXT: WHY" line per check.
usage: tests/figures_check.py PLOT_SCRIPT FIGDIR_JIN FIGDIR_DSSP FIGDIR_DSSP_REVERSED FIGDIR_SIM RESULTS_DIR
"""
import colorsys
import html
import importlib.machinery
import importlib.util
import json
import re
import sys

TEXT = re.compile(r'<g transform="translate\(([-\d.]+),([-\d.]+)\)( rotate\(\d+\))?"[^>]*text-anchor="(\w+)">\s*'
                  r'<text>(.*?)</text>', re.S)
TITLED = re.compile(r'<g id="gnuplot_plot_\w+" ><title>(.*?)</title>(.*?)stroke=\'rgb\(([^)]*)\)\'', re.S)


def texts(path):
    """(x, y, rotated, anchor, text) of every text gnuplot drew."""
    svg = open(path, encoding="utf-8").read()
    out = []
    for x, y, rot, anchor, body in TEXT.findall(svg):
        t = html.unescape(re.sub(r"<[^>]+>", "", body)).strip()
        if t:
            out.append((float(x), float(y), bool(rot), anchor, t))
    return out


def colours(path):
    """Curve title -> its stroke colour."""
    svg = open(path, encoding="utf-8").read()
    return {html.unescape(t): re.sub(r"\s+", "", c) for t, _, c in TITLED.findall(svg) if not t.startswith("gnuplot_plot")}


def ticks(tx, axis, lo_y=None, hi_y=None):
    """Tick labels: x ticks are centred, y ticks right-aligned; both numeric."""
    num = re.compile(r"^[-\d.]+[kMG]?$")
    if axis == "x":
        return [t for t in tx if t[3] == "middle" and not t[2] and num.match(t[4])]
    return [t for t in tx if t[3] == "end" and num.match(t[4]) and (lo_y is None or lo_y <= t[1] <= hi_y)]


def hue(rgb):
    return colorsys.rgb_to_hsv(*(int(v) / 255 for v in rgb.split(",")))[0]


results = []


def check(name, cond, why=""):
    results.append(f"ok {name}" if cond else f"FAIL {name}: {why}")


def main(plot, jin, dssp, dssp_rev, sim, res):
    # 1. the key sits below the plots: every run's key entry is lower than every tick label, and the
    #    plot area spans (nearly) the whole width (the key took ~30% of it beside the plot)
    for d, fig in ((jin, "accuracy_time"), (dssp, "staleness"), (jin, "scaling")):
        tx = texts(f"{d}/{fig}.svg")
        names = set(colours(f"{d}/{fig}.svg"))
        keyed = [t for t in tx if t[4] in names]
        tk = ticks(tx, "x") + ticks(tx, "y")
        right = max((t[0] for t in tx if t[3] == "middle" and not t[2] and t[4] not in names and t[1] > 60), default=0)
        check(f"{fig}: the key is below the plot area, which spans the width",
              keyed and tk and min(t[1] for t in keyed) > max(t[1] for t in tk) and right > 800,
              f"key entries at y {sorted(t[1] for t in keyed)[:3]}, lowest tick at y {max((t[1] for t in tk), default=None)}, "
              f"rightmost x tick at {right}")

    # 2. readable tick labels on the samples axis: k/M, never 100000120000...
    tx = texts(f"{jin}/accuracy_samples.svg")
    xl = [t[4] for t in ticks(tx, "x")]
    check("accuracy_samples: samples ticks read 2M, 250k (short labels with k/M)",
          xl and all(len(s) <= 5 for s in xl) and any(s[-1] in "kM" for s in xl), f"x tick labels {xl}")

    # 3. axes from 0; simulated seconds named as such
    tx = texts(f"{sim}/accuracy_time.svg")
    xl = [t[4] for t in ticks(tx, "x")]
    check("accuracy_time: the time axis starts at 0", xl[:1] == ["0"], f"x tick labels {xl}")
    top = [t for t in ticks(tx, "y") if t[1] < 330]
    check("accuracy_time: the accuracy axis starts at 0", any(t[4] == "0" for t in top), f"y tick labels {[t[4] for t in top]}")
    check("accuracy_time: a simulator's metrics put 'simulated s' on the time axis",
          any("simulated s" in t[4] for t in tx), f"labels {[t[4] for t in tx if '(' in t[4]]}")

    # 4. the logarithmic loss axis fits the data (0.27-0.72 here), not 0.1-10
    tx = texts(f"{dssp}/accuracy_time.svg")
    low = sorted(ticks(tx, "y", 330, 2000), key=lambda t: -t[1])
    vals = [float(t[4]) for t in low]
    check("accuracy_time: the log loss axis is fitted to the data",
          len(vals) >= 3 and min(vals) >= 0.2 and max(vals) <= 1, f"loss ticks {vals}")

    # 5. one colour per paradigm, whatever the order of the files and the figure
    a, b = colours(f"{dssp}/accuracy_time.svg"), colours(f"{dssp_rev}/accuracy_time.svg")
    same = [k for k in a if k in b and a[k] == b[k]]
    check("a paradigm keeps its colour when the files come in another order",
          len(a) == 4 and len(same) == 4, f"{a} against {b}")
    s = colours(f"{dssp}/staleness.svg")
    check("a paradigm keeps its colour from figure to figure",
          all(a.get(k.split(" (")[0]) == c for k, c in s.items()) and len(s) == 4, f"{s} against {a}")
    j = colours(f"{jin}/scaling.svg")
    bsp = {c for k, c in colours(f"{jin}/accuracy_time.svg").items() if k.startswith("bsp,")}
    check("bsp keeps its hue in the scaling figure and the curves (runs of one paradigm differ by shade)",
          j.get("bsp") and len(bsp) == 6 and all(abs(hue(c) - hue(j["bsp"])) < 0.03 for c in bsp), f"{j} / {bsp}")

    # 6. a default title from what the runs share
    tx = texts(f"{dssp}/accuracy_time.svg")
    title = [t[4] for t in tx if t[1] < 40 and t[3] == "middle"]
    check("a default title names the model, data and workers",
          any("mlp on fashion-mnist" in t and "8 workers" in t for t in title), f"texts at the top: {title}")

    # 7. the samples axis counts every worker's samples (worker_samples), not the lead's steps x N x batch
    spec = importlib.util.spec_from_loader("dsgd_plot", importlib.machinery.SourceFileLoader("dsgd_plot", plot))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run = mod.read_run(f"{res}/dssp/metrics/cpu-hetero-8-asp.jsonl")
    rows = mod.curve_rows(run, "samples", "train_s")
    d, e0 = run["done"], run["evals"][0]
    want = sum(n * min(1, e0["run_s"] / s) for n, s in zip(d["worker_samples"], d["worker_stop_s"]))
    check("samples axis: an asynchronous run's first point counts each worker at its own pace",
          abs(rows[0][0] - want) < 1 and abs(rows[-1][0] - sum(d["worker_samples"])) < 1,
          f"first {rows[0][0]} (want {want:.0f}, lead's count {e0['samples']}), last {rows[-1][0]} "
          f"(want {sum(d['worker_samples'])})")

    # 8. the scaling figure marks the paradigm that stopped reaching the target
    tx = texts(f"{jin}/scaling.svg")
    svg = open(f"{jin}/scaling.svg", encoding="utf-8").read()
    check("scaling: a run that never reached the target is marked 'not reached'",
          any("not reached" in t[4] for t in tx) and "easgd" in svg, "no 'not reached' in the figure")

    # 9. staleness in logarithmic bins up to the largest staleness seen
    xl = [t[4] for t in texts(f"{dssp}/staleness.svg") if t[3] == "middle" and not t[2]]
    want = ["0", "1", "2", "3", "4–7", "8–15", "16–31", "32–4015"]
    check("staleness: bins 0, 1, 2, 3, 4-7, 8-15, 16-31, 32 up to asp's 4015", all(w in xl for w in want),
          f"x labels {xl}")
    print("\n".join(results))


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    main(*sys.argv[1:])
