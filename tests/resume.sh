#!/usr/bin/env bash
# Resume for every paradigm (docs/checkpoints.md): the lockstep ones continue
# bit for bit (a run stopped after k steps and resumed ends with the
# uninterrupted run's checkpoint, byte for byte); the asynchronous ones
# continue from the saved global model, optimizer state and clocks; a run
# resumes on another number of workers where the paradigm allows it, and
# is refused with one line where it does not.
# Usage: tests/resume.sh BUILD_DIR   (prints "resume: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin resume "$@"

REFUSE_LIMIT=60   # refused(): runs that start MPI jobs get longer
# exact NAME NP K ARGS...: the uninterrupted run (ARGS fix its length) and a
# run stopped after K steps then resumed write the same final checkpoint.
exact() {
    local name=$1 np=$2 k=$3
    shift 3
    rm -f "$WORK/full.st" "$WORK/half.st" "$WORK/res.st"
    launch "$np" "$@" --checkpoint "$WORK/full.st" --metrics "$WORK/full.jsonl" > "$WORK/full.out" 2>&1
    launch "$np" "$@" --steps "$k" --checkpoint "$WORK/half.st" > "$WORK/half.out" 2>&1
    launch "$np" "$@" --resume "$WORK/half.st" --checkpoint "$WORK/res.st" --metrics "$WORK/res.jsonl" > "$WORK/res.out" 2>&1
    if [ -s "$WORK/full.st" ] && cmp -s "$WORK/full.st" "$WORK/res.st"; then
        ok "$name: resumed after $k steps, the final checkpoint equals the uninterrupted run's byte for byte (max |diff| 0)"
    else
        bad "$name resumed after $k steps" "max |diff| $(python3 "$HERE/ckpt_diff.py" "$WORK/full.st" "$WORK/res.st" 2>&1): $(tail -c 300 "$WORK/res.out")"
    fi
}

# ---- SelSync: every worker's replica, momentum and EWMA windows ----
# delta 0.04 with W = 10 on this data syncs most steps but not all after
# the warm-up, so a resume mid-run must reproduce each decision.
S=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --momentum 0.9 --quiet --sync selsync --delta 0.04 --window 10 --steps 120)
exact "selsync, 2 workers, momentum" 2 47 "${S[@]}"
syncs=$(json_field "$WORK/full.jsonl" done syncs); rsyncs=$(json_field "$WORK/res.jsonl" done syncs)
if awk -v s="$syncs" 'BEGIN{exit !(s > 60 && s < 120)}' && [ "$syncs" = "$rsyncs" ]; then
    ok "selsync: the run skips some synchronizations after the warm-up ($syncs of 120 steps synced) and the resumed run counts the same"
else bad "selsync sync counts" "uninterrupted $syncs, resumed $rsyncs (want 60 < syncs < 120, equal)"; fi
exact "selsync, 2 workers, resumed inside the warm-up" 2 7 "${S[@]}"
launch 2 "${S[@]}" --steps 47 --checkpoint "$WORK/sel.st" > /dev/null 2>&1
refused "selsync: 2 workers' state resumed with 3 workers is refused" "resume with 2 workers" \
    "${MPIRUN[@]}" -np 3 "$DSGD" train "${S[@]}" --resume "$WORK/sel.st"
refused "selsync: windows of W = 10 resumed with --window 25 is refused" "resume with --window 10" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${S[@]}" --window 25 --resume "$WORK/sel.st"

