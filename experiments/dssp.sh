#!/usr/bin/env bash
# DSSP (Zhao et al., ICDCS 2019): bsp-ps, asp, ssp (s = 3) and dssp
# (s_L = 3, s_U = 15) on simulated clusters where one shard's link sets the
# pace and where computing does (4 shards, hosts 10x slower), each mixed
# (the paper's mixed GPUs: a quarter of the workers 2x and a quarter 4x
# slower than the rest) and uniform, 8 and 16 workers, Fashion-MNIST mlp,
# and a cluster of transient stragglers (4 shards, hosts 10x slower, every
# worker 4x slower for exponential intervals of a mean of 2 s between
# full-speed ones of a mean of 6 s: SimGrid speed profiles), 3 seeds each,
# every run of a cluster bounded by the same simulated time:
# time to target, final accuracy, staleness distributions. Plain SGD at the
# shard, lr 0.4/N (0.05 at 8 workers): with momentum 0.9 at the shard (lr 0.0125) the stale
# gradients of 8 workers spiked dssp's loss to 33 and it ended at 0.71.
# REGIME=resnet moves it to the paper's compute-to-communication ratio
# (0.095, mostly assumed: docs/results.md "The regime"): resnet:8,8 on
# 1.27 Gb/s links, hosts 174x this machine's core, 4 shards, 1 simulated s
# a run; transient stragglers (their intervals scaled to the shorter run)
# at 8 and 16 workers, the mixed and the uniform cluster at 8; 3 seeds
# each; the shards' messages (20 KB pushes and pulls) simulated eagerly,
# as a real MPI sends them under its 64 KiB limit (--eager 65536,
# docs/simulation.md "Messages"). Resumable with --keep.
# Usage: [REGIME=resnet] [EXP_SPECS="N:CLUSTER ..."] experiments/dssp.sh [--quick] [--keep | --report] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md (tables, with dssp's time to target against ssp's
# and bsp-ps's), DIR/figures/, DIR/metrics/ (default experiments/results/dssp).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args dssp "$@"
need_sim
# transient stragglers: factor, mean slow and mean fast interval (simulated s)
TF=4 TSLOW=2 TFAST=6
SEEDS=(1 2 3)
RN=0
[ "${REGIME:-mlp}" = resnet ] && RN=1
if [ "$QUICK" = 1 ]; then
    NS=(4); LIMIT=0.05; EVAL=0.01; TARGET=0.5; SEEDS=(1); TSLOW=0.01 TFAST=0.03
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128)
    [ $RN = 1 ] && SEEDS=(1 2)
elif [ $RN = 1 ]; then
    # 1 s: 200-740 steps a worker with eager messages (a pilot of 0.5 s
    # made 95-145 with SMPI's rendezvous, and none of bsp-ps, ssp, dssp
    # reached 0.80; rendezvous runs of 2 s reached it at 0.50-1.65 s, eager
    # ones about twice as fast); the stragglers' intervals are those that
    # gave a 2 s run the mlp cluster's number of slow spells
    NS=(8 16); LIMIT=1; EVAL=0.05; TARGET=0.80; TSLOW=0.067 TFAST=0.2
    DATA=(--data fashion-mnist --model resnet:8,8 --batch 64 --test-subset 1000)
else
    NS=(8 16); LIMIT=30; EVAL=0.5; TARGET=0.82
    DATA=(--data fashion-mnist --model mlp --batch 64 --test-subset 2000)
fi
# The shard applies every worker's gradient: lr 0.4/N keeps the sum of one
# clock's N gradients the same size (at 16 workers lr 0.05 diverged in 37
# steps).
lr_for() { [ "$QUICK" = 1 ] && echo 0.05 || awk -v n="$1" -v k="$([ $RN = 1 ] && echo 0.8 || echo 0.4)" 'BEGIN { print k / n }'; }
# a run that diverges is a result of its cluster (bsp-ps on the uniform
# compute-bound one at 8 workers): its table says so, the experiment goes on
ALLOW_FAIL=1
declare -A P=([bsp-ps]="--sync bsp-ps" [asp]="--sync asp" [ssp]="--sync ssp --staleness 3"
              [dssp]="--sync dssp --staleness-low 3 --staleness-high 15")
