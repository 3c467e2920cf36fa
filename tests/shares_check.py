#!/usr/bin/env python3
"""Check that a run's done event accounts for the lead's training time:
computing, communicating (the stop decisions included) and the paradigm's
update cover train_s, the shares add up to 1 with little left over, the
stop decisions are part of the communication, and the ratio of computing to
communicating is the ratio of their shares.

usage: shares_check.py METRICS [--rest R]
  --rest R  the largest share left to bookkeeping (default 0.05)
Prints one line; exits 1 on a violation."""
import json
import sys


def main():
    args = sys.argv[1:]
    rest = float(args[args.index("--rest") + 1]) if "--rest" in args else 0.05
    done = None
    for line in open(args[0]):
        rec = json.loads(line)
        if rec["event"] == "done":
            done = rec
    if done is None:
        sys.exit(print(f"{args[0]}: no done event") or 1)
    keys = ("train_s", "comm_s", "train_comm_s", "stop_check_s", "compute_s", "compute_comm_ratio",
            "compute_share", "comm_share", "stop_check_share", "update_share", "other_share")
    missing = [k for k in keys if not isinstance(done.get(k), (int, float))]
    if missing:
        sys.exit(print(f"the done event lacks {', '.join(missing)}") or 1)
    d = done
    T, errs = d["train_s"], []
    parts = d["compute_share"] + d["comm_share"] + d["update_share"] + d["other_share"]
    if abs(parts - 1) > 1e-6:
        errs.append(f"the shares add up to {parts:.6f}")
    if not -0.01 <= d["other_share"] <= rest:
        errs.append(f"{d['other_share']:.3f} of the time is not accounted for (at most {rest})")
    # measured independently of the shares: the counters against the clock
    counted = (d["compute_s"] + d["comm_s"]) / T
    if counted < 1 - rest - d["update_share"]:
        errs.append(f"computing and communicating make {counted:.3f} of the training time")
    for k, v in (("compute", d["compute_s"]), ("comm", d["train_comm_s"]), ("stop_check", d["stop_check_s"])):
        if abs(d[f"{k}_share"] * T - v) > 1e-6 * T:
            errs.append(f"{k}_share {d[f'{k}_share']:.6f} is not {v:.6f} s of {T:.6f} s")
    if not 0 < d["stop_check_s"] <= d["train_comm_s"] * (1 + 1e-9) + 1e-9:
        errs.append(f"stop_check_s {d['stop_check_s']:.6f} not within train_comm_s {d['train_comm_s']:.6f}")
    if d["train_comm_s"] > d["comm_s"] * (1 + 1e-9) + 1e-9:
        errs.append(f"train_comm_s {d['train_comm_s']:.6f} exceeds comm_s {d['comm_s']:.6f}")
    ratio = d["compute_share"] / d["comm_share"]
    if abs(d["compute_comm_ratio"] - ratio) > 1e-6 * ratio:
        errs.append(f"compute_comm_ratio {d['compute_comm_ratio']:.6g}, but the shares' ratio is {ratio:.6g}")
    line = (f"compute {d['compute_share']:.3f} + comm {d['comm_share']:.3f} (stop checks {d['stop_check_share']:.3f})"
            f" + update {d['update_share']:.3f} + other {d['other_share']:.3f} of {T:.3f} s; ratio {d['compute_comm_ratio']:.3g}")
    if errs:
        sys.exit(print("; ".join(errs) + f" ({line})") or 1)
    print(line)


if __name__ == "__main__":
    main()