# ---- L-BFGS: curvature pairs, ρ, γ, f and the gradient at W ----
# A batch of 256 of the 4096 samples (a new batch each iteration), and the
# full batch of a 512-sample subset (the gradient at W is carried over).
LB=(--data synthetic --model mlp:16 --quiet --sync lbfgs --steps 30)
exact "lbfgs, batches of 256" 1 13 "${LB[@]}" --batch-total 256
exact "lbfgs, full batch" 1 11 "${LB[@]}" --train-subset 512
ev=$(json_field "$WORK/full.jsonl" done lbfgs_evals); rev=$(json_field "$WORK/res.jsonl" done lbfgs_evals)
if [ "$ev" = "$rev" ] && [ "$ev" != None ]; then ok "lbfgs: the resumed run's evaluation count continues to the uninterrupted run's ($ev)"
else bad "lbfgs evaluation count" "uninterrupted $ev, resumed $rev"; fi
launch 1 "${LB[@]}" --train-subset 512 --steps 11 --checkpoint "$WORK/lb.st" > /dev/null 2>&1
refused "lbfgs: 10 curvature pairs resumed with --lbfgs-history 5 is refused" "resume with --lbfgs-history 10" \
    "$DSGD" train "${LB[@]}" --train-subset 512 --lbfgs-history 5 --resume "$WORK/lb.st"

# ---- Sandblaster: the history lives at the shards ----
# With one replica Sandblaster adds the same floats in the same order as
# --sync lbfgs (tests/sandblaster.sh), so the resume is exact, with the
# shards restoring their slices of G, S_i, Y_i (2 shards here); and a
# checkpoint of --sync lbfgs resumes under Sandblaster onto the same
# trajectory as the uninterrupted lbfgs run.
SB=(--data synthetic --model mlp:16 --quiet --batch-total 256 --timeout 20 --steps 30)
exact "sandblaster, 2 shards, 1 replica" 4 13 "${SB[@]}" --sync sandblaster --servers 2
launch 1 "${SB[@]}" --sync lbfgs --checkpoint "$WORK/lbf.st" > /dev/null 2>&1
launch 1 "${SB[@]}" --sync lbfgs --steps 13 --checkpoint "$WORK/lbh.st" > /dev/null 2>&1
launch 4 "${SB[@]}" --sync sandblaster --servers 2 --resume "$WORK/lbh.st" --checkpoint "$WORK/sbr.st" > "$WORK/sbr.out" 2>&1
d=$(python3 "$HERE/ckpt_diff.py" "$WORK/lbf.st" "$WORK/sbr.st" 2>&1)
if [ "$d" = 0 ]; then ok "an lbfgs checkpoint after 13 iterations resumed under sandblaster (2 shards) ends on the uninterrupted lbfgs model (max |diff| 0)"
else bad "lbfgs -> sandblaster resume" "max |diff| $d: $(tail -c 300 "$WORK/sbr.out")"; fi
refused "sandblaster: 10 curvature pairs resumed with --lbfgs-history 4 is refused" "resume with --lbfgs-history 10" \
    "${MPIRUN[@]}" -np 4 "$DSGD" train "${SB[@]}" --sync sandblaster --servers 2 --lbfgs-history 4 --resume "$WORK/lbh.st"

# ---- parameter-server paradigms: the shards' model, optimizer state, clocks ----
# One worker: asp and ssp are plain SGD through the shards, so a resume that
# restores the shards' slices, their Adagrad accumulators and the clocks
# continues byte for byte (2 shards: each restores its slice).
P=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --quiet --servers 2 --timeout 20)
exact "asp, 1 worker, 2 shards, server Adagrad" 3 27 "${P[@]}" --sync asp --server-opt adagrad --adagrad-lr 0.1 --steps 60
exact "ssp, 1 worker, 2 shards" 3 27 "${P[@]}" --sync ssp --staleness 2 --steps 60

