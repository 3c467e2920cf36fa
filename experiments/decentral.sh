#!/usr/bin/env bash
# BSP against the asynchronous methods of Jin et al. (elastic averaging and
# gossip) on Fashion-MNIST (mlp, 3 epochs): time to a target accuracy with
# 2, 4 and 8 workers, then each method's step rate on a fast worker when
# one of 4 workers is 4x slower.
# Usage: experiments/decentral.sh [BUILD_DIR] [TARGET]     (default build, 0.85)
# EASGD adds one parameter-server rank for the center variable. On a 2-core
# machine 4 and 8 workers are oversubscribed: compare the methods with each
# other at the same N, not across N.
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
COMMON=(train --data fashion-mnist --model mlp --epochs 3 --batch 64 --lr 0.05 --momentum 0.9 --eval-every 20 --quiet)

summary() {   # FILE → final accuracy, time to target, samples/s of the lead's training
    python3 - "$1" "$TARGET" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
t = float(sys.argv[2])
hit = next((r["time"] for r in rs if r["event"] == "eval" and r["test_acc"] >= t), None)
d = rs[-1]
print("%.4f %s %.1f %.0f" % (d["test_acc"], "%.1f" % hit if hit is not None else "-", d["wall_s"],
                             d["steps"] * 64 / d["train_s"]))
PY
}

run() {   # NAME N EXTRA...: mpirun the method with N workers
    local name=$1 n=$2
    shift 2
    local np=$n
    [ "$name" = easgd ] && np=$((n + 1))
    "${MPIRUN[@]}" -np "$np" "$BUILD/dsgd" "${COMMON[@]}" "$@" --metrics "$OUT/dec-$name-$n$SUFFIX.jsonl" > /dev/null
    summary "$OUT/dec-$name-$n$SUFFIX.jsonl"
}

SUFFIX=""
echo "== time to $TARGET test accuracy (seconds; '-' = not reached in 3 epochs) =="
printf '%-8s %3s %9s %10s %8s\n' method N test_acc t_to_$TARGET wall_s
for n in 2 4 8; do
    for m in bsp easgd gossip; do
        case $m in
            bsp) args=(--sync bsp) ;;
            easgd) args=(--sync easgd --tau 4) ;;
            gossip) args=(--sync gossip --gossip pull) ;;
        esac
        read -r acc hit wall _ < <(run "$m" "$n" "${args[@]}")
        printf '%-8s %3s %9s %10s %8s\n' "$m" "$n" "$acc" "$hit" "$wall"
    done
done

echo
echo "== one of 4 workers 4x slower: the lead's (a fast worker's) own samples/s =="
printf '%-8s %14s %14s %8s\n' method homogeneous straggler kept
for m in bsp gossip; do
    case $m in bsp) args=(--sync bsp) ;; gossip) args=(--sync gossip --gossip pull) ;; esac
    SUFFIX=""; read -r _ _ _ fast < <(run "$m" 4 "${args[@]}")
    SUFFIX="-slow"; read -r _ _ _ slow < <(run "$m" 4 "${args[@]}" --slowdown 3=4)
    printf '%-8s %14s %14s %8s\n' "$m" "$fast" "$slow" "$(awk -v a="$slow" -v b="$fast" 'BEGIN{printf "%.2f", a/b}')"
done
