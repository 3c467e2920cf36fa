#!/usr/bin/env bash
# Hostile input and crashes: every numeric flag's syntax and range, damaged
# or crafted checkpoints, output paths that are not plain files, the same
# file under two names, data files that are FIFOs or damaged .gz streams,
# stale temporaries, and what a fault leaves behind. Each case is a defect
# found by fuzzing or by killing ranks; the comment names it.
# Usage: tests/robust.sh BUILD_DIR   (prints "robust: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin robust "$@"

T=(--data synthetic --model mlp:8 --batch 32 --quiet)

# ---- (10) one strict parser with a range for every numeric flag ----
refused "--lr 0x10 (hex) is refused" "--lr wants a decimal number" "$DSGD" train "${T[@]}" --lr 0x10
refused "--lr inf is refused" "--lr wants a decimal number" "$DSGD" train "${T[@]}" --lr inf
refused "--batch ' 64' is refused like '64 '" "--batch wants a decimal integer" "$DSGD" train "${T[@]}" --batch " 64"
refused "--batch '64 ' is refused" "--batch wants a decimal integer" "$DSGD" train "${T[@]}" --batch "64 "
refused "--momentum 1 is refused" "--momentum must be in \[0, 1)" "$DSGD" train "${T[@]}" --momentum 1
refused "--epochs 2^63-1 is refused, not overflowed" "--epochs must be in" "$DSGD" train "${T[@]}" --epochs 9223372036854775807
refused "--steps 2^63 overflows the parser and is refused" "--steps wants a decimal integer" "$DSGD" train "${T[@]}" --steps 9223372036854775808
for th in -5 100000; do
    refused "dsgd eval --threads $th is refused" "--threads must be" "$DSGD" eval --checkpoint "$WORK/none.st" --threads "$th"
done

# ---- (1) checkpoint metadata is range-checked: a negative step ----
# st_meta_v1 IN OUT KEY VALUE: a copy with one metadata value changed,
# written as a version-1 file (CRC-32 of the data only, which both the
# current and older readers verify), so only the value itself is wrong.
st_meta_v1() {
    python3 - "$@" <<'PY'
import json, struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); data = raw[8 + n:]
md = hdr["__metadata__"]
md[sys.argv[3]] = sys.argv[4]; md["version"] = "1"; md["crc32"] = "%08x" % zlib.crc32(data)
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}
"$DSGD" train "${T[@]}" --steps 20 --checkpoint "$WORK/ck.st" > /dev/null 2>&1
for step in -1 -5000; do
    st_meta_v1 "$WORK/ck.st" "$WORK/neg.st" step "$step"
    refused "--resume of a checkpoint at step $step is refused" "metadata 'step'" "$DSGD" train "${T[@]}" --steps 40 --resume "$WORK/neg.st"
done
st_meta_v1 "$WORK/ck.st" "$WORK/v1.st" step 20
"$DSGD" train "${T[@]}" --steps 40 --resume "$WORK/v1.st" > "$WORK/v1.out" 2>&1 && ok "a version-1 checkpoint still resumes" || bad "version-1 checkpoint" "$(cat "$WORK/v1.out")"

# ---- (12) a data file that is a FIFO is refused, not read forever ----
# mkidx DIR NAME MAGIC COUNT [H W]: a raw IDX file with deterministic content
mkidx() {
    perl -e 'my ($m,$n,$h,$w)=@ARGV; if ($h) { print pack("N4",$m,$n,$h,$w); print pack("C*", map { ($_*37)%256 } 0..$n*$h*$w-1) }
             else { print pack("N2",$m,$n); print pack("C*", map { $_%10 } 0..$n-1) }' "$3" "$4" "${5:-}" "${6:-}" > "$1/$2"
}
mkdir -p "$WORK/idx"
mkidx "$WORK/idx" train-images-idx3-ubyte 2051 300 8 8
mkidx "$WORK/idx" train-labels-idx1-ubyte 2049 300
mkidx "$WORK/idx" t10k-images-idx3-ubyte 2051 60 8 8
mkidx "$WORK/idx" t10k-labels-idx1-ubyte 2049 60
mkdir -p "$WORK/fifo"; cp "$WORK/idx/"* "$WORK/fifo/"
rm "$WORK/fifo/t10k-labels-idx1-ubyte"; mkfifo "$WORK/fifo/t10k-labels-idx1-ubyte"
refused "a FIFO as a data file is refused" "not a regular file" "$DSGD" train --data "$WORK/fifo" --model mlp:8 --quiet
mkdir -p "$WORK/cifar"; mkfifo "$WORK/cifar/test_batch.bin"
for i in 1 2 3 4 5; do head -c $((3073 * 4)) /dev/zero > "$WORK/cifar/data_batch_$i.bin"; done
refused "a FIFO as a CIFAR batch is refused" "not a regular file" "$DSGD" train --data "$WORK/cifar" --model mlp:8 --quiet

