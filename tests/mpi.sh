#!/usr/bin/env bash
# Multi-process tests under mpirun: equivalences between paradigms that the
# math says are equal, start-up configuration checks, a dead peer under
# --enable-recovery, uneven shards, and the TCP transport.
# Usage: tests/mpi.sh BUILD_DIR   (prints "mpi: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin mpi "$@"

# A small run: 40 steps of mlp:32 on synthetic data, plain SGD.
C=(--data synthetic --model mlp:32 --batch 32 --lr 0.05 --steps 40 --quiet)

# same_params NAME TOL A B: parameters of two checkpoints agree within TOL
same_params() {
    local d
    d=$(python3 "$HERE/ckpt_diff.py" "$3" "$4" 2>&1)
    if le "$d" "$2"; then ok "$1 (max |diff| $d)"; else bad "$1" "max |diff| $d > $2"; fi
}

# ---- equivalences ----
"$DSGD" train "${C[@]}" --checkpoint "$WORK/none.st" > /dev/null
"${MPIRUN[@]}" -np 1 "$DSGD" train "${C[@]}" --sync bsp --checkpoint "$WORK/bsp1.st" > /dev/null
same_params "bsp on 1 rank equals --sync none bit for bit" 0 "$WORK/none.st" "$WORK/bsp1.st"

"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync bsp --checkpoint "$WORK/bsp2.st" > /dev/null
# --bucket-kb: a residual network's ~19 layer spans go as one all-reduce a
# step, and the sums are the same (two ranks: a + b in any order)
R=(--data synthetic:512,1x16x16 --model resnet:8,4 --batch 16 --steps 20 --eval-every 1000 --quiet --sync bsp)
"${MPIRUN[@]}" -np 2 "$DSGD" train "${R[@]}" --checkpoint "$WORK/rl.st" --metrics "$WORK/rl.jsonl" > /dev/null
"${MPIRUN[@]}" -np 2 "$DSGD" train "${R[@]}" --bucket-kb 1024 --checkpoint "$WORK/rb.st" --metrics "$WORK/rb.jsonl" > /dev/null
same_params "bsp --bucket-kb 1024 equals bsp per layer (2 ranks, resnet:8,4)" 0 "$WORK/rl.st" "$WORK/rb.st"
cl=$(tail -n 1 "$WORK/rl.jsonl" | grep -o '"collectives":[0-9]*' | cut -d: -f2)
cb=$(tail -n 1 "$WORK/rb.jsonl" | grep -o '"collectives":[0-9]*' | cut -d: -f2)
if [ -n "$cl" ] && [ -n "$cb" ] && [ "$cl" -ge 200 ] && [ "$cb" -le 30 ]; then
    ok "bsp --bucket-kb 1024: $cb collectives in 20 steps, against $cl per layer"
else bad "bsp --bucket-kb" "collectives: $cb bucketed, $cl per layer"; fi
# a bucket smaller than the network: several all-reduces a step, same sums
"${MPIRUN[@]}" -np 2 "$DSGD" train "${R[@]}" --bucket-kb 4 --checkpoint "$WORK/r4.st" --metrics "$WORK/r4.jsonl" > /dev/null
c4=$(tail -n 1 "$WORK/r4.jsonl" | grep -o '"collectives":[0-9]*' | cut -d: -f2)
if [ -n "$c4" ] && [ "$c4" -gt "$cb" ] && [ "$c4" -lt "$cl" ]; then
    same_params "bsp --bucket-kb 4 ($c4 collectives) equals bsp per layer" 0 "$WORK/rl.st" "$WORK/r4.st"
else bad "bsp --bucket-kb 4" "collectives: $c4 (1 MiB buckets $cb, per layer $cl)"; fi
# θ − η·mean(g) vs mean(θ − η·g): equal up to float rounding, a few ulps per
# step of O(1) weights: 1e-6 over 40 steps.
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync localsgd --period 1 --checkpoint "$WORK/ls1.st" > /dev/null
same_params "localsgd --period 1 equals bsp (2 ranks)" 1e-6 "$WORK/bsp2.st" "$WORK/ls1.st"
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync fedavg --period 1 --checkpoint "$WORK/fa1.st" > /dev/null
same_params "fedavg with every client and equal shards equals localsgd" 1e-6 "$WORK/ls1.st" "$WORK/fa1.st"
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync selsync --delta 0 --aggregation gradient \
    --checkpoint "$WORK/ssg.st" --metrics "$WORK/ssg.jsonl" > /dev/null
