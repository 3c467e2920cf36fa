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
# N = 4 ... 32, 6 simulated s, target 0.80, a large and a small step size
# (0.1 and 0.025, the same for every method: the paper's RQ4), 3 seeds
# each, the easgd centre sharded over S = max(1, N/8) shards (a server
# that grows with the workers, not the bottleneck) and bsp's gradients in
# one all-reduce a step (--bucket-kb 1024, as DDP and Horovod fuse them:
# per layer, 19 all-reduces a step cost 32 workers 17 ms of latency for
# 1 ms of bytes); about 77 min per step size here (2.6 hours in all, with
# another experiment on the second core), resumable with --keep.
# EXP_NS="64" or "128" asks the larger clusters (at 64 workers a seed of
# the three methods took 25-33 min here, 84 min a step size; 128 about
# twice that: one EXP_SEEDS at a time keeps an invocation near an hour).
# EXP_LRS, EXP_NS, EXP_SEEDS and EXP_METHODS (space-separated) run a subset
# of the step sizes, worker counts, seeds and methods (bsp easgd gossip):
# one invocation per step size, say, or two at once (one per core) into one
# --out; a last --keep run (or --report) then writes the whole summary.
# Usage: [REGIME=resnet] [EXP_LRS=...] [EXP_NS=...] [EXP_SEEDS=...] [EXP_METHODS=...] experiments/jin.sh [--quick] [--keep | --report] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md (tables, the crossover N), DIR/figures/ (with the
# scaling curve), DIR/metrics/ (default experiments/results/jin).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args jin "$@"
need_sim
SCALE=50 BW=10Gbps
LRS=(0.05) SEEDS=(0)   # seed 0: one run per configuration, named without step size and seed
BSP=(--sync bsp)
shards() { echo 1; }
if [ "${REGIME:-mlp}" = resnet ] && [ "$QUICK" = 0 ]; then
    SCALE=1.4 BW=1.27Gbps
    NS=(4 8 16 32); LIMIT=6; EVAL=0.25; TARGET=0.80
    LRS=(0.1 0.025) SEEDS=(1 2 3)
    ALLOW_FAIL=1   # a run that diverges at the large step is a result
    BSP=(--sync bsp --bucket-kb 1024)
    shards() { echo $(($1 >= 16 ? $1 / 8 : 1)); }
    DATA=(--data fashion-mnist --model resnet:8,8 --batch 64 --optimizer nesterov --momentum 0.9 --test-subset 1000)
elif [ "$QUICK" = 1 ]; then
    # two seeds, so that the repeats' tables and crossover stay tested
    NS=(2 4); LIMIT=0.01; EVAL=0.001; TARGET=0.5
    SEEDS=(1 2)
    shards() { echo $(($1 >= 4 ? 2 : 1)); }
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --test-subset 128)
else
    NS=(4 8 16 32 64 128); LIMIT=4; EVAL=0.1; TARGET=0.82
    DATA=(--data fashion-mnist --model mlp --batch 64 --test-subset 2000)
fi
METHODS=(bsp easgd gossip)
exp_list EXP_LRS LRS '[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?' "a step size (a positive decimal number)"
exp_list EXP_NS NS '[2-9]|[1-9][0-9]+' "a number of workers (a whole number from 2)"
exp_list EXP_SEEDS SEEDS '[0-9]+' "a seed (a whole number)"
exp_list EXP_METHODS METHODS 'bsp|easgd|gossip' "a method (bsp, easgd, gossip)"
# runs method $1 of this invocation? (EXP_METHODS)
wanted() { [[ " ${METHODS[*]} " == *" $1 "* ]]; }
COMMON=("${DATA[@]}" --epochs 100000 --time-limit "$LIMIT" --eval-every-s "$EVAL" --eval-offline --quiet)
head="Simulated links of $BW, hosts ${SCALE}x this machine's core, model ${DATA[3]}; every run bounded by $LIMIT simulated s; target test accuracy $TARGET. Accuracy at the fixed time is the final test accuracy."
[ "${SEEDS[*]}" = 0 ] || head+=" Step size ${LRS[*]}, the same for every method; seeds ${SEEDS[*]}; a configuration's numbers are the median [min, max] over its seeds."
[ "${#BSP[@]}" = 2 ] || head+=" bsp all-reduces its gradients in buckets of 1 MiB (one all-reduce a step)."
head+=" The easgd centre is sharded over S shards:$(for n in "${NS[@]}"; do printf ' %s at N = %s,' "$(shards "$n")" "$n"; done)"
summary_head "Jin et al.: synchronous all-reduce against asynchronous easgd and gossip as N grows" "${head%,}."
# a run's name: METHOD-N, and -lrLR-seedSEED where there are repeats
name() { if [ "$3" = 0 ]; then echo "$1-$4"; else echo "$1-$4-lr$2-seed$3"; fi; }
for LR in "${LRS[@]}"; do
    for SEED in "${SEEDS[@]}"; do
        seedarg=()
        [ "$SEED" = 0 ] || seedarg=(--seed "$SEED")
        for N in "${NS[@]}"; do
            echo "== step size $LR, seed $SEED, $N workers =="
            S=$(shards "$N")
            ! wanted bsp || sim_run "$(name bsp "$LR" "$SEED" "$N")" "$N" "$(sim_speeds "$N" "$SCALE")" "$BW" -- \
                "${COMMON[@]}" --lr "$LR" "${seedarg[@]}" "${BSP[@]}"
            ! wanted easgd || sim_run "$(name easgd "$LR" "$SEED" "$N")" "$((N + S))" "$(sim_speeds "$((N + S))" "$SCALE")" "$BW" -- \
                "${COMMON[@]}" --lr "$LR" "${seedarg[@]}" --sync easgd --servers "$S" --tau 4
            ! wanted gossip || sim_run "$(name gossip "$LR" "$SEED" "$N")" "$N" "$(sim_speeds "$N" "$SCALE")" "$BW" -- \
                "${COMMON[@]}" --lr "$LR" "${seedarg[@]}" --sync gossip --gossip pull
        done
    done