# ---- (9) a .gz IDX file must end with its trailer ----
mkdir -p "$WORK/gz"; cp "$WORK/idx/"* "$WORK/gz/"
gzip "$WORK/gz/train-images-idx3-ubyte"
sz=$(stat -c %s "$WORK/gz/train-images-idx3-ubyte.gz")
truncate -s $((sz - 8)) "$WORK/gz/train-images-idx3-ubyte.gz"
refused "a .gz data file cut by its 8-byte trailer is refused" "truncated" "$DSGD" train --data "$WORK/gz" --model mlp:8 --quiet

# ---- (4) outputs must be regular files: a device node is never replaced ----
O="$WORK/o"; mkdir -p "$O"
# copies of /dev/null and /dev/full (as root), else symbolic links to them
mknod "$O/null" c 1 3 2>/dev/null || ln -s /dev/null "$O/null"
mknod "$O/full" c 1 7 2>/dev/null || ln -s /dev/full "$O/full"
refused "--metrics naming a device node is refused" "not a regular file" "$DSGD" train "${T[@]}" --steps 5 --metrics "$O/null"
refused "--checkpoint naming a device node is refused" "not a regular file" "$DSGD" train "${T[@]}" --steps 5 --checkpoint "$O/full"
if [ -c "$O/null" ] && [ -c "$O/full" ]; then ok "the device nodes are still device nodes"
else bad "device nodes" "replaced: $(ls -l "$O")"; fi
mkfifo "$O/fifo"
refused "--metrics naming a FIFO is refused" "not a regular file" "$DSGD" train "${T[@]}" --steps 5 --metrics "$O/fifo"

# ---- (6) a directory as an output is refused before training ----
mkdir -p "$O/dir"
refused "--metrics naming a directory is refused at start" "a directory" "$DSGD" train "${T[@]}" --epochs 100000 --metrics "$O/dir"
refused "--checkpoint naming a directory is refused at start" "a directory" "$DSGD" train "${T[@]}" --epochs 100000 --checkpoint "$O/dir"
if [ ! -e "$O/dir.part" ]; then ok "no DIR.part left beside the directory"; else bad "directory output" "left $O/dir.part"; fi

# ---- (5) one file under two spellings ----
mkdir -p "$O/sub"
refused "--metrics out/x --checkpoint out/./x is refused" "same file" "$DSGD" train "${T[@]}" --steps 5 \
    --metrics "$O/sub/x" --checkpoint "$O/sub/./x"
refused "--metrics out/x --checkpoint out/../o/sub/x is refused" "same file" "$DSGD" train "${T[@]}" --steps 5 \
    --metrics "$O/sub/x" --checkpoint "$O/sub/../sub/x"
cp "$WORK/ck.st" "$O/ck.st"; cp "$WORK/ck.st" "$O/ck.orig"
refused "--metrics naming the checkpoint being resumed is refused" "being resumed" "$DSGD" train "${T[@]}" --steps 40 \
    --resume "$O/ck.st" --metrics "$O/./ck.st"
ln "$O/ck.st" "$O/hard.st"
refused "--metrics naming a hard link of the resumed checkpoint is refused" "being resumed" "$DSGD" train "${T[@]}" --steps 40 \
    --resume "$O/ck.st" --metrics "$O/hard.st"