same_params "selsync --delta 0 --aggregation gradient equals bsp" 1e-6 "$WORK/bsp2.st" "$WORK/ssg.st"
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync selsync --delta 0 --metrics "$WORK/ssp.jsonl" > /dev/null
frac=$(json_field "$WORK/ssp.jsonl" done sync_fraction)
if [ "$frac" = "1" ]; then ok "selsync --delta 0 synchronizes every step"; else bad "selsync --delta 0" "sync_fraction $frac"; fi
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --steps 200 --sync selsync --metrics "$WORK/ss.jsonl" > /dev/null
frac=$(json_field "$WORK/ss.jsonl" done sync_fraction)
if awk -v f="$frac" 'BEGIN{exit !(f > 0 && f < 1)}'; then ok "selsync --delta 0.3 skips steps (sync_fraction $frac)"
else bad "selsync default delta" "sync_fraction $frac"; fi
sm=$(json_field "$WORK/ss.jsonl" done smoothed_change)
if awk -v f="$sm" 'BEGIN{exit !(f > 0 && f < 1)}'; then ok "selsync reports the smoothed change delta is compared with ($sm)"
else bad "selsync smoothed_change" "'$sm'"; fi
# local SGD really is local between averages: period 8 differs from bsp
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync localsgd --period 8 --checkpoint "$WORK/ls8.st" > /dev/null
d=$(python3 "$HERE/ckpt_diff.py" "$WORK/bsp2.st" "$WORK/ls8.st")
if awk -v d="$d" 'BEGIN{exit !(d > 1e-4)}'; then ok "localsgd --period 8 departs from bsp (max |diff| $d)"
else bad "localsgd --period 8" "identical to bsp ($d)"; fi
# An evaluation mid-round scores the workers' average (all-reduced into a
# buffer of its own), not the lead's own model: at step 5 of period 8 it
# scores exactly the model a run ending at step 5 delivers (its final
# average; the lead's own model read 0.374 there against the average's
# 0.402), and evaluating every step leaves the run bit for bit as it was.
for s in "localsgd 2" "fedavg 3 --fedavg-fraction 0.6 --data synthetic:1003"; do
    set -- $s
    name=$1 np=$2
    shift 2
    E=("${C[@]}" --sync "$name" --period 8 "$@")
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "${E[@]}" --steps 12 --eval-every 1 --metrics "$WORK/avg1.jsonl" --checkpoint "$WORK/avg1.st" > /dev/null
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "${E[@]}" --steps 12 --eval-every 1000 --checkpoint "$WORK/avg0.st" > /dev/null
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "${E[@]}" --steps 5 --metrics "$WORK/avg5.jsonl" > /dev/null
    mid=$(grep '"event":"eval"' "$WORK/avg1.jsonl" | grep '"step":5,' | grep -o '"test_acc":[^,]*,"test_loss":[^,]*')
    end=$(grep '"event":"eval"' "$WORK/avg5.jsonl" | tail -n 1 | grep -o '"test_acc":[^,]*,"test_loss":[^,]*')
    d=$(python3 "$HERE/ckpt_diff.py" "$WORK/avg1.st" "$WORK/avg0.st" 2>&1)
    if [ -n "$mid" ] && [ "$mid" = "$end" ] && [ "$d" = 0 ]; then
        ok "$name: an evaluation mid-round scores the average ($mid at step 5, as the run ending there), and leaves the run as it was"
    else bad "$name's evaluated model" "step 5: '$mid', a run ending there: '$end'; evaluating every step moved the parameters by $d"; fi
done

# ---- uneven shards: 1003 samples over 3 ranks, same steps everywhere ----
if "${MPIRUN[@]}" -np 3 "$DSGD" train --data synthetic:1003 --model mlp:16 --batch 16 --epochs 2 --sync bsp \
    --quiet --metrics "$WORK/uneven.jsonl" > "$WORK/uneven.out" 2>&1 &&
   [ "$(json_field "$WORK/uneven.jsonl" done steps)" = "40" ]; then ok "3 ranks on 1003 samples run 40 steps each"
else bad "uneven shards" "$(tail -3 "$WORK/uneven.out")"; fi

