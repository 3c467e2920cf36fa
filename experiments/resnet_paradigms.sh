#!/usr/bin/env bash
# Every paradigm trains a residual network with batch normalization:
# resnet:8,8 on Fashion-MNIST, one epoch, 4 workers (parameter-server shards
# and Sandblaster's coordinator extra), batch 16 per worker; a table of test
# accuracy and wall time per paradigm.
# Usage: experiments/resnet_paradigms.sh [--quick] [OUT_DIR]
#   --quick   2000 training samples instead of 60000 (a smoke test)
#   OUT_DIR   metrics and the table (default: a new folder under /tmp)
# Recipe: a cosine schedule over the epoch after a 50-step warm-up,
# momentum 0.9; rate 0.1 for the collective paradigms and easgd, 0.03 for
# the parameter-server ones, whose shards apply every worker's push; L-BFGS
# over 500-sample batches. The environment may override: PARADIGMS (a
# list), LR_COLLECTIVE, LR_PS, LBFGS_BATCH, BATCH (per worker), EXTRA (more
# flags for every run), DSGD (the binary).
set -u
cd "$(dirname "$0")/.." || exit 1
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
OUT=${1:-$(mktemp -d /tmp/dsgd-resnet-paradigms-XXXXXX)}
mkdir -p "$OUT"
. scripts/mpi-env.sh
DSGD=${DSGD:-build/dsgd}
mpi_env "$(dirname "$DSGD")"
sub=()
[ $quick = 1 ] && sub=(--train-subset 2000 --test-subset 1000)
C=(--model resnet:8,8 --data fashion-mnist --epochs 1 --batch ${BATCH:-16} --momentum 0.9 --lr-schedule cosine --lr-warmup 50
   --quiet --timeout 120 "${sub[@]}" ${EXTRA:-})
printf '| paradigm | ranks | test accuracy | wall s |\n|---|---|---|---|\n' > "$OUT/table.md"
for s in ${PARADIGMS:-bsp localsgd fedavg selsync bsp-ps asp ssp dssp downpour easgd gossip sandblaster lbfgs}; do
    np=4 extra=(--lr ${LR_COLLECTIVE:-0.1})
    case $s in
        bsp-ps|asp|ssp|dssp|downpour) np=5 extra=(--lr ${LR_PS:-0.03} --servers 1) ;;
        easgd) np=5 extra=(--lr ${LR_COLLECTIVE:-0.1} --servers 1) ;;
        sandblaster) np=6 extra=(--servers 1 --batch-total ${LBFGS_BATCH:-500}) ;;
        lbfgs) np=1 extra=(--batch-total ${LBFGS_BATCH:-500}) ;;
    esac
    t0=$(date +%s.%N)
    if [ $np = 1 ]; then "$DSGD" train "${C[@]}" --sync $s "${extra[@]}" --metrics "$OUT/$s.jsonl" > "$OUT/$s.out" 2>&1
    else "${MPIRUN[@]}" -np $np "$DSGD" train "${C[@]}" --sync $s "${extra[@]}" --metrics "$OUT/$s.jsonl" > "$OUT/$s.out" 2>&1; fi
    t1=$(date +%s.%N)
    acc=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "\"done\"" in l]; print("%.4f" % r[-1]["test_acc"])' "$OUT/$s.jsonl" 2>/dev/null || echo failed)
    printf '| %s | %d | %s | %.0f |\n' "$s" "$np" "$acc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" | tee -a "$OUT/table.md"
done
echo "table: $OUT/table.md"
