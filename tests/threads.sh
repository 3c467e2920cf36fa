#!/usr/bin/env bash
# A rank's compute threads (--threads T): the kernels split their work over
# T threads in pieces fixed by the shapes alone (src/util/par.h), so a run
# gives the same bits whatever T. For the mlp, LeNet and a small ResNet,
# each under momentum and weight decay: the final checkpoint of T = 2 (and
# T = 3, where the pieces do not divide evenly among the threads, with a
# batch of 37 that no piece divides evenly either) equals T = 1's byte for
# byte; a T = 2 run resumed from a T = 1 checkpoint equals the T = 1 run
# that went on; the start-up line and the config event say the count and
# where it came from; dsgd eval gives the same figures with 1 and 2 threads;
# make bench's probe of the host's pauses prints its line.
# Usage: tests/threads.sh BUILD_DIR   (prints "threads: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin threads "$@"
need_fashion threads mlp

# same NAME A B: the two checkpoints are the same bytes
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1"
    else bad "$1" "checkpoints differ (max |diff| $(python3 "$HERE/ckpt_diff.py" "$2" "$3" 2>&1))"; fi
}

base=(--data fashion-mnist --train-subset 1024 --test-subset 200 --lr 0.05 --momentum 0.9 --weight-decay 5e-4 --quiet)
for spec in "mlp 64 20" "lenet 64 12" "resnet:8,8 64 8" "resnet:8,8 37 6"; do
    set -- $spec
    m=$1 b=$2 n=$3
    tag=${m/:/_}_$b
    for t in 1 2 3; do
        timeout 300 "$DSGD" train "${base[@]}" --model "$m" --batch "$b" --steps "$n" --threads $t \
            --checkpoint "$WORK/$tag.t$t.st" > "$WORK/$tag.t$t.out" 2>&1 || echo "     ($tag T=$t failed: $(tail -2 "$WORK/$tag.t$t.out"))"
    done
    same "$m, batch $b, $n steps: T=2's checkpoint equals T=1's byte for byte" "$WORK/$tag.t1.st" "$WORK/$tag.t2.st"
    same "$m, batch $b, $n steps: T=3's checkpoint equals T=1's byte for byte" "$WORK/$tag.t1.st" "$WORK/$tag.t3.st"
done

# ---- a T=1 checkpoint resumed with T=2 continues the T=1 run exactly ----
for m in mlp resnet:8,8; do
    tag=${m/:/_}
    timeout 300 "$DSGD" train "${base[@]}" --model "$m" --steps 16 --threads 1 --checkpoint "$WORK/$tag.full.st" > /dev/null 2>&1
    timeout 300 "$DSGD" train "${base[@]}" --model "$m" --steps 7 --threads 1 --checkpoint "$WORK/$tag.half.st" > /dev/null 2>&1
    timeout 300 "$DSGD" train "${base[@]}" --model "$m" --steps 16 --threads 2 --resume "$WORK/$tag.half.st" \
        --checkpoint "$WORK/$tag.res.st" > "$WORK/$tag.res.out" 2>&1
    same "$m: a T=1 checkpoint of step 7 resumed with T=2 ends as the uninterrupted T=1 run, byte for byte" \
        "$WORK/$tag.full.st" "$WORK/$tag.res.st"
done

# ---- what the run says about its threads ----
"$DSGD" train --data fashion-mnist --train-subset 256 --test-subset 100 --steps 2 --threads 2 \
    --metrics "$WORK/m.jsonl" > "$WORK/m.out" 2>&1
if grep -q '^threads: 2 per rank (--threads)$' "$WORK/m.out"; then ok "the start-up lines say 'threads: 2 per rank (--threads)'"
else bad "start-up threads line" "$(grep threads "$WORK/m.out")"; fi
t=$(json_field "$WORK/m.jsonl" config threads) f=$(json_field "$WORK/m.jsonl" config threads_from)
if [ "$t" = 2 ] && [ "$f" = "--threads" ]; then ok "the config event says threads 2 from --threads"
else bad "config event threads" "threads=$t threads_from=$f"; fi
# the default: this process's cores (taskset: one) over the ranks on the host (one)
if command -v taskset > /dev/null; then
    taskset -c 0 "$DSGD" train --data fashion-mnist --train-subset 256 --test-subset 100 --steps 2 \
        --metrics "$WORK/d.jsonl" > "$WORK/d.out" 2>&1
    t=$(json_field "$WORK/d.jsonl" config threads) f=$(json_field "$WORK/d.jsonl" config threads_from)
    if [ "$t" = 1 ] && [ "$f" = "auto: 1 core for 1 rank on this host" ]; then ok "on one core the default is 1 thread ($f)"
    else bad "default threads on one core" "threads=$t threads_from=$f"; fi
