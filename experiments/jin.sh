#!/usr/bin/env bash
# Jin, Yuan, Iandola, Keutzer (2016), "How to scale distributed deep
# learning?": bsp (all-reduce), asynchronous easgd (one shard) and gossip
# (pull) at N = 4 ... 128 workers on a simulated 10 GbE cluster whose hosts
# compute 50x faster than this machine's core (a GPU-like compute scale),
# Fashion-MNIST mlp: time to a target accuracy and accuracy at a fixed
# (simulated) time, to see where the asynchronous methods stop winning.
# REGIME=resnet moves it to the paper's compute-to-communication ratio
# (about 12, docs/results.md "The regime"): resnet:8,8 on 1.27 Gb/s links,
# hosts 1.4x this machine's core, Nesterov momentum 0.9 (as the paper),
# N = 4 ... 32, 6 simulated s, target 0.80 (a pilot: one seed; about 25
# min here).
# Usage: [REGIME=resnet] experiments/jin.sh [--quick] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md (tables, the crossover N), DIR/figures/ (with the
# scaling curve), DIR/metrics/ (default experiments/results/jin).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args jin "$@"
need_sim
SCALE=50 BW=10Gbps
if [ "${REGIME:-mlp}" = resnet ] && [ "$QUICK" = 0 ]; then
    SCALE=1.4 BW=1.27Gbps
    NS=(4 8 16 32); LIMIT=6; EVAL=0.25; TARGET=0.80
    DATA=(--data fashion-mnist --model resnet:8,8 --batch 64 --lr 0.05 --optimizer nesterov --momentum 0.9 --test-subset 1000)
elif [ "$QUICK" = 1 ]; then
    NS=(2 4); LIMIT=0.01; EVAL=0.001; TARGET=0.5
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128)
else
    NS=(4 8 16 32 64 128); LIMIT=4; EVAL=0.1; TARGET=0.82
    DATA=(--data fashion-mnist --model mlp --batch 64 --lr 0.05 --test-subset 2000)
fi
COMMON=("${DATA[@]}" --epochs 100000 --time-limit "$LIMIT" --eval-every-s "$EVAL" --eval-offline --quiet)
summary_head "Jin et al.: synchronous all-reduce against asynchronous easgd and gossip as N grows" \
    "Simulated links of $BW, hosts ${SCALE}x this machine's core, model ${DATA[3]}; every run bounded by $LIMIT simulated s; target test accuracy $TARGET. Accuracy at the fixed time is the final test accuracy."
names=()
for N in "${NS[@]}"; do
    echo "== $N workers =="
    sim_run "bsp-$N" "$N" "$(sim_speeds "$N" "$SCALE")" "$BW" -- "${COMMON[@]}" --sync bsp
    sim_run "easgd-$N" "$((N + 1))" "$(sim_speeds "$((N + 1))" "$SCALE")" "$BW" -- "${COMMON[@]}" --sync easgd --servers 1 --tau 4
    sim_run "gossip-$N" "$N" "$(sim_speeds "$N" "$SCALE")" "$BW" -- "${COMMON[@]}" --sync gossip --gossip pull
    names+=("bsp-$N" "easgd-$N" "gossip-$N")
done
table "time to $TARGET and accuracy at $LIMIT s" "$TARGET" bsp "${names[@]}"
figures all "$TARGET" "${names[@]}"
python3 - "$OUT" "$TARGET" "$EVAL" "${NS[@]}" >> "$OUT/summary.md" <<'PY'
import sys
sys.path.insert(0, "experiments")
from summarize import ttt
out, target, every, ns = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
# time since the common start: the lead of gossip spends most of its time
# reading every replica for the evaluations while the others train, so its
# own training time would flatter gossip (0.1 s where 2.3 s have passed)
print("### crossover: the smallest N from which bsp reaches the target first (time since the start)\n")
print(f"A tie: two runs reached the target at the same evaluation (every {every:g} s).\n")
cross = None
for n in ns:
    b, e, g = (ttt(f"{out}/metrics/{p}-{n}.jsonl", target, wall=True) for p in ("bsp", "easgd", "gossip"))
    f = lambda v: "not reached" if v is None else f"{v:.3f} s"
    # times are known to the evaluation grid (--eval-every-s): within half a
    # step of it, two runs reached the target at the same evaluation, a tie
    wins = b is not None and all(o is None or b < o - every / 2 for o in (e, g))
    tie = b is not None and not wins and all(o is None or b < o + every / 2 for o in (e, g))
    print(f"- N = {n}: bsp {f(b)}, easgd {f(e)}, gossip {f(g)}"
          f"{' ← bsp first' if wins else ' ← a tie at the same evaluation' if tie else ''}")
    cross = None if not wins else (cross or n)
print(f"\nCrossover N: {cross if cross else 'none in this range'}\n")
PY
wall_report
cat "$OUT/summary.md"