# ---- which all-reduce carries the gradients, and why ----
# Open MPI: libnbc's ring on 3 and 4 ranks, with large messages eager over
# TCP for a paradigm whose receives are posted (bsp) but not for a shard's
# (asp), which on 4 ranks gets Rabenseifner's instead (as every power of two
# from 16 does); 8 ranks of bsp get the eager ring, which beat Rabenseifner's
# on 8 namespaced hosts; a user's own settings stand; MPICH: its ring, eager
# over UCX for bsp (Open MPI's variables are not its own).
"${MPIRUN[@]}" -np 4 "$DSGD" train --data synthetic:512 --model mlp:16 --steps 2 --sync bsp --quiet \
    --metrics "$WORK/ar4.jsonl" > "$WORK/ar4.out" 2>&1
OMPI_MCA_coll_libnbc_iallreduce_algorithm=2 "${MPIRUN[@]}" -np 4 "$DSGD" train --data synthetic:512 --model mlp:16 \
    --steps 2 --sync bsp --quiet --metrics "$WORK/ar4u.jsonl" > "$WORK/ar4u.out" 2>&1
"${MPIRUN[@]}" -np 3 "$DSGD" train --data synthetic:512 --model mlp:16 --steps 2 --sync asp --servers 1 --quiet \
    --metrics "$WORK/ar3ps.jsonl" > "$WORK/ar3ps.out" 2>&1
"${MPIRUN[@]}" -np 4 "$DSGD" train --data synthetic:512 --model mlp:16 --steps 2 --sync asp --servers 1 --quiet \
    --metrics "$WORK/ar4ps.jsonl" > "$WORK/ar4ps.out" 2>&1
"${MPIRUN[@]}" -np 8 "$DSGD" train --data synthetic:512 --model mlp:16 --steps 2 --sync bsp --quiet \
    --metrics "$WORK/ar8.jsonl" > "$WORK/ar8.out" 2>&1
OMPI_MCA_btl_tcp_eager_limit=65536 "${MPIRUN[@]}" -np 3 "$DSGD" train --data synthetic:512 --model mlp:16 --steps 2 \
    --sync bsp --quiet --metrics "$WORK/ar3u.jsonl" > "$WORK/ar3u.out" 2>&1
a3=$(json_field "$WORK/uneven.jsonl" config allreduce) a4=$(json_field "$WORK/ar4.jsonl" config allreduce)
a4u=$(json_field "$WORK/ar4u.jsonl" config allreduce) a3ps=$(json_field "$WORK/ar3ps.jsonl" config allreduce)
a3u=$(json_field "$WORK/ar3u.jsonl" config allreduce) a4ps=$(json_field "$WORK/ar4ps.jsonl" config allreduce)
a8=$(json_field "$WORK/ar8.jsonl" config allreduce)
if [ "$MPI_IMPL" = mpich ]; then
    want3="MPICH ring (tsp_ring); eager over UCX to 1 MiB" want4=$want3 want4u=$want3 want3u=$want3 want8=$want3
    want3ps="MPICH ring (tsp_ring)" want4ps=$want3ps
else
    want3ps="Open MPI libnbc ring (a world of 3)" want3u=$want3ps want3="$want3ps; eager over TCP to 1 MiB"
    want4="Open MPI libnbc ring (a world of 4); eager over TCP to 1 MiB"
    want8="Open MPI libnbc ring (a world of 8); eager over TCP to 1 MiB"
    want4ps="Open MPI libnbc Rabenseifner's (a power-of-two world of 4)"
    want4u="Open MPI libnbc binomial tree (OMPI_MCA_coll_libnbc_iallreduce_algorithm=2)"
fi
if [ "$a3" = "$want3" ] && [ "$a4" = "$want4" ] && [ "$a4u" = "$want4u" ] && [ "$a3ps" = "$want3ps" ] &&
   [ "$a3u" = "$want3u" ] && [ "$a4ps" = "$want4ps" ] && [ "$a8" = "$want8" ]; then
    ok "the config event names the all-reduce: 3 ranks '$a3', asp on 3 '$a3ps', 4 '$a4', asp on 4 '$a4ps', 8 '$a8', a user's settings '$a4u', '$a3u'"
else bad "the all-reduce named" "3 ranks '$a3' (want '$want3'), asp on 3 '$a3ps' (want '$want3ps'), 4 '$a4' (want '$want4'), asp on 4 '$a4ps' (want '$want4ps'), user's '$a4u' (want '$want4u'), user's eager limit '$a3u' (want '$want3u'), 8 ranks '$a8' (want '$want8')"; fi

