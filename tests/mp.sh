#!/usr/bin/env bash
# Model parallelism (--model-parallel M): a replica split over M ranks trains
# the same model as one process; combined with bsp and downpour it equals the
# data-parallel run with unsplit replicas; checkpoints assemble the whole
# model and resume is exact; bad combinations and a dead partition stop
# cleanly.
# Usage: tests/mp.sh BUILD_DIR   (prints "mp: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin mp "$@"

# Tolerance. A split layer computes each output unit's dot product on one
# rank, as the whole layer does, but with a narrower sgemm (other blocking,
# other summation order), and the input gradient is a sum of M partial
# products instead of one: float reassociation, ~1e-7 relative per value per
# step. Over 40 steps of momentum SGD that grows to ~1e-6; 1e-4 relative on
# the losses (the issue's bound) leaves a wide margin and still catches any
# real error (a wrong slice or a missing contribution changes losses by
# percents). Parameters are compared too, at 1e-5 absolute, or at PTOL
# (a wrong slice moves parameters by 1e-2 and more).
same_run() {   # NAME A.jsonl B.jsonl A.st B.st [PTOL]
    local t p ptol=${6:-1e-5}
    t=$(python3 "$HERE/traj_diff.py" "$2" "$3" 2>&1)
    p=$(python3 "$HERE/ckpt_diff.py" "$4" "$5" 2>&1)
    if le "$t" 1e-4 && le "$p" "$ptol"; then ok "$1 (loss rel diff $t, params max |diff| $p)"
    else bad "$1" "loss rel diff $t, params max |diff| $p"; fi
}
run() {   # TAG NP ARGS...: train with metrics and checkpoint WORK/TAG.*
    local tag=$1 np=$2
    shift 2
    if [ "$np" = 0 ]; then "$DSGD" train "$@" --metrics "$WORK/$tag.jsonl" --checkpoint "$WORK/$tag.st" > "$WORK/$tag.out" 2>&1
    else "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@" --metrics "$WORK/$tag.jsonl" --checkpoint "$WORK/$tag.st" > "$WORK/$tag.out" 2>&1; fi
    [ $? -eq 0 ] || echo "     ($tag failed: $(tail -2 "$WORK/$tag.out"))"
}

# ---- one replica over M ranks equals one process ----
C=(--data synthetic --model mlp:48,24 --batch 32 --lr 0.05 --momentum 0.9 --steps 40 --eval-every 10 --quiet)
run mlp1 0 "${C[@]}"
run mlp2 2 "${C[@]}" --model-parallel 2
same_run "mlp over 2 partitions equals one process" "$WORK/mlp1.jsonl" "$WORK/mlp2.jsonl" "$WORK/mlp1.st" "$WORK/mlp2.st"
run mlp3 3 "${C[@]}" --model-parallel 3   # 10 classes over 3: uneven slices
same_run "mlp over 3 uneven partitions equals one process" "$WORK/mlp1.jsonl" "$WORK/mlp3.jsonl" "$WORK/mlp1.st" "$WORK/mlp3.st"

# Eight steps: within them the two runs agree to ~1e-7. Later, a max-pool
# window whose two largest inputs differ by less than that rounding picks
# the other one in one of the runs, and the trajectories part (seen at
# step 10 in an -O1 build: one conv bias moved by 2e-6, the dense layers
# not at all, 1% in test loss by step 24): a property of max pooling, not
# of the split.
L=(--data fashion-mnist --train-subset 1024 --test-subset 256 --model lenet --batch 32 --lr 0.05 --momentum 0.9
   --steps 8 --eval-every 4 --quiet)
run lenet1 0 "${L[@]}"
run lenet2 2 "${L[@]}" --model-parallel 2
same_run "lenet (convs split by output channels) over 2 partitions equals one process" \
    "$WORK/lenet1.jsonl" "$WORK/lenet2.jsonl" "$WORK/lenet1.st" "$WORK/lenet2.st"

# ---- with data parallelism ----
run bsp2 2 "${C[@]}" --sync bsp
run bsp22 4 "${C[@]}" --sync bsp --model-parallel 2
same_run "bsp, 2 replicas x 2 partitions, equals bsp with 2 single-rank replicas" \
    "$WORK/bsp2.jsonl" "$WORK/bsp22.jsonl" "$WORK/bsp2.st" "$WORK/bsp22.st"
