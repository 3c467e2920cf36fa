#!/usr/bin/env bash
# The benchmark runner (make bench calls it): single-process training
# throughput of dsgd against the sgemm peak, the core's FP32 peak (an FMA
# loop for its widest vector unit) and, when /usr/bin/python3 can import
# torch, against PyTorch with the same models, batch and one thread (and,
# in the last section, one rank's --threads 2 against --threads 1 and
# PyTorch's 2 threads). The
# first lines say which CPU and which BLAS kernels every figure was
# measured with.
#
# Every program runs with OMP_NUM_THREADS=1 and without OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE (unset in those commands only), so OpenBLAS picks the
# kernels of the real CPU for both dsgd and PyTorch.
#
# Usage: bench/run.sh BUILD_DIR
#   DSGD_BENCH_INSTALL=1   apt-get install python3-torch if it is missing
#   DSGD_BENCH_SECTIONS    the sections to run (default: all)
#   DSGD_BENCH_REPEATS     repeats per measurement (default: 3)
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

# ---- noise: repeats, median and spread ----
REPEATS=${DSGD_BENCH_REPEATS:-3}

# spread V...: "median [min, max]" of the values
spread() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3g [%.3g, %.3g]", m, v[1], v[NR] }'; }
# verdict DIR TARGET V...: is the target met by every repeat (yes), by none (no), or by some (within noise)?
# DIR is ge (higher is better) or le.
verdict() {
    local dir=$1 target=$2
    shift 2
    printf '%s\n' "$@" | awk -v d="$dir" -v t="$target" '
        { ok = (d == "ge") ? ($1 >= t) : ($1 <= t); n++; k += ok }
        END { print (k == n) ? "yes" : (k == 0) ? "no" : "within noise (" k " of " n " repeats)" }'
}
# report NAME DIR TARGET V...: one line per target, and the machine-readable record
report() {
    local name=$1 dir=$2 target=$3
    shift 3
    local sym=">="; [ "$dir" = le ] && sym="<="
    printf '%-34s %-26s target %s%-5s met: %s\n' "$name" "$(spread "$@")" "$sym" "$target" "$(verdict "$dir" "$target" "$@")"
    echo "target name=$name median=$(spread "$@" | cut -d' ' -f1) target=$sym$target met=$(verdict "$dir" "$target" "$@" | tr ' ' '_')" >> "$logdir/compare.log"
}

# ratio_of DSGD_LOG TORCH_LOG MODEL: dsgd's samples/s over PyTorch's
ratio_of() {
    awk -v a="$(field "$1" bench "$3" samples_per_s)" -v b="$(field "$2" torch "$3" samples_per_s)" \
        'BEGIN { if (a == "" || b == "" || b == 0) print "nan"; else printf "%.3f\n", a / b }'
}

