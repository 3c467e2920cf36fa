#!/usr/bin/env bash
# The residual network with batch normalization under every paradigm
# (docs/paradigms.md, "Batch normalization"): each trains resnet:8,4 on a
# Fashion-MNIST subset well beyond chance; none and bsp resume bit for bit
# (parameters, optimizer state and running statistics, with augmentation and
# a cosine schedule), bsp with --sync-bn too; bsp leaves every replica with
# the same running statistics, with --sync-bn even without the evaluation's
# average, and --sync-bn's gathers count as communication; a checkpoint
# evaluates as the run's final evaluation did; bad specs and combinations
# are refused in one line.
# Usage: tests/resnet.sh BUILD_DIR   (prints "resnet: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin resnet "$@"

DATA=fashion-mnist
need_fashion resnet resnet:8,4

# ---- every paradigm learns: 3 epochs of 2000 samples, 500 test samples ----
# Measured on 2 cores: 0.55-0.65 for every paradigm; 0.42-0.57 for the
# asynchronous parameter-server ones at their lower rate (under the
# sanitizers); chance is 0.10. The floors leave room for a loaded or
# sanitized run: 0.40 where the run is deterministic, 0.30 where staleness
# or the order of pushes depends on timing.
R=(--model resnet:8,4 --data "$DATA" --train-subset 2000 --test-subset 500 --batch 32 --epochs 3 --quiet
   --lr 0.05 --momentum 0.9 --timeout 60)
# Under the sanitizers (make test SANITIZE=1) the SGD paradigms train one
# epoch, which costs that leg about a minute less: the plain and MPICH legs
# hold the floors above, this one runs the same code for memory errors and
# asks only that it learns (one epoch gave 0.34-0.57, chance is 0.10). The
# L-BFGS ones make 4 iterations an epoch and train 2 epochs there (0.57 and
# 0.58 after 8 iterations; after 4, 0.25), holding their floor.
SAN=0
[ "${SANITIZE:-0}" = 1 ] && SAN=1
for s in none bsp localsgd fedavg selsync bsp-ps asp ssp dssp downpour easgd gossip sandblaster lbfgs; do
    np=2 floor=0.40 extra=()
    case $s in
        none|lbfgs) np=1 ;;
        bsp-ps|asp|ssp|dssp|downpour|easgd) np=3 ;;
        sandblaster) np=4 ;;
    esac
    # (bsp-ps is deterministic: its shard applies a round's pushes in worker
    # order; 0.586 under both MPIs)
    case $s in asp|ssp|dssp|downpour|easgd|gossip) floor=0.30 ;; esac
    L=("${R[@]}")
    case $SAN,$s in 1,lbfgs|1,sandblaster) L+=(--epochs 2) ;; 1,*) L+=(--epochs 1); floor=0.25 ;; esac
    case $s in lbfgs|sandblaster) extra=(--batch-total 500) ;; esac
    # the workers' pushes to one shard compound: with the sanitizers' slower
    # steps staleness reached 37 and a rate of 0.02 diverged once (0.19)
    case $s in asp|ssp|dssp|downpour) extra=(--lr 0.01) ;; esac
    # bsp-ps: the shard applies both workers' pushes, twice the step of bsp
    # at one rate (0.05 gave 0.32-0.60 when the order of pushes still
    # depended on timing)
    [ $s = bsp-ps ] && extra=(--lr 0.02)
    launch $np "${L[@]}" --sync $s "${extra[@]}" --metrics "$WORK/$s.jsonl" > "$WORK/$s.out" 2>&1
    acc=$(json_field "$WORK/$s.jsonl" done test_acc 2>/dev/null)
    if ge "$acc" "$floor"; then
        ok "$s trains resnet:8,4 on $np ranks: test accuracy $acc (floor $floor)"
    else bad "$s trains resnet:8,4" "test accuracy '$acc' below $floor: $(tail -c 300 "$WORK/$s.out")"; fi
done

# ---- bit-exact resume: parameters, optimizer state, running statistics ----
exact() {
    local name=$1 np=$2 k=$3
    shift 3
    rm -f "$WORK/full.st" "$WORK/half.st" "$WORK/res.st"
    launch "$np" "$@" --checkpoint "$WORK/full.st" > "$WORK/full.out" 2>&1
    launch "$np" "$@" --steps "$k" --checkpoint "$WORK/half.st" > "$WORK/half.out" 2>&1
    launch "$np" "$@" --resume "$WORK/half.st" --checkpoint "$WORK/res.st" > "$WORK/res.out" 2>&1
    if [ -s "$WORK/full.st" ] && cmp -s "$WORK/full.st" "$WORK/res.st"; then
        ok "$name: resumed after $k steps, the final checkpoint (running statistics included) equals the uninterrupted run's byte for byte"
    else
        bad "$name resumed after $k steps" "max |diff| $(python3 "$HERE/ckpt_diff.py" "$WORK/full.st" "$WORK/res.st" 2>&1): $(tail -c 300 "$WORK/res.out")"
    fi
}
E=(--model resnet:8,4 --data "$DATA" --train-subset 512 --test-subset 200 --batch 32 --quiet --lr 0.05
   --optimizer nesterov --momentum 0.9 --weight-decay 5e-4 --weight-decay-bn 0 --lr-schedule cosine --lr-warmup 4
   --augment crop,flip --epochs 2 --eval-every 10)