run dp1 2 "${C[@]}" --sync downpour
run dp2 3 "${C[@]}" --sync downpour --model-parallel 2
same_run "downpour, one replica of 2 partitions + a server, equals one single-rank replica + a server" \
    "$WORK/dp1.jsonl" "$WORK/dp2.jsonl" "$WORK/dp1.st" "$WORK/dp2.st"
b1=$(json_field "$WORK/dp1.jsonl" done bytes_sent)
b2=$(json_field "$WORK/dp2.jsonl" done bytes_sent)
b2=$((b2 - $(json_field "$WORK/dp2.jsonl" done mp_bytes_sent)))
# the lead rank of the split replica pushes and pulls only its own slices
if awk -v a="$b1" -v b="$b2" 'BEGIN{exit !(b > 0 && b < 0.8 * a)}'; then
    ok "a downpour partition moves only its slices ($b2 parameter-server bytes from the lead against $b1 unsplit)"
else bad "downpour partition traffic" "$b2 bytes against $b1"; fi

# ---- checkpoints: whole model on the lead; exact resume; eval in one process ----
R=(--data synthetic --model mlp:48,24 --batch 32 --lr 0.05 --momentum 0.9 --eval-every 10 --quiet --model-parallel 2)
"${MPIRUN[@]}" -np 2 "$DSGD" train "${R[@]}" --steps 17 --checkpoint "$WORK/half.st" > /dev/null 2>&1
"${MPIRUN[@]}" -np 2 "$DSGD" train "${R[@]}" --steps 40 --resume "$WORK/half.st" --checkpoint "$WORK/res.st" > /dev/null 2>&1
d=$(python3 "$HERE/ckpt_diff.py" "$WORK/mlp2.st" "$WORK/res.st" 2>&1)
if [ "$d" = 0 ]; then ok "resume after 17 steps with 2 partitions equals the uninterrupted run bit for bit"
else bad "model-parallel resume" "max |diff| $d"; fi
loss=$(printf '%.4f' "$(json_field "$WORK/lenet2.jsonl" done test_loss)")
if "$DSGD" eval --checkpoint "$WORK/lenet2.st" --data fashion-mnist --test-subset 256 > "$WORK/ev.out" 2>&1 &&
   grep -q "test loss $loss on" "$WORK/ev.out"
then ok "a model-parallel lenet checkpoint evaluates in one process to the run's test loss ($loss)"
else bad "model-parallel checkpoint eval" "run $loss: $(cat "$WORK/ev.out")"; fi

# ---- errors: one line, non-zero exit ----
err_case() {   # NAME PATTERN NP ARGS...
    local name=$1 pat=$2 np=$3
    shift 3
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@" > "$WORK/e.out" 2> "$WORK/e.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c 'dsgd: error' "$WORK/e.err")" = 1 ] && grep -q -- "$pat" "$WORK/e.err"; then ok "$name"
    else bad "$name" "rc $rc: $(grep dsgd "$WORK/e.err" | head -2)"; fi
}
S=(--data synthetic --model mlp:16 --steps 5 --quiet)
err_case "--model-parallel with gossip is refused" "does not combine with --model-parallel" 2 "${S[@]}" --sync gossip --model-parallel 2
err_case "3 worker ranks for --model-parallel 2 are refused" "multiple of 2" 3 "${S[@]}" --sync bsp --model-parallel 2
err_case "more partitions than a layer's units are refused" "has only 2" 3 --data synthetic --model mlp:16,2 --steps 5 --quiet --model-parallel 3

# ---- a dead partition: its peer stops within the timeout, naming it ----
start=$SECONDS
"${MPIRUN[@]}" "${MPI_RECOVER[@]}" -np 2 "${RECORD_RC[@]}" \
    "$DSGD" train "${S[@]}" --steps 100000 --model-parallel 2 --fail 1@20 --timeout 3 > "$WORK/fail.out" 2> "$WORK/fail.err"
took=$((SECONDS - start))
rcs="$(cat "$WORK"/rc.0 "$WORK"/rc.1 2>/dev/null | tr '\n' ' ')"
if [ "$rcs" = "1 3 " ] && grep -q "rank 1 did not arrive at the model-parallel" "$WORK/fail.err" && [ $took -le 15 ]; then
    ok "partition 1 dead: partition 0 exits 1 in ${took}s naming rank 1"
else bad "a dead partition" "exit codes [$rcs] after ${took}s: $(grep dsgd "$WORK/fail.err" | head -3)"; fi

summary mp