# Three workers: the checkpoint written by the shards at step 40, then a run
# resumed to step 80. Loss continuity: the resumed run's first evaluation is
# no worse than the checkpoint's own test loss (dsgd eval) by more than 10%,
# and well below a fresh model's; clocks continue: the eval steps go on from
# 40 and the shards' update count ends where the uninterrupted run's does.
# (dssp, downpour and easgd through the same path: loss continuity only;
# easgd pushes every tau = 4 steps, so its checkpoint is at the last push's
# step, 37. Downpour's Adagrad at γ = 0.03: at 0.1 the shards' model after
# 40 asynchronous steps lay anywhere from 0.04 to 1.39 in test loss, once
# too close to a fresh model's 1.42 for the bound; at 0.03, 0.057-0.092
# in 6 runs.)
launch 1 --data synthetic --model mlp:16 --quiet --steps 1 --lr 1e-9 --checkpoint "$WORK/init.st" > /dev/null 2>&1
L0=$("$DSGD" eval --data synthetic --checkpoint "$WORK/init.st" | sed 's/.*test loss \([0-9.]*\).*/\1/')
for s in asp "ssp --staleness 2" "dssp --staleness-low 1 --staleness-high 4" bsp-ps "downpour --server-opt adagrad --adagrad-lr 0.03" easgd; do
    n=${s%% *}
    rm -f "$WORK/$n.st"
    launch 5 "${P[@]}" --sync $s --steps 40 --checkpoint "$WORK/$n.st" > "$WORK/$n.out" 2>&1
    launch 5 "${P[@]}" --sync $s --steps 80 --eval-every 10 --metrics "$WORK/$n.full.jsonl" > /dev/null 2>&1
    launch 5 "${P[@]}" --sync $s --steps 80 --eval-every 10 --resume "$WORK/$n.st" --metrics "$WORK/$n.jsonl" > "$WORK/$n.res.out" 2>&1
    L=$("$DSGD" eval --data synthetic --checkpoint "$WORK/$n.st" 2>/dev/null | sed 's/.*test loss \([0-9.]*\).*/\1/')
    read -r first loss1 upd <<< "$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
e = [r for r in ev if r["event"] == "eval"]
print(e[0]["step"], e[0]["test_loss"], ev[-1].get("server_updates"))' "$WORK/$n.jsonl" 2>/dev/null)"
    fupd=$(json_field "$WORK/$n.full.jsonl" done server_updates 2>/dev/null)
    meta=$(python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; m = json.loads(raw[8:8 + n])["__metadata__"]
print(m["step"], m["sync_state"])' "$WORK/$n.st" 2>/dev/null)
    if awk -v a="$loss1" -v l="$L" -v z="$L0" -v f="$first" -v m="${meta%% *}" \
        'BEGIN{exit !(m >= 37 && m <= 40 && f >= m && f <= 50 && a <= 1.1 * l && l < 0.9 * z)}'; then
        ok "$n, 3 workers: the shards' checkpoint is at step ${meta%% *} ($meta); resumed, the first evaluation (step $first) has test loss $loss1 against $L at the checkpoint (a fresh model: $L0)"
    else bad "$n resume" "checkpoint '$meta', checkpoint loss $L, first eval step $first loss $loss1 (fresh $L0): $(tail -c 300 "$WORK/$n.res.out")"; fi
    case $n in asp|ssp|dssp|bsp-ps)
        if [ "$upd" = "$fupd" ] && [ "$upd" != None ]; then ok "$n: the shards' update count continues across the resume (ends at $upd, as uninterrupted)"
        else bad "$n update count" "resumed run ends at $upd, uninterrupted at $fupd"; fi;;
    esac
done
if python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
t = h["optim.accum"]; b, e = t["data_offsets"]; a = struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
sys.exit(not (h["__metadata__"]["optimizer"] == "adagrad" and min(a) >= 0 and max(a) > 0))' "$WORK/downpour.st"; then
    ok "downpour with server Adagrad: the shards' accumulators are in the checkpoint (optim.accum, optimizer adagrad)"
else bad "downpour checkpoint" "no Adagrad accumulators"; fi
refused "downpour: a checkpoint of server Adagrad resumed with --server-opt sgd is refused" "resume with --server-opt adagrad" \
    "${MPIRUN[@]}" -np 5 "$DSGD" train "${P[@]}" --sync downpour --server-opt sgd --steps 80 --resume "$WORK/downpour.st"

