#!/usr/bin/env bash
# Real hosts on one machine (scripts/dsgd-cluster): 4 network namespaces on a
# bridge, links shaped to 1 Gbit/s, ranks launched through the MPI's own
# remote launcher, TCP between hosts. The paradigms train (bsp with 2
# compute threads a rank to the same bits as with 1); a host killed or
# cut off mid-run gets each paradigm's documented outcome within --timeout
# plus a margin; a lost shard leaves a checkpoint that resumes; `down`
# leaves nothing behind. Skips (with dsgd-cluster's one line) where network
# namespaces cannot be created.
# Usage: tests/cluster.sh BUILD_DIR   (prints "cluster: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin cluster "$@"
DSGD=$(cd "$BUILD" && pwd)/dsgd
CL="$HERE/../scripts/dsgd-cluster"
CN=dt$$
export DSGD_CLUSTER_NAME=$CN
# whatever happens, the clusters and their processes go (the second one,
# ${CN}p, is the paths part's; the third, ${CN}f, the fault cases')
trap '"$CL" down > /dev/null 2>&1; "$CL" down --name "${CN}p" > /dev/null 2>&1; "$CL" down --name "${CN}f" > /dev/null 2>&1; rm -rf "$WORK"' EXIT
if ! why=$("$CL" check 2>&1); then
    echo "skip cluster: $why"
    summary cluster
    exit
fi
if [ "${SANITIZE:-0}" = 1 ]; then
    # The suite tests launch paths, TCP between hosts and network faults;
    # the code the ranks run is the same as in the other suites, which the
    # sanitizers cover. Under them every rank is 2-3x slower and the
    # timings this suite bounds mean something else.
    echo "skip cluster: under SANITIZE=1 (the other suites run the same ranks' code with the sanitizers)"
    summary cluster
    exit
fi
# the margin within which a fault's outcome must follow --timeout (start-up
# of the roll call, the launcher's output, and a loaded 2-core machine)
MARGIN=20
T=4        # --timeout of the fault runs
# the time limit of the fault runs that end on the survivors (asp, gossip):
# short, since a run ends only once its fault is dealt with (the shard waits
# for the dead worker's eviction, the peers for its --timeout), so the
# outcome does not race the limit; measured with limits down to 4 s
FTL=8
S=(train --data synthetic --model mlp:32 --batch 32 --lr 0.05 --quiet)

# run TAG [dsgd-cluster mpirun options] -- ARGS: one launch in the background
# (RUN_PID), bounded to 150 s; output in $WORK/TAG.{out,err}, exit statuses
# of the ranks in $WORK/TAG.rc/rc.RANK
run() {
    local tag=$1
    shift
    mkdir -p "$WORK/$tag.rc"
    DSGD_LAUNCH_LIMIT=150 "$HERE/bounded" "$CL" mpirun --mpi "$MPI_IMPL" --dsgd "$DSGD" --rc-dir "$WORK/$tag.rc" --grace 10 \
        "$@" > "$WORK/$tag.out" 2> "$WORK/$tag.err" &
    RUN_PID=$!
}
# rcs TAG NP: the ranks' exit statuses, x for none. Under MPICH over UCX's
# tcp a rank can stay in MPI_Finalize after the run (README, "Multiple
# machines"); dsgd-cluster then stops it --grace s after the run ended well
# and says so, and such a rank counts as 0.
rcs() {
    local fin=x
    grep -q "after the run ended well" "$WORK/$1.err" 2>/dev/null && fin=0
    for i in $(seq 0 $(($2 - 1))); do cat "$WORK/$1.rc/rc.$i" 2>/dev/null || echo $fin; done | tr '\n' ' '
}
# wait_eval FILE: until FILE.part (or FILE) has an eval record (at most 60 s)
wait_eval() {
    local t0=$SECONDS
    until grep -qs '"eval"' "$1.part" "$1"; do
        [ $((SECONDS - t0)) -ge 60 ] && return 1
        sleep 0.2
    done
}
# secs_until CMD...: seconds (0.1 s resolution) until CMD succeeds, at most 120 s; "never" otherwise
secs_until() {
    local t0 now
    t0=$(date +%s.%N)
    while ! "$@" 2>/dev/null; do
        awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{exit !(b - a > 120)}' && { echo never; return; }
        kill -0 "$RUN_PID" 2>/dev/null || { echo ended; return; }
        sleep 0.1
    done
    now=$(date +%s.%N)
    awk -v a="$t0" -v b="$now" 'BEGIN{printf "%.1f\n", b - a}'
}
# within SECS LIMIT: a measured time ("never" and "ended" are not) within the limit
within() { le "$1" "$2"; }
# hydra_lost TAG ACTION: under MPICH, a killed host takes its Hydra proxy
# with it, and mpiexec ends the whole job (-disable-auto-cleanup keeps the
# other ranks of a dead rank running, not those of a dead proxy): no rank
# gets to act. Today's expected outcome there, reported as XFAIL. A rank
# may die of a signal on the way (once in CI: exit 139, SIGSEGV, beside
# mpiexec's "assert (!closed) failed"), which is still no rank acting.
hydra_lost() {
    local f v codes=""
    [ "$MPI_IMPL" = mpich ] && [ "$2" = kill ] || return 1
    for f in "$WORK/$1.rc"/rc.*; do
        [ -e "$f" ] || continue
        v=$(cat "$f")
        [ "$v" -ge 128 ] 2>/dev/null || return 1   # a rank that exited on its own acted
        codes="$codes $v"
    done
    echo "XFAIL $1: MPICH's mpiexec ended the whole job when host ${3:-2}'s proxy died (no rank reported$([ -n "$codes" ] && echo ", but ranks killed by signals:$codes"); $(grep -c . "$WORK/$1.err") stderr lines)"
}
have_rcs() { local f; for f in "$@"; do [ -e "$f" ] || return 1; done; }