# ---- 1. single process: dsgd against its GEMM bound and PyTorch ----
bench_single() {
    section "single process, batch 64, 1 thread ($REPEATS repeats, dsgd and PyTorch interleaved)"
    for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
        [ -n "${!v:-}" ] && echo "note: $v=${!v} is set here; unset for the benchmarks"
    done
    if ! "$PY" -c 'import torch' 2>/dev/null && [ "${DSGD_BENCH_INSTALL:-0}" = 1 ]; then
        echo "bench: installing python3-torch (DSGD_BENCH_INSTALL=1)"
        apt-get install -y python3-torch python3-numpy ||
            { apt-get update && apt-get install -y python3-torch python3-numpy; }
    fi
    local torch=1
    if ! "$PY" -c 'import torch' 2>/dev/null; then
        torch=0
        echo "bench: PyTorch not found for $PY; skipping the comparison."
        echo "       install it with: apt-get install python3-torch (or scripts/install-deps --bench,"
        echo "       or DSGD_BENCH_INSTALL=1 make bench)"
    fi
    local i model
    local -a r_mlp=() r_lenet=() f_mlp=() f_lenet=() c_mlp=() k_mlp=()
    for i in $(seq "$REPEATS"); do
        if ! run_clean "$logdir/dsgd$i.log" "$BUILD/bench/bench_train" > /dev/null; then
            echo "bench: bench_train failed"; cat "$logdir/dsgd$i.log"; status=1; return
        fi
        [ "$torch" = 1 ] && { run_clean "$logdir/torch$i.log" "$PY" bench/torch_bench.py > /dev/null || torch=0; }
        f_mlp+=("$(field "$logdir/dsgd$i.log" bench mlp fraction)")
        f_lenet+=("$(field "$logdir/dsgd$i.log" bench lenet fraction)")
        k_mlp+=("$(field "$logdir/dsgd$i.log" bench mlp core_fraction)")
        if [ "$torch" = 1 ]; then
            r_mlp+=("$(ratio_of "$logdir/dsgd$i.log" "$logdir/torch$i.log" mlp)")
            r_lenet+=("$(ratio_of "$logdir/dsgd$i.log" "$logdir/torch$i.log" lenet)")
            c_mlp+=("$(awk -v a="$(field "$logdir/dsgd$i.log" bench mlp gemm_shapes_bound_samples_per_s)" \
                -v b="$(field "$logdir/torch$i.log" torch mlp samples_per_s)" 'BEGIN { printf "%.3f\n", a / b }')")
        fi
    done
    grep -v '^bench \|^profile \|^layers \|^sgemm n=\|^core_peak' "$logdir/dsgd$REPEATS.log"
    [ "$torch" = 1 ] && grep '^torch version' "$logdir/torch$REPEATS.log"
    echo
    echo "samples/s per repeat (dsgd / PyTorch):"
    for i in $(seq "$REPEATS"); do
        for model in mlp lenet; do
            printf '  %-6s dsgd %8.0f' "$model" "$(field "$logdir/dsgd$i.log" bench "$model" samples_per_s)"
            [ "$torch" = 1 ] && printf '  torch %8.0f' "$(field "$logdir/torch$i.log" torch "$model" samples_per_s)"
            echo
        done
    done
    echo "where the step goes (last repeat): $(grep '^profile model=mlp' "$logdir/dsgd$REPEATS.log")"
    echo "                                   $(grep '^profile model=lenet' "$logdir/dsgd$REPEATS.log")"
    echo
    # The step against its own GEMM shapes timed on OpenBLAS's sgemm (true
    # FLOPs); the dense layers run dsgd's own tiles, so this is the step
    # against what those products alone cost on the BLAS. dsgd / PyTorch is
    # reported beside it, not targeted: it is set by each machine's BLAS
    # against PyTorch's.
    report "mlp: fraction of its GEMM bound" ge 0.85 "${f_mlp[@]}"
    # and against the physical limit: the core's FP32 peak (an FMA loop for
    # its widest vector unit), whatever BLAS kernels run
    report "mlp: fraction of the core's peak" ge 0.5 "${k_mlp[@]}"
    echo "lenet: fraction of its GEMM bound  $(spread "${f_lenet[@]}")   (no target: its first conv runs outside BLAS)"
    if [ "$torch" = 1 ]; then
        echo "mlp: dsgd / PyTorch               $(spread "${r_mlp[@]}")   (no target: set by this machine's BLAS)"
        echo "target name=mlp: dsgd / PyTorch median=$(spread "${r_mlp[@]}" | cut -d' ' -f1)" >> "$logdir/compare.log"
        # the most a step that multiplied with this OpenBLAS could reach:
        # its GEMMs alone, at the same shapes, against PyTorch's whole step
        echo "mlp: its GEMMs alone / PyTorch    $(spread "${c_mlp[@]}")   (the ceiling of dsgd / PyTorch on this BLAS's sgemm)"
        echo "target name=mlp: GEMM bound / PyTorch median=$(spread "${c_mlp[@]}" | cut -d' ' -f1)" >> "$logdir/compare.log"
        report "lenet: dsgd / PyTorch" ge 2.0 "${r_lenet[@]}"
    fi
}

