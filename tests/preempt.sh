#!/usr/bin/env bash
# How runs end (README, "Exit status"). Divergence: a loss above
# --diverge-loss (or not finite) stops the run with status 3, the metrics
# closed by a done event of status "diverged", and a good checkpoint is not
# replaced. Preemption: SIGTERM to the ranks mid-run, as a
# scheduler sends it before SIGKILL. Every worker finishes its step, the
# paradigm's final synchronization runs, the checkpoint is written, the
# metrics end with a done event of status "preempted", and the ranks exit
# 143. The checkpoint resumes: for bsp and localsgd the resumed run ends on
# the uninterrupted run's checkpoint byte for byte. A second signal stops a
# process at once.
# Usage: tests/preempt.sh BUILD_DIR   (prints "preempt: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin preempt "$@"
trap 'pkill -KILL -f "^$DSGD train.*$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

# evals FILE: evaluation records written so far (the .part while running)
evals() { cat "$1" "$1.part" 2>/dev/null | grep -c '"event":"eval"'; }
# preempt TAG NP ARGS...: start the run, SIGTERM its ranks after its second
# evaluation, wait; sets RC (the launcher's status) and the files in $WORK/TAG.*
preempt() {
    local tag=$1 np=$2 i
    shift 2
    rm -f "$WORK/$tag".*
    if [ "$np" = 1 ]; then "$DSGD" train "$@" --metrics "$WORK/$tag.jsonl" > "$WORK/$tag.out" 2>&1 &
    else "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@" --metrics "$WORK/$tag.jsonl" > "$WORK/$tag.out" 2>&1 & fi
    local pid=$!
    for i in $(seq 600); do [ "$(evals "$WORK/$tag.jsonl")" -ge 2 ] && break; sleep 0.1; done
    pkill -TERM -f "^$DSGD train.*$WORK/$tag.jsonl"
    wait $pid
    RC=$?
}
# preempt_rank TAG NP RANK ARGS...: as preempt, but SIGTERM to one rank only
# (found by the rank its MPI gives it in the environment), as when that
# rank's node alone is reclaimed
preempt_rank() {
    local tag=$1 np=$2 rank=$3 i p
    shift 3
    rm -f "$WORK/$tag".*
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@" --metrics "$WORK/$tag.jsonl" > "$WORK/$tag.out" 2>&1 &
    local pid=$!
    for i in $(seq 600); do [ "$(evals "$WORK/$tag.jsonl")" -ge 2 ] && break; sleep 0.1; done
    p=$(rank_pid "$rank" "$WORK/$tag.jsonl")
    [ -n "$p" ] && kill -TERM $p
    wait $pid
    RC=$?
}
done_field() { json_field "$WORK/$1.jsonl" done "$2" 2>/dev/null; }
ckpt_step() { python3 -c 'import json,struct,sys
raw=open(sys.argv[1],"rb").read(); h=json.loads(raw[8:8+struct.unpack("<Q",raw[:8])[0]]); print(h["__metadata__"]["step"])' "$1" 2>/dev/null; }

A=(--data synthetic --model mlp:32 --batch 32 --lr 0.05 --momentum 0.9 --quiet --eval-every 100 --timeout 20)
N=20000

# Each case below mostly waits (for its evaluations, for the signal to be
# taken): they run side by side (tests/lib.sh, side).
sigterm_case() {   # SYNC NP
    local s=$1 np=$2 extra=() st steps cs rc
    [ $s = gossip ] && extra=(--gossip round)
    preempt "$s" "$np" "${A[@]}" --sync "$s" "${extra[@]}" --steps $N --checkpoint "$WORK/$s.st"
    st=$(done_field "$s" status); steps=$(done_field "$s" steps); cs=$(ckpt_step "$WORK/$s.st")
    if [ "$RC" = 143 ] && [ "$st" = preempted ] && [ -n "$cs" ] && [ "$cs" -gt 0 ] && [ "$cs" -lt $N ] && [ ! -e "$WORK/$s.jsonl.part" ]; then
        ok "$s: SIGTERM at step $steps of $N: exit 143, done status preempted, checkpoint at step $cs, metrics closed"
    else bad "$s preempted" "exit $RC, status '$st', checkpoint step '$cs', steps '$steps': $(tail -c 300 "$WORK/$s.out")"; fi
    if [ $s = bsp ]; then
        # a preempted run saves first and does not evaluate at the end (a launcher
        # kills its ranks soon after passing the signal on): its done event carries
        # the last evaluation and says the final one was left out
        if python3 - "$WORK/$s.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
d = recs[-1]
ev = [r for r in recs if r["event"] == "eval"]
assert d["event"] == "done" and d["status"] == "preempted" and d["final_eval"].startswith("skipped"), d
assert d["eval_step"] == ev[-1]["step"] < d["steps"] and d["test_acc"] == ev[-1]["test_acc"], (d, ev[-1])
PY
        then ok "a preempted run's done event carries its last evaluation (eval_step) and says the final one was skipped"
        else bad "preempted run's final evaluation" "$(tail -1 "$WORK/$s.jsonl" | head -c 300)"; fi
    fi
    # the checkpoint resumes to the end
    if [ "$np" = 1 ]; then timeout 120 "$DSGD" train "${A[@]}" --sync "$s" "${extra[@]}" --steps $N --resume "$WORK/$s.st" --checkpoint "$WORK/$s.res.st" > "$WORK/$s.res.out" 2>&1
    else "${MPIRUN[@]}" -np "$np" "$DSGD" train "${A[@]}" --sync "$s" "${extra[@]}" --steps $N --resume "$WORK/$s.st" --checkpoint "$WORK/$s.res.st" > "$WORK/$s.res.out" 2>&1; fi
    rc=$?
    if [ $rc = 0 ] && [ "$(ckpt_step "$WORK/$s.res.st")" = $N ]; then ok "$s: the preempted run resumes from step $cs and finishes step $N"
    else bad "$s resumed after preemption" "exit $rc: $(tail -c 300 "$WORK/$s.res.out")"; fi
    # lockstep paradigms: exactly the uninterrupted run
    if [ $s = bsp ] || [ $s = localsgd ]; then
        "${MPIRUN[@]}" -np "$np" "$DSGD" train "${A[@]}" --sync "$s" --steps $N --checkpoint "$WORK/$s.full.st" > "$WORK/$s.full.out" 2>&1
        if cmp -s "$WORK/$s.full.st" "$WORK/$s.res.st"; then ok "$s: preempted at step $cs and resumed, the final checkpoint equals the uninterrupted run's byte for byte"
        else bad "$s: preempted and resumed against uninterrupted" "max |diff| $(python3 "$HERE/ckpt_diff.py" "$WORK/$s.full.st" "$WORK/$s.res.st" 2>&1)"; fi
    fi
}
for p in "bsp 2" "localsgd 2" "asp 3" "gossip 2" "none 1"; do side sigterm_case $p; done

# the resumed run continues the preempted run's metrics: its evaluations up
# to the checkpoint, a resume event, the rest, one done event
metrics_case() {
    local cs
    preempt mx 2 "${A[@]}" --sync bsp --steps $N --checkpoint "$WORK/mx.st"
    cs=$(ckpt_step "$WORK/mx.st")
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${A[@]}" --sync bsp --steps $N --resume "$WORK/mx.st" --metrics "$WORK/mx.jsonl" > "$WORK/mx.res.out" 2>&1
    if python3 - "$WORK/mx.jsonl" "$cs" $N <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r["event"] for r in recs]
cs, n = int(sys.argv[2]), int(sys.argv[3])
steps = [r["step"] for r in recs if r["event"] == "eval"]
res = [i for i, e in enumerate(ev) if e == "resume"]
assert ev[0] == "config" and ev.count("done") == 1 and ev[-1] == "done", ev[:3] + ev[-3:]
assert len(res) == 1 and recs[res[0]]["step"] == cs, (res, cs)
assert steps[0] == 100 and steps == sorted(steps) and steps[-1] == n, steps[:3] + steps[-3:]
assert recs[-1]["status"] == "ok"
PY
    then ok "the resumed run's metrics continue the preempted run's record (evaluations from step 100, a resume event at step $cs, one done event)"
    else bad "metrics across a resume" "$(tail -c 300 "$WORK/mx.res.out")"; fi
    grep -q "resumed from step $cs" "$WORK/mx.res.out" && ok "the console says where the run resumed (step $cs)" || bad "resume line" "$(head -c 300 "$WORK/mx.res.out")"
}
side metrics_case

