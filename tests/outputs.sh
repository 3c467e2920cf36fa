#!/usr/bin/env bash
# What a run's files survive: a checkpoint that cannot be written (a full
# disk) keeps the previous checkpoint and the whole metrics record, closed
# by a done event of status checkpoint_failed, and a run resumed from that
# checkpoint continues the record; a second run naming a file a live run
# writes (--metrics or --checkpoint) is refused at its start, the first
# untouched; dsgd status turns a record's done event into an exit status a
# batch script can trust.
# Usage: tests/outputs.sh BUILD_DIR   (prints "outputs: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin outputs "$@"
trap 'pkill -KILL -f "^$DSGD train.*$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
DSGD=$(cd "$(dirname "$DSGD")" && pwd)/dsgd   # used from inside a namespace too

T=(--data synthetic --model mlp:32 --batch 32 --lr 0.05 --quiet --eval-every 50)
ckpt_step() { python3 -c 'import json,struct,sys
raw=open(sys.argv[1],"rb").read(); h=json.loads(raw[8:8+struct.unpack("<Q",raw[:8])[0]]); print(h["__metadata__"]["step"])' "$1" 2>/dev/null; }

# ---- a full disk for the checkpoint, the metrics on a healthy one ----
# A small file system of our own (a user and mount namespace; skipped where
# the kernel does not allow one): 16 KiB hold the checkpoint's lock file (a
# page) and one checkpoint of this model (9.4 KB, three pages) but not a
# second beside it, so the first periodic save succeeds and the second
# fails; 4 KiB hold none, so the save at the end fails. (The lock file of a
# run that stops on an error stays; it locks nothing once its run is gone.)
if unshare -rm true 2> /dev/null; then
    cat > "$WORK/inner.sh" <<'SH'
set -u
DSGD=$1 DIR=$2 SIZE=$3 OUT=$4
shift 4
mount -t tmpfs -o "size=$SIZE" tmpfs "$DIR" || exit 99
"$DSGD" train "$@" --checkpoint "$DIR/ck.st" > "$OUT.out" 2> "$OUT.err"
echo $? > "$OUT.rc"
ls -A "$DIR" > "$OUT.ls"
cp "$DIR/ck.st" "$OUT.st" 2> /dev/null
exit 0
SH
    # periodic: saves at steps 50 and 100; the one at 100 fails
    mkdir -p "$WORK/fs"
    unshare -rm bash "$WORK/inner.sh" "$DSGD" "$WORK/fs" 16k "$WORK/per" "${T[@]}" --steps 200 --checkpoint-every 50 \
        --metrics "$WORK/per.jsonl"
    rc=$(cat "$WORK/per.rc" 2>/dev/null)
    st=$(json_field "$WORK/per.jsonl" done status 2>/dev/null)
    if [ "$rc" = 1 ] && [ "$st" = checkpoint_failed ] && [ ! -e "$WORK/per.jsonl.part" ] && [ "$(grep -c . "$WORK/per.err")" = 1 ] &&
       [ "$(ckpt_step "$WORK/per.st")" = 50 ] && [ "$(cat "$WORK/per.ls" | tr '\n' ' ')" = "ck.st ck.st.lock " ] &&
       [ "$(grep -c '"event":"eval"' "$WORK/per.jsonl")" = 2 ]; then
        ok "a periodic save on a full disk: exit 1, one line, the checkpoint of step 50 kept, no temporary left, the record kept (evaluations at 50 and 100) with status checkpoint_failed"
    else bad "periodic save on a full disk" "exit '$rc', status '$st', files '$(cat "$WORK/per.ls" 2>/dev/null)', stderr: $(head -c 300 "$WORK/per.err")"; fi
    # the kept checkpoint resumes and continues the kept record
    "$DSGD" train "${T[@]}" --steps 200 --resume "$WORK/per.st" --checkpoint "$WORK/per2.st" --metrics "$WORK/per.jsonl" > "$WORK/per2.out" 2>&1
    if python3 - "$WORK/per.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r["event"] for r in recs]
assert ev[0] == "config" and ev.count("done") == 1 and ev[-1] == "done" and recs[-1]["status"] == "ok", ev
res = [r for r in recs if r["event"] == "resume"]
assert len(res) == 1 and res[0]["step"] == 50, res
steps = [r["step"] for r in recs if r["event"] == "eval"]
assert steps == [50, 100, 150, 200], steps
PY
    then ok "the run resumed from the kept checkpoint continues the record (a resume event at step 50, evaluations to 200, one done event)"
    else bad "resume after a failed save" "$(tail -c 300 "$WORK/per2.out")"; fi
    # at the end: training finished, the final save fails
    unshare -rm bash "$WORK/inner.sh" "$DSGD" "$WORK/fs" 4k "$WORK/fin" "${T[@]}" --steps 100 --metrics "$WORK/fin.jsonl"
    rc=$(cat "$WORK/fin.rc" 2>/dev/null)
    st=$(json_field "$WORK/fin.jsonl" done status 2>/dev/null)
    err=$(json_field "$WORK/fin.jsonl" done error 2>/dev/null)
    if [ "$rc" = 1 ] && [ "$st" = checkpoint_failed ] && [ ! -e "$WORK/fin.jsonl.part" ] && [ "$(cat "$WORK/fin.ls")" = ck.st.lock ] &&
       [ "$(grep -c '"event":"eval"' "$WORK/fin.jsonl")" = 2 ] && [[ "$err" == *ck.st* ]]; then
        ok "the final save on a full disk: exit 1, no checkpoint or temporary left on that disk, the record kept with both evaluations and status checkpoint_failed ($err)"
    else bad "final save on a full disk" "exit '$rc', status '$st', left '$(cat "$WORK/fin.ls" 2>/dev/null)', stderr: $(head -c 300 "$WORK/fin.err")"; fi
    # asp: shard 0 writes the checkpoints; it says the job's one line, and
    # the lead worker, told in the replies, keeps the record and stops the job
    # (MPICH's launcher adds its own line about the abort)
    cat > "$WORK/inner-mpi.sh" <<'SH'
set -u
DIR=$1 SIZE=$2 OUT=$3
shift 3
mount -t tmpfs -o "size=$SIZE" tmpfs "$DIR" || exit 99
"$@" --checkpoint "$DIR/ck.st" > "$OUT.out" 2> "$OUT.err"
echo $? > "$OUT.rc"
ls -A "$DIR" | grep -v '\.lock$' > "$OUT.ls"
exit 0
SH
    for c in "16k periodic" "4k final"; do
        set -- $c
        unshare -rm bash "$WORK/inner-mpi.sh" "$WORK/fs" "$1" "$WORK/ps$2" "${MPIRUN[@]}" -np 3 "$DSGD" train "${T[@]}" \
            --sync asp --servers 1 --steps 300 $([ "$2" = periodic ] && echo --checkpoint-every 50) --metrics "$WORK/ps$2.jsonl"
        rc=$(cat "$WORK/ps$2.rc" 2>/dev/null)
        st=$(json_field "$WORK/ps$2.jsonl" done status 2>/dev/null)
        want=""; [ "$2" = periodic ] && want=ck.st
        if [ "$rc" = 1 ] && [ "$st" = checkpoint_failed ] && [ ! -e "$WORK/ps$2.jsonl.part" ] && [ "$(grep -c '^dsgd' "$WORK/ps$2.err")" = 1 ] &&
           grep -q "server shard 0: cannot write checkpoint" "$WORK/ps$2.err" && [ "$(cat "$WORK/ps$2.ls")" = "$want" ]; then
            ok "asp, the $2 save on a full disk: exit 1, the shard's one line, the record kept with status checkpoint_failed${want:+, the previous checkpoint kept}"
        else bad "asp, the $2 save on a full disk" "exit '$rc', status '$st', files '$(cat "$WORK/ps$2.ls" 2>/dev/null)', stderr: $(head -c 300 "$WORK/ps$2.err")"; fi
    done
    "$DSGD" status "$WORK/fin.jsonl" > /dev/null 2> "$WORK/st.err"
    rc=$?
    if [ $rc = 1 ] && grep -q "checkpoint_failed" "$WORK/st.err"; then ok "dsgd status: a failed save exits 1: $(cat "$WORK/st.err")"
    else bad "dsgd status of a failed save" "exit $rc: $(cat "$WORK/st.err")"; fi
else
    echo "skip a full disk: no user namespaces here (unshare -rm)"
fi

# ---- two runs, one output ----
# run A trains for a few seconds; B starts while A writes and names the
# same metrics file, then the same checkpoint
L=(--data synthetic --model mlp:64 --batch 32 --lr 0.05 --quiet --steps 3000000 --time-limit 6 --eval-every 200)
"$DSGD" train "${L[@]}" --seed 1 --metrics "$WORK/a.jsonl" --checkpoint "$WORK/a.st" > "$WORK/a.out" 2>&1 &
apid=$!
for i in $(seq 300); do [ -e "$WORK/a.jsonl.part" ] && break; sleep 0.05; done
refused "a second run naming a live run's --metrics is refused at start" "being written by another run" \
    "$DSGD" train "${T[@]}" --seed 2 --steps 50 --metrics "$WORK/a.jsonl"
refused "a second run naming a live run's --checkpoint is refused at start" "being written by another run" \
    "$DSGD" train "${T[@]}" --seed 2 --steps 50 --checkpoint "$WORK/a.st"
REFUSE_LIMIT=60 refused "the same under mpirun -np 2: one line for the job" "being written by another run" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${T[@]}" --sync bsp --steps 50 --metrics "$WORK/a.jsonl"
wait $apid
arc=$?
if [ $arc = 0 ] && python3 - "$WORK/a.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs[0]["event"] == "config" and recs[0]["config"]["seed"] == 1, recs[0]
assert [r["event"] for r in recs].count("config") == 1 and recs[-1]["event"] == "done" and recs[-1]["status"] == "ok"
PY
then ok "the first run is untouched: its record is its own (one config, seed 1) and ends ok"
else bad "the first run" "exit $arc: $(tail -c 300 "$WORK/a.out")"; fi
ls "$WORK"/a.* > "$WORK/left" 2>&1
if ! grep -q '\.lock$\|\.part$' "$WORK/left" && [ -s "$WORK/a.st" ]; then ok "after it, no lock or partial file is left"
else bad "files after the run" "$(tr '\n' ' ' < "$WORK/left")"; fi
"$DSGD" train "${T[@]}" --steps 50 --metrics "$WORK/a.jsonl" --checkpoint "$WORK/a.st" > "$WORK/a2.out" 2>&1 &&
    ok "a run after it may use the same files" || bad "a run after the first" "$(cat "$WORK/a2.out")"
# a lock file a killed run left behind is not a live run
: > "$WORK/stale.jsonl.lock"
"$DSGD" train "${T[@]}" --steps 50 --metrics "$WORK/stale.jsonl" > "$WORK/stale.out" 2>&1 &&
    ok "a lock file left by a killed run does not refuse the next run" || bad "stale lock" "$(cat "$WORK/stale.out")"

# ---- dsgd status: the done event's status as the exit status ----
status_is() {   # NAME FILE RC NEEDLE
    "$DSGD" status "$2" > "$WORK/st.out" 2>&1
    local rc=$?
    if [ $rc = "$3" ] && grep -q -- "$4" "$WORK/st.out"; then ok "dsgd status, $1: exit $rc: $(cat "$WORK/st.out")"
    else bad "dsgd status, $1" "exit $rc (want $3): $(cat "$WORK/st.out")"; fi
}
status_is "a run that ended ok" "$WORK/a.jsonl" 0 "status ok"
printf '%s\n' '{"event":"config","time":0}' '{"event":"done","time":1,"steps":7,"status":"preempted"}' > "$WORK/pre.jsonl"
status_is "a preempted run" "$WORK/pre.jsonl" 143 "status preempted"
printf '%s\n' '{"event":"config","time":0}' '{"event":"done","time":1,"steps":7,"status":"diverged","diverged":"the loss is nan"}' > "$WORK/div.jsonl"
status_is "a diverged run" "$WORK/div.jsonl" 3 "the loss is nan"
printf '%s\n' '{"event":"config","time":0}' '{"event":"done","time":1,"steps":7,"status":"fault","fault":"rank 2 lost"}' > "$WORK/flt.jsonl"
status_is "a run that lost a rank" "$WORK/flt.jsonl" 1 "rank 2 lost"
printf '%s\n' '{"event":"config","time":0}' > "$WORK/run.jsonl.part"
status_is "a run still going (only FILE.part)" "$WORK/run.jsonl" 2 "has not ended"
printf '%s\n' '{"event":"config","time":0}' '{"event":"eval","ti' > "$WORK/cut.jsonl"
status_is "a record without a done event" "$WORK/cut.jsonl" 2 "no done event"
status_is "no such file" "$WORK/none.jsonl" 2 "cannot read"

summary outputs