# ---- 1a. the residual network: dsgd against PyTorch, the GEMM bound, memory ----
# resnet:20,16 (ResNet-20 at base width 16) on Fashion-MNIST, batch 64, one
# thread, each in its own process so that the peak resident size is the
# model's. The target, as the mlp's: the step against its own GEMMs timed
# alone (the network's im2col shapes: forward, weight gradient and input
# gradient where computed), the rate its true FLOPs could reach if nothing
# but its GEMMs ran. Beside it, not targeted: the fraction of the
# square-matrix sgemm peak measured in the same run (true FLOPs per sample
# printed as mflop_per_sample). A 16-channel convolution's GEMM has 16 rows,
# on which the BLAS stays well below its square-matrix peak: that fraction
# is set by the BLAS's kernels on small shapes, not by dsgd (the ratio of
# the two fractions is how far the network's GEMMs alone fall short).
bench_resnet() {
    section "resnet:20,16, batch 64, 1 thread ($REPEATS repeats, dsgd and PyTorch interleaved)"
    local torch=1 i
    "$PY" -c 'import torch' 2>/dev/null || { torch=0; echo "bench: PyTorch not found; dsgd only"; }
    local -a frac=() peak=() core=() ratio=() mem=() d=() t=()
    for i in $(seq "$REPEATS"); do
        if ! run_clean "$logdir/rn$i.log" "$BUILD/bench/bench_train" resnet > /dev/null; then
            echo "bench: bench_train resnet failed"; cat "$logdir/rn$i.log"; status=1; return
        fi
        [ "$torch" = 1 ] && { run_clean "$logdir/rt$i.log" "$PY" bench/torch_bench.py /usr/share/datasets/fashion-mnist resnet > /dev/null || torch=0; }
        frac+=("$(field "$logdir/rn$i.log" bench resnet fraction)")
        peak+=("$(field "$logdir/rn$i.log" bench resnet peak_fraction)")
        core+=("$(field "$logdir/rn$i.log" bench resnet core_fraction)")
        d+=("$(field "$logdir/rn$i.log" bench resnet samples_per_s)")
        if [ "$torch" = 1 ]; then
            t+=("$(field "$logdir/rt$i.log" torch resnet samples_per_s)")
            ratio+=("$(ratio_of "$logdir/rn$i.log" "$logdir/rt$i.log" resnet)")
            mem+=("$(awk -v a="$(field "$logdir/rn$i.log" memory resnet maxrss_kb)" -v b="$(field "$logdir/rt$i.log" torch resnet maxrss_kb)" \
                'BEGIN { if (b == "" || b == 0) print "nan"; else printf "%.3f\n", a / b }')")
        fi
    done
    grep -E '^resnet|^       ' "$logdir/rn$REPEATS.log"
    echo "training FLOPs per sample: $(field "$logdir/rn$REPEATS.log" bench resnet mflop_per_sample) M (forward, weight and input gradients of every convolution and the dense layer)"
    echo "peak resident memory (last repeat): dsgd $(field "$logdir/rn$REPEATS.log" memory resnet maxrss_kb) kB$([ "$torch" = 1 ] && echo ", PyTorch $(field "$logdir/rt$REPEATS.log" torch resnet maxrss_kb) kB")"
    echo "samples/s: dsgd $(spread "${d[@]}")$([ "$torch" = 1 ] && echo "   PyTorch $(spread "${t[@]}")")"
    report "resnet: fraction of its GEMM bound" ge 0.6 "${frac[@]}"
    echo "resnet: fraction of the sgemm peak  $(spread "${peak[@]}")   (no target: small-shape GEMMs, the BLAS's)"
    report "resnet: fraction of the core's peak" ge 0.35 "${core[@]}"
    if [ "$torch" = 1 ]; then
        report "resnet: dsgd / PyTorch" ge 1.5 "${ratio[@]}"
        report "resnet: peak memory dsgd / PyTorch" le 0.5 "${mem[@]}"
    fi
}