# Sandblaster: the coordinator stops after its iteration, and so do the shards and replicas
SB=(--data synthetic --model mlp:16 --quiet --batch-total 256 --timeout 20 --steps 100000 --eval-every 5)
sandblaster_case() {
    local st cs
    preempt sb 4 "${SB[@]}" --sync sandblaster --servers 2 --checkpoint "$WORK/sb.st"
    st=$(done_field sb status); cs=$(ckpt_step "$WORK/sb.st")
    if [ "$RC" = 143 ] && [ "$st" = preempted ] && [ -n "$cs" ] && [ "$cs" -gt 0 ]; then ok "sandblaster: SIGTERM: exit 143, done status preempted, checkpoint at iteration $cs"
    else bad "sandblaster preempted" "exit $RC, status '$st', checkpoint step '$cs': $(tail -c 300 "$WORK/sb.out")"; fi
}
side sandblaster_case

# a signal to one rank of the job preempts the whole job, whatever that
# rank's role: the shard that holds the model and writes the checkpoints, a
# worker other than the lead, Sandblaster's shards and replicas
rank_case() {   # SYNC NP RANK ROLE
    local s=$1 np=$2 rk=$3 role=$4 st cs
    if [ $s = asp ]; then preempt_rank "$s-$role" "$np" "$rk" "${A[@]}" --sync asp --servers 1 --steps $N --checkpoint "$WORK/$s-$role.st"
    else preempt_rank "$s-$role" "$np" "$rk" "${SB[@]}" --sync sandblaster --servers 2 --checkpoint "$WORK/$s-$role.st"; fi
    st=$(done_field "$s-$role" status); cs=$(ckpt_step "$WORK/$s-$role.st")
    if [ "$RC" = 143 ] && [ "$st" = preempted ] && [ -n "$cs" ] && [ "$cs" -gt 0 ] && [ ! -e "$WORK/$s-$role.jsonl.part" ] &&
       grep -q "stopping after" "$WORK/$s-$role.out"; then
        ok "$s: SIGTERM to the $role (rank $rk) alone: the job stops, exit 143, done status preempted, checkpoint at step $cs"
    else bad "$s: SIGTERM to the $role alone" "exit $RC, status '$st', checkpoint step '$cs': $(tail -c 300 "$WORK/$s-$role.out")"; fi
}
for c in "asp 3 0 shard" "asp 3 2 worker" "sandblaster 4 1 shard" "sandblaster 4 3 replica"; do side rank_case $c; done
side_join

