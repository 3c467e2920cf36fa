#!/usr/bin/env bash
# The benchmark runner (make bench calls it): single-process training
# throughput of dsgd against the sgemm peak and, when /usr/bin/python3 can
# import torch, against PyTorch with the same models, batch and one thread.
#
# Every program runs with OMP_NUM_THREADS=1 and without OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE (unset in those commands only), so OpenBLAS picks the
# kernels of the real CPU for both dsgd and PyTorch.
#
# Usage: bench/run.sh BUILD_DIR
#   DSGD_BENCH_INSTALL=1   apt-get install python3-torch if it is missing
# Exits non-zero only if a dsgd benchmark fails; a missing PyTorch skips the
# comparison. Sections are functions called in order at the bottom; add new
# ones there.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3

logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
status=0

# run_clean LOG CMD...: run CMD with the benchmark environment, echo and keep its output.
run_clean() {
    local log=$1
    shift
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 "$@" 2>&1 | tee "$log"
    return "${PIPESTATUS[0]}"
}

# field LOG PREFIX MODEL KEY: KEY's value on the "PREFIX model=MODEL ..." line of LOG.
field() {
    awk -v p="$2" -v m="model=$3" -v k="$4=" '
        $1 == p && $2 == m { for (i = 3; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }
    ' "$1" | tail -n 1
}

section() { echo; echo "== $* =="; }

# ---- 1. single process: dsgd against the sgemm peak and PyTorch ----
bench_single() {
    section "single process, batch 64, 1 thread"
    for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
        [ -n "${!v:-}" ] && echo "note: $v=${!v} is set here; unset for the benchmarks"
    done
    if ! run_clean "$logdir/dsgd.log" "$BUILD/bench/bench_train"; then
        echo "bench: bench_train failed"
        status=1
        return
    fi

    if ! "$PY" -c 'import torch' 2>/dev/null; then
        if [ "${DSGD_BENCH_INSTALL:-0}" = 1 ]; then
            echo "bench: installing python3-torch (DSGD_BENCH_INSTALL=1)"
            apt-get install -y python3-torch python3-numpy ||
                { apt-get update && apt-get install -y python3-torch python3-numpy; }
        fi
    fi
    if ! "$PY" -c 'import torch' 2>/dev/null; then
        echo "bench: PyTorch not found for $PY; skipping the comparison."
        echo "       install it with: apt-get install python3-torch (or scripts/install-deps --bench,"
        echo "       or DSGD_BENCH_INSTALL=1 make bench)"
        return
    fi
    echo
    if ! run_clean "$logdir/torch.log" "$PY" bench/torch_bench.py; then
        echo "bench: torch_bench.py failed; no comparison"
        return
    fi

    echo
    printf '%-6s %14s %14s %11s %7s  %s\n' model dsgd_samples/s torch_samples/s dsgd/torch target met
    local model target d t ratio met
    for model in mlp lenet; do
        case $model in mlp) target=1.2 ;; lenet) target=1.0 ;; esac
        d=$(field "$logdir/dsgd.log" bench "$model" samples_per_s)
        t=$(field "$logdir/torch.log" torch "$model" samples_per_s)
        if [ -z "$d" ] || [ -z "$t" ]; then
            printf '%-6s %14s %14s %11s %7s  %s\n' "$model" "${d:--}" "${t:--}" - ">=$target" "no result"
            continue
        fi
        ratio=$(awk -v a="$d" -v b="$t" 'BEGIN { printf "%.2f", a / b }')
        met=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r >= g) ? "yes" : "no" }')
        printf '%-6s %14.0f %14.0f %11s %7s  %s\n' "$model" "$d" "$t" "$ratio" ">=$target" "$met"
        echo "compare model=$model dsgd_samples_per_s=$d torch_samples_per_s=$t ratio=$ratio target=$target met=$met" \
            >> "$logdir/compare.log"
    done
    cat "$logdir/compare.log" 2>/dev/null
}