# --- the cluster -----------------------------------------------------------
before=$(ip -o link show | awk -F': ' '{print $2}' | sort | tr '\n' ' ')
refused "up 0 is refused" "host count" "$CL" up 0
"$CL" up 4 --bandwidth 1gbit > "$WORK/up.out" 2>&1
hf=$(sed -nE 's/.*hostfiles ([^ ]+) .*/\1/p' "$WORK/up.out")
if [ "$(grep -c slots "$hf" 2>/dev/null)" = 4 ] && "$CL" status | grep -q "^3 .*10.213.0.4 .*up .*1Gbit"; then
    ok "up 4: four hosts at 1 Gbit/s and a hostfile ($hf)"
else bad "up 4" "$(cat "$WORK/up.out"; "$CL" status 2>&1)"; fi
routes=$("$CL" exec 0 ip route 2>&1)
if [ "$routes" = "10.213.0.0/24 dev eth0 proto kernel scope link src 10.213.0.1 " ] ||
   [ "$routes" = "10.213.0.0/24 dev eth0 proto kernel scope link src 10.213.0.1" ]; then
    ok "a host routes only to the cluster's subnet"
else bad "host routes" "$routes"; fi
# A shaped link carries a message at its rate, not in a burst at the veth's
# speed: at 100 Mbit/s a 51 KB message (Downpour's push) takes at least 0.9
# of its payload's time at 1448 of 1514 bytes a frame (4.28 ms; measured
# 4.09). The simulator is checked against these links (docs/simulation.md,
# "The links themselves"); with a 16 KB token bucket it took 3.0 ms, 0.70.
PSB=$(dirname "$DSGD")/bench/ps_bench
if "$CL" slow 0 100mbit > /dev/null && "$CL" slow 1 100mbit > /dev/null &&
   lat=$("$HERE/bounded" "$CL" mpirun --mpi "$MPI_IMPL" --dsgd "$PSB" --hosts 2 --grace 10 -- latency 30 51200 2> "$WORK/lat.err"); then
    ow=$(sed -n 's/.*one_way_us=\([0-9.]*\).*/\1/p' <<< "$lat")
    if awk -v t="$ow" 'BEGIN { exit !(t != "" && t >= 0.9 * 51200 / (100e6 / 8 * 1448 / 1514) * 1e6) }'; then
        ok "a 51 KB message at 100 Mbit/s takes its rate's time, not a burst ($ow us one way)"
    else bad "a 51 KB message at 100 Mbit/s" "$ow us one way, under 0.9 of 4282 us: the token bucket lets it through in a burst"; fi
else bad "the 100 Mbit/s latency probe" "$(tail -3 "$WORK/lat.err")"; fi
"$CL" slow 0 1gbit > /dev/null; "$CL" slow 1 1gbit > /dev/null
refused "kill of a host that does not exist is refused" "has no host 7" "$CL" kill 7
refused "a second up of the same cluster is refused" "already up" "$CL" up 2