# The lead worker (worker 0, rank 2) dies at step 50: the shards evict it
# and still write the checkpoints (periodic and final) -- no worker writes
# them -- with worker 0's clock where it stopped; a resume from that file
# trains worker 0 on from its own step 50 and finishes.
rm -f "$WORK"/rc.* "$WORK/ld.st"
"${MPIRUN[@]}" "${MPI_RECOVER[@]}" -np 5 "${RECORD_RC[@]}" "$DSGD" train --data synthetic --model mlp:32 --batch 32 --lr 0.05 \
    --steps 300 --quiet --sync asp --servers 2 --fail 0@50 --timeout 3 --checkpoint-every 100 --checkpoint "$WORK/ld.st" \
    > "$WORK/ld.out" 2> "$WORK/ld.err"
rcs="$(cat "$WORK"/rc.0 "$WORK"/rc.1 "$WORK"/rc.2 "$WORK"/rc.3 "$WORK"/rc.4 2>/dev/null | tr '\n' ' ')"
clocks=$(python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
t = h["sync.ps_clocks"]; b, e = t["data_offsets"]
print(" ".join("%d" % x for x in struct.unpack("<6d", raw[8 + n + b:8 + n + e])))' "$WORK/ld.st" 2>/dev/null)
if [ "$rcs" = "0 0 3 0 0 " ] && [ "$clocks" = "50 50 300 300 300 300" ]; then
    ok "asp, the lead worker killed at step 50: the shards write the checkpoint anyway (clock, step per worker: $clocks)"
else bad "asp checkpoint without the lead" "exit codes [$rcs], clocks [$clocks]: $(grep dsgd "$WORK/ld.err" | head -3)"; fi
launch 5 --data synthetic --model mlp:32 --batch 32 --lr 0.05 --steps 300 --quiet --sync asp --servers 2 --timeout 20 --eval-every 100 \
    --resume "$WORK/ld.st" --metrics "$WORK/ld.jsonl" > "$WORK/ld2.out" 2>&1
first=$(python3 -c '
import json, sys
print([json.loads(l)["step"] for l in open(sys.argv[1]) if json.loads(l)["event"] == "eval"][0])' "$WORK/ld.jsonl" 2>/dev/null)
acc=$(json_field "$WORK/ld.jsonl" done test_acc 2>/dev/null)
if [ "$first" = 100 ] && ge "$acc" 0.95; then
    ok "asp resumed from that checkpoint: worker 0 goes on from step 50 (first evaluation at step $first) and finishes with test accuracy $acc"
else bad "asp resume after the lead's death" "first eval step $first, accuracy $acc: $(tail -c 300 "$WORK/ld2.out")"; fi

# The staleness bound holds across a resume. The checkpoint is edited so that
# worker 0 is s + 1 = 3 clocks ahead of the others (it has pushed and waits
# for its pull, a state SSP(2) reaches): its first push after the resume
# must wait for the others, or it would be 3 clocks behind (clock gap 3).
python3 - "$WORK/ssp.st" "$WORK/ssp_ahead.st" <<'PY'
import json, struct, sys, zlib
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); t = h["sync.ps_clocks"]; b = 8 + n + t["data_offsets"][0]
raw[b:b + 16] = struct.pack("<2d", 43, 43)      # worker 0: clock 43, step 43
field = ('"crc32":"%s"' % h["__metadata__"]["crc32"]).encode()
i = raw.index(field) + len('"crc32":"')
raw[i:i + 8] = b"00000000"
raw[i:i + 8] = b"%08x" % zlib.crc32(bytes(raw))
open(sys.argv[2], "wb").write(raw)
PY
launch 5 "${P[@]}" --sync ssp --staleness 2 --steps 120 --slowdown 1=20 --resume "$WORK/ssp_ahead.st" --metrics "$WORK/ahead.jsonl" > "$WORK/ahead.out" 2>&1
mx=$(json_field "$WORK/ahead.jsonl" done clock_gap_max 2>/dev/null)
if [ "$mx" = 2 ]; then ok "ssp --staleness 2, resumed with worker 0 three clocks ahead and worker 1 twenty times slower: max clock gap after the resume is $mx"
else bad "ssp's bound across a resume" "max clock gap $mx (bound 2): $(tail -c 300 "$WORK/ahead.out")"; fi

# ---- EASGD's center and gossip replicas ----
# Synchronous EASGD (the center is the checkpoint's model, every x_i and
# momentum in sync.worker_*) and round-mode gossip (every replica and its
# momentum) are deterministic: a resume continues byte for byte.
G=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --momentum 0.9 --quiet --timeout 20 --steps 60)
exact "easgd --easgd-mode sync, 4 workers, tau 2, momentum" 4 27 "${G[@]}" --sync easgd --easgd-mode sync --tau 2
exact "EAMSGD (easgd sync, Nesterov delta 0.9), 2 workers" 2 17 "${G[@]}" --momentum 0 --sync easgd --easgd-mode sync --momentum-nesterov 0.9
exact "gossip round, 4 ranks, momentum" 4 27 "${G[@]}" --sync gossip --gossip round
# Pull and push gossip (no barrier): the checkpoint holds every replica as the
# lead read it and their mean as the model. A resume restores each rank's
# replica: resumed for zero more steps, the run's checkpoint holds the same
# replicas byte for byte. Resumed for 40 more, the run goes on from the
# checkpoint: the first evaluation is at step 41, and its loss is below 0.93
# of a fresh model's. That evaluation averages only the replicas whose ranks
# have published since the resume, so it may be one replica's loss (about
# 1.2 here, against 0.9-1.05 for the checkpoint's average); a fresh model
# after one step is still at 0.97-0.99 of its initial loss, so the bound
# tells the two apart under any timing (the step-50 midpoint it replaces
# failed once under a sanitizer: 1.238 against 1.232).
for mode in pull push; do
    rm -f "$WORK/g.st" "$WORK/g0.st"
    launch 3 "${G[@]}" --momentum 0 --sync gossip --gossip $mode --steps 40 --checkpoint "$WORK/g.st" > /dev/null 2>&1
    launch 3 "${G[@]}" --momentum 0 --sync gossip --gossip $mode --steps 40 --resume "$WORK/g.st" --checkpoint "$WORK/g0.st" > /dev/null 2>&1
    launch 3 "${G[@]}" --momentum 0 --sync gossip --gossip $mode --steps 80 --eval-every 1 --resume "$WORK/g.st" \
        --metrics "$WORK/g.jsonl" > "$WORK/g.out" 2>&1
    L=$("$DSGD" eval --data synthetic --checkpoint "$WORK/g.st" 2>/dev/null | sed 's/.*test loss \([0-9.]*\).*/\1/')
    read -r rows differ same <<< "$(python3 -c '