# Which thread takes a signal sent to the process is the kernel's choice
# among those that do not block it; one that is not running takes it only
# once it is scheduled again, and on a loaded 2-core machine the run's own
# thread could meanwhile stop gracefully on the first of two signals sent
# at once (a CI run caught it, one try in 60 under load). So every thread
# but the one that runs the paradigm (the kernels' pool, OpenBLAS's
# workers, the MPI runtime's threads) blocks SIGINT and SIGTERM.
# masks_ok PID...: each process's other threads block both (bits 2 and 15)
masks_ok() {
    local p t m
    for p in "$@"; do
        for t in /proc/$p/task/*; do
            [ "${t##*/}" = "$p" ] && continue
            m=$(awk '/^SigBlk:/ { print $2 }' "$t/status" 2>/dev/null) || continue
            [ -z "$m" ] && continue
            (( (0x$m & 0x4002) == 0x4002 )) || { echo "thread ${t##*/} of $p ($(cat "$t/comm" 2>/dev/null)) takes them: SigBlk $m"; return 1; }
        done
        [ "$(ls /proc/$p/task | wc -l)" -gt 1 ] || { echo "process $p has one thread"; return 1; }
    done
}
rm -f "$WORK/mask".*
"$DSGD" train --data synthetic --model mlp:64 --batch 32 --quiet --steps 100000000 --eval-every 100000000 --threads 2 \
    --metrics "$WORK/mask.jsonl" > "$WORK/mask.out" 2>&1 &