fi
# OMP_NUM_THREADS, as OpenMP programs read it (a list: its first count),
# sets the default; --threads wins over it; a value that is no count is not used
OMP_NUM_THREADS=3,1 "$DSGD" train --data fashion-mnist --train-subset 256 --test-subset 100 --steps 2 \
    --metrics "$WORK/o.jsonl" > "$WORK/o.out" 2>&1
t=$(json_field "$WORK/o.jsonl" config threads) f=$(json_field "$WORK/o.jsonl" config threads_from)
if [ "$t" = 3 ] && [ "$f" = "auto: OMP_NUM_THREADS=3" ]; then ok "OMP_NUM_THREADS=3,1 makes the default 3 threads ($f)"
else bad "OMP_NUM_THREADS as the default" "threads=$t threads_from=$f"; fi
OMP_NUM_THREADS=3 "$DSGD" train --data fashion-mnist --train-subset 256 --test-subset 100 --steps 2 --threads 1 \
    --metrics "$WORK/o.jsonl" > "$WORK/o.out" 2>&1
t=$(json_field "$WORK/o.jsonl" config threads)
if [ "$t" = 1 ]; then ok "--threads 1 wins over OMP_NUM_THREADS=3"
else bad "--threads over OMP_NUM_THREADS" "threads=$t"; fi
OMP_NUM_THREADS=lots taskset -c 0 "$DSGD" train --data fashion-mnist --train-subset 256 --test-subset 100 --steps 2 \
    --metrics "$WORK/o.jsonl" > "$WORK/o.out" 2>&1
f=$(json_field "$WORK/o.jsonl" config threads_from)
if [ "$f" = "auto: 1 core for 1 rank on this host" ]; then ok "OMP_NUM_THREADS=lots is not a count: the cores decide ($f)"
else bad "OMP_NUM_THREADS that is no count" "threads_from=$f"; fi
# two ranks on this host: the cores each may use, divided by 2, at least 1
"${MPIRUN[@]}" -np 2 --bind-to none "$DSGD" train --sync bsp --data fashion-mnist --train-subset 256 --test-subset 100 \
    --steps 2 --metrics "$WORK/b.jsonl" > "$WORK/b.out" 2>&1
t=$(json_field "$WORK/b.jsonl" config threads) f=$(json_field "$WORK/b.jsonl" config threads_from)
want=$(( $(nproc) / 2 )); [ "$want" -lt 1 ] && want=1
if [ "$t" = "$want" ] && [[ $f == "auto: "*" for 2 ranks on this host" ]]; then ok "two ranks on $(nproc) cores: $t thread(s) each ($f)"
else bad "default threads with 2 ranks" "threads=$t (want $want) threads_from=$f"; fi

# ---- dsgd eval: the same figures with 1 and 2 threads ----
e1=$("$DSGD" eval --checkpoint "$WORK/resnet_8,8_64.t1.st" --data fashion-mnist --test-subset 300 --threads 1 2>&1)
e2=$("$DSGD" eval --checkpoint "$WORK/resnet_8,8_64.t1.st" --data fashion-mnist --test-subset 300 --threads 2 2>&1)
if [ -n "$e1" ] && [ "$e1" = "$e2" ]; then ok "dsgd eval --threads 2 prints what --threads 1 does: $e1"
else bad "dsgd eval with 2 threads" "'$e1' vs '$e2'"; fi

# ---- make bench's probe of the host's pauses (bench/par_bench pauses) ----
PB=$(dirname "$DSGD")/bench/par_bench
l=$("$PB" pauses 0.2 2>&1)
if [[ $l =~ ^par\ pauses\ secs=0.2\ lost_pct=[0-9.]+,[0-9.]+\ over_100us=[0-9]+,[0-9]+\ longest_ms=[0-9.]+\ together_pct=[0-9]+$ ]]
then ok "par_bench pauses 0.2: one line of both cores' pauses ($l)"
else bad "par_bench pauses" "printed '$l'"; fi
"$PB" pauses 0 > "$WORK/pb.out" 2>&1; rc=$?
if [ "$rc" = 2 ] && grep -q "usage: par_bench pauses" "$WORK/pb.out"; then ok "par_bench pauses 0: usage, exit 2"
else bad "par_bench pauses 0" "rc=$rc: $(head -1 "$WORK/pb.out")"; fi

summary threads