import json, struct, sys
def rows(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    t = h["sync.worker_params"]; b, e = t["data_offsets"]
    return t["shape"], raw[8 + n + b:8 + n + e]
(R, C), a = rows(sys.argv[1]); _, b = rows(sys.argv[2])
print(R, int(a[:4 * C] != a[4 * C:8 * C]), int(a == b))' "$WORK/g.st" "$WORK/g0.st" 2>/dev/null)"
    read -r first loss1 <<< "$(python3 -c '
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]; e = [r for r in e if r["event"] == "eval"]
print(e[0]["step"], e[0]["test_loss"])' "$WORK/g.jsonl" 2>/dev/null)"
    if [ "$rows" = 3 ] && [ "$differ" = 1 ] && [ "$same" = 1 ]; then
        ok "gossip $mode, 3 ranks: the checkpoint holds 3 distinct replicas, and a resume gives each rank its own back (byte for byte)"
    else bad "gossip $mode replicas" "rows $rows, distinct $differ, restored unchanged $same"; fi
    if awk -v a="$loss1" -v l="$L" -v z="$L0" -v f="$first" 'BEGIN{exit !(f == 41 && a < 0.93 * z && l < 0.9 * z)}'; then
        ok "gossip $mode resumed: first evaluation (step 41) test loss $loss1, below 0.93 of a fresh model's $L0 (the checkpoint's $L)"
    else bad "gossip $mode resume" "checkpoint loss $L, first eval step $first loss $loss1 (fresh $L0): $(tail -c 300 "$WORK/g.out")"; fi