if cmp -s "$O/ck.st" "$O/ck.orig"; then ok "the resumed checkpoint is intact"; else bad "resumed checkpoint" "overwritten"; fi
"$DSGD" train "${T[@]}" --steps 40 --resume "$O/ck.st" --checkpoint "$O/ck.st" > "$WORK/same.out" 2>&1 &&
    ok "--resume and --checkpoint may name the same file (continue in place)" || bad "resume in place" "$(cat "$WORK/same.out")"

# ---- (7) temporaries of killed runs are removed, a live run's are kept ----
sleep 0 & dead=$!; wait $dead
touch "$O/c.st.tmp.$dead" "$O/c.st.tmp.$$" "$O/other.st.tmp.$dead"
"$DSGD" train "${T[@]}" --steps 5 --checkpoint "$O/c.st" > /dev/null 2>&1
if [ ! -e "$O/c.st.tmp.$dead" ] && [ -e "$O/c.st.tmp.$$" ] && [ -e "$O/other.st.tmp.$dead" ] && [ -s "$O/c.st" ]; then
    ok "a dead run's checkpoint temporary is removed; a live one's and another target's are kept"
else bad "stale temporaries" "$(ls "$O")"; fi

# ---- (11) a fault keeps the metrics so far, ending with a done event ----
# killed_run NP VICTIM OUT ARGS...: start NP ranks (MPI_RECOVER keeps the
# survivors up), kill -9 rank VICTIM once the lead has recorded an
# evaluation, wait at most 180 s for the rest (each rank's exit code in
# OUT/rc.R, the seconds from the kill to the end in $took).
killed_run() {
    local np=$1 victim=$2 out=$3
    shift 3
    rm -rf "$out"; mkdir -p "$out"
    # each rank: the program's pid (an exec keeps it) and, once it has ended,
    # its exit code; a foreground command, so a signal the launcher sends the
    # wrapper (MPICH's SIGUSR1 on a death) cannot cut the wait short
    cat > "$out/rank.sh" <<'EOS'
out=$1 var=$2
shift 2
eval r=\$$var
trap : USR1
sh -c 'echo $$ > "$0"; exec "$@"' "$out/pid.$r" "$@"
echo $? > "$out/rc.$r"
EOS
    DSGD_LAUNCH_LIMIT=180 "${MPIRUN[@]}" "${MPI_RECOVER[@]}" -np "$np" sh "$out/rank.sh" "$out" "$MPI_RANK_VAR" \
        "$DSGD" train "$@" --metrics "$out/m.jsonl" > "$out/stdout" 2> "$out/stderr" &
    local job=$! i
    for i in $(seq 1 300); do
        grep -q '"event":"eval"' "$out/m.jsonl.part" 2>/dev/null && [ -s "$out/pid.$victim" ] && break
        sleep 0.1
    done
    kill -9 "$(cat "$out/pid.$victim")"
    local t0=$SECONDS
    wait $job
    took=$((SECONDS - t0))
}
# fault_record NAME DIR LOST: metrics.jsonl in place, no .part, last event a
# done with status fault naming the lost rank(s) and the step
fault_record() {
    if [ -e "$2/m.jsonl.part" ] || [ ! -s "$2/m.jsonl" ]; then bad "$1" "metrics not in place: $(ls "$2") $(grep dsgd "$2/stderr" | head -2)"; return; fi
    if python3 -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
d=rs[-1]
assert d["event"]=="done" and d["status"]=="fault", d
assert d["lost_ranks"]==json.loads(sys.argv[2]), d
assert d["fault_step"]>0 and any(r["event"]=="eval" for r in rs), d' "$2/m.jsonl" "$3" 2> "$WORK/py.err"
    then ok "$1"; else bad "$1" "$(tail -1 "$WORK/py.err")"; fi
}
# These cases and the frozen shard below mostly wait out a --timeout or a
# --time-limit: they run side by side (tests/lib.sh, side).
F=(--data synthetic --model mlp:8 --batch 16 --steps 1000000 --eval-every 20 --quiet --timeout 3)
bsp_killed() {
    killed_run 3 2 "$WORK/kbsp" "${F[@]}" --sync bsp
    fault_record "bsp, worker rank 2 killed: metrics in place, done says rank 2 lost at its step" "$WORK/kbsp" "[2]"
}
side bsp_killed
# (Under MPICH both workers wait out the shard limit, and the first to give up
# aborts the job: the other worker waits longer, so the lead records first.)
server_killed() {
    killed_run 3 0 "$WORK/kps" "${F[@]}" --sync asp --servers 1
    fault_record "asp, the server (rank 0) killed: metrics in place, done says rank 0 lost" "$WORK/kps" "[0]"
}
side server_killed
# asp workers killed -9 (not --fail): the server evicts the dead one after
# --timeout and the rest run to the time limit. A worker that is not the
# lead: the lead's metrics close normally and count the eviction. The lead
# itself: the others and the server still finish (exit 0), and the next
# worker takes over the evaluations and the dead lead's metrics file: it is
# renamed into place with a takeover event and a done event.
worker_killed() {
    local rcs ev
    killed_run 4 2 "$WORK/kw" "${F[@]}" --sync asp --servers 1 --time-limit 5
    rcs="$(cat "$WORK/kw/rc.0" "$WORK/kw/rc.1" "$WORK/kw/rc.3" 2>/dev/null | tr '\n' ' ')"
    ev=$(json_field "$WORK/kw/m.jsonl" done evictions 2>/dev/null)
    if [ "$rcs" = "0 0 0 " ] && [ "$ev" = 1 ]; then ok "asp, worker rank 2 killed -9: evicted, the rest finish (exit 0, ${took}s after the kill), evictions $ev"
    else bad "asp with a worker killed" "exit codes [$rcs] after ${took}s, evictions $ev: $(grep dsgd "$WORK/kw/stderr" | head -3)"; fi
}
side worker_killed
lead_killed() {
    local rcs
    killed_run 4 1 "$WORK/kwl" "${F[@]}" --sync asp --servers 1 --time-limit 8
    rcs="$(cat "$WORK/kwl/rc.0" "$WORK/kwl/rc.2" "$WORK/kwl/rc.3" 2>/dev/null | tr '\n' ' ')"
    if [ "$rcs" = "0 0 0 " ] && [ "$took" -le 30 ]; then ok "asp, the lead worker (rank 1) killed -9: the server and the other workers finish (exit 0, ${took}s after the kill)"
    else bad "asp with the lead worker killed" "exit codes [$rcs] after ${took}s: $(grep dsgd "$WORK/kwl/stderr" | head -3)"; fi
    if [ ! -e "$WORK/kwl/m.jsonl.part" ] && python3 -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
assert rs[0]["event"]=="config", rs[0]
t=[x for x in rs if x["event"]=="takeover"]
assert len(t)==1 and t[0]["rank"]==2 and t[0]["worker"]==1, t
i=rs.index(t[0])
assert any(x["event"]=="eval" for x in rs[:i]) and any(x["event"]=="eval" for x in rs[i+1:]), "evaluations before and after"
d=rs[-1]
assert d["event"]=="done" and d["status"]=="ok" and d["evictions"]==1, d' "$WORK/kwl/m.jsonl" 2> "$WORK/py.err"
    then ok "asp, the lead worker killed -9: worker 1 takes over; the metrics are in place (config, evaluations, takeover, evaluations, done)"
    else bad "lead takeover" "$(ls "$WORK/kwl") $(tail -1 "$WORK/py.err")"; fi
}
side lead_killed

