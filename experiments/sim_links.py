#!/usr/bin/env python3
"""Summarize the messages of a simulated run: the Paje trace that
`scripts/dsgd-sim --trace FILE` writes.

Each point-to-point message is one line of the trace at its send (the
simulated time the send was posted) and one at its receive's completion,
so a message's span includes any wait for its receive to be posted: it
shows when a message was wanted and when it arrived, not when its bytes
moved. Prints,
per (sender, receiver, tag), the messages and their spans; per rank, how
much of the run it had messages of the chosen tags coming in and going out,
and both at once; with --from/--to, every message that started in that
window, in order.

Usage: experiments/sim_links.py TRACE [--tags 211,202] [--from T --to T]
  --tags: the tags that count as data (default: every tag); dsgd's tags are
  in src/comm/comm.h (parameter server 200-299: 211 a push's gradient, 202 a
  reply; gossip 300-399; Sandblaster 400-499).
"""
import argparse
import collections
import sys


def read(path):
    """Messages (start, end, src, dst, tag) of a Paje trace, ranks from
    their containers' names ("rank-R")."""
    defs, fields, rank, starts, msgs = {}, None, {}, {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("%EventDef"):
                _, name, num = line.split()
                fields = defs[num] = (name, [])
                continue
            if line.startswith("%EndEventDef"):
                fields = None
                continue
            if line.startswith("%"):
                if fields is not None and len(line.split()) >= 2:
                    fields[1].append(line.split()[1])
                continue
            parts = line.split(None)
            if not parts or parts[0] not in defs:
                continue
            name, names = defs[parts[0]]
            ev = dict(zip(names, parts[1:]))
            if name == "PajeCreateContainer":
                label = line.rsplit('"', 2)[-2] if '"' in line else ev.get("Name", "")
                if label.startswith("rank-"):
                    rank[ev["Alias"]] = int(label[5:])
            elif name == "PajeStartLink":
                k = ev["Key"].split("_")
                if len(k) >= 3:
                    starts.setdefault((k[0], k[1]), []).append((float(ev["Time"]), ev["StartContainer"], k[2]))
            elif name == "PajeEndLink":
                k = ev["Key"].split("_")
                q = starts.get((k[0], k[1]), []) if len(k) >= 3 else []
                # a receive of any tag (MPI_ANY_TAG, negative in the key) takes
                # the pair's oldest message: MPI keeps a pair's order
                i = next((i for i, m in enumerate(q) if k[2].startswith("-") or m[2] == k[2]), None)
                if i is None:
                    continue
                t0, src, tag = q.pop(i)
                if src in rank and ev["EndContainer"] in rank and tag.lstrip("-").isdigit():
                    msgs.append((t0, float(ev["Time"]), rank[src], rank[ev["EndContainer"]], int(tag)))
    if not defs:
        sys.exit(f"sim_links: {path} is not a Paje trace (scripts/dsgd-sim --trace FILE writes one)")
    return sorted(msgs)


def covered(spans):
    """Total length of the union of (a, b) spans."""
    tot, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur:
                tot += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return tot + (cur[1] - cur[0] if cur else 0.0)


def both(ins, outs):
    """Length of the time covered by an incoming and an outgoing span at once."""
    ev = sorted([(a, 0, 1) for a, b in ins] + [(b, 0, -1) for a, b in ins] +
                [(a, 1, 1) for a, b in outs] + [(b, 1, -1) for a, b in outs])
    n, tot, last = [0, 0], 0.0, None
    for t, k, d in ev:
        if last is not None and n[0] > 0 and n[1] > 0:
            tot += t - last
        n[k] += d
        last = t
    return tot


def main():
    ap = argparse.ArgumentParser(description="Summarize the messages of a simulated run's trace "
                                 "(scripts/dsgd-sim --trace FILE).")
    ap.add_argument("trace")
    ap.add_argument("--tags", default="")
    ap.add_argument("--from", dest="t0", type=float)
    ap.add_argument("--to", dest="t1", type=float)
    a = ap.parse_args()
    try:
        msgs = read(a.trace)
    except OSError as e:
        sys.exit(f"sim_links: cannot read {a.trace}: {e.strerror}")
    try:
        tags = {int(t) for t in a.tags.split(",") if t}
    except ValueError:
        sys.exit(f"sim_links: --tags wants numbers separated by commas, not '{a.tags}'")
    if not msgs:
        sys.exit(f"sim_links: {a.trace} holds no point-to-point messages between ranks")
    end = max(m[1] for m in msgs)
    print(f"{len(msgs)} messages in {end:.6g} simulated s")
    print()
    print("| from | to | tag | messages | span median | span min | span max |")
    print("|---|---|---|---|---|---|---|")
    by = collections.defaultdict(list)
    for t0, t1, s, d, tag in msgs:
        by[(s, d, tag)].append(t1 - t0)
    for (s, d, tag), v in sorted(by.items()):
        v.sort()
        print(f"| {s} | {d} | {tag} | {len(v)} | {v[len(v) // 2]:.4g} | {v[0]:.4g} | {v[-1]:.4g} |")
    data = [m for m in msgs if not tags or m[4] in tags]
    print()
    print(f"Per rank, the share of the run ({end:.6g} s) with data messages"
          f"{' (tags ' + ','.join(map(str, sorted(tags))) + ')' if tags else ''} coming in, going out, and both:")
    print()
    print("| rank | in | out | both |")
    print("|---|---|---|---|")
    for r in sorted({m[2] for m in data} | {m[3] for m in data}):
        ins = [(m[0], m[1]) for m in data if m[3] == r]
        outs = [(m[0], m[1]) for m in data if m[2] == r]
        print(f"| {r} | {covered(ins) / end:.2f} | {covered(outs) / end:.2f} | {both(ins, outs) / end:.2f} |")
    if a.t0 is not None or a.t1 is not None:
        lo = a.t0 if a.t0 is not None else 0.0
        hi = a.t1 if a.t1 is not None else end
        print()
        print(f"Messages that started in [{lo:g}, {hi:g}] s:")
        print()
        for t0, t1, s, d, tag in msgs:
            if lo <= t0 <= hi:
                print(f"  {t0:.4f} -> {t1:.4f}  ({t1 - t0:.4f} s)  {s} -> {d}  tag {tag}")


if __name__ == "__main__":
    main()