done
refused "gossip: 3 ranks' replicas resumed on 4 ranks is refused" "resume with 3 ranks" \
    "${MPIRUN[@]}" -np 4 "$DSGD" train "${G[@]}" --momentum 0 --sync gossip --gossip pull --steps 80 --resume "$WORK/g.st"

# ---- elastic resume: N workers' checkpoint, M workers resumed ----
# bsp: the data is re-partitioned by the new worker count from the saved
# step on; asp: the shards' full vectors are re-sliced for the new number of
# shards, and every worker starts at the checkpoint's (mean) step and clock.
# Each resumed run must continue the loss (first evaluation within 10% of the
# checkpoint's test loss) and finish with test accuracy >= 0.95 (this
# synthetic task reaches 0.99 in these 80 steps uninterrupted).
E=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --quiet --timeout 20 --eval-every 10)
elastic() {   # NAME NP_BEFORE NP_AFTER ARGS_BEFORE -- ARGS_AFTER
    local name=$1 np1=$2 np2=$3
    shift 3
    local a=() b=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    rm -f "$WORK/el.st"
    launch "$np1" "${E[@]}" "${a[@]}" --steps 40 --checkpoint "$WORK/el.st" > /dev/null 2>&1
    launch "$np2" "${E[@]}" "${b[@]}" --steps 80 --resume "$WORK/el.st" --metrics "$WORK/el.jsonl" > "$WORK/el.out" 2>&1
    local rc=$? L first loss1 acc
    L=$("$DSGD" eval --data synthetic --checkpoint "$WORK/el.st" 2>/dev/null | sed 's/.*test loss \([0-9.]*\).*/\1/')
    read -r first loss1 acc <<< "$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
e = [r for r in ev if r["event"] == "eval"]
print(e[0]["step"], e[0]["test_loss"], ev[-1]["test_acc"])' "$WORK/el.jsonl" 2>/dev/null)"
    if [ $rc = 0 ] && awk -v a="$loss1" -v l="$L" -v c="$acc" -v f="$first" 'BEGIN{exit !(f >= 40 && f <= 50 && a <= 1.1 * l && c >= 0.95)}'; then
        ok "$name: resumed at step 40, first evaluation (step $first) test loss $loss1 against $L at the checkpoint; final test accuracy $acc"
    else bad "$name" "exit $rc, checkpoint loss $L, first eval step $first loss $loss1, final accuracy $acc: $(tail -c 300 "$WORK/el.out")"; fi
}
elastic "bsp (lr 0.2), 4 workers -> 2" 4 2 --sync bsp --lr 0.2 -- --sync bsp --lr 0.2
elastic "bsp (lr 0.2), 2 workers -> 4" 2 4 --sync bsp --lr 0.2 -- --sync bsp --lr 0.2
elastic "asp, 4 workers and 1 shard -> 2 workers and 2 shards" 5 4 --sync asp --servers 1 -- --sync asp --servers 2
elastic "asp, 2 workers and 2 shards -> 4 workers and 1 shard" 4 5 --sync asp --servers 2 -- --sync asp --servers 1
elastic "ssp, 4 workers -> 2 (every worker at the mean clock)" 6 4 --sync ssp --staleness 2 --servers 2 -- --sync ssp --staleness 2 --servers 2
launch 4 "${E[@]}" --sync localsgd --period 8 --steps 40 --checkpoint "$WORK/ls4.st" > /dev/null 2>&1
refused "localsgd: 4 workers' local models resumed with 2 workers is refused" "resume with 4 workers" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${E[@]}" --sync localsgd --period 8 --steps 80 --resume "$WORK/ls4.st"