# The shard itself frozen (kill -STOP) for twice --timeout, then continued:
# its workers were waiting on it, not silent, and it must not evict them
# when it comes back (it did: every worker, "silent for 4.0 s"). The same
# gap opens when the shard waits out a dead worker's half-sent push.
shard_frozen() {
    local job i rc ev
    rm -rf "$WORK/fz"; mkdir -p "$WORK/fz"
    cat > "$WORK/fz/rank.sh" <<'EOS'
out=$1 var=$2
shift 2
eval r=\$$var
sh -c 'echo $$ > "$0"; exec "$@"' "$out/pid.$r" "$@"
EOS
    "${MPIRUN[@]}" -np 4 sh "$WORK/fz/rank.sh" "$WORK/fz" "$MPI_RANK_VAR" "$DSGD" train "${F[@]}" --timeout 2 --sync asp --servers 1 \
        --time-limit 9 --metrics "$WORK/fz/m.jsonl" > "$WORK/fz/out" 2>&1 &
    job=$!
    for i in $(seq 1 300); do
        grep -q '"event":"eval"' "$WORK/fz/m.jsonl.part" 2>/dev/null && [ -s "$WORK/fz/pid.0" ] && break
        sleep 0.1
    done
    kill -STOP "$(cat "$WORK/fz/pid.0")"; sleep 4; kill -CONT "$(cat "$WORK/fz/pid.0")"
    wait $job; rc=$?
    ev=$(json_field "$WORK/fz/m.jsonl" done evictions 2>/dev/null)
    if [ "$rc" = 0 ] && [ "$ev" = 0 ]; then ok "asp, the shard frozen 4 s past --timeout 2 and continued: no worker evicted, the job exits 0"
    else bad "a frozen shard" "exit $rc, evictions '$ev': $(grep dsgd "$WORK/fz/out" | head -2)"; fi
}
side shard_frozen
side_join