done
for LR in "${LRS[@]}"; do
    names=()
    for N in "${NS[@]}"; do
        for p in bsp easgd gossip; do
            for SEED in "${SEEDS[@]}"; do names+=("$(name "$p" "$LR" "$SEED" "$N")"); done
        done
    done
    sub=all title="time to $TARGET and accuracy at $LIMIT s"
    [ "${#LRS[@]}" = 1 ] || { sub=lr$LR; title+=", step size $LR"; }
    ran=0
    for n in "${names[@]}"; do [ -f "$OUT/metrics/$n.jsonl" ] && ran=$((ran + 1)); done
    if [ "$ran" = 0 ]; then   # --report before any run of this step size
        printf '### %s

Not run yet (%d runs).

' "$title" "${#names[@]}" >> "$SUMMARY"
        continue
    fi
    table "$title" "$TARGET" bsp "${names[@]}"
    figures "$sub" "$TARGET" "${names[@]}"
    python3 - "$OUT" "$TARGET" "$EVAL" "$LR" "${SEEDS[*]}" "${#LRS[@]}" "${NS[@]}" >> "$SUMMARY" <<'PY'
import json
import os
import sys
sys.path.insert(0, "experiments")
from summarize import first_among, median, ttt
out, target, every, lr, seeds, nlr, ns = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                                          sys.argv[5].split(), int(sys.argv[6]), sys.argv[7:])
name = lambda p, n, s: f"{p}-{n}" if s == "0" else f"{p}-{n}-lr{lr}-seed{s}"
# time since the common start: the lead of gossip spends most of its time
# reading every replica for the evaluations while the others train, so its
# own training time would flatter gossip (0.1 s where 2.3 s have passed)
print(f"### crossover{f', step size {lr}' if nlr > 1 else ''}: the smallest N from which bsp reaches the target first"
      " (time since the start)\n")
if len(seeds) == 1:
    print(f"A tie: two runs reached the target at the same evaluation (every {every:g} s).\n")
else:
    print(f"With {len(seeds)} seeds: bsp is first where its slowest seed reached the target at an earlier evaluation "
          f"(every {every:g} s) than every other method's fastest seed, and a method is ahead of bsp where its "
          "slowest seed was earlier than bsp's fastest; otherwise their spreads overlap, a tie. A seed that never "
          "reached the target counts as infinitely late.\n")
cross = None
for n in ns:
    # the seeds that ran (--report: an experiment stopped part-way)
    ran = {p: [s for s in seeds if os.path.exists(f"{out}/metrics/{name(p, n, s)}.jsonl")] for p in ("bsp", "easgd", "gossip")}
    if not all(ran.values()):
        print(f"- N = {n}: not run")
        continue
    t = {p: [ttt(f"{out}/metrics/{name(p, n, s)}.jsonl", target, wall=True) for s in ran[p]] for p in ran}

    def f(vs):
        got = [v for v in vs if v is not None]
        if not got:
            return "not reached"
        if len(vs) == 1:
            return f"{vs[0]:.3f} s"
        m = median(vs)
        return f"{'–' if m is None else f'{m:.3f}'} [{min(got):.3f}, {'never' if len(got) < len(vs) else f'{max(got):.3f}'}] s"
    wins, ahead = first_among(t, "bsp", every)
    reached = any(v is not None for v in t["bsp"])
    mark = " ← bsp first" if wins else f" ← {' and '.join(ahead)} ahead of bsp" if ahead else " ← a tie" if reached else ""
    # simulated bsp waits for its all-reduce after backward instead of
    # overlapping it (docs/simulation.md): its step could shrink to no less
    # than the larger of computing and communicating, a bound on how much
    # sooner it could have been
    hidden = []
    for s, v in zip(ran["bsp"], t["bsp"]):
        m = f"{out}/metrics/{name('bsp', n, s)}.jsonl"
        d = [json.loads(line) for line in open(m)][-1] if v is not None and os.path.exists(m) else {}
        c, w = d.get("compute_s_per_step"), d.get("comm_s_per_step")
        hidden.append(v * max(c, w) / (c + w) if c and w else None)
    bound = ""
    if any(h is not None for h in hidden):
        bound = f"; bsp with its all-reduce hidden, at best {f(hidden)}"
        still = first_among({**t, "bsp": hidden}, "bsp", every)[1]
        if ahead:
            bound += f" ({' and '.join(still) + ' still ahead' if still else 'a tie then'})"
    few = lambda p: f" ({len(ran[p])} of {len(seeds)} seeds)" if len(ran[p]) < len(seeds) else ""
    print(f"- N = {n}: bsp {f(t['bsp'])}{few('bsp')}, easgd {f(t['easgd'])}{few('easgd')}, "
          f"gossip {f(t['gossip'])}{few('gossip')}{mark}{bound}")
    cross = None if not wins else (cross or n)
print(f"\nCrossover N: {cross if cross else 'none in this range'}\n")
PY
done
wall_report
summary_done