# ---- one record across resumes: a run stopped twice and resumed with the
# same --metrics is one record on one clock (times, training time, samples
# continue; the done event's totals are the whole run's, segment_* the last
# part's); a parameter server's record goes on from its last evaluation ----
one_record() {
    local name=$1 np=$2 from=$3
    shift 3
    rm -f "$WORK/or".*
    launch "$np" "$@" --steps 40 --checkpoint "$WORK/or.st" --metrics "$WORK/or.jsonl" > /dev/null 2>&1
    cp "$WORK/or.jsonl" "$WORK/or.1.jsonl" 2>/dev/null
    launch "$np" "$@" --steps 80 --resume "$WORK/or.st" --checkpoint "$WORK/or.st" --metrics "$WORK/or.jsonl" > /dev/null 2>&1
    cp "$WORK/or.jsonl" "$WORK/or.2.jsonl" 2>/dev/null
    launch "$np" "$@" --resume "$WORK/or.st" --checkpoint "$WORK/or.st" --metrics "$WORK/or.jsonl" > "$WORK/or.out" 2>&1
    local why
    why=$(python3 - "$WORK/or" "$from" <<'PY' 2>&1
import json, sys
stem, want = sys.argv[1], sys.argv[2]
rec = lambda f: [json.loads(l) for l in open(f)]
ev, d1, d2 = rec(stem + ".jsonl"), rec(stem + ".1.jsonl")[-1], rec(stem + ".2.jsonl")[-1]
d, res = ev[-1], [e for e in ev if e["event"] == "resume"]
evals = [e for e in ev if e["event"] == "eval"]
bad = []
t = [e["time"] for e in ev]
if t != sorted(t): bad.append("time goes back: %s" % t)
for k in ("run_s", "train_s", "samples", "step"):
    v = [e[k] for e in evals]
    if v != sorted(v): bad.append("eval %s goes back: %s" % (k, v))
if [r["segment"] for r in res] != [2, 3] or [r["prior_from"] for r in res] != [want, want]:
    bad.append("resume events %s" % [(r["segment"], r["prior_from"]) for r in res])
if d["event"] != "done" or d.get("segment") != 3 or d["steps"] != d2["steps"] + d["segment_steps"]:
    bad.append("done steps %s, segment %s, segment_steps %s; the second part ended at %s" % (d["steps"], d.get("segment"), d.get("segment_steps"), d2["steps"]))
if want == "checkpoint":   # lockstep: the totals are exact sums of the parts
    for k in ("samples", "train_s"):
        if abs(d[k] - (d2[k] + d["segment_" + k])) > 1e-6 * max(1, d[k]):
            bad.append("done %s %s is not the second part's %s + this part's %s" % (k, d[k], d2[k], d["segment_" + k]))
    if abs(res[0]["prior_train_s"] - d1["train_s"]) > 1e-6: bad.append("first resume's prior_train_s %s, first part's train_s %s" % (res[0]["prior_train_s"], d1["train_s"]))
for k in ("wall_s", "train_s", "samples"):
    if not d[k] > d2[k] > d1[k]: bad.append("done %s %s, after the parts %s, %s" % (k, d[k], d1[k], d2[k]))
print("; ".join(bad) if bad else "ok %s %s %s" % (d["steps"], d["samples"], round(d["train_s"], 4)))
PY
)
    if [ "${why%% *}" = ok ]; then
        read -r _ st sa tr <<< "$why"
        ok "$name: stopped at steps 40 and 80 and resumed twice, one record: times and totals continue (done: $st steps, $sa samples, $tr s training), segment 3, from the $from"
    else bad "$name: one record across resumes" "$why: $(tail -c 300 "$WORK/or.out")"; fi
}
one_record "bsp, 2 workers" 2 checkpoint --data synthetic --model mlp:16 --batch 32 --lr 0.05 --epochs 2 --eval-every 20 --quiet --sync bsp
one_record "asp, 2 workers and 1 shard" 3 eval --data synthetic --model mlp:16 --batch 32 --lr 0.05 --epochs 2 --eval-every 20 --quiet --sync asp --timeout 20

summary resume
