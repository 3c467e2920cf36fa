#!/usr/bin/env bash
# DSSP (Zhao et al., ICDCS 2019): bsp-ps, asp, ssp (s = 3) and dssp
# (s_L = 3, s_U = 15) through one parameter-server shard, on a simulated
# heterogeneous cluster (the paper's mixed GPUs: a quarter of the workers 2x
# and a quarter 4x slower than the rest) and a homogeneous one, 8 and 16
# workers, Fashion-MNIST mlp, every run bounded by the same simulated time:
# time to target, final accuracy, staleness distributions. Plain SGD at the
# shard, lr 0.05: with momentum 0.9 at the shard (lr 0.0125) the stale
# gradients of 8 workers spiked dssp's loss to 33 and it ended at 0.71.
#   experiments/dssp.sh [--quick] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md (tables, with dssp's time to target against ssp's
# and bsp-ps's), DIR/figures/, DIR/metrics/ (default experiments/results/dssp).
. "$(dirname "$0")/lib.sh"
exp_args dssp "$@"
need_sim
if [ "$QUICK" = 1 ]; then
    NS=(4); LIMIT=0.05; EVAL=0.01; TARGET=0.5
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128)
else
    NS=(8 16); LIMIT=30; EVAL=1; TARGET=0.82
    DATA=(--data fashion-mnist --model mlp --batch 64 --lr 0.05 --test-subset 2000)
fi
COMMON=("${DATA[@]}" --epochs 100000 --servers 1 --time-limit "$LIMIT" --eval-every-s "$EVAL" --quiet)
declare -A P=([bsp-ps]="--sync bsp-ps" [asp]="--sync asp" [ssp]="--sync ssp --staleness 3"
              [dssp]="--sync dssp --staleness-low 3 --staleness-high 15")
ORDER=(bsp-ps ssp dssp asp)
summary_head "DSSP: dynamic staleness on heterogeneous clusters" \
    "Paradigms of the parameter server under the same simulated time budget ($LIMIT s), target test accuracy $TARGET."
for N in "${NS[@]}"; do
    H=$((N + 1))
    # host 0 is the shard; workers 1..N: the last quarter 4x, the quarter before 2x slower
    mixed=""
    for ((w = 0; w < N; w++)); do
        f=1
        if [ $w -ge $((3 * N / 4)) ]; then f=4; elif [ $w -ge $((N / 2)) ]; then f=2; fi
        mixed+="${mixed:+,}$((w + 1))=$f"
    done
    for cl in hetero homo; do
        [ "$QUICK" = 1 ] && [ "$cl" = homo ] && continue
        slow=""
        [ "$cl" = hetero ] && slow=$mixed
        speeds=$(sim_speeds "$H" 1 "$slow")
        echo "== $cl, $N workers =="
        names=()
        for p in "${ORDER[@]}"; do
            # shellcheck disable=SC2086
            sim_run "$cl-$N-$p" "$H" "$speeds" 10Gbps -- "${COMMON[@]}" ${P[$p]}
            names+=("$cl-$N-$p")
        done
        table "$cl cluster, $N workers" "$TARGET" bsp-ps "${names[@]}"
        figures "$cl-$N" "$TARGET" "${names[@]}"
    done
done
# the acceptance figure: dssp's time to target against ssp's and bsp-ps's (heterogeneous)
python3 - "$OUT" "$TARGET" "${NS[@]}" >> "$OUT/summary.md" <<'PY'
import sys
sys.path.insert(0, "experiments")
from summarize import ttt
out, target, ns = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
print("### dssp's time to target, heterogeneous cluster\n")
for n in ns:
    d, s, b = (ttt(f"{out}/metrics/hetero-{n}-{p}.jsonl", target) for p in ("dssp", "ssp", "bsp-ps"))
    r = lambda a, c: f"{a / c:.2f}" if a and c else "– (not reached by one of them)"
    print(f"- {n} workers: dssp/ssp = {r(d, s)}, dssp/bsp-ps = {r(d, b)}")
print()
PY
cat "$OUT/summary.md"
