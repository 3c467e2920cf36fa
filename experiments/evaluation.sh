#!/usr/bin/env bash
# Does evaluating change the run it measures? Asynchronous paradigms with
# the lead worker evaluating inline (it stops to evaluate; the others go
# on), with --eval-offline (it only keeps a snapshot of the delivered model
# and evaluates the snapshots after the run) and without evaluations:
# the mean staleness the shard recorded and every worker's step rate.
#   real processes: asp, 4 workers + 1 shard on this 2-core machine,
#     Fashion-MNIST mlp, 2000 steps, an evaluation every 0.25 s, seeds 1-3;
#   simulated: asp and ssp (s = 3) on the DSSP experiment's transient-
#     straggler cluster (8 workers + 4 shards, hosts 10x slower, every
#     worker 4x slower for a mean of 2 s between 6 s at full speed), 60
#     simulated s, an evaluation every 2 s, lr 0.03 (asp diverged once at
#     0.05), seeds 1-3 (each draws the run and the stragglers' schedule).
# Usage: experiments/evaluation.sh [--quick] [--keep | --report] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md and DIR/metrics/ (default experiments/results/evaluation).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args evaluation "$@"
need_sim
declare -A MODE=([none]="--eval-every 1000000000" [inline]="--eval-every-s EV" [offline]="--eval-every-s EV --eval-offline")
MODES=(none inline offline)
if [ "$QUICK" = 1 ]; then
    SEEDS=(1); STEPS=400; EV=0.005; SLIM=0.05; SEV=0.01; TSLOW=0.01 TFAST=0.03
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128)
    SDATA=("${DATA[@]}")
else
    SEEDS=(1 2 3); STEPS=2000; EV=0.25; SLIM=60; SEV=2; TSLOW=2 TFAST=6
    DATA=(--data fashion-mnist --model mlp --batch 32 --lr 0.05)
    SDATA=(--data fashion-mnist --model mlp --batch 64 --test-subset 2000 --lr 0.03)
fi
summary_head "Evaluation that does not perturb the run" \
    "The lead evaluating inline, with --eval-offline, and not at all: mean staleness and step rates."
names=()
echo "== real processes: asp, 4 workers + 1 shard =="
for seed in "${SEEDS[@]}"; do
    for m in "${MODES[@]}"; do
        # shellcheck disable=SC2086
        real_run "real-asp-$m-seed$seed" 5 -- "${DATA[@]}" --sync asp --steps "$STEPS" --quiet --seed "$seed" ${MODE[$m]//EV/$EV}
        names+=("real-asp-$m-seed$seed")
    done
done
echo "== simulated: transient stragglers, 8 workers + 4 shards =="
for seed in "${SEEDS[@]}"; do
    for p in asp ssp; do
        extra=(--sync asp)
        [ "$p" = ssp ] && extra=(--sync ssp --staleness 3)
        for m in "${MODES[@]}"; do
            # shellcheck disable=SC2086
            SIM_EXTRA="--transient 4-11:4:$TSLOW:$TFAST:$seed" \
            sim_run "sim-$p-$m-seed$seed" 12 "0.1:" 10Gbps -- "${SDATA[@]}" "${extra[@]}" --servers 4 --epochs 100000 \
                --time-limit "$SLIM" --quiet --seed "$seed" ${MODE[$m]//EV/$SEV}
            names+=("sim-$p-$m-seed$seed")
        done
    done
done
python3 - "$OUT" "${names[@]}" >> "$SUMMARY" <<'PY'
import json
import os
import statistics
import sys

sys.path.insert(0, "experiments")
from summarize import spread

out, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    ev = [json.loads(l) for l in open(os.path.join(out, "metrics", n + ".jsonl"))]
    d = [e for e in ev if e["event"] == "done"][-1]
    rates = d["worker_step_rate"]
    key = n.rsplit("-seed", 1)[0]
    rows.setdefault(key, []).append((sum(1 for e in ev if e["event"] == "eval") - 1, d["staleness_mean"],
                                     statistics.mean(rates), rates[0], statistics.mean(rates[1:]), d["test_acc"]))


print("| setting | evaluation | evaluations | mean staleness | step rate, all workers (/s) | lead | others | final accuracy |")
print("|---|---|---|---|---|---|---|---|")
for key, rs in rows.items():
    where, mode = key.rsplit("-", 1)
    cols = list(zip(*rs))
    print(f"| {where} | {mode} | {spread(cols[0], '%d')} | {spread(cols[1], '%.1f')} | {spread(cols[2], '%.0f')} | "
          f"{spread(cols[3], '%.0f')} | {spread(cols[4], '%.0f')} | {spread(cols[5], '%.4f')} |")
print()
print("Median [min, max] over seeds " + ", ".join(sorted({n.rsplit('seed', 1)[1] for n in names})) +
      ". Step rates are steps per second of each worker's loop (the lead's excludes its evaluations).")
print()
PY
wall_report
summary_done > /dev/null
echo "wrote $OUT/summary.md"