# ---- the multi-machine path: the TCP transport ----
# Under MPICH 4.0 over UCX's tcp a rank can stay in MPI_Finalize after the
# run has ended (an MPICH/UCX defect, rare since dsgd enters it with a
# barrier; scripts/mpi-env.sh): a run whose outputs are all in place is then
# stopped after 20 s (the run itself takes under a second; it hung in 1 of 3
# suites here, and in CI, costing the full wait) and checked like any other,
# with a note.
DSGD_HANG_LOG="$WORK/tcp.hung" DSGD_LAUNCH_LIMIT=$([ "$MPI_IMPL" = mpich ] && echo 20 || echo 300) \
    "${MPIRUN[@]}" "${MPI_TCP[@]}" -np 2 "$DSGD" train "${C[@]}" --sync bsp \
    --checkpoint "$WORK/tcp.st" --metrics "$WORK/tcp.jsonl" > "$WORK/tcp.out" 2>&1
rc=$?
if [ $rc -eq 124 ] && [ "$MPI_IMPL" = mpich ] && [ "$(json_field "$WORK/tcp.jsonl" done status 2>/dev/null)" = ok ]; then
    echo "note: bsp over TCP: the run ended, but a rank stayed in MPICH's MPI_Finalize (UCX tcp endpoint flush); stopped after 20 s"
    rc=0
fi
if [ $rc -eq 0 ]; then
    same_params "bsp over TCP equals bsp over shared memory" 0 "$WORK/bsp2.st" "$WORK/tcp.st"
else bad "bsp over TCP" "exit $rc: $(cat "$WORK/tcp.hung" 2>/dev/null) $(tail -3 "$WORK/tcp.out")"; fi

# ---- configuration mismatch across ranks is caught at start-up ----
"${MPIRUN[@]}" -np 1 "$DSGD" train "${C[@]}" --sync bsp --lr 0.05 : -np 1 "$DSGD" train "${C[@]}" --sync bsp --lr 0.2 \
    > "$WORK/mm.out" 2> "$WORK/mm.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c 'dsgd: error' "$WORK/mm.err")" = 1 ] && grep -q "rank(s) 1: --lr=0.2 here but --lr=0.05 on rank 0" "$WORK/mm.err"
then ok "mismatched --lr across ranks stops every rank naming rank 1 and --lr"
else bad "configuration mismatch" "rc $rc: $(cat "$WORK/mm.err")"; fi

# ---- the regime: the done event says how much a step computes against how
# much it communicates (or waits), for bsp, asp and gossip (whose one-sided
# reads are communication: a step reads a whole model, so on this small model
# it communicates about as long as it computes: 0.07-1.2 measured, where
# uncounted reads once gave 16 511) ----
for s in bsp asp gossip; do
    "${MPIRUN[@]}" -np 3 "$DSGD" train "${C[@]}" --sync $s --metrics "$WORK/reg.jsonl" > /dev/null 2>&1
    if msg=$(python3 - "$WORK/reg.jsonl" $s <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if '"done"' in l][-1]
c, m, n = d["compute_s"], d["train_comm_s"], d["steps"]
ok = c > 0 and 0 < m <= d["comm_s"] and abs(d["compute_s_per_step"] * n - c) <= 1e-6 * c and \
     abs(d["comm_s_per_step"] * n - m) <= 1e-6 * m and abs(d["compute_comm_ratio"] - c / m) <= 1e-6 * c / m
if sys.argv[2] == "gossip": ok = ok and c / m < 100
print(f"compute {c:.4f} s, communication {m:.4f} s over {n} steps: ratio {d['compute_comm_ratio']:.3g}")
sys.exit(0 if ok else 1)
PY
    ); then ok "$s: the done event states the regime ($msg)"; else bad "$s regime" "${msg:-no done event}"; fi
done

# ---- a dead peer: rank 2 exits at step 20; the others stop within the timeout ----
# mpirun --enable-recovery keeps the survivors up (and exits 0 itself), so each
# rank's own exit status is recorded.
start=$SECONDS
"${MPIRUN[@]}" "${MPI_RECOVER[@]}" -np 4 "${RECORD_RC[@]}" \
    "$DSGD" train "${C[@]}" --steps 100000 --sync bsp --fail 2@20 --timeout 4 > "$WORK/fail.out" 2> "$WORK/fail.err"