ORDER=(bsp-ps ssp dssp asp)
if [ $RN = 1 ]; then
    summary_head "DSSP: dynamic staleness on heterogeneous clusters, in the paper's regime" \
        "Paradigms of the parameter server under the same simulated time budget ($LIMIT s), model ${DATA[3]}, hosts 174x this machine's core, 1.27 Gb/s links, 4 shards, plain SGD at lr 0.8/N, target test accuracy $TARGET; seeds ${SEEDS[*]}, a configuration's numbers the median [min, max] over them."
else
    summary_head "DSSP: dynamic staleness on heterogeneous clusters" \
        "Paradigms of the parameter server under the same simulated time budget ($LIMIT s; 60 s on the compute-bound clusters), plain SGD at lr 0.4/N, target test accuracy $TARGET."
fi
# Two kinds of cluster. "hetero"/"homo": hosts at this machine's speed and
# one shard, so one 10 GbE link to the shard sets the pace (a worker's step
# computes in 0.8 ms, a clock of 8 workers' pushes and pulls takes ~12 ms).
# "cpu-hetero"/"cpu-homo": hosts 10x slower (--compute-scale 0.1: a model
# ten times larger, say) and 4 shards, so computing sets the pace and slow
# workers matter, as on the paper's GPU cluster; 60 s, evaluations every 2 s
# (an evaluation takes the lead 10x longer there too).
# the link-bound clusters at every size first, the compute-bound ones last
# In the regime: "rn-hetero", "rn-transient", "rn-homo", every one with seeds.
SPECS=$(for N in "${NS[@]}"; do echo "$N:hetero $N:homo"; done; for N in "${NS[@]}"; do echo "$N:cpu-hetero $N:cpu-homo"; done
        for N in "${NS[@]}"; do echo "$N:cpu-transient"; done)