exact "none, resnet:8,4" 1 13 "${E[@]}"
exact "bsp, 2 workers, resnet:8,4" 2 9 "${E[@]}" --sync bsp --epochs 3
exact "bsp --sync-bn, 2 workers, resnet:8,4" 2 9 "${E[@]}" --sync bsp --sync-bn --epochs 3
# --eval-offline keeps the running statistics with each snapshot: the
# offline evaluations of bsp are the inline ones
launch 2 "${E[@]}" --sync bsp --epochs 3 --metrics "$WORK/in.jsonl" > "$WORK/in.out" 2>&1
launch 2 "${E[@]}" --sync bsp --epochs 3 --eval-offline --metrics "$WORK/off.jsonl" > "$WORK/off.out" 2>&1
if msg=$(python3 "$HERE/offline_check.py" "$WORK/in.jsonl" "$WORK/off.jsonl" 2>&1); then ok "bsp, resnet:8,4, --eval-offline: $msg"
else bad "bsp, resnet:8,4, --eval-offline" "$msg: $(tail -c 300 "$WORK/off.out")"; fi
python3 - "$WORK/full.st" <<'EOF' && ok "the checkpoint names the running statistics as PyTorch does and holds no bias for the convolutions" || bad "checkpoint tensor names" "see above"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
hdr = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
names = [k for k in hdr if k != "__metadata__"]
assert any(k.endswith(".bn.running_mean") for k in names), names
assert any(k.endswith(".bn.running_var") for k in names), names
assert not any(".conv.bias" in k for k in names), names
EOF

# ---- bsp: every replica's running statistics equal after the final evaluation ----
rm -f "$WORK"/bn.*
launch 2 "${E[@]}" --sync bsp --fail dump-state:"$WORK/bn" > "$WORK/bnd.out" 2>&1
if [ -s "$WORK/bn.0" ] && cmp -s "$WORK/bn.0" "$WORK/bn.1"; then
    ok "bsp: both replicas hold the same running statistics after the evaluation ($(stat -c %s "$WORK/bn.0") bytes)"
else bad "bsp: running statistics on the replicas" "rank 0 and rank 1 differ or are missing: $(tail -c 300 "$WORK/bnd.out")"; fi
# --sync-bn: equal because every replica normalized with the same (merged)
# statistics all along; the evaluation's average is skipped, so a replica
# that merged nothing would show here. On label skew, where the replicas'
# own batches differ most.
rm -f "$WORK"/bn.*
launch 2 "${E[@]}" --sync bsp --fail dump-state:"$WORK/bn" --sync-bn --partition label-skew > "$WORK/bns.out" 2>&1
if [ -s "$WORK/bn.0" ] && cmp -s "$WORK/bn.0" "$WORK/bn.1"; then
    ok "bsp --sync-bn: both replicas' running statistics are the same bits without the evaluation's average"
else bad "bsp --sync-bn: running statistics on the replicas" "rank 0 and rank 1 differ or are missing: $(tail -c 300 "$WORK/bns.out")"; fi
# ... where they would differ without the average: each replica normalizes its own batches
rm -f "$WORK"/bn.*
launch 3 "${E[@]}" --sync asp --fail dump-state:"$WORK/bn" > "$WORK/bnl.out" 2>&1
if [ -s "$WORK/bn.1" ] && [ -s "$WORK/bn.2" ] && ! cmp -s "$WORK/bn.1" "$WORK/bn.2"; then
    ok "the workers' statistics do differ where nothing averages them (asp: each worker keeps its own)"
else bad "worker statistics without averaging" "expected ranks 1 and 2 to differ: $(tail -c 300 "$WORK/bnl.out")"; fi

# --sync-bn's gathers are communication: the done event counts them in the
# lead's collectives (two a batch-norm layer a step) and their time in
# comm_s, not in compute_s (they run on a group of their own)
C=(--model resnet:8,4 --data "$DATA" --train-subset 512 --test-subset 100 --batch 32 --quiet --steps 6
   --sync bsp --bucket-kb 1024 --eval-every 100)
