#!/usr/bin/env bash
# DistBelief (Dean et al., NIPS 2012): Downpour SGD with plain SGD, with
# Adagrad at the shards, and with Adagrad and a warm start, against
# Sandblaster L-BFGS and bsp, at 1 ... 32 replicas on a simulated 10 GbE
# cluster, Fashion-MNIST mlp, every run bounded by the same simulated time:
# time to target, and whether many replicas stay stable (final accuracy,
# diverged runs) with and without Adagrad.
# Usage: experiments/distbelief.sh [--quick] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md, DIR/figures/, DIR/metrics/ (default experiments/results/distbelief).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args distbelief "$@"
need_sim
ALLOW_FAIL=1
if [ "$QUICK" = 1 ]; then
    NS=(1 2); LIMIT=0.05; EVAL=0.01; TARGET=0.5; WARM=10
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --test-subset 128)
    BT=256
else
    NS=(1 2 4 8 16 32); LIMIT=10; EVAL=0.5; TARGET=0.82; WARM=200
    DATA=(--data fashion-mnist --model mlp --batch 64 --test-subset 2000)
    BT=6000
fi
COMMON=("${DATA[@]}" --epochs 100000 --time-limit "$LIMIT" --eval-every-s "$EVAL" --eval-offline --quiet)
# Downpour: Adagrad at the shard with γ = the fixed rate, 0.05 (the paper
# suggests ~10x the best fixed rate; not swept here)
declare -A P=(
    [downpour-sgd]="--sync downpour --servers 1 --lr 0.05"
    [downpour-adagrad]="--sync downpour --servers 1 --lr 0.05 --server-opt adagrad --adagrad-lr 0.05"
    [downpour-adagrad-warm]="--sync downpour --servers 1 --lr 0.05 --server-opt adagrad --adagrad-lr 0.05 --warmup-steps $WARM"
    [sandblaster]="--sync sandblaster --servers 1 --batch-total $BT --lr 0.05"
    [bsp]="--sync bsp --lr 0.05"
)
ORDER=(bsp downpour-sgd downpour-adagrad downpour-adagrad-warm sandblaster)
summary_head "DistBelief: Downpour (± Adagrad, ± warm start) against Sandblaster and bsp" \
    "Simulated 10 GbE; every run bounded by $LIMIT simulated s; target test accuracy $TARGET; one parameter-server shard. N = model replicas."
names=()
for N in "${NS[@]}"; do
    echo "== $N replicas =="
    row=()
    for p in "${ORDER[@]}"; do
        case $p in bsp) H=$N ;; sandblaster) H=$((N + 2)) ;; *) H=$((N + 1)) ;; esac
        # shellcheck disable=SC2086
        sim_run "$p-$N" "$H" "$(sim_speeds "$H" 1)" 10Gbps -- "${COMMON[@]}" ${P[$p]}
        row+=("$p-$N")
    done
    table "$N replicas" "$TARGET" bsp "${row[@]}"
    names+=("${row[@]}")
done
figures all "$TARGET" "${names[@]}"
wall_report
cat "$OUT/summary.md"