# ---- (8) --sync localsgd/fedavg --resume continues exactly ----
# 2 workers, H = 8, momentum: stopped mid-period (k = 37) and at a period
# boundary (k = 40), then resumed: the final checkpoint equals the
# uninterrupted run's byte for byte (every worker's model and momentum and
# the round count included).
L=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --momentum 0.9 --period 8 --quiet --epochs 2)
for sync in localsgd fedavg; do
    extra=(); [ $sync = fedavg ] && extra=(--fedavg-fraction 0.5)
    DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" -np 2 "$DSGD" train "${L[@]}" --sync $sync "${extra[@]}" --checkpoint "$WORK/ls_full.st" > /dev/null 2>&1
    for k in 37 40; do
        rm -f "$WORK/ls_half.st" "$WORK/ls_res.st"
        DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" -np 2 "$DSGD" train "${L[@]}" --sync $sync "${extra[@]}" --steps $k --checkpoint "$WORK/ls_half.st" > /dev/null 2>&1
        DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" -np 2 "$DSGD" train "${L[@]}" --sync $sync "${extra[@]}" --resume "$WORK/ls_half.st" \
            --checkpoint "$WORK/ls_res.st" > "$WORK/ls.out" 2>&1
        if [ -s "$WORK/ls_full.st" ] && cmp -s "$WORK/ls_full.st" "$WORK/ls_res.st"; then
            ok "$sync with momentum: resume after $k steps (period 8) gives the uninterrupted run's checkpoint bit for bit"
        else bad "$sync resume after $k steps" "checkpoints differ: $(head -c 300 "$WORK/ls.out")"; fi
    done
done
refused "localsgd: resuming 2 workers' state with 3 workers is refused" "resume with 2 workers" \
    "${MPIRUN[@]}" -np 3 "$DSGD" train "${L[@]}" --sync localsgd --resume "$WORK/ls_half.st"

# ---- (3) gossip pull survives a peer killed with kill -9 ----
# No window lock is taken, so no survivor can block on the dead rank's
# window; the frozen replica is mixed in at most once, so accuracy holds
# (--timeout 8 outlasts the rest of training, under 3 s here also with the
# sanitizers: the peer is declared dead only when the lead waits for its
# final parameters); the run ends on its own.
G=(--data synthetic --model mlp:32 --batch 32 --lr 0.05 --steps 60000 --eval-every 2000 --quiet --sync gossip --gossip pull)
# (Under MPICH a read of the dead rank's window never completes: the reader
# gives up after half the timeout, so that it does not look dead itself; and a
# peer that has finished is not taken for dead by one still training.)
killed_run 3 2 "$WORK/kg" "${G[@]}" --timeout 8
rcs="$(cat "$WORK/kg/rc.0" "$WORK/kg/rc.1" 2>/dev/null | tr '\n' ' ')"
acc=$(json_field "$WORK/kg/m.jsonl" done test_acc 2>/dev/null); dead=$(json_field "$WORK/kg/m.jsonl" done dead_peers 2>/dev/null)
if [ "$rcs" = "0 0 " ] && awk -v a="$acc" -v d="$dead" 'BEGIN{exit !(a >= 0.9 && d == 1)}'; then
    ok "gossip pull, rank 2 killed -9: ranks 0,1 finish (exit 0, ${took}s after the kill), test_acc $acc, dead_peers $dead"
