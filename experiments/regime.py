#!/usr/bin/env python3
"""The regime table: the papers' settings and dsgd's, by their intrinsic
compute-to-communication ratio B (F / P) W / (8 R) (experiments/regime.sh
says where it comes from).

Usage: regime.py BATCH METRICS_STEM...   (METRICS_STEM.jsonl: one run per
model, one process, batch BATCH); prints markdown.

For a cluster of your own (an accelerator and a link) and dsgd's model
itself, dsgd-sim --regime prints the compute scale (scripts/dsgd-regime).

The papers' settings are estimates from public facts about their models
and hardware; what is assumed is marked so, and can be replaced here."""
import importlib.machinery
import importlib.util
import json
import os
import sys

# the hardware, links and the ratio are dsgd-regime's (dsgd-sim --regime)
_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "dsgd-regime")
_spec = importlib.util.spec_from_loader("dsgd_regime", importlib.machinery.SourceFileLoader("dsgd_regime", _path))
rg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rg)
GB, ratio = rg.GB, rg.ratio


def sustained(gpu):
    return rg.SUSTAINED * rg.ACCELS[gpu][0]


# name, setting, P, F (FLOPs per training sample: 6 x forward MACs), batch,
# R (sustained FLOP/s: an assumed 40% of the GPU's fp32 peak, dsgd-regime's figure), W (bytes/s)
PAPERS = [
    ("Jin et al. 2016", "ResNet-18, ImageNet 224x224 (11.7 M parameters, 1.82 G multiply-adds a sample); "
     "K20X GPUs (3.95 TFLOP/s peak); batch 32 and a 40 Gb/s interconnect assumed",
     11.69e6, 6 * 1.82e9, 32, sustained("k20x"), 40 * GB),
    ("SelSync 2023, 10 GbE", "ResNet-101, CIFAR-10 32x32 through the ImageNet stem (42.5 M parameters, "
     "0.16 G multiply-adds); V100 GPUs (15.7 TFLOP/s peak), batch 32 assumed",
     42.5e6, 6 * 0.160e9, 32, sustained("v100"), 10 * GB),
    ("SelSync 2023, 1 GbE", "the same on 1 GbE", 42.5e6, 6 * 0.160e9, 32, sustained("v100"), 1 * GB),
    ("SelSync 2023, CIFAR stem", "if the stem keeps 32x32 (a 3x3 convolution, no pooling): 16x the multiply-adds, 10 GbE",
     42.5e6, 6 * 2.56e9, 32, sustained("v100"), 10 * GB),
    ("DSSP 2019", "mixed GPU generations on a parameter server; assumed: ResNet-50 on CIFAR-10 32x32 (23.5 M "
     "parameters, 0.084 G multiply-adds), batch 128, GTX 1080 Ti (11.3 TFLOP/s peak), 10 GbE",
     23.5e6, 6 * 0.0837e9, 128, sustained("1080ti"), 10 * GB),
    ("DistBelief 2012", "Downpour, a fully connected speech model (42 M parameters: F = 6 P), CPU machines "
     "on 1 GbE; assumed: batch 100 and 45 GFLOP/s sustained per machine (16 cores of 2012)",
     42e6, 6 * 42e6, 100, 45e9, 1 * GB),
]

# dsgd's published experiments: model, batch, compute scale K, link
DSGD_RUNS = [
    ("jin.sh", "mlp", 64, 50, 10 * GB),
    ("selsync.sh, 10 GbE", "mlp", 64, 1, 10 * GB),
    ("selsync.sh, 1 GbE", "mlp", 64, 1, 1 * GB),
    ("dssp.sh, link-bound", "mlp", 64, 1, 10 * GB),
    ("dssp.sh, compute-bound", "mlp", 64, 0.1, 10 * GB),
    ("distbelief.sh", "mlp", 64, 1, 10 * GB),
]


ALPHA = rg.LINKS["10gbe"][1]   # scripts/dsgd-sim's one-way latency (its 10gbe preset, kept by --bandwidth)


def load(stem):
    ev = [json.loads(l) for l in open(stem + ".jsonl")]
    c = [e for e in ev if e["event"] == "config"][0]
    d = [e for e in ev if e["event"] == "done"][-1]
    return c["config"]["model"], c["nparams"], c["train_flops_per_sample"], d["compute_s_per_step"]


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        print(__doc__.split("\n\n")[1].replace("Usage", "usage", 1), file=sys.stderr if len(sys.argv) < 2 or
              sys.argv[1] not in ("-h", "--help") else sys.stdout)
        sys.exit(0 if len(sys.argv) >= 2 and sys.argv[1] in ("-h", "--help") else 2)
    B = int(sys.argv[1])
    models = [load(s) for s in sys.argv[2:]]
    print("**The papers' settings** (estimates; ratio = B (F / P) W / (8 R)):\n")
    print("| paper | setting | F / P | ratio |")
    print("|---|---|---|---|")
    for name, what, P, F, b, R, W in PAPERS:
        print(f"| {name} | {what} | {F / P:.0f} | {ratio(P, F, b, R, W):.3g} |")
    print()
    print(f"**dsgd's models on this machine** (one process, one thread, batch {B}):\n")
    print("| model | parameters | FLOPs a sample | F / P | s a step here | GFLOP/s here |")
    print("|---|---|---|---|---|---|")
    for m, P, F, t in models:
        print(f"| {m} | {P:,} | {F / 1e6:.3g} M | {F / P:.0f} | {t:.4f} | {B * F / t / 1e9:.1f} |")
    print()
    mlp = [x for x in models if x[0] == "mlp"]
    if mlp:
        _, P, F, t = mlp[0]
        print("**dsgd's published experiments** (the mlp; K = --compute-scale):\n")
        print("| experiment | K | link | ratio |")
        print("|---|---|---|---|")
        for name, _, b, K, W in DSGD_RUNS:
            print(f"| {name} | {K:g} | {W / GB:g} Gb/s | {(b / B) * (t / K) / (2 * ALPHA + 8 * P / W):.3g} |")
        print()
    print("**Each paper's ratio in simulation.** The papers' messages are tens of megabytes, so latency is "
          "nothing to them; a small model's are not, so its simulated link is made slow enough that a push and a "
          f"pull take 25 times the two latencies ({ALPHA * 1e6:g} µs each): W below. Then the compute scale K "
          "(K < 1: a host slower than this machine's core) puts the model at each paper's ratio; and this "
          "machine's hours for 1 000 steps of 16 simulated workers (16 000 real steps, whatever K is):\n")
    print("| model | link W | hours per 16 x 1 000 steps | " + " | ".join(p[0] for p in PAPERS) + " |")
    print("|---|---|---|" + "---|" * len(PAPERS))
    for m, P, F, t in models:
        W = 8 * P / (25 * 2 * ALPHA)
        ks = [t / (ratio(p, f, b, R, w) * (2 * ALPHA + 8 * P / W)) for _, _, p, f, b, R, w in PAPERS]
        print(f"| {m} | {W / GB:.3g} Gb/s | {16000 * t / 3600:.2f} | " + " | ".join(f"K = {k:.3g}" for k in ks) + " |")
    print()


main()