# ---- 2. two processes: bsp against one process and PyTorch DDP; all-reduce cost ----
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# done_rate JSONL: samples per second of training time in a run's done record
done_rate() { "$PY" -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; print("%.0f" % (d["samples"]/d["train_s"]))' "$1"; }

bench_dist() {
    section "bsp on 2 processes, mlp, batch 64 per worker, 1 thread per process"
    local T=(train --data fashion-mnist --model mlp --batch 64 --lr 0.05 --momentum 0.9 --steps 3000 --eval-every 1000000 --quiet)
    run_clean "$logdir/one.log" "$BUILD/dsgd" "${T[@]}" --metrics "$logdir/one.jsonl" > /dev/null &&
    run_clean "$logdir/two.log" mpirun -q -np 2 "$BUILD/dsgd" "${T[@]}" --sync bsp --metrics "$logdir/two.jsonl" > /dev/null ||
        { echo "bench: dsgd training failed"; status=1; return; }
    local one two eff
    one=$(done_rate "$logdir/one.jsonl"); two=$(done_rate "$logdir/two.jsonl")
    eff=$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2f", b / (2 * a) }')
    echo "dsgd none x1: $one samples/s   bsp x2: $two samples/s   scaling efficiency $eff (target >= 0.85)"
    run_clean "$logdir/ar.log" mpirun -q -np 2 "$BUILD/bench/allreduce" 300 || status=1
    if "$PY" -c 'import torch' 2>/dev/null; then
        run_clean "$logdir/ddp.log" "$PY" bench/torch_ddp.py 2 1000 || { echo "bench: torch_ddp.py failed"; return; }
        local ddp
        ddp=$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' "$logdir/ddp.log")
        awk -v a="$two" -v b="$ddp" 'BEGIN { r = a / b; printf "compare bsp2=%.0f ddp2=%.0f ratio=%.2f target=3 met=%s\n", a, b, r, (r >= 3 ? "yes" : "no") }'
    fi
}

# ---- 3. parameter server: push+pull round trip, shard throughput ----
bench_ps() {
    section "parameter server, mlp vector"
    run_clean "$logdir/rt.log" mpirun -q -np 2 "$BUILD/bench/ps_bench" roundtrip 300 || status=1
    local w
    for w in 1 2 4; do
        run_clean "$logdir/tp$w.log" mpirun -q -np $((w + 1)) "$BUILD/bench/ps_bench" throughput 300 || status=1
    done
    echo "(on this 2-core machine, 4 workers plus a shard are oversubscribed)"
}

# ---- 4. model parallelism: one replica over M ranks, a wide MLP ----
bench_mp() {
    section "model parallelism, mlp:2048,2048, batch 64, one replica over M ranks"
    local T=(train --data fashion-mnist --model mlp:2048,2048 --batch 64 --lr 0.01 --steps 200 --eval-every 1000000 --quiet)
    local m rate1="" rate share
    printf '%-3s %16s %9s %14s\n' M samples/s speedup comm_share
    for m in 1 2; do
        if ! run_clean "$logdir/mp$m.log" mpirun -q -np $m "$BUILD/dsgd" "${T[@]}" --model-parallel $m \
            --metrics "$logdir/mp$m.jsonl" > /dev/null; then
            echo "bench: model-parallel run M=$m failed"; status=1; return
        fi
        rate=$(done_rate "$logdir/mp$m.jsonl")
        share=$("$PY" -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; print("%.2f" % (d.get("mp_comm_s", 0)/d["train_s"]))' "$logdir/mp$m.jsonl")
        [ -z "$rate1" ] && rate1=$rate
        printf '%-3s %16s %9s %14s\n' "$m" "$rate" "$(awk -v a="$rate" -v b="$rate1" 'BEGIN{printf "%.2f", a/b}')" "$share"
        echo "mp M=$m samples_per_s=$rate comm_share=$share" >> "$logdir/compare.log"
    done
    echo "(comm_share: time in the replica's activation gathers and input-gradient sums / training time)"
}

bench_single
bench_dist
bench_ps
bench_mp

exit "$status"
