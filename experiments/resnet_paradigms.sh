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
# over 500-sample batches; selsync at --delta 0.015 (at batch 16 the
# smoothed relative change of the gradient norm sits between 0.01 and 0.02
# all epoch: 0.02 and above synchronize only the warm-up) and, as a row of
# its own, at its default 0.3; easgd with an elastic move every step
# (--tau 1). Each paradigm runs once per seed in SEEDS (default 1 2 3); the
# table gives the median and the range of the test accuracy, and the
# median wall time. The environment may override: PARADIGMS (a list),
# SEEDS, LR_COLLECTIVE, LR_PS, LBFGS_BATCH, SELSYNC_DELTA, EASGD_TAU, BATCH
# (per worker), EXTRA (more flags for every run), DSGD (the binary).
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
# OUT_DIR and DSGD, when given, are the caller's: made absolute before the
# cd into the repository (DSGD's default is the repository's)
OUT=${1:-$(mktemp -d /tmp/dsgd-resnet-paradigms-XXXXXX)}
[[ $OUT = /* ]] || OUT=$PWD/$OUT
[ -z "${DSGD:-}" ] || [[ $DSGD = /* ]] || DSGD=$PWD/$DSGD
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OUT"
. scripts/mpi-env.sh
DSGD=${DSGD:-build/dsgd}
mpi_env "$(dirname "$DSGD")"
sub=()
[ $quick = 1 ] && sub=(--train-subset 2000 --test-subset 1000)
C=(--model resnet:8,8 --data fashion-mnist --epochs 1 --batch ${BATCH:-16} --momentum 0.9 --lr-schedule cosine --lr-warmup 50
   --quiet --timeout 120 "${sub[@]}" ${EXTRA:-})
printf '| paradigm | ranks | test accuracy, median [min, max] | wall s, median |\n|---|---|---|---|\n' > "$OUT/table.md"
[ $quick = 1 ] && SEEDS=${SEEDS:-1}
for s in ${PARADIGMS:-bsp localsgd fedavg selsync selsync-default bsp-ps asp ssp dssp downpour easgd gossip sandblaster lbfgs}; do
    np=4 extra=(--lr ${LR_COLLECTIVE:-0.1}) sync=$s
    case $s in
        selsync) extra+=(--delta ${SELSYNC_DELTA:-0.015}) ;;
        selsync-default) sync=selsync ;;
        bsp-ps|asp|ssp|dssp|downpour) np=5 extra=(--lr ${LR_PS:-0.03} --servers 1) ;;
        easgd) np=5 extra=(--lr ${LR_COLLECTIVE:-0.1} --servers 1 --tau ${EASGD_TAU:-1}) ;;
        sandblaster) np=6 extra=(--servers 1 --batch-total ${LBFGS_BATCH:-500}) ;;
        lbfgs) np=1 extra=(--batch-total ${LBFGS_BATCH:-500}) ;;
    esac
    accs=() walls=()
    for seed in ${SEEDS:-1 2 3}; do
        m="$OUT/$s-seed$seed.jsonl"
        t0=$(date +%s.%N)
        if [ $np = 1 ]; then "$DSGD" train "${C[@]}" --sync $sync --seed $seed "${extra[@]}" --metrics "$m" > "${m%.jsonl}.out" 2>&1
        else "${MPIRUN[@]}" -np $np "$DSGD" train "${C[@]}" --sync $sync --seed $seed "${extra[@]}" --metrics "$m" > "${m%.jsonl}.out" 2>&1; fi
        t1=$(date +%s.%N)
        accs+=("$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "\"done\"" in l]; print("%.4f" % r[-1]["test_acc"])' "$m" 2>/dev/null || echo failed)")
        walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')")
    done
    python3 - "$s" "$np" "${#accs[@]}" "${accs[@]}" "${walls[@]}" <<'PY' | tee -a "$OUT/table.md"
import statistics, sys
name, np_, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
accs, walls = sys.argv[4:4 + n], [float(w) for w in sys.argv[4 + n:]]
ok = [float(a) for a in accs if a != "failed"]
acc = "failed" if len(ok) < n else "%.4f [%.4f, %.4f]" % (statistics.median(ok), min(ok), max(ok))
print("| %s | %s | %s | %.0f |" % (name, np_, acc, statistics.median(walls)))
PY
done
echo "table: $OUT/table.md"
