#!/usr/bin/env python3
"""How a host's link is used in each direction, sampled while a run goes on.

Run inside a host's network namespace (scripts/dsgd-cluster exec H ...). It
reads eth0's byte counters every --every seconds until the file --until
exists (or --max seconds pass), then prints one JSON object:

  rate_bps       the link's rate, as given (--rate, bits/s)
  in_mbps/out_mbps  mean rate received / sent over the busy span
  in_busy/out_busy  fraction of the busy span's samples in which that
                 direction moved at least --busy of the link's rate
  both_busy      fraction in which both did at once
  either_busy    fraction in which at least one did
  span_s         from the first to the last sample that moved anything

A link used one direction at a time shows both_busy near 0 and either_busy
near in_busy + out_busy; one used both ways at once shows both_busy near
min(in_busy, out_busy).
"""
import argparse
import json
import os
import sys
import time


def counters(dev):
    base = f"/sys/class/net/{dev}/statistics/"
    with open(base + "rx_bytes") as f:
        rx = int(f.read())
    with open(base + "tx_bytes") as f:
        tx = int(f.read())
    return rx, tx


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, required=True, help="link rate, bits/s")
    ap.add_argument("--until", required=True, help="stop once this file exists")
    ap.add_argument("--every", type=float, default=0.01, help="sampling period, s")
    ap.add_argument("--busy", type=float, default=0.5, help="fraction of the rate that counts as busy")
    ap.add_argument("--max", type=float, default=600, help="stop after this many seconds anyway")
    ap.add_argument("--dev", default="eth0")
    ap.add_argument("--series", help="also write each sample (seconds, in and out bits/s) to this file")
    a = ap.parse_args()
    samples = []
    t0 = time.monotonic()
    last = (t0, *counters(a.dev))
    while not os.path.exists(a.until) and time.monotonic() - t0 < a.max:
        time.sleep(a.every)
        now = (time.monotonic(), *counters(a.dev))
        dt = now[0] - last[0]
        samples.append((dt, (now[1] - last[1]) * 8 / dt, (now[2] - last[2]) * 8 / dt))
        last = now
    moved = [i for i, s in enumerate(samples) if s[1] > 0.01 * a.rate or s[2] > 0.01 * a.rate]
    if not moved:
        print(json.dumps({"rate_bps": a.rate, "span_s": 0}))
        return
    span = samples[moved[0]:moved[-1] + 1]
    if a.series:
        with open(a.series, "w") as f:
            t = 0.0
            for s in span:
                t += s[0]
                f.write(f"{t:.4f} {s[1]:.0f} {s[2]:.0f}\n")
    thr = a.busy * a.rate
    n = len(span)
    secs = sum(s[0] for s in span)
    out = {
        "rate_bps": a.rate,
        "span_s": round(secs, 3),
        "in_mbps": round(sum(s[0] * s[1] for s in span) / secs / 1e6, 2),
        "out_mbps": round(sum(s[0] * s[2] for s in span) / secs / 1e6, 2),
        "in_busy": round(sum(s[1] >= thr for s in span) / n, 3),
        "out_busy": round(sum(s[2] >= thr for s in span) / n, 3),
        "both_busy": round(sum(s[1] >= thr and s[2] >= thr for s in span) / n, 3),
        "either_busy": round(sum(s[1] >= thr or s[2] >= thr for s in span) / n, 3),
        "samples": n,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