# In the regime the transient stragglers come first (the question the paper's
# advantage rests on), so that a run stopped early has answered it.
# (the mixed and uniform clusters at 8 workers only: a run of 16 costs twice
# as much, and the transient stragglers are where the paper's advantage lies)
[ $RN = 1 ] && SPECS=$(for N in "${NS[@]}"; do echo "$N:rn-transient"; done; echo "${NS[0]}:rn-hetero ${NS[0]}:rn-homo")
# EXP_SPECS="8:rn-transient 8:rn-hetero": some of the clusters only (two
# invocations sharing --out with --keep can run disjoint sets side by side;
# a last --report over all of them writes the whole summary)
SPECA=()
exp_list EXP_SPECS SPECA '[0-9]+:(hetero|homo|cpu-hetero|cpu-homo|cpu-transient|rn-transient|rn-hetero|rn-homo)' "N:CLUSTER specs (e.g. 8:rn-transient)"
[ "${#SPECA[@]}" -gt 0 ] && SPECS="${SPECA[*]}"
for spec in $SPECS; do
        N=${spec%%:*} cl=${spec#*:}
        # --quick: the mixed link-bound cluster and transient stragglers only
        [ "$QUICK" = 1 ] && [ "$cl" != hetero ] && [ "$cl" != cpu-transient ] && [ "$cl" != rn-transient ] && continue
        S=1 scale=1 lim=$LIMIT ev=$EVAL bw=10Gbps
        [ "${cl%%-*}" = cpu ] && [ "$QUICK" = 0 ] && { S=4; scale=0.1; lim=60; ev=2; }
        [ "${cl%%-*}" = rn ] && [ "$QUICK" = 0 ] && { S=4; scale=174; bw=1.27Gbps; }
        [ "${cl%%-*}" = rn ] && [ "$QUICK" = 1 ] && S=2
        H=$((N + S))
        # hosts 0..S-1 are the shards; of the workers, the last quarter 4x
        # and the quarter before 2x slower
        slow=""
        if [ "${cl#*-}" = hetero ] || [ "$cl" = hetero ]; then
            for ((w = 0; w < N; w++)); do
                f=1
                if [ $w -ge $((3 * N / 4)) ]; then f=4; elif [ $w -ge $((N / 2)) ]; then f=2; fi
                [ $f -gt 1 ] && slow+="${slow:+,}$((w + S))=$f"
            done
        fi
        speeds=$(sim_speeds "$H" "$scale" "$slow")
        echo "== $cl, $N workers =="
        names=()
        if [ "${cl#*-}" = transient ] || [ $RN = 1 ]; then
            # with seeds: transient stragglers (every worker, hosts S..H-1,
            # slowed now and then; a seed draws both the schedule and the
            # run), and every cluster of the regime
            for seed in "${SEEDS[@]}"; do
                for p in "${ORDER[@]}"; do
                    # shellcheck disable=SC2086
                    SIM_EXTRA="$([ "${cl#*-}" = transient ] && echo "--transient $S-$((H - 1)):$TF:$TSLOW:$TFAST:$seed")" \
                    SIM_EXTRA+="$([ $RN = 1 ] && echo " --eager 65536")" \
                    sim_run "$cl-$N-$p-seed$seed" "$H" "$speeds" "$bw" -- "${DATA[@]}" --lr "$(lr_for "$N")" --epochs 100000 \
                        --servers "$S" --time-limit "$lim" --eval-every-s "$ev" --eval-offline --quiet --seed "$seed" ${P[$p]}
                    names+=("$cl-$N-$p-seed$seed")
                done
            done
        else
        for p in "${ORDER[@]}"; do
            # shellcheck disable=SC2086
            sim_run "$cl-$N-$p" "$H" "$speeds" 10Gbps -- "${DATA[@]}" --lr "$(lr_for "$N")" --epochs 100000 --servers "$S" \
                --time-limit "$lim" --eval-every-s "$ev" --eval-offline --quiet ${P[$p]}
            names+=("$cl-$N-$p")
        done
        fi
        table "$cl cluster, $N workers ($lim s)" "$TARGET" bsp-ps "${names[@]}"
        figures "$cl-$N" "$TARGET" "${names[@]}"
done
# the acceptance figure: dssp's time to target against ssp's and bsp-ps's (heterogeneous)
CLS="hetero cpu-hetero cpu-transient"
[ $RN = 1 ] && CLS="rn-hetero rn-transient rn-homo"
python3 - "$OUT" "$TARGET" "${SEEDS[*]}" "$CLS" "${NS[@]}" >> "$SUMMARY" <<'PY'
import os
import sys
sys.path.insert(0, "experiments")
from summarize import spread, ttt
out, target, seeds, cls, ns = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5:]
print("### dssp's time to target against ssp's and bsp-ps's\n")
print("Time to the target since the common start (the tables' wall s), as a ratio (below 1: dssp first);"
      " transient stragglers: per seed, median [min, max] over the seeds.\n")
r = lambda a, c: a / c if a and c else None
for cl in cls:
    for n in ns:
        runs = [f"-seed{s}" for s in seeds] if cl.endswith("transient") or cl.startswith("rn-") else [""]
        ds, bs = [], []
        for suf in runs:
            paths = [f"{out}/metrics/{cl}-{n}-{p}{suf}.jsonl" for p in ("dssp", "ssp", "bsp-ps")]
            if not all(os.path.exists(q) for q in paths):
                continue
            d, s, b = (ttt(q, target, wall=True) for q in paths)
            ds.append(r(d, s)); bs.append(r(d, b))
        if ds:
            print(f"- {cl}, {n} workers: dssp/ssp = {spread(ds, '%.2f')}, dssp/bsp-ps = {spread(bs, '%.2f')}"
                  + (f" ({len(ds)} seeds)" if len(ds) > 1 else ""))
print()
PY
wall_report
summary_done