# --- paths -------------------------------------------------------------------
# A checkout, a state folder (DSGD_CLUSTER_STATE) and an --rc-dir whose
# names hold spaces, quotes, $( ) and backquotes: the launch works under
# both MPIs and runs nothing of them (the ranks' shells once ran the
# --rc-dir's $( ) on every rank; a space in the checkout's path stopped Open
# MPI's mpirun at once, status 243, and hung MPICH's mpiexec). A second
# cluster of 2 hosts, so that its state folder is the odd one.
odd="o d'd \"q\" \$(touch CANARY_1) \`touch CANARY_2\`; touch CANARY_3"
mkdir -p "$WORK/cwd" "$WORK/$odd checkout/scripts"
cp "$HERE/../scripts/dsgd-cluster" "$HERE/../scripts/dsgd-cluster-agent" "$WORK/$odd checkout/scripts/"
OCL="$WORK/$odd checkout/scripts/dsgd-cluster"
(
    cd "$WORK/cwd" || exit 1
    export DSGD_CLUSTER_STATE="$WORK/$odd state"
    "$OCL" up 2 --name "${CN}p" > "$WORK/paths.up" 2>&1 &&
    DSGD_LAUNCH_LIMIT=60 "$HERE/bounded" "$OCL" mpirun --name "${CN}p" --mpi "$MPI_IMPL" --dsgd "$DSGD" \
        --rc-dir "$WORK/$odd rc" --grace 10 -- "${S[@]}" --sync bsp --steps 50 --metrics "$WORK/paths.jsonl" \
        > "$WORK/paths.out" 2> "$WORK/paths.err"
    "$OCL" down --name "${CN}p" > /dev/null 2>&1
)
# (a rank MPICH leaves in MPI_Finalize after the run ended well counts as 0, as in rcs)
fin=x; grep -q "after the run ended well" "$WORK/paths.err" 2>/dev/null && fin=0
r=$(for i in 0 1; do cat "$WORK/$odd rc/rc.$i" 2>/dev/null || echo $fin; done | tr '\n' ' ')
canaries=$(find "$WORK" -name 'CANARY*' | wc -l)
if [ "$r" = "0 0 " ] && [ "$canaries" = 0 ] && [ "$(json_field "$WORK/paths.jsonl" done status 2>/dev/null)" = ok ] &&
   [ -e "$WORK/$odd state" ] && ! [ -e "$WORK/$odd state/${CN}p" ]; then
    ok "a launch from a checkout, state folder and --rc-dir named with spaces, quotes, \$( ) and backquotes trains and runs none of them"
else bad "odd paths" "exit codes [$r], $canaries canary files: $(cat "$WORK/paths.up" "$WORK/paths.err" 2>/dev/null | head -c 600)"; fi

# --grace: a copy of sh stands for dsgd (dsgd-cluster counts the ranks by
# their binary), rank 1 working on after rank 0 exited 0. When rank 0 has
# printed the lead's "done:" line, the rest is stopped --grace s later with
# one line naming the MPI in use; when it has not (a shard cut off from its
# workers exits 0 while they still work), nothing is stopped (the line once
# named MPICH under Open MPI and stopped the job either way).
cp "$(command -v sh)" "$WORK/fake-dsgd"
mpi_name="Open MPI"; [ "$MPI_IMPL" = mpich ] && mpi_name=MPICH
grace() {   # TAG RANK0_SCRIPT RANK1_SECONDS: a 2-host launch with --grace 2
    mkdir -p "$WORK/$1.rc"
    DSGD_LAUNCH_LIMIT=60 "$HERE/bounded" "$CL" mpirun --mpi "$MPI_IMPL" --dsgd "$WORK/fake-dsgd" --hosts 2 --rc-dir "$WORK/$1.rc" \
        --grace 2 -- -c 'if [ "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" = 0 ]; then '"$2"'; else sleep '"$3"'; fi' > /dev/null 2> "$WORK/$1.err"
}
grace grace_done 'echo "done: test accuracy 1"; exit 0' 30
rc=$?
if [ $rc = 0 ] && [ "$(grep -c . "$WORK/grace_done.err")" = 1 ] &&
   grep -q "^dsgd-cluster: under $mpi_name, ranks 1 still running 2 s (--grace) after the run ended well (the lead printed its result" "$WORK/grace_done.err"; then
    ok "--grace after the lead's result: the rest stopped with one line naming $mpi_name"
else bad "--grace after the lead's result" "status $rc: $(head -c 400 "$WORK/grace_done.err")"; fi
grace grace_zero 'exit 0' 6
rc=$?
if [ $rc = 0 ] && [ "$(cat "$WORK/grace_zero.rc/rc.1" 2>/dev/null)" = 0 ] && ! grep -q "still running" "$WORK/grace_zero.err"; then
    ok "--grace: a rank's exit 0 without the lead's result stops nothing (rank 1 ran its 6 s)"