pid=$!
for i in $(seq 600); do [ -e "$WORK/mask.jsonl.part" ] && break; sleep 0.05; done
sleep 0.2
why=$(masks_ok $pid)
kill -TERM $pid; wait $pid
"${MPIRUN[@]}" -np 2 "$DSGD" train --data synthetic --model mlp:64 --batch 32 --quiet --steps 100000000 --eval-every 100000000 --sync bsp \
    --threads 1 --metrics "$WORK/mask2.jsonl" > "$WORK/mask2.out" 2>&1 &
pid=$!
for i in $(seq 600); do [ -e "$WORK/mask2.jsonl.part" ] && break; sleep 0.05; done
sleep 0.2
[ -z "$why" ] && why=$(masks_ok $(pgrep -f "^$DSGD train.*$WORK/mask2.jsonl"))
pkill -TERM -f "^$DSGD train.*$WORK/mask2.jsonl"; wait $pid
if [ -z "$why" ]; then ok "only the thread that runs the paradigm takes SIGINT and SIGTERM (one process with 2 threads; 2 ranks under $MPI_IMPL)"
else bad "signal masks" "$why"; fi

# a second signal: at once (the signal's default action: status 128 + its
# number, and no done event: the run did not stop gracefully). The process
# is stopped while both signals are sent (SIGINT and SIGTERM: two of one
# kind would merge into one pending signal), so both reach it before it can
# act on the first, whatever the machine's load; which of the two comes
# first is the kernel's choice. With 2 compute threads the kernel may hand
# the two signals to two threads, whose handlers then run at once: a plain
# flag let both take themselves for the first, and about one try in 30 the
# run stopped gracefully (a CI run caught it), so the case is tried 20
# times. (The first may still print its line before the second ends the
# process.)
B=(--data synthetic --model mlp:64 --batch 32 --quiet --steps 100000000 --eval-every 100000000 --threads 2)
twice_bad=""
for k in $(seq 20); do
    rm -f "$WORK/twice".*
    "$DSGD" train "${B[@]}" --metrics "$WORK/twice.jsonl" > "$WORK/twice.out" 2> "$WORK/twice.err" &
    pid=$!
    # only once dsgd handles signals: the metrics file is opened after the
    # handler is set (before it, SIGTERM's default action would pass the test)
    for i in $(seq 600); do [ -e "$WORK/twice.jsonl.part" ] && break; sleep 0.05; done
    sleep 0.1
    kill -STOP $pid
    kill -INT $pid
    kill -TERM $pid
    kill -CONT $pid
    wait $pid
    rc=$?
    if { [ $rc != 143 ] && [ $rc != 130 ]; } || [ ! -e "$WORK/twice.jsonl.part" ] || [ -e "$WORK/twice.jsonl" ] ||
       grep -q '"event":"done"' "$WORK/twice.jsonl.part" 2>/dev/null; then
        twice_bad="try $k: exit $rc, $(ls "$WORK" | grep -c '^twice.jsonl$') metrics in place: $(tail -c 200 "$WORK/twice.err")"
        break
    fi
done
if [ -z "$twice_bad" ]; then
    ok "a second signal ends the process at once, 20 times of 20 with 2 threads (status 130 or 143: the second signal's own, no done event)"
else bad "second signal" "$twice_bad"; fi

# SIGTERM to the launcher, as a batch system sends it: Open MPI's mpirun
# passes it on and kills the ranks 1 s later; a final evaluation that took
# longer (here 100 000 test samples, a few seconds) lost the checkpoint and
# the metrics. Now they go first, and the final evaluation is left out.
# The steps are slow (--slowdown: ~0.14 s here, ~0.05 s a step under the
# sanitizers without it): lockstep workers agreed to stop only every 16
# steps, 2.2 s of them, and a CI run under the sanitizers lost the
# checkpoint to mpirun's kill; they now agree about every 0.2 s of steps
# (at least every step), so the stop comes within 0.2 s or one step of the
# signal.
F=25
[ "${SANITIZE:-0}" = 1 ] && F=1
rm -f "$WORK/launch".*
"${MPIRUN[@]}" -np 2 "$DSGD" train --data synthetic:400000 --test-subset 100000 --model mlp:1024,1024 --sync bsp --batch 32 \
    --slowdown 0=$F --quiet --steps 100000000 --eval-every 100000000 --metrics "$WORK/launch.jsonl" \
    --checkpoint "$WORK/launch.st" > "$WORK/launch.out" 2>&1 &