took=$((SECONDS - start))
rcs="$(cat "$WORK"/rc.0 "$WORK"/rc.1 "$WORK"/rc.2 "$WORK"/rc.3 2>/dev/null | tr '\n' ' ')"
if [ "$rcs" = "1 1 3 1 " ] && grep -q "rank 2 did not arrive at the gradient all-reduce" "$WORK/fail.err" && [ $took -le 15 ]; then
    ok "bsp with rank 2 dead: ranks 0,1,3 exit 1 in ${took}s, naming rank 2"
else bad "bsp with a dead rank" "exit codes [$rcs] after ${took}s: $(grep dsgd "$WORK/fail.err" | head -3)"; fi

# --compute none (network calibration, experiments/net_calibration.sh): the
# same messages as a computing run, no forward or backward, the model
# untouched (its test loss that of a run whose rate, 1e-30, moves no
# parameter by a float's last bit)
CN=(--data synthetic --model mlp:256 --batch 256 --lr 0.1 --steps 40 --eval-every 40 --quiet)
cn_bad=""
for s in bsp asp; do
    ex=(); [ $s = asp ] && ex=(--servers 1)
    launch 3 "${CN[@]}" --sync $s "${ex[@]}" --metrics "$WORK/cf-$s.jsonl" > /dev/null 2>&1
    launch 3 "${CN[@]}" --sync $s "${ex[@]}" --compute none --metrics "$WORK/cn-$s.jsonl" > /dev/null 2>&1
    launch 3 "${CN[@]}" --sync $s "${ex[@]}" --lr 1e-30 --metrics "$WORK/c0-$s.jsonl" > /dev/null 2>&1
    for f in bytes_sent msgs_sent; do
        a=$(json_field "$WORK/cf-$s.jsonl" done $f) b=$(json_field "$WORK/cn-$s.jsonl" done $f)
        [ -n "$a" ] && [ "$a" = "$b" ] || cn_bad+="$s: $f $a computing, $b not; "
    done
    a=$(json_field "$WORK/c0-$s.jsonl" done test_loss) b=$(json_field "$WORK/cn-$s.jsonl" done test_loss)
    c=$(json_field "$WORK/cf-$s.jsonl" done test_loss)
    { [ -n "$a" ] && [ "$a" = "$b" ] && [ "$c" != "$b" ]; } || cn_bad+="$s: test loss $b, untrained $a, trained $c; "
    # a step's seconds outside its communication: at most a quarter of the
    # computing run's. Seconds, not shares of the step: a share depends on
    # how fast the communication went in each run, and faster kernels move
    # the computing run's share towards the other's. The batch, 256 x 256
    # units, makes the products the bulk of the computing step (measured:
    # 0.2-0.3 ms against 6-9 us, 6-9 ms against 30 us under the sanitizers).
    # Three ranks share two cores: a rank descheduled inside a step adds
    # the other's time slice to that step's own seconds (3 ms against 0.4
    # seen once, under another load), so the run without computing gets
    # two more tries before this counts against it.
    c=$(json_field "$WORK/cf-$s.jsonl" done compute_s_per_step)
    for try in 1 2 3; do
        a=$(json_field "$WORK/cn-$s.jsonl" done compute_s_per_step)
        { [ -n "$c" ] && le "$a" "$(awk -v c="$c" 'BEGIN { print c / 4 }')"; } && break
        [ $try = 3 ] && cn_bad+="$s: $a s per step outside communication, computing $c (3 tries); " && break
        launch 3 "${CN[@]}" --sync $s "${ex[@]}" --compute none --metrics "$WORK/cn-$s.jsonl" > /dev/null 2>&1
    done
done
if [ -z "$cn_bad" ]; then ok "--compute none: bsp and asp on 3 ranks send the computing run's bytes and messages, and leave the model as it was"
else bad "--compute none" "$cn_bad"; fi
refused "--compute none with --model-parallel is refused" "--compute none skips" "$DSGD" train --data synthetic --model mlp:64 --compute none --model-parallel 2
refused "--compute none with sandblaster is refused" "computes its own passes" "${MPIRUN[@]}" -np 3 "$DSGD" train --data synthetic --model logreg --sync sandblaster --servers 1 --steps 3 --compute none

summary mpi
