#!/usr/bin/env bash
# Parameter-server paradigms side by side on Fashion-MNIST (mlp, 4 workers,
# 1 shard, 3 epochs; server-side momentum SGD at lr 0.05/4, since the shard
# applies each of the 4 workers' gradients separately): final accuracy on a homogeneous cluster, then time to
# a target accuracy with one worker 4x slower, each against bsp-ps.
# Usage: experiments/ps_hetero.sh [BUILD_DIR] [TARGET]     (default build, 0.85)
# Writes the metrics of every run to experiments/out/ps-*.jsonl.
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -euo pipefail
BUILD=${1:-build}
# a build directory given is the caller's (the default, the repository's)
[ -z "${1-}" ] || [[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
TARGET=${2:-0.85}
cd "$(dirname "$0")/.."
# the launcher of the build's MPI (Open MPI or MPICH), root and oversubscription allowed
. scripts/mpi-env.sh
mpi_env "$BUILD"
OUT=experiments/out
mkdir -p "$OUT"
COMMON=(train --data fashion-mnist --model mlp --epochs 3 --batch 64 --lr 0.0125 --momentum 0.9 --servers 1
        --eval-every 20 --quiet)
declare -A ARGS=(
    [bsp-ps]="--sync bsp-ps"
    [asp]="--sync asp"
    [ssp]="--sync ssp --staleness 3"
    [dssp]="--sync dssp --staleness-low 3 --staleness-high 15"
    [downpour]="--sync downpour --server-opt adagrad --adagrad-lr 0.01 --optimizer sgd --momentum 0 --lr 0.05 --warmup-steps 100"
)
ORDER=(bsp-ps asp ssp dssp downpour)

summary() {   # FILE: final accuracy, time to target, wall, staleness max
    python3 - "$1" "$TARGET" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
t = float(sys.argv[2])
hit = next((r["time"] for r in rs if r["event"] == "eval" and r["test_acc"] >= t), None)
d = rs[-1]
print("%.4f %s %.1f %s" % (d["test_acc"], "%.1f" % hit if hit is not None else "-", d["wall_s"], d.get("staleness_max", "-")))
PY
}

echo "== homogeneous: 4 workers + 1 shard, 3 epochs =="
printf '%-9s %9s %10s %8s %14s\n' paradigm test_acc t_to_$TARGET wall_s staleness_max
for p in "${ORDER[@]}"; do
    # shellcheck disable=SC2086
    "${MPIRUN[@]}" -np 5 "$BUILD/dsgd" "${COMMON[@]}" ${ARGS[$p]} --metrics "$OUT/ps-$p.jsonl" > /dev/null
    read -r acc hit wall smax < <(summary "$OUT/ps-$p.jsonl")
    printf '%-9s %9s %10s %8s %14s\n' "$p" "$acc" "$hit" "$wall" "$smax"
done

echo
echo "== heterogeneous: worker 3 is 4x slower (--slowdown 3=4) =="
printf '%-9s %9s %10s %12s %14s\n' paradigm test_acc t_to_$TARGET vs_bsp-ps staleness_max
base=""
for p in bsp-ps asp ssp dssp; do
    # shellcheck disable=SC2086
    "${MPIRUN[@]}" -np 5 "$BUILD/dsgd" "${COMMON[@]}" ${ARGS[$p]} --slowdown 3=4 --metrics "$OUT/ps-slow-$p.jsonl" > /dev/null
    read -r acc hit wall smax < <(summary "$OUT/ps-slow-$p.jsonl")
    [ "$p" = bsp-ps ] && base=$hit
    ratio=$(awk -v a="$hit" -v b="$base" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')
    printf '%-9s %9s %10s %12s %14s\n' "$p" "$acc" "$hit" "$ratio" "$smax"
done
echo "(5 processes on this machine's cores; the slow worker sleeps, so it frees its core)"

echo
echo "== simulated (SimGrid): 5 hosts, worker 3's host at 1/4 speed; simulated seconds =="
if [ ! -x build-sim/dsgd ]; then echo "build-sim/dsgd missing: run make sim"; exit 0; fi
printf '%-9s %9s %10s %12s %14s\n' paradigm test_acc t_to_$TARGET vs_bsp-ps staleness_max
base=""
for p in bsp-ps asp ssp dssp; do
    # shellcheck disable=SC2086
    scripts/dsgd-sim --hosts 5 --slow-workers 3=4 -- "${COMMON[@]}" ${ARGS[$p]} --metrics "$OUT/ps-sim-$p.jsonl" > /dev/null
    read -r acc hit wall smax < <(summary "$OUT/ps-sim-$p.jsonl")
    [ "$p" = bsp-ps ] && base=$hit
    ratio=$(awk -v a="$hit" -v b="$base" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')
    printf '%-9s %9s %10s %12s %14s\n' "$p" "$acc" "$hit" "$ratio" "$smax"
done
