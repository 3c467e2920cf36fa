#!/usr/bin/env python3
"""Check a --time-limit run's done event: every worker stopped at its first
decision after the limit (so it overran it by less than its last step,
decision to decision), the paradigm's final synchronization ended after every
worker had left its loop, and the final evaluation came after that.

usage: bounds_check.py METRICS LIMIT [--lockstep] [--skew S]
  --lockstep  every worker must have taken the same number of steps
  --skew S    clock skew allowed between ranks (0 under SimGrid: one clock)
Prints one line; exits 1 on a violation."""
import json
import sys


def main():
    args = sys.argv[1:]
    lockstep = "--lockstep" in args
    skew = 0.0
    if "--skew" in args:
        skew = float(args[args.index("--skew") + 1])
    path, limit = args[0], float(args[1])
    done = None
    for line in open(path):
        rec = json.loads(line)
        if rec["event"] == "done":
            done = rec
    if done is None:
        sys.exit(print(f"{path}: no done event") or 1)
    errs = []
    if done["stop_reason"] != "time_limit":
        errs.append(f"stop_reason {done['stop_reason']}")
    stops, lasts, steps = done["worker_stop_s"], done["worker_last_step_s"], done["worker_steps"]
    eps = 1e-9 + skew
    for w, (s, l) in enumerate(zip(stops, lasts)):
        if s < limit - eps:
            errs.append(f"worker {w} stopped at {s:.6f} s, before the limit")
        if s - limit > l + eps:
            errs.append(f"worker {w} stopped {s - limit:.6f} s after the limit, more than its last step {l:.6f} s")
    if lockstep and len(set(steps)) != 1:
        errs.append(f"lockstep workers took different step counts {steps}")
    # bsp-like paradigms have no final step of their own: their last
    # all-reduce completes on the ranks within one step of each other
    sync, ev = done["sync_done_s"], done["final_eval_s"]
    if sync < max(stops) - max(lasts) - eps:
        errs.append(f"final synchronization ended at {sync:.6f} s, before the workers stopped (latest {max(stops):.6f})")
    if ev < sync:
        errs.append(f"final evaluation at {ev:.6f} s before the final synchronization ended ({sync:.6f})")
    over = max(s - limit for s in stops)
    if errs:
        print(f"{path}: " + "; ".join(errs))
        return 1
    print(f"{len(stops)} workers stopped {min(stops) - limit:+.6f}..{over:+.6f} s around the {limit} s limit "
          f"(last steps <= {max(lasts):.6f} s, steps {min(steps)}..{max(steps)}); "
          f"sync done {sync:.6f}, final eval {ev:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