pid=$!
# once the ranks handle signals (the metrics file is opened after), and a few steps on
for i in $(seq 600); do [ -e "$WORK/launch.jsonl.part" ] && break; sleep 0.1; done
sleep 0.5
for p in $(pgrep -f "$WORK/launch.jsonl"); do   # the launcher itself, not its ranks
    case "$(cat "/proc/$p/comm" 2> /dev/null)" in mpirun*|mpiexec*|orterun*) kill -TERM "$p" ;; esac
done
wait $pid
st=$(done_field launch status); cs=$(ckpt_step "$WORK/launch.st")
if [ "$st" = preempted ] && [ -n "$cs" ] && [ "$cs" -gt 0 ] && [ ! -e "$WORK/launch.jsonl.part" ]; then
    ok "SIGTERM to $MPI_IMPL's launcher: the checkpoint (step $cs) and the metrics (status preempted) are written before it kills the ranks"
else bad "SIGTERM to the launcher" "status '$st', checkpoint step '$cs': $(tail -c 300 "$WORK/launch.out")"; fi
if why=$(python3 - "$WORK/launch.jsonl" 2>&1 <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
if "preempt_seen_step" not in d: sys.exit("the done event does not say when the signal was seen (preempt_seen_step)")
per = d["train_s"] / d["steps"]
if per < 0.03: sys.exit("steps of %.3f s: too fast to tell" % per)
late, wait = d["steps"] - d["preempt_seen_step"], d["preempt_wait_s"]
if not (late >= 0 and wait < max(0.2, per) + 0.1):
    sys.exit("stopped at step %d, %d after the signal was seen, %.3f s later (steps of %.3f s)" % (d["steps"], late, wait, per))
print("%d steps after the signal was seen, %.2f s later (steps of %.2f s)" % (late, wait, per))
PY
); then ok "the workers agree to stop within 0.2 s or a step of the signal when a step is slow: $why"
else bad "preemption agreement with slow steps" "$why $(tail -c 300 "$WORK/launch.jsonl")"; fi

# ---- divergence ----
# a good checkpoint first, then a run that diverges (lr 3, momentum 0.9:
# before the bound, a loss of 1e16 finished with status 0 at chance)
D=(--data synthetic --model mlp:32 --batch 32 --quiet --steps 200 --eval-every 50)
"$DSGD" train "${D[@]}" --lr 0.05 --checkpoint "$WORK/good.st" > /dev/null 2>&1
"$DSGD" train "${D[@]}" --lr 3 --momentum 0.9 --checkpoint "$WORK/good.st" --checkpoint-every 1 \
    --metrics "$WORK/div.jsonl" > "$WORK/div.out" 2> "$WORK/div.err"
rc=$?
st=$(json_field "$WORK/div.jsonl" done status 2>/dev/null)
dstep=$(json_field "$WORK/div.jsonl" done steps 2>/dev/null); cstep=$(ckpt_step "$WORK/good.st")
if [ $rc = 3 ] && [ "$st" = diverged ] && [ ! -e "$WORK/div.jsonl.part" ] && [ "$(grep -c . "$WORK/div.err")" = 1 ] &&
   grep -q "diverged" "$WORK/div.err" && [ -n "$cstep" ] && [ "$cstep" -lt "$dstep" ] &&
   "$DSGD" eval --checkpoint "$WORK/good.st" --data synthetic > /dev/null 2>&1; then
    ok "a diverging run stops at step $dstep with status 3 and one line, its metrics end with status diverged, the checkpoint holds step $cstep (before the divergence) and evaluates"