# ---- 1b. noisy training: subnormals must not slow the step down ----
# Batch 16 at lr 0.05 with momentum 0.9 drives units dead and activations
# and gradients towards subnormal values; the quiet run (lr 0.005, no
# momentum) does not. Time per sample of the noisy run over the quiet one,
# as dsgd runs (subnormals flushed), and with --denormals keep for
# reference: what the flush is worth on this CPU.
bench_denormals() {
    section "noisy training (batch 16, lr 0.05, momentum 0.9) against a quiet run, mlp, 1 epoch"
    local T=(train --data fashion-mnist --model mlp --batch 16 --epochs 1 --eval-every 1000000 --quiet)
    local i q n k
    local -a ratio=() keep=()
    for i in $(seq "$REPEATS"); do
        run_clean "$logdir/q.log" "$BUILD/dsgd" "${T[@]}" --lr 0.005 --metrics "$logdir/q.jsonl" > /dev/null &&
        run_clean "$logdir/n.log" "$BUILD/dsgd" "${T[@]}" --lr 0.05 --momentum 0.9 --metrics "$logdir/n.jsonl" > /dev/null &&
        run_clean "$logdir/k.log" "$BUILD/dsgd" "${T[@]}" --lr 0.05 --momentum 0.9 --denormals keep --metrics "$logdir/k.jsonl" > /dev/null ||
            { echo "bench: dsgd training failed"; status=1; return; }
        q=$(done_rate "$logdir/q.jsonl"); n=$(done_rate "$logdir/n.jsonl"); k=$(done_rate "$logdir/k.jsonl")
        echo "  repeat $i: quiet $q samples/s, noisy $n, noisy with --denormals keep $k"
        ratio+=("$(awk -v a="$q" -v b="$n" 'BEGIN { printf "%.3f", a / b }')")
        keep+=("$(awk -v a="$q" -v b="$k" 'BEGIN { printf "%.3f", a / b }')")
    done
    report "noisy/quiet time per sample" le 1.3 "${ratio[@]}"
    echo "(with --denormals keep: $(spread "${keep[@]}"))"
}