else bad "--grace after a rank's exit 0 alone" "status $rc, rank 1's status '$(cat "$WORK/grace_zero.rc/rc.1" 2>/dev/null)': $(head -c 400 "$WORK/grace_zero.err")"; fi

# Each host has its share of the machine's cores, as machines have their
# own: with n hosts on c cores, host i runs on cores i*c/n ... when n <= c;
# when n > c every host runs on every core with one compute thread a rank
# (OMP_NUM_THREADS=1). (Open MPI's daemons once bound every host's first
# rank to core 0, so that all the cluster's ranks computed on one core, and
# each rank took every core it saw as its threads.) The 2-host launch above
# is the n <= c case on a machine of 2 cores or more.
mkdir -p "$WORK/cpus.rc"
DSGD_LAUNCH_LIMIT=60 "$HERE/bounded" "$CL" mpirun --mpi "$MPI_IMPL" --dsgd "$WORK/fake-dsgd" --rc-dir "$WORK/cpus.rc" \
    -- -c 'echo "$(awk "/^Cpus_allowed_list:/ {print \$2}" /proc/self/status) ${OMP_NUM_THREADS:-unset}" > "$0/cpus.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"' "$WORK" \
    > /dev/null 2> "$WORK/cpus.err"
all=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
want=$(python3 -c 'import sys
c = sys.argv[1].split(); n = 4
for i in range(n):
    print(",".join(c[i * (len(c) // n):(i + 1) * (len(c) // n)]) + " unset" if n <= len(c) else ",".join(c) + " 1")' "$all")
got=$(for i in 0 1 2 3; do python3 -c 'import sys
m, t = open(sys.argv[1]).read().split()
out = []
for p in m.split(","):
    a, _, b = p.partition("-")
    out += [str(k) for k in range(int(a), int(b or a) + 1)]
print(",".join(out), t)' "$WORK/cpus.$i" 2>/dev/null || echo none; done)
if [ "$got" = "$want" ]; then
    ok "4 hosts on $(echo $all | wc -w) cores: each host's cores and threads are its share ($(echo "$got" | tr '\n' '/'))"
else bad "the hosts' cores" "hosts 0-3 (cores, OMP_NUM_THREADS): [$(echo $got)], not [$(echo $want)] (the launcher's cores: $all): $(head -c 300 "$WORK/cpus.err")"; fi
c=$(echo $all | wc -w)
if [ "$c" -ge 2 ]; then
    tf=$(json_field "$WORK/paths.jsonl" config threads_from 2>/dev/null)
    if [ "$tf" = "auto: $((c / 2)) core$([ $((c / 2)) = 1 ] || echo s) for 1 rank on this host" ]; then
        ok "2 hosts on $c cores: a rank's host has $((c / 2)) of them ($tf)"
    else bad "the cores of 2 hosts" "threads_from '$tf', not $((c / 2)) cores for 1 rank"; fi
fi

# --- training, one rank per host -------------------------------------------
# bsp: the all-reduce crosses the links; each host's link carries at least
# the ring's 2(N-1)/N x 4 bytes x parameters per step (half of it, for slack)
tx0=$("$CL" exec 1 cat /sys/class/net/eth0/statistics/tx_bytes)
run bsp -- "${S[@]}" --sync bsp --steps 300 --metrics "$WORK/bsp.jsonl"
wait $RUN_PID
acc=$(json_field "$WORK/bsp.jsonl" done test_acc 2>/dev/null)
np=$(json_field "$WORK/bsp.jsonl" config nparams 2>/dev/null)
tx=$(( $("$CL" exec 1 cat /sys/class/net/eth0/statistics/tx_bytes) - tx0 ))
need=$(awk -v p="$np" 'BEGIN{printf "%d", 0.5 * 1.5 * 4 * p * 300}')
if ge "$acc" 0.9 && [ "$tx" -ge "$need" ] && [ "$(rcs bsp 4)" = "0 0 0 0 " ]; then
    ok "bsp on 4 hosts trains (test_acc $acc); host 1 sent $tx bytes over its link (>= $need)"
else bad "bsp on 4 hosts" "acc $acc, host 1 sent $tx bytes (need $need), exit codes [$(rcs bsp 4)]: $(tail -2 "$WORK/bsp.err")"; fi

for s in "asp --servers 1" "easgd --servers 1 --tau 4" "gossip --gossip pull"; do
    tag=${s%% *}
    run "$tag" -- "${S[@]}" --sync $s --steps 400 --metrics "$WORK/$tag.jsonl"
    wait $RUN_PID
    acc=$(json_field "$WORK/$tag.jsonl" done test_acc 2>/dev/null)
    if ge "$acc" 0.9 && [ "$(rcs "$tag" 4)" = "0 0 0 0 " ]; then ok "--sync $s on 4 hosts trains (test_acc $acc)"
    else bad "--sync $s on 4 hosts" "acc $acc, exit codes [$(rcs "$tag" 4)]: $(grep -h dsgd "$WORK/$tag.err" | head -3)"; fi
done

# two ranks per host: between hosts the link, within a host shared memory,
# so the host's loopback (where TCP between its own ranks would go) stays quiet
lo0=$("$CL" exec 0 cat /sys/class/net/lo/statistics/tx_bytes)
eth0=$("$CL" exec 0 cat /sys/class/net/eth0/statistics/tx_bytes)
run pair --hosts 2 --per-host 2 -- "${S[@]}" --sync bsp --model mlp:256 --steps 200 --metrics "$WORK/pair.jsonl"
wait $RUN_PID
lo=$(( $("$CL" exec 0 cat /sys/class/net/lo/statistics/tx_bytes) - lo0 ))
eth=$(( $("$CL" exec 0 cat /sys/class/net/eth0/statistics/tx_bytes) - eth0 ))
np=$(json_field "$WORK/pair.jsonl" config nparams 2>/dev/null)
step=$(awk -v p="$np" 'BEGIN{printf "%d", 4 * p}')
acc=$(json_field "$WORK/pair.jsonl" done test_acc 2>/dev/null)
if ge "$acc" 0.9 && [ "$eth" -ge $((step * 100)) ] && [ "$lo" -lt $((step * 10)) ] && [ "$(rcs pair 4)" = "0 0 0 0 " ]; then
    ok "2 ranks on each of 2 hosts: $eth bytes over the link, $lo over loopback (shared memory within the host; a step's gradient is $step bytes)"
elif [ "$MPI_IMPL" = mpich ] && ge "$acc" 0.9 && [ "$lo" -ge $((step * 10)) ]; then
    # Expected under MPICH over UCX: UCX's shared memory reaches every
    # process of the machine, across namespaces, so dsgd-cluster allows
    # UCX only tcp (UCX_TLS=tcp,self); two ranks of one host then talk TCP
    # over its loopback. Missing: a way to give UCX one machine per host.
    echo "XFAIL 2 ranks per host under MPICH: $lo bytes over loopback (UCX's tcp within the host), $eth over the link"
else bad "2 ranks per host" "acc $acc, link $eth bytes, loopback $lo bytes (gradient $step), exit codes [$(rcs pair 4)]: $(tail -2 "$WORK/pair.err")"; fi

# one rank per host with 2 compute threads (--threads 2): the same bits as
# one thread each, so the same model as 2 single-thread ranks
for t in 1 2; do
    run "thr$t" --hosts 2 -- "${S[@]}" --sync bsp --model mlp:256 --steps 60 --threads $t \
        --metrics "$WORK/thr$t.jsonl" --checkpoint "$WORK/thr$t.st"
    wait $RUN_PID
done
tt=$(json_field "$WORK/thr2.jsonl" config threads 2>/dev/null)
if [ -s "$WORK/thr1.st" ] && cmp -s "$WORK/thr1.st" "$WORK/thr2.st" && [ "$tt" = 2 ] && [ "$(rcs thr2 2)" = "0 0 " ]; then
    ok "bsp on 2 hosts with 2 threads a rank ends with the checkpoint of 1 thread a rank, byte for byte"
else bad "bsp on 2 hosts with 2 threads a rank" "threads $tt, exit codes [$(rcs thr2 2)], checkpoints differ by $(python3 "$HERE/ckpt_diff.py" "$WORK/thr1.st" "$WORK/thr2.st" 2>&1): $(tail -2 "$WORK/thr2.err")"; fi

# --- faults ------------------------------------------------------------------
# fault TAG ACTION HOST ARGS...: start a long run, wait for its first
# evaluation, then `dsgd-cluster ACTION HOST`
fault() {
    local tag=$1 action=$2 host=$3
    shift 3
    run "$tag" "${MPI_RECOVER[@]}" -- "${S[@]}" --timeout $T --eval-every 100 --metrics "$WORK/$tag.jsonl" "$@"
    if ! wait_eval "$WORK/$tag.jsonl"; then echo "no evaluation within 60 s: $(tail -3 "$WORK/$tag.err")" >&2; fi
    # and, when asked, until a file (a checkpoint) exists
    [ -z "${WAIT_FILE:-}" ] || secs_until test -e "$WAIT_FILE" > /dev/null
    "$CL" "$action" "$host" > /dev/null
}

# bsp: a worker's host killed, or its cable cut: the survivors name rank 2
# and exit 1 within --timeout + margin
bsp_faults() {
for action in kill cut; do
    fault "bsp_$action" "$action" 2 --sync bsp --steps 100000000 --time-limit 60
    s=$(secs_until have_rcs "$WORK/bsp_$action.rc/rc.0" "$WORK/bsp_$action.rc/rc.1" "$WORK/bsp_$action.rc/rc.3")
    [ "$action" = cut ] && "$CL" heal 2 > /dev/null
    wait $RUN_PID
    r=$(rcs "bsp_$action" 4)
    stopped=0   # the survivors exited 1 within the bound
    within "$s" $((T + MARGIN)) && [[ "$r" =~ ^1\ 1\ [^\ ]+\ 1\ $ ]] && stopped=1
    if [ "$stopped" = 1 ] && grep -q "rank.* 2\b.*\|2.*did not" "$WORK/bsp_$action.err"; then
        ok "bsp, $action host 2: the survivors stop in ${s} s (--timeout $T), naming rank 2 (exit codes $r)"
    elif hydra_lost "bsp_$action" "$action"; then :
    elif [ "$MPI_IMPL" = mpich ] && [ "$stopped" = 1 ] && ! grep -q "dsgd" "$WORK/bsp_$action.err"; then
        # every rank stopped itself in time (the exit codes are the ranks'
        # own, recorded beside them), but no line of theirs reached the
        # launch's stderr: seen once under MPICH (7.0 s, exit codes
        # 1 1 1 1), whose mpiexec tears the job down at the first exit 1,
        # and not in the reruns; the stderr's last lines are printed
        echo "XFAIL bsp_$action: the ranks stopped in ${s} s (exit codes $r), but MPICH's mpiexec forwarded none of their lines: $(tail -2 "$WORK/bsp_$action.err" | tr '\n' ' ')"
    else bad "bsp, $action host 2" "after $s s, exit codes [$r]: $( (grep -h "dsgd" "$WORK/bsp_$action.err" || tail -4 "$WORK/bsp_$action.err") | head -4)"; fi
    echo "fault-time $MPI_IMPL bsp $action ${s}s"
done
}

# parameter server (shard 0 alone on host 0, workers on hosts 1-3): the host
# of worker 1 (rank 2) killed or cut: evicted within --timeout + margin, the
# run finishes on the others
asp_faults() {
for action in kill cut; do
    fault "asp_$action" "$action" 2 --sync asp --servers 1 --steps 100000000 --time-limit $FTL
    s=$(secs_until grep -q "evicting worker 1 (rank 2)" "$WORK/asp_$action.err")
    wait $RUN_PID
    r=$(rcs "asp_$action" 4)
    st=$(json_field "$WORK/asp_$action.jsonl" done status 2>/dev/null)
    ev=$(json_field "$WORK/asp_$action.jsonl" done evictions 2>/dev/null)
    acc=$(json_field "$WORK/asp_$action.jsonl" done test_acc 2>/dev/null)
    if within "$s" $((T + MARGIN)) && [ "$st" = ok ] && [ "$ev" = 1 ] && ge "$acc" 0.9 && [[ "$r" =~ ^0\ 0\ [^\ ]+\ 0\ $ ]]; then
        ok "asp, $action host 2: worker 1 evicted after ${s} s (--timeout $T), the run finishes (exit codes $r, test_acc $acc)"
    elif hydra_lost "asp_$action" "$action"; then :
    else bad "asp, $action host 2" "eviction after $s s, status $st, evictions $ev, acc $acc, exit codes [$r]: $(grep -h dsgd "$WORK/asp_$action.err" | head -3)"; fi
    echo "fault-time $MPI_IMPL asp $action ${s}s"
    [ "$action" = cut ] && "$CL" heal 2 > /dev/null
done
}

# gossip (pull): a peer's host killed or cut: the others finish without it.
# A cut host's rank finds the other three silent, as if they had died: it is
# in a minority and stops (exit 1) instead of taking the lead's part over
# and writing the lead's metrics file beside the real lead.
gossip_faults() {
for action in kill cut; do
    fault "gos_$action" "$action" 2 --sync gossip --gossip pull --steps 100000000 --time-limit $FTL
    s=$(secs_until grep -q "dead\|evicting\|dropp" "$WORK/gos_$action.err")
    wait $RUN_PID
    r=$(rcs "gos_$action" 4)
    st=$(json_field "$WORK/gos_$action.jsonl" done status 2>/dev/null)
    acc=$(json_field "$WORK/gos_$action.jsonl" done test_acc 2>/dev/null)
    want='^0 0 [^ ]+ 0 $'; [ "$action" = cut ] && want='^0 0 1 0 $'
    if within "$s" $((T + MARGIN)) && [ "$st" = ok ] && ge "$acc" 0.9 && [[ "$r" =~ $want ]]; then
        ok "gossip, $action host 2: peer 2 dropped after ${s} s (--timeout $T), the others finish (exit codes $r, test_acc $acc)"
    elif hydra_lost "gos_$action" "$action"; then :
    else bad "gossip, $action host 2" "dropped after $s s, status $st, acc $acc, exit codes [$r]: $(grep -h dsgd "$WORK/gos_$action.err" | head -3)"; fi
    echo "fault-time $MPI_IMPL gossip $action ${s}s"
    [ "$action" = cut ] && "$CL" heal 2 > /dev/null
done
}

# heal after eviction: worker 1's cable is cut until the shard evicts it,
# then plugged back. Documented outcome (docs/paradigms.md, "Eviction is a
# message"): the returning worker reads its eviction at its next exchange,
# prints one line and stops training; the job ends as any other (every rank
# exits 0, status ok) and the global model goes on smoothly (no evaluation
# after the return worse than 1.5 x the last one before).
# (twice the limit: training goes on after the return)
heal_case() {
fault asp_heal cut 2 --sync asp --servers 1 --steps 100000000 --time-limit $((2 * FTL))
s=$(secs_until grep -q "evicting worker 1 (rank 2)" "$WORK/asp_heal.err")
healed=$(python3 -c 'import json,sys; e=[json.loads(l) for l in open(sys.argv[1]) if "\"eval\"" in l]; print(e[-1]["time"] if e else 0)' "$WORK/asp_heal.jsonl.part" 2>/dev/null)
"$CL" heal 2 > /dev/null
wait $RUN_PID
r=$(rcs asp_heal 4)
jump=$(python3 -c 'import json,sys
e=[json.loads(l) for l in open(sys.argv[1]) if "\"eval\"" in l]
t=float(sys.argv[2]); b=[x["test_loss"] for x in e if x["time"] <= t]; a=[x["test_loss"] for x in e if x["time"] > t]
print("%.3g" % (max(a) / b[-1]) if a and b else "none")' "$WORK/asp_heal.jsonl" "$healed" 2>/dev/null)
told=$(grep -c "worker 1 (rank 2): evicted by the servers" "$WORK/asp_heal.err")
st=$(json_field "$WORK/asp_heal.jsonl" done status 2>/dev/null)
if [ "$r" = "0 0 0 0 " ] && [ "$told" = 1 ] && [ "$st" = ok ] && [ "$jump" != none ] && within "$s" $((T + MARGIN)) && ge 1.5 "$jump"; then
    ok "asp, host 2 cut until evicted (${s} s), then healed: the worker is told, says so in one line and stops; every rank exits 0, status ok, test loss after/before ratio $jump"
else
    bad "asp heal after eviction" "exit codes [$r], status '$st', eviction lines $told, eviction after $s s, loss ratio $jump: $(grep -h "rank 2\|worker 1" "$WORK/asp_heal.err" | head -3)"
fi
echo "fault-time $MPI_IMPL asp heal-after-eviction ${s}s exit [$r]"
}

# the shard's host killed: every worker stops with one line naming the
# shard, and the last checkpoint (written by the shard) resumes
shard_case() {
WAIT_FILE="$WORK/ck.st" fault shard kill 0 --sync asp --servers 1 --steps 100000000 --time-limit 40 --checkpoint "$WORK/ck.st" --checkpoint-every 100
s=$(secs_until have_rcs "$WORK/shard.rc/rc.1" "$WORK/shard.rc/rc.2" "$WORK/shard.rc/rc.3")
wait $RUN_PID
r=$(rcs shard 4)
named=$(grep -c "shard 0 (rank 0)\|server shard" "$WORK/shard.err")
# a worker gives a shard 2 x --timeout + 10 s, and a worker other than the
# lead --timeout + 5 s more (src/ps/client.c), so: 3 x --timeout + 15 s
if within "$s" $((3 * T + 15 + MARGIN)) && [[ "$r" =~ ^[^\ ]+\ 1\ 1\ 1\ $ ]] && [ "$named" -ge 3 ]; then
    ok "asp, kill the shard's host: the 3 workers stop in ${s} s, each with a line naming the shard (exit codes $r)"
elif hydra_lost shard kill 0; then :
else bad "asp, kill the shard's host" "after $s s, exit codes [$r], $named lines name the shard: $(grep -h dsgd "$WORK/shard.err" | head -3)"; fi
echo "fault-time $MPI_IMPL asp kill-shard ${s}s"
ck=$(python3 -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; print(json.loads(f.read(n))["__metadata__"]["step"])' "$WORK/ck.st" 2>/dev/null)
run resume -- "${S[@]}" --sync asp --servers 1 --steps $((${ck:-0} + 200)) --eval-every 100 --resume "$WORK/ck.st" --metrics "$WORK/resume.jsonl"
wait $RUN_PID
first=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"eval\"" in l][0]["step"])' "$WORK/resume.jsonl" 2>/dev/null)
acc=$(json_field "$WORK/resume.jsonl" done test_acc 2>/dev/null)
# the run starts from the checkpoint, not afresh: the lead says so, with a
# step above 0. The first evaluation is not the sign: the checkpoint's step
# counts every worker's updates, so at step 100 the workers' clocks are
# about 33, and it comes at 100 as in a fresh run (CI failed on that once).
from=$(sed -nE "s/^resumed from step ([0-9]+) of .*/\1/p" "$WORK/resume.out" | head -n 1)
if [ -n "$ck" ] && [ "$ck" -gt 0 ] && [ "${from:-0}" -gt 0 ] && ge "$acc" 0.9 && [ "$(rcs resume 4)" = "0 0 0 0 " ]; then
    ok "the shard's last checkpoint (step $ck) resumes on the cluster (the lead from step $from, first evaluation at step $first, test_acc $acc)"
else bad "resume after the shard's loss" "checkpoint step $ck, resumed from '$from', first eval $first, acc $acc, exit codes [$(rcs resume 4)]: $(grep -h dsgd "$WORK/resume.err" | head -3)"; fi
}

# The cases above in two lanes side by side, each on a cluster of its own
# (the second, ${CN}f, alike): most of their time is a wait for --timeout
# or a --time-limit. Under MPICH gossip's cases run alone, after: there a
# one-sided read of a live peer can stall past half the --timeout on a
# loaded machine (tests/decentral.sh).
lane() {    # NAME FN...: run the FNs on cluster NAME (another than $CN: brought up, then down)
    local name=$1
    shift
    export DSGD_CLUSTER_NAME=$name
    if [ "$name" != "$CN" ] && ! "$CL" up 4 --bandwidth 1gbit > "$WORK/up.out" 2>&1; then
        bad "a second cluster of 4 hosts" "$(cat "$WORK/up.out")"
        return
    fi
    local f
    for f; do "$f"; done
    [ "$name" = "$CN" ] || "$CL" down > /dev/null 2>&1
}
if [ "$MPI_IMPL" = mpich ]; then
    side lane "$CN" bsp_faults shard_case heal_case
    side lane "${CN}f" asp_faults
    side_join
    gossip_faults
else
    side lane "$CN" bsp_faults shard_case heal_case
    side lane "${CN}f" asp_faults gossip_faults
    side_join
fi

# down removes every namespace, link and process, and twice is fine
"$CL" down > /dev/null 2>&1
"$CL" down > "$WORK/down2.out" 2>&1
down2=$?
left_ns=$(ip netns list | grep -c "^$CN-")
left_p=$(pgrep -fc "10\.213\.0\.|$WORK|/run/dsgd-cluster/$CN/")
after=$(ip -o link show | awk -F': ' '{print $2}' | sort | tr '\n' ' ')
if [ "$left_ns" = 0 ] && [ "$left_p" = 0 ] && [ "$after" = "$before" ] && [ $down2 = 0 ] && ! [ -e "/run/dsgd-cluster/$CN" ]; then
    ok "down leaves no namespace, link, process or state behind, and a second down is fine"
else bad "down" "namespaces left $left_ns, processes $left_p, links before [$before] after [$after], second down exit $down2"; fi
refused "a command on a cluster that is down names it" "is not up" "$CL" status
refused "cut of a host of a cluster that is down says how to bring it up" "is not up (start it with: scripts/dsgd-cluster up N" "$CL" cut 1

summary cluster