else bad "divergence" "exit $rc, status '$st', checkpoint step '$cstep' (diverged at '$dstep'), stderr: $(head -c 300 "$WORK/div.err")"; fi
"${MPIRUN[@]}" -np 3 "$DSGD" train "${D[@]}" --sync asp --lr 3 --momentum 0.9 > "$WORK/div3.out" 2>&1
rc=$?
if [ $rc = 3 ] && grep -q "training diverged" "$WORK/div3.out"; then ok "asp diverging on 3 ranks: the job exits 3"
else bad "asp divergence" "exit $rc: $(grep dsgd "$WORK/div3.out" | head -3)"; fi
# the shard that writes asp's checkpoints writes none once a worker has
# seen the loss diverge (it went on for 80-90 more steps of the exploded
# parameters before the job stopped; the checkpoint of the step the loss
# diverged at is as far as it may go, give or take the other worker's pushes)
rm -f "$WORK/divs".*
"${MPIRUN[@]}" -np 3 "$DSGD" train "${D[@]}" --steps 2000 --sync asp --servers 1 --lr 3 --momentum 0.9 --checkpoint-every 1 \
    --checkpoint "$WORK/divs.st" --metrics "$WORK/divs.jsonl" > "$WORK/divs.out" 2>&1
rc=$?
dstep=$(json_field "$WORK/divs.jsonl" done steps 2>/dev/null); cstep=$(ckpt_step "$WORK/divs.st")
if [ $rc = 3 ] && [ -n "$dstep" ] && [ -n "$cstep" ] && [ "$cstep" -le $((dstep + 10)) ]; then
    ok "asp: the shard's last checkpoint is of step $cstep, the loss diverged at $dstep: none is written after the divergence is seen"
else bad "asp: checkpoints after divergence" "exit $rc, diverged at '$dstep', checkpoint of step '$cstep'"; fi

# a worker other than the lead diverges first (the lead slowed 20x): the
# lead, told by it, closes the metrics (no .part left behind) and the job
# exits 3 with one line naming the worker (under heavy load the slowed lead
# may still diverge first: then it is the lead's own line)
for s in gossip localsgd; do
    rm -f "$WORK/divw.jsonl"*
    lr=3; [ $s = gossip ] && lr=10   # at 3 gossip's mixing sometimes keeps every loss below the bound
    "${MPIRUN[@]}" -np 4 "$DSGD" train "${D[@]}" --sync $s --lr $lr --momentum 0.9 --slowdown 0=20 \
        --metrics "$WORK/divw.jsonl" > "$WORK/divw.out" 2>&1
    rc=$?
    st=$(json_field "$WORK/divw.jsonl" done status 2>/dev/null); at=$(json_field "$WORK/divw.jsonl" done diverged_at 2>/dev/null)
    if [ $rc = 3 ] && [ "$st" = diverged ] && [ ! -e "$WORK/divw.jsonl.part" ] && [ "$(grep -c "training diverged" "$WORK/divw.out")" = 1 ] &&
       { [ -z "$at" ] || [[ "$at" == *"of worker "[1-9]* ]]; }; then
        ok "$s: a worker other than the lead diverges (${at:-the lead first, under load}): exit 3, one line, the metrics closed with status diverged"
    else bad "$s: divergence on a worker other than the lead" "exit $rc, status '$st', at '$at', part $(ls "$WORK"/divw.jsonl* 2>/dev/null | tr '\n' ' '): $(grep dsgd "$WORK/divw.out" | head -3)"; fi
done

# ---- one line per job; one final evaluation ----
REFUSE_LIMIT=60 refused "a bad flag under mpirun -np 3 is one line, not three" "--bogus" "${MPIRUN[@]}" -np 3 "$DSGD" train --bogus 1
refused "--timeout below 0.5 s" "--timeout" "$DSGD" train --data synthetic --steps 1 --timeout 1e-9
# a clock schedule due at every step: the last step's evaluation is the final one, written once
"$DSGD" train --data synthetic --model mlp:16 --steps 60 --quiet --eval-every-s 1e-9 --metrics "$WORK/once.jsonl" > /dev/null 2>&1
if python3 - "$WORK/once.jsonl" <<'PY'
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if r["event"] == "eval"]
assert steps[-1] == 60 and steps.count(60) == 1, steps[-4:]
assert all(r is not None for r in [r.get("train_loss", 0) for r in map(json.loads, open(sys.argv[1])) if r["event"] == "eval"])
PY
then ok "an evaluation schedule due at the last step writes one final record"; else bad "final evaluation record" "see $WORK/once.jsonl"; fi

summary preempt