else bad "gossip pull with a killed peer" "exit codes [$rcs] after ${took}s, acc $acc, dead $dead: $(grep dsgd "$WORK/kg/stderr" | head -3)"; fi
# The lead killed: rank 1, the next live rank, takes over the evaluations,
# the metrics and the checkpoints (before, the survivors trained on and
# nobody saved their work: found by experiments/soak.sh).
killed_run 3 0 "$WORK/kl" "${G[@]}" --timeout 3 --checkpoint "$WORK/kl.st" --checkpoint-every 1000
rcs="$(cat "$WORK/kl/rc.1" "$WORK/kl/rc.2" 2>/dev/null | tr '\n' ' ')"
if [ "$rcs" = "0 0 " ]; then ok "gossip pull, the lead (rank 0) killed -9: ranks 1,2 stop on their own (exit 0, ${took}s after the kill)"
else bad "gossip pull with the lead killed" "exit codes [$rcs] after ${took}s: $(grep dsgd "$WORK/kl/stderr" | head -3)"; fi
if [ ! -e "$WORK/kl/m.jsonl.part" ] && python3 -c 'import json,struct,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
t=[x for x in rs if x["event"]=="takeover"]
assert len(t)==1 and t[0]["rank"]==1, t
d=rs[-1]
assert d["event"]=="done" and d["status"]=="ok" and d["steps"]==60000 and d["test_acc"]>=0.9, d
f=open(sys.argv[2],"rb"); n=struct.unpack("<Q",f.read(8))[0]; m=json.loads(f.read(n))["__metadata__"]
assert m["step"]=="60000", m' "$WORK/kl/m.jsonl" "$WORK/kl.st" 2> "$WORK/py.err"
then ok "gossip pull, the lead killed -9: rank 1 takes over; metrics in place (takeover, done), the final checkpoint at step 60000"
else bad "gossip lead takeover" "$(ls "$WORK/kl") $(tail -1 "$WORK/py.err")"; fi
if DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" -np 3 "$DSGD" train "${G[@]}" --timeout 3 --steps 60100 --resume "$WORK/kl.st" > "$WORK/klr.out" 2>&1
then ok "gossip: the checkpoint of the rank that took over resumes (every replica from its final average)"
else bad "gossip resume after a takeover" "$(grep dsgd "$WORK/klr.out" | head -2)"; fi

# A rank that dies halfway through publishing its copy leaves it marked as
# being written for good; the lead, reading every replica for a periodic
# checkpoint, retried such a copy forever (a hang found by
# experiments/soak.sh). --fail 1@200:publishing places that death.
rm -f "$WORK"/rc.* "$WORK/kp.st"
DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" "${MPI_RECOVER[@]}" -np 3 "${RECORD_RC[@]}" \
    "$DSGD" train --data synthetic --model mlp:32 --batch 32 --lr 0.05 --steps 3000 --quiet --sync gossip --gossip pull \
    --fail 1@200:publishing --timeout 3 --checkpoint-every 50 --checkpoint "$WORK/kp.st" --metrics "$WORK/kp.jsonl" > "$WORK/kp.out" 2>&1
rcs="$(cat "$WORK/rc.0" "$WORK/rc.2" 2>/dev/null | tr '\n' ' ')"
dead=$(json_field "$WORK/kp.jsonl" done dead_peers 2>/dev/null)
if [ "$rcs" = "0 0 " ] && [ "$dead" = 1 ] && [ -s "$WORK/kp.st" ]; then
    ok "gossip pull, rank 1 dead halfway through publishing: the lead's periodic checkpoints give up on its copy after --timeout; ranks 0,2 finish (dead_peers 1)"
else bad "gossip peer dead mid-publish" "exit codes [$rcs], dead_peers $dead: $(grep dsgd "$WORK/kp.out" | head -3)"; fi

summary robust