# ---- 2. two processes: bsp against one process and PyTorch DDP; all-reduce cost ----
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# done_rate JSONL: samples per second of training time in a run's done record
done_rate() { "$PY" -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; print("%.0f" % (d["samples"]/d["train_s"]))' "$1"; }

bench_dist() {
    section "bsp on 2 processes, mlp, batch 64 per worker, 1 thread per process ($REPEATS repeats)"
    local T=(train --data fashion-mnist --model mlp --batch 64 --lr 0.05 --momentum 0.9 --steps 3000 --eval-every 1000000 --quiet)
    local i one two ddp torch=0
    local -a eff=() vs_ddp=()
    "$PY" -c 'import torch' 2>/dev/null && torch=1
    for i in $(seq "$REPEATS"); do
        run_clean "$logdir/one.log" "$BUILD/dsgd" "${T[@]}" --metrics "$logdir/one.jsonl" > /dev/null &&
        run_clean "$logdir/two.log" mpirun -q -np 2 "$BUILD/dsgd" "${T[@]}" --sync bsp --metrics "$logdir/two.jsonl" > /dev/null ||
            { echo "bench: dsgd training failed"; status=1; return; }
        one=$(done_rate "$logdir/one.jsonl"); two=$(done_rate "$logdir/two.jsonl")
        eff+=("$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.3f", b / (2 * a) }')")
        printf '  repeat %d: none x1 %s samples/s, bsp x2 %s' "$i" "$one" "$two"
        if [ "$torch" = 1 ] && run_clean "$logdir/ddp.log" "$PY" bench/torch_ddp.py 2 1000 > /dev/null; then
            ddp=$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' "$logdir/ddp.log")
            printf ', PyTorch DDP x2 %s' "$ddp"
            vs_ddp+=("$(awk -v a="$two" -v b="$ddp" 'BEGIN { printf "%.3f", a / b }')")
        fi
        echo
    done
    report "bsp x2 scaling efficiency" ge 0.85 "${eff[@]}"
    [ ${#vs_ddp[@]} -gt 0 ] && report "bsp x2 / PyTorch DDP x2" ge 3 "${vs_ddp[@]}"
    run_clean "$logdir/ar.log" mpirun -q -np 2 "$BUILD/bench/allreduce" 300 || status=1
}

# ---- 3. parameter server: push+pull round trip, shard throughput, idle waits ----
# The round trip's target: a push and a gated pull of the whole mlp vector
# against a bare send+receive of the same bytes plus the shard's update of
# the vector alone (it must apply the push before it answers the pull).
bench_ps() {
    section "parameter server, mlp vector ($REPEATS repeats)"
    local i w np tr
    local -a rt=() rtm=() tp1=()
    # --ps-transport: auto (the default) is shared memory wherever a shard
    # has a worker on its host; messages for comparison
    echo "round trip per repeat (us): push+pull, bare send+receive, update alone, push+pull / (bare + update)"
    for i in $(seq "$REPEATS"); do
        for tr in auto messages; do
            run_clean "$logdir/rt.log" mpirun -q -np 2 "$BUILD/bench/ps_bench" roundtrip 300 $tr > /dev/null || { cat "$logdir/rt.log"; status=1; return; }
            if [ $tr = auto ]; then rt+=("$(sed -n 's/.* ratio=\([0-9.]*\).*/\1/p' "$logdir/rt.log")")
            else rtm+=("$(sed -n 's/.* ratio=\([0-9.]*\).*/\1/p' "$logdir/rt.log")"); fi
            printf '  %-8s' $tr
            sed -n 's/.*push_pull_us=\([0-9.]*\) bare_sendrecv_us=\([0-9.]*\) update_us=\([0-9.]*\).* ratio=\([0-9.]*\).*/  \1  \2  \3  \4/p' "$logdir/rt.log"
        done
    done
    report "push+pull / (bare + update)" le 1.3 "${rt[@]}"
    echo "  the same, --ps-transport messages:   $(spread "${rtm[@]}")"
    echo "shard throughput per repeat (updates/s, fraction of memcpy bandwidth), 1, 2 and 4 workers, auto / messages:"
    for i in $(seq "$REPEATS"); do
        printf '  repeat %d:' "$i"
        for w in 1 2 4; do
            for tr in auto messages; do
                run_clean "$logdir/tp$w.log" mpirun -q -np $((w + 1)) "$BUILD/bench/ps_bench" throughput 1000 $tr > /dev/null || { cat "$logdir/tp$w.log"; status=1; return; }
                printf '  %s%s (%s)' "$([ $tr = auto ] && echo "${w}w ")" "$(sed -n 's/.*updates_per_s=\([0-9]*\).*/\1/p' "$logdir/tp$w.log")" \
                    "$(sed -n 's/.*fraction=\([0-9.]*\).*/\1/p' "$logdir/tp$w.log")"
                [ $tr = auto ] && printf ' /'
                [ "$w" = 1 ] && [ $tr = auto ] && tp1+=("$(sed -n 's/.*fraction=\([0-9.]*\).*/\1/p' "$logdir/tp$w.log")")
            done
        done
        echo
    done
    report "shard, 1 worker: of memcpy bw" ge 0.7 "${tp1[@]}"
    echo "(each update moves a vector in and a vector out; with more than one worker the ranks outnumber $(nproc) cores)"
    # The idle policies' wake-up latency: what a rank waiting under each pays
    # beyond pure polling, by how long it has waited.
    run_clean "$logdir/wake.log" mpirun -q -np 2 "$BUILD/bench/ps_bench" wakeup 30 > /dev/null || { cat "$logdir/wake.log"; status=1; return; }
    grep 'calibration\|uncalibrated:' "$logdir/wake.log" | sed 's/^ps_wakeup /  /'
    printf '  %-22s' "wake-up us at delay:"
    awk '$2 == "policy=spin" { sub("delay_us=", "", $3); printf "%10s", $3 "us" }' "$logdir/wake.log"; echo
    local p
    for p in spin backoff-uncalibrated backoff; do
        printf '  %-22s' "$p"
        awk -v p="policy=$p" '$2 == p { sub("wake_us=", "", $6); printf "%10s", $6 }' "$logdir/wake.log"; echo
    done
    echo "  (backoff: poll for the measured wake-up, then yield until 2 ms, then sleep waited/8 capped at 100 us;"
    echo "   uncalibrated: poll 50 us and the kernel's 50 us timer slack; spin: poll 50 us, then only yield)"
    # Ranks outnumbering cores, as every experiment on a small machine runs:
    # the server and waiting workers must leave the cores to those computing.
    # 1 server + 4 workers (5 ranks) and 1 + 7 (8 ranks) on this machine's
    # cores; --wait spin and backoff interleaved so both see the same machine.
    local A=(train --data fashion-mnist --model mlp --batch 64 --lr 0.01 --steps 1000 --eval-every 1000000 --quiet)
    for np in 5 8; do
        local -a rate=() spin=() gain=() msg=() tgain=()
        # one run's rate moves by 5-10% with the scheduler's luck: each
        # verdict says how many of the repeats met the target
        for i in $(seq "$REPEATS"); do
            for w in spin backoff messages; do
                local x=(--wait "$w")
                [ $w = messages ] && x=(--ps-transport messages)
                run_clean "$logdir/asp-$w.log" mpirun -q -np $np "$BUILD/dsgd" "${A[@]}" --sync asp "${x[@]}" --metrics "$logdir/asp-$w.jsonl" > /dev/null ||
                    { echo "bench: asp run (${x[*]}, $np ranks) failed"; status=1; return; }
            done
            spin+=("$(done_rate "$logdir/asp-spin.jsonl")")
            rate+=("$(done_rate "$logdir/asp-backoff.jsonl")")
            msg+=("$(done_rate "$logdir/asp-messages.jsonl")")
            gain+=("$(awk -v a="${rate[-1]}" -v b="${spin[-1]}" 'BEGIN { printf "%.3f", a / b }')")
            tgain+=("$(awk -v a="${rate[-1]}" -v b="${msg[-1]}" 'BEGIN { printf "%.3f", a / b }')")
        done
        echo "asp, $np ranks (1 server + $((np - 1)) workers) on $(nproc) cores, samples/s: --wait backoff $(spread "${rate[@]}"), --wait spin $(spread "${spin[@]}"), --ps-transport messages $(spread "${msg[@]}")"
        echo "target name=asp${np}_samples_per_s median=$(spread "${rate[@]}" | cut -d' ' -f1)" >> "$logdir/compare.log"
        if [ "$np" = 5 ]; then report "asp x5: backoff / spin" ge 0.95 "${gain[@]}"
        else report "asp x8: backoff / spin" ge 1.05 "${gain[@]}"; fi
        echo "asp x$np: shared memory / messages  $(spread "${tgain[@]}")   (--ps-transport auto against messages, both --wait backoff)"
    done
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

# ---- 5. one rank's threads: --threads 2 against --threads 1 ----
# One process, the same runs with 1 and 2 compute threads (src/util/par.h),
# interleaved; each repeat's ratio is of two runs made moments apart, so
# the references are measured in the same run of make bench. Beside each
# targeted ratio, the machine's own ceiling for two threads: two
# independent one-thread processes at once, their rates summed, against
# one alone, and the ratio as a fraction of that ceiling. PyTorch with 1
# and 2 threads beside the residual network. Last, par_bench: a parallel
# region's own cost, and what it costs one core to read data the other
# core wrote (what a kernel pays when a region reads what the previous
# region's pieces left on the other core). On a host with other work on
# its cores a second thread helps far less (a thread descheduled holds
# up every join): read the load average printed first, and the host's
# pauses (par_bench pauses: the share of 2 s that each core was taken from
# a thread spinning on the clock) measured before the runs and after them.
bench_threads() {
    section "one rank, --threads 2 against --threads 1 ($REPEATS repeats, interleaved; load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BUILD/bench/par_bench" pauses 2 | sed 's/^/before the runs: /'
    local torch=1 i cfg
    "$PY" -c 'import torch' 2>/dev/null || { torch=0; echo "bench: PyTorch not found; dsgd only"; }
    local R=(--data fashion-mnist --eval-every 1000000 --test-subset 100 --quiet)
    for cfg in "resnet:20,16 64 40 1.8" "mlp 256 400 1.6" "mlp 64 1500 0"; do
        set -- $cfg
        local m=$1 b=$2 n=$3 target=$4 name
        name="${m%%:*} b$b"
        local -a r1=() r2=() ratio=() t1=() t2=() vs=() two=() of=()
        for i in $(seq "$REPEATS"); do
            for t in 1 2; do
                run_clean "$logdir/th$t.log" "$BUILD/dsgd" train "${R[@]}" --model "$m" --batch "$b" --steps "$n" \
                    --threads $t --metrics "$logdir/th$t.jsonl" > /dev/null || { echo "bench: dsgd --threads $t failed"; status=1; return; }
            done
            r1+=("$(done_rate "$logdir/th1.jsonl")"); r2+=("$(done_rate "$logdir/th2.jsonl")")
            ratio+=("$(awk -v a="${r2[-1]}" -v b="${r1[-1]}" 'BEGIN { printf "%.3f", a / b }')")
            if [ "$target" != 0 ]; then
                # the machine's own ceiling for two threads: two independent
                # one-thread processes at once (nothing shared but the
                # cores, their caches and the memory), their rates summed,
                # against one alone
                local p pids=()
                for p in pa pb; do
                    run_clean "$logdir/$p.log" "$BUILD/dsgd" train "${R[@]}" --model "$m" --batch "$b" --steps "$n" \
                        --threads 1 --metrics "$logdir/$p.jsonl" > /dev/null &
                    pids+=($!)
                done
                for p in "${pids[@]}"; do wait "$p" || { echo "bench: dsgd (two processes) failed"; status=1; }; done
                two+=("$(awk -v a="$(done_rate "$logdir/pa.jsonl")" -v c="$(done_rate "$logdir/pb.jsonl")" -v b="${r1[-1]}" \
                    'BEGIN { printf "%.3f", (a + c) / b }')")
                of+=("$(awk -v a="${ratio[-1]}" -v b="${two[-1]}" 'BEGIN { printf "%.3f", a / b }')")
            fi
            if [ "$torch" = 1 ] && [ "${m%%:*}" = resnet ]; then
                for t in 1 2; do
                    TORCH_BENCH_THREADS=$t run_clean "$logdir/tt$t.log" "$PY" bench/torch_bench.py /usr/share/datasets/fashion-mnist resnet > /dev/null || torch=0
                done
                t1+=("$(field "$logdir/tt1.log" torch resnet samples_per_s)"); t2+=("$(field "$logdir/tt2.log" torch resnet samples_per_s)")
                vs+=("$(awk -v a="${r2[-1]}" -v b="${t2[-1]}" 'BEGIN { if (b == "" || b == 0) print "nan"; else printf "%.3f", a / b }')")
            fi
        done
        echo "$name samples/s: --threads 1 $(spread "${r1[@]}"), --threads 2 $(spread "${r2[@]}")"
        if [ "$target" = 0 ]; then echo "$name: T=2 / T=1  $(spread "${ratio[@]}")   (no target: a 0.7 ms step of ~15 kernels)"
        else
            report "$name: T=2 / T=1" ge "$target" "${ratio[@]}"
            echo "$name: 2 one-thread processes / 1  $(spread "${two[@]}")   (this machine's ceiling for 2 threads)"
            echo "$name: T=2 / T=1 of that ceiling   $(spread "${of[@]}")"
            echo "target name=$name: T=2 / T=1 of the 2-process ceiling median=$(spread "${of[@]}" | cut -d' ' -f1)" >> "$logdir/compare.log"
        fi
        if [ "${#vs[@]}" -gt 0 ] && [ "$torch" = 1 ]; then
            echo "PyTorch resnet samples/s: 1 thread $(spread "${t1[@]}"), 2 threads $(spread "${t2[@]}")"
            report "resnet: dsgd T=2 / PyTorch 2 thr" ge 1.2 "${vs[@]}"
        fi
    done
    run_clean "$logdir/par.log" "$BUILD/bench/par_bench" 2 > /dev/null && grep '^par ' "$logdir/par.log"
    "$BUILD/bench/par_bench" pauses 2 | sed 's/^/after the runs: /'
}

# DSGD_BENCH_SECTIONS="ps mp" runs only those sections (default: all, in this order)
t_all=$SECONDS
for sec in ${DSGD_BENCH_SECTIONS:-single resnet denormals dist ps mp threads}; do
    t_sec=$SECONDS
    case $sec in
        single|resnet|denormals|dist|ps|mp|threads) "bench_$sec" ;;
        *) echo "bench: unknown section '$sec' in DSGD_BENCH_SECTIONS; choose from single resnet denormals dist ps mp threads"; exit 2 ;;
    esac
    echo "($sec: $((SECONDS - t_sec)) s)"
done

section "summary"
cat "$logdir/compare.log"
echo "(make bench: $((SECONDS - t_all)) s)"
exit "$status"