launch 2 "${C[@]}" --metrics "$WORK/c0.jsonl" > "$WORK/c0.out" 2>&1
launch 2 "${C[@]}" --sync-bn --metrics "$WORK/c1.jsonl" --checkpoint "$WORK/c1.st" > "$WORK/c1.out" 2>&1
if msg=$(python3 - "$WORK/c0.jsonl" "$WORK/c1.jsonl" "$WORK/c1.st" 2>&1 <<'EOF'
import json, struct, sys
done = [next(e for e in map(json.loads, open(f)) if e.get("event") == "done") for f in sys.argv[1:3]]
raw = open(sys.argv[3], "rb").read()
layers = sum(k.endswith(".bn.running_mean") for k in json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]]))
want = 2 * layers * done[1]["steps"]
diff = done[1]["collectives"] - done[0]["collectives"]
# the run without --sync-bn averages the statistics once before its final evaluation
assert want - 2 <= diff <= want, f"{diff} more collectives with --sync-bn, want {want} (2 x {layers} layers x {done[1]['steps']} steps)"
print(f"{diff} more collectives ({layers} layers), comm_s {done[1]['comm_s']:.4f} against {done[0]['comm_s']:.4f}")
EOF
); then ok "bsp --sync-bn: its gathers count as communication: $msg"
else bad "bsp --sync-bn: gathers counted as communication" "$msg: $(tail -c 300 "$WORK/c1.out")"; fi

# ---- a checkpoint evaluates as the run's own final evaluation did ----
launch 1 "${E[@]}" --checkpoint "$WORK/ev.st" --metrics "$WORK/ev.jsonl" > /dev/null 2>&1
want=$(json_field "$WORK/ev.jsonl" done test_acc)
got=$("$DSGD" eval --checkpoint "$WORK/ev.st" --data "$DATA" --test-subset 200 2>&1 | sed -nE 's/.*test accuracy ([0-9.]+).*/\1/p')
if [ -n "$got" ] && awk -v a="$got" -v b="$want" 'BEGIN{exit !(a - b < 1e-4 && b - a < 1e-4)}'; then
    ok "dsgd eval of the resnet checkpoint gives the run's final test accuracy ($got), by its running statistics"
else bad "resnet checkpoint evaluation" "eval $got, run $want"; fi

# ---- a parameter server's checkpoint holds statistics of its global model ----
# The shards compute no batch: shard 0 recomputes the statistics at the
# global parameters before it writes (without that the file held the
# initial ones, and evaluated at 0.14).
# (one epoch under the sanitizers, as above: 0.60 there, one worker; the initial
# statistics gave 0.14)
L=("${R[@]}") floor=0.40
[ $SAN = 1 ] && L+=(--epochs 1) floor=0.30
launch 2 "${L[@]}" --sync asp --checkpoint "$WORK/asp.st" > "$WORK/asp.out" 2>&1
got=$("$DSGD" eval --checkpoint "$WORK/asp.st" --data "$DATA" --test-subset 500 2>&1 | sed -nE 's/.*test accuracy ([0-9.]+).*/\1/p')
if ge "$got" $floor; then
    ok "asp's shard-written checkpoint evaluates at $got (its statistics recomputed at the global parameters)"
else bad "asp checkpoint evaluation" "test accuracy '$got' (want >= $floor): $(tail -c 300 "$WORK/asp.out")"; fi

# ---- refused in one line ----
S=(--data "$DATA" --train-subset 256 --test-subset 64 --steps 2 --quiet)
refused "resnet depth not 6n+2" "6n+2" "$DSGD" train "${S[@]}" --model resnet:21,16
refused "resnet width 0" "--model resnet:20,0" "$DSGD" train "${S[@]}" --model resnet:20,0
refused "resnet spec without a width" "resnet:D,W" "$DSGD" train "${S[@]}" --model resnet:20
refused "unknown --augment" "--augment" "$DSGD" train "${S[@]}" --model resnet:8,4 --augment rotate
refused "--augment with lbfgs" "--augment" "$DSGD" train "${S[@]}" --model resnet:8,4 --sync lbfgs --augment crop
refused "--lr-schedule unknown" "cosine" "$DSGD" train "${S[@]}" --model resnet:8,4 --lr-schedule linear
refused "--sync-bn without bsp" "--sync-bn" "$DSGD" train "${S[@]}" --model resnet:8,4 --sync-bn
refused "--sync-bn on a model without batch normalization" "--sync-bn" "$DSGD" train "${S[@]}" --model mlp --sync bsp --sync-bn
REFUSE_LIMIT=60 refused "resnet with --model-parallel 2" "--model-parallel 2" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${S[@]}" --model resnet:8,4 --sync bsp --model-parallel 2

summary resnet
