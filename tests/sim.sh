#!/usr/bin/env bash
# The SimGrid build: the same sources under smpirun on a generated platform;
# the platform generator; the simulated all-reduce against its cost model;
# shared datasets; every paradigm on a heterogeneous simulated cluster.
# Usage: tests/sim.sh SIM_BUILD_DIR MPI_BUILD_DIR   (prints "sim: N passed, M failed")
set -u
SIM=${1:-build-sim}
REAL=${2:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/dsgd-sim-test-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/lib.sh"
if [ ! -x "$SIM/dsgd" ]; then
    bad "simulated build" "$SIM/dsgd missing (make sim needs smpicc from libsimgrid-dev)"
    echo "sim: $pass passed, $fail failed"; exit 1
fi
C=(train --sync bsp --data synthetic --model mlp:32 --batch 32 --steps 40 --lr 0.05 --quiet)

if "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 -- "${C[@]}" --checkpoint "$WORK/sim.st" \
        --metrics "$WORK/sim.jsonl" > "$WORK/sim.out" 2>&1; then
    acc=$(json_field "$WORK/sim.jsonl" done test_acc)
    if ge "$acc" 0.9; then ok "4-rank bsp under smpirun trains (test_acc $acc)"
    else bad "4-rank bsp under smpirun" "test_acc $acc"; fi
    "${MPIRUN[@]}" -np 4 "$REAL/dsgd" "${C[@]}" --checkpoint "$WORK/real.st" > /dev/null 2>&1
    d=$(python3 "$HERE/ckpt_diff.py" "$WORK/sim.st" "$WORK/real.st" 2>&1)
    # same arithmetic; only the all-reduce's summation order may differ
    if le "$d" 1e-5; then ok "simulated and real 4-rank bsp agree (max |diff| $d)"
    else bad "simulated vs real bsp" "max |diff| $d"; fi
else
    bad "4-rank bsp under smpirun" "$(tail -5 "$WORK/sim.out")"
fi

# The simulated all-reduce is the one dsgd asks Open MPI for on real links:
# Rabenseifner's on a power of two. SimGrid's Open MPI selector picked,
# for a 77 KB gradient (resnet:8,8's size) at 64 hosts, an algorithm 2.5x
# slower (3.2 ms a step, where Rabenseifner's cost, 2 (N-1)/N n/B + 2 log2 N
# latencies, is 1.2 ms); computing made negligible (--compute-scale 1000).
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 64 --compute-scale 1000 --bandwidth 1.27Gbps -- train --sync bsp \
    --bucket-kb 1024 --data synthetic:4096 --model mlp:280 --batch 16 --steps 6 --test-subset 64 --quiet \
    --metrics "$WORK/rab.jsonl" > /dev/null 2>&1
r=$(python3 -c '
import json, math, sys
ev = {e["event"]: e for e in map(json.loads, open(sys.argv[1]))}
c, d = ev["config"], ev["done"]
N, n, p = c["platform"]["hosts"], 4 * c["nparams"], c["platform"]
model = 2 * (N - 1) / N * n / p["bandwidth_Bps"] + 2 * math.log2(N) * p["latency_s"]
ok = p["collectives"] == "ompi, all-reduce Rabenseifner" and d["comm_s_per_step"] <= 1.3 * model
print("ok" if ok else "bad", "%s: %.2f ms a step, Rabenseifner cost %.2f ms" % (p["collectives"], 1e3 * d["comm_s_per_step"], 1e3 * model))
' "$WORK/rab.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "64 simulated hosts all-reduce a 77 KB gradient as dsgd does on Open MPI (${r#ok })"
else bad "the simulated all-reduce at 64 hosts" "$r"; fi

# Under MPICH dsgd asks for the ring at every count (tsp_ring), and
# --coll mpich simulates that ring: at 8 hosts, the same gradient within
# 1.3x of the ring's cost, 2 (N-1)/N n/B + 2 (N-1) latencies. SimGrid's
# MPICH selector alone sent it by recursive doubling, log2 N (n/B + a):
# 1.7x the ring's bandwidth cost.
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 8 --coll mpich --compute-scale 1000 --bandwidth 1.27Gbps -- train \
    --sync bsp --bucket-kb 1024 --data synthetic:4096 --model mlp:280 --batch 16 --steps 6 --test-subset 64 --quiet \
    --metrics "$WORK/ring.jsonl" > /dev/null 2>&1
r=$(python3 -c '
import json, sys
ev = {e["event"]: e for e in map(json.loads, open(sys.argv[1]))}
c, d = ev["config"], ev["done"]
N, n, p = c["platform"]["hosts"], 4 * c["nparams"], c["platform"]
model = 2 * (N - 1) / N * n / p["bandwidth_Bps"] + 2 * (N - 1) * p["latency_s"]
ok = p["collectives"] == "mpich, all-reduce ring" and d["comm_s_per_step"] <= 1.3 * model
print("ok" if ok else "bad", "%s: %.2f ms a step, ring cost %.2f ms" % (p["collectives"], 1e3 * d["comm_s_per_step"], 1e3 * model))
' "$WORK/ring.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "8 simulated hosts with --coll mpich all-reduce by the ring dsgd asks MPICH for (${r#ok })"
else bad "the simulated all-reduce with --coll mpich" "$r"; fi

# Two shards use their links at full rate: 6 asp workers each push half of
# an mlp:32's gradient (50 KB) to each shard and pull half from each, over
# 10 Mbit/s links; the shards' links bound a step at 6 pieces each way
# (243 ms). A shard that took one gradient at a time received each at half
# the rate (each worker sends its two pieces at once, and both shards took
# the same worker's at once): 2.1x the bound; taking two at once, 1.2x.
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 8 --bandwidth 10Mbps -- train --sync asp --servers 2 \
    --data fashion-mnist --train-subset 1920 --test-subset 100 --model mlp:32 --batch 32 --steps 10 --lr 0.05 --quiet \
    --metrics "$WORK/lanes.jsonl" > "$WORK/lanes.out" 2>&1
r=$(python3 -c '
import json, sys
ev = {e["event"]: e for e in map(json.loads, open(sys.argv[1]))}
c, d = ev["config"], ev["done"]
bound = 6 * 4 * c["nparams"] / 2 / c["platform"]["bandwidth_Bps"]
step = d["train_s"] / d["steps"]
print("ok" if step <= 1.5 * bound else "bad", "%.0f ms a step, %.2fx the bound of the shard links (%.0f ms)" % (1e3 * step, step / bound, 1e3 * bound))
' "$WORK/lanes.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "asp on 2 simulated shards keeps both links busy (${r#ok })"
else bad "asp on 2 simulated shards" "$r $(tail -c 300 "$WORK/lanes.out")"; fi

# --trace writes SimGrid's trace of the messages, and experiments/sim_links.py
# reads it back: asp on 2 shards, 2 workers, 10 steps: each worker's 10
# gradients (tag 211) reach each shard, and each shard answers each worker's
# 10 pulls (202); receives of any tag (the shard's headers) are matched too.
# A file that is not a trace is refused in one line.
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --trace "$WORK/t.trace" -- train --sync asp --servers 2 \
    --data synthetic --model mlp:32 --batch 32 --steps 10 --lr 0.05 --quiet > "$WORK/trace.out" 2>&1
python3 "$HERE/../experiments/sim_links.py" "$WORK/t.trace" --tags 211,202 > "$WORK/links.md" 2>&1
r=$(python3 -c '
import re, sys
rows = {(int(a), int(b), int(t)): int(n) for a, b, t, n in re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", open(sys.argv[1]).read(), re.M)}
want = {(w, s, 211): 10 for w in (2, 3) for s in (0, 1)}
want.update({(s, w, 202): 10 for w in (2, 3) for s in (0, 1)})
want.update({(w, s, 200): 10 for w in (2, 3) for s in (0, 1)})
bad = {k: (rows.get(k), v) for k, v in want.items() if rows.get(k) != v}
print("bad %s" % bad if bad else "ok %d kinds of message" % len(rows))
' "$WORK/links.md" 2>&1)
if [ "${r%% *}" = ok ]; then ok "dsgd-sim --trace and experiments/sim_links.py count every push, header and reply (${r#ok })"
else bad "dsgd-sim --trace / sim_links.py" "$r $(tail -c 300 "$WORK/trace.out")"; fi
m=$(python3 "$HERE/../experiments/sim_links.py" "$WORK/trace.out" 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$m" | wc -l)" = 1 ] && [[ $m == *"not a Paje trace"* ]]; then ok "sim_links.py refuses a file that is not a trace: $m"
else bad "sim_links.py on a file that is not a trace" "rc $rc: $m"; fi

# Progress lines print the simulated time, as the eval events record it (a
# small model's run lasts milliseconds of simulated time: one decimal
# printed "time 0.0s" on every line)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 2 -- train --sync bsp --data synthetic --model mlp:32 --batch 32 --steps 40 \
    --lr 0.05 --eval-every 20 --metrics "$WORK/clock.jsonl" > "$WORK/clock.out" 2>&1
r=$(python3 -c '
import json, re, sys
printed = [float(t) for t in re.findall(r"step +\d+ .* time +([0-9.]+)s", open(sys.argv[1]).read())]
recorded = [r["time"] for r in map(json.loads, open(sys.argv[2])) if r["event"] == "eval"]
good = len(printed) == len(recorded) == 2 and all(0 < p and abs(p - t) <= 0.01 * t + 1e-4 for p, t in zip(printed, recorded))
print("ok" if good else "bad", "printed", printed, "recorded", recorded)' "$WORK/clock.out" "$WORK/clock.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "progress lines print the simulated time: ${r#ok }"
else bad "simulated time in progress lines" "$r"; fi

# A 4x slower host stretches simulated time: BSP waits for the straggler.
# Here a step is ~1/4 computation and ~3/4 all-reduce on the simulated
# network, so a 4x slower host should make it ~1.8x longer; assert 1.4x.
S=(train --sync bsp --data synthetic --model mlp:256,256 --batch 256 --steps 10 --eval-every 1000 --quiet)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 -- "${S[@]}" --metrics "$WORK/fast.jsonl" > /dev/null 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --slow 1=4 -- "${S[@]}" --metrics "$WORK/slow.jsonl" > /dev/null 2>&1
t1=$(json_field "$WORK/fast.jsonl" done train_s); t4=$(json_field "$WORK/slow.jsonl" done train_s)
if awk -v a="$t1" -v b="$t4" 'BEGIN{exit !(a > 0 && b >= 1.4 * a)}'; then ok "a 4x slower simulated host slows bsp (${t1}s -> ${t4}s simulated)"
else bad "slow simulated host" "train_s ${t1} -> ${t4}"; fi
# Computing and communicating are told apart: the simulated build's bsp
# all-reduces each span (blocking) inside backward, and that time is
# communication, not computation, so the two add up to at most the
# training time (before: counted in both, 1.36x the training time here).
r=$(python3 -c '
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])][-1]
c, m, t = d["compute_s"], d["comm_s"], d["train_s"]
print("ok" if 0 < c and 0 < m and c + m <= 1.05 * t else "bad", f"compute {c:.4f} s + communication {m:.4f} s against {t:.4f} s of training")' "$WORK/fast.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "bsp under simulation: ${r#ok }"
else bad "bsp's compute and communication times overlap" "$r"; fi
# Eager messages (dsgd-sim --eager 65536, Open MPI's TCP limit): one shard
# and 8 asp workers with 51 KB pushes. With every message waiting for its
# receive (the default) each push costs the shard a round trip more;
# measured 257 steps against 581-582 in 0.05 simulated s. The computing is
# made negligible (--compute none, --compute-scale 1000): its simulated
# time is the processor time it took here, and with it the counts moved
# with the machine's load (127 against 172 on a quiet machine, 145 against
# 156 in a CI run).
E=(train --data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128 --sync asp --servers 1
   --epochs 1000 --time-limit 0.05 --quiet --compute none)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 9 --compute-scale 1000 -- "${E[@]}" --metrics "$WORK/rdv.jsonl" > /dev/null 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 9 --compute-scale 1000 --eager 65536 -- "${E[@]}" --metrics "$WORK/eager.jsonl" > /dev/null 2>&1
n0=$(json_field "$WORK/rdv.jsonl" done steps); n1=$(json_field "$WORK/eager.jsonl" done steps)
if awk -v a="$n0" -v b="$n1" 'BEGIN{exit !(a > 0 && b >= 1.3 * a)}'; then
    ok "small messages leave eagerly: asp with one shard makes $n1 steps, $n0 when each push waits for its receive"
else bad "eager messages" "steps with --eager 0: '$n0', by default: '$n1' (want >= 1.3x)"; fi
# The shard's link used both ways: 3 asp workers on one shard over 10 Mbps
# links, 200 KB pushes and replies (0.16 s each on the link). The shard takes
# gradients one at a time while replies go out: 12 pushes and 12 replies in
# 2.67 simulated s. Received all at once they share the link, finish
# together, and the replies then go out together: 4.34 s; one direction at
# a time would be 24 x 0.16 = 3.84 s.
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --bandwidth 10Mbps -- train --data synthetic:768 --model mlp \
    --batch 64 --lr 0.05 --test-subset 64 --sync asp --servers 1 --epochs 1 --quiet --metrics "$WORK/duplex.jsonl" > /dev/null 2>&1
t=$(json_field "$WORK/duplex.jsonl" done train_s 2>/dev/null)
if awk -v t="$t" 'BEGIN{exit !(t > 0 && t < 0.8 * 3.84)}'; then
    ok "a shard takes pushes in while its replies go out: 12 of each in $t simulated s (one direction at a time: 3.84 s)"
else bad "the shard's link both ways" "12 pushes and replies of 200 KB over 10 Mbps took '$t' simulated s (want < 3.07)"; fi
# Above 64 KiB: SimGrid aborts (a CRITICAL line and a backtrace) unless
# MPI_Send's detached size rises with the eager limit. With 71 KB pushes
# (mlp:256) the run at 1 MiB sends them eagerly and makes at least as many
# steps as at 65536, where they wait for their receive (the shard takes
# gradients one at a time, so a waiting push does not hold up the replies:
# 144 steps at 65536 and 149 at 1 MiB, where the shard that probed and
# received whole messages made 78 and 150). Beyond an int, one line.
E2=(train --data synthetic:1024 --model mlp:256 --batch 16 --lr 0.05 --test-subset 128 --sync asp --servers 1
    --epochs 1000 --time-limit 0.05 --quiet)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 5 --eager 65536 -- "${E2[@]}" --metrics "$WORK/e64k.jsonl" > /dev/null 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 5 --eager 1048576 -- "${E2[@]}" --metrics "$WORK/e1m.jsonl" > "$WORK/e1m.out" 2>&1
n0=$(json_field "$WORK/e64k.jsonl" done steps 2>/dev/null); n1=$(json_field "$WORK/e1m.jsonl" done steps 2>/dev/null)
if ! grep -q CRITICAL "$WORK/e1m.out" && awk -v a="$n0" -v b="$n1" 'BEGIN{exit !(a > 0 && b >= 0.9 * a)}'; then
    ok "--eager 1048576 runs and sends 71 KB pushes eagerly: $n1 steps, $n0 at --eager 65536"
else bad "--eager above 65536" "steps at 65536: '$n0', at 1048576: '$n1': $(head -c 300 "$WORK/e1m.out")"; fi
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 2 --eager 2147483648 -- "${C[@]}" > "$WORK/ebig.out" 2>&1
rc=$?
if [ $rc = 2 ] && [ "$(grep -c . "$WORK/ebig.out")" = 1 ] && grep -q "at most 2147483647" "$WORK/ebig.out"; then
    ok "--eager 2147483648 is refused in one line (exit 2)"
else bad "--eager beyond an int" "exit $rc: $(head -c 300 "$WORK/ebig.out")"; fi
# --transient writes SimGrid speed profiles: a host slowed for intervals of
# a mean of 10^6 s (and fast for 10^-6 s) is a 4x slower host; one slowed
# for 10^-6 s between 10^6 s at full speed is a full-speed host. (Simulated
# compute is measured, so 10 steps move by 25% on a busy machine: the fast
# run is judged against the slowed one, not against the first run.)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --transient 1-1:4:1e6:1e-6 -- "${S[@]}" --metrics "$WORK/tslow.jsonl" > "$WORK/tslow.out" 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --transient 1-1:4:1e-6:1e6 -- "${S[@]}" --metrics "$WORK/tfast.jsonl" > "$WORK/tfast.out" 2>&1
ts=$(json_field "$WORK/tslow.jsonl" done train_s); tf=$(json_field "$WORK/tfast.jsonl" done train_s)
if awk -v a="$t1" -v s="$ts" -v f="$tf" 'BEGIN{exit !(a > 0 && s >= 1.4 * a && f > 0 && f < 0.7 * s)}'; then
    ok "--transient: a host's speed profile slows bsp while it is slow (${t1}s -> ${ts}s), not while it is fast (${tf}s)"
else bad "--transient speed profiles" "train_s ${t1}, slowed ${ts}, fast ${tf}: $(tail -c 300 "$WORK/tslow.out")"; fi

DS="$HERE/../scripts/dsgd-sim"

# ---- platforms: SimGrid cluster zones, O(N) lines, no host-to-host routes ----
"$DS" --hosts 1024 --print-platform > "$WORK/p1024.xml"
lines=$(wc -l < "$WORK/p1024.xml"); routes=$(grep -c '<route ' "$WORK/p1024.xml")
if [ "$lines" -le $((3 * 1024 + 10)) ] && [ "$routes" -eq 0 ]; then ok "1024 flat hosts: $lines lines, no route list"
else bad "flat platform size" "$lines lines, $routes routes for 1024 hosts"; fi
# fat tree: 64 hosts in leaves of 16 = 4 leaves, 4x3 leaf-to-leaf routes, each
# uplink 16 hosts' bandwidth / oversubscription 4 = 4 x 10 Gb/s = 5e9 B/s
"$DS" --hosts 64 --topology fat-tree:16:4 --print-platform > "$WORK/ft.xml"
zr=$(grep -c '<zoneRoute ' "$WORK/ft.xml"); up=$(grep -o 'id="uplink-0" bandwidth="[^"]*"' "$WORK/ft.xml")
if [ "$zr" -eq 12 ] && [ "$up" = 'id="uplink-0" bandwidth="5000000000Bps"' ]; then ok "fat tree: 4 leaves, 12 routes, uplinks at 1/4 of their hosts' bandwidth"
else bad "fat tree platform" "$zr routes, $up"; fi
# a seeded quarter of 128 hosts 4x slower; compute scale multiplies every speed
slow_set() { "$DS" --hosts 128 "$@" --print-platform | grep -o 'id="node-[0-9]*" speed="[^"]*"' | grep -v '"1Gf"' | tr '\n' ' '; }
a=$(slow_set --slow-fraction 0.25:4:1); b=$(slow_set --slow-fraction 0.25:4:1); c=$(slow_set --slow-fraction 0.25:4:2)
na=$(echo "$a" | grep -o '0.25Gf' | wc -l)
if [ "$na" -eq 32 ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]; then ok "--slow-fraction 0.25:4: 32 of 128 hosts at 1/4 speed, fixed by the seed"
else bad "--slow-fraction" "$na slow hosts; same seed same set: $([ "$a" = "$b" ] && echo yes || echo no); other seed differs: $([ "$a" != "$c" ] && echo yes || echo no)"; fi
sp=$("$DS" --hosts 2 --compute-scale 8 --slow 1=4 --print-platform | grep -o 'speed="[^"]*"' | tr '\n' ' ')
if [ "$sp" = 'speed="8Gf" speed="2Gf" ' ]; then ok "--compute-scale 8 with a 4x slow host: speeds 8Gf and 2Gf"
else bad "--compute-scale" "speeds $sp"; fi
for args in "--topology ring" "--slow-fraction 2:4" "--net 40gbe" "--hosts 0" "--bandwidth fast"; do
    # shellcheck disable=SC2086
    err=$("$DS" $args --print-platform 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 0 ] && [ "$(echo "$err" | wc -l)" -eq 1 ] && [[ "$err" == dsgd-sim:* ]]; then ok "dsgd-sim $args: one-line error"
    else bad "dsgd-sim $args" "rc $rc, '$err'"; fi
done

# a user's own platform: ranks go to its hosts in order, or to a host file
"$DS" --hosts 3 --slow 2=2 --print-platform > "$WORK/mine.xml"
if "$DS" --build "$SIM" --hosts 3 --platform "$WORK/mine.xml" -- train --sync bsp --data synthetic --model mlp:16 --steps 3 --quiet > "$WORK/mine.out" 2>&1
then ok "--platform FILE runs on the file's hosts"; else bad "--platform FILE" "$(tail -2 "$WORK/mine.out")"; fi
printf '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n<platform version="4.1">\n<cluster id="c" prefix="n" suffix="" radical="0-3" speed="1Gf" bw="1Gbps" lat="10us"/>\n</platform>\n' > "$WORK/cl.xml"
err=$("$DS" --build "$SIM" --hosts 4 --platform "$WORK/cl.xml" -- train --sync bsp 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [[ "$err" == *--hostfile* ]]; then ok "a <cluster> platform without --hostfile: asks for one"
else bad "<cluster> platform without host file" "rc $rc: $err"; fi
printf 'n0\nn1\nn2\nn3\n' > "$WORK/cl.hosts"
if "$DS" --build "$SIM" --hosts 4 --platform "$WORK/cl.xml" --hostfile "$WORK/cl.hosts" -- train --sync bsp --data synthetic --model mlp:16 --steps 3 --quiet > "$WORK/cl.out" 2>&1
then ok "a <cluster> platform with --hostfile runs"; else bad "<cluster> platform with --hostfile" "$(tail -2 "$WORK/cl.out")"; fi

# ---- the simulated all-reduce against the cost model of the algorithm used ----
# --coll ompi runs the all-reduce dsgd asks Open MPI for: the ring below 16
# hosts, T = 2 (N-1) a + 2 (N-1)/N n/b, Rabenseifner's on a power of two
# from 16, T = 2 log2(N) a + 2 (N-1)/N n/b, with a = 20 us, b = 10 Gb/s
# (--net 10gbe), for the mlp gradient (940584 bytes). The simulation adds
# the reductions' own arithmetic, a few percent (the ring's up to 12%).
if [ -x "$SIM/bench/allreduce" ]; then
    for n in 2 4 8 16; do
        out=$("$DS" --build "$SIM" --hosts "$n" --exe "$SIM/bench/allreduce" -- 2 2>&1 | grep '^allreduce')
        us=$(echo "$out" | sed -n 's/.*bare_us=\([0-9.]*\).*/\1/p')
        m=$(awk -v n="$n" 'BEGIN { a = n >= 16 ? 2 * log(n) / log(2) : 2 * (n - 1)
            printf "%.1f", (a * 20e-6 + 2 * (n - 1) / n * 940584 / 1.25e9) * 1e6 }')
        if awk -v s="$us" -v m="$m" 'BEGIN { exit !(s > 0 && s / m > 0.95 && s / m < 1.15) }'; then ok "all-reduce at N=$n: ${us} us simulated, ${m} us alpha-beta"
        else bad "all-reduce at N=$n" "${us:-no result} us simulated vs ${m} us alpha-beta ($out)"; fi
    done
    # oversubscribed uplinks slow the cross-leaf steps (the first two of four)
    t1=$("$DS" --build "$SIM" --hosts 16 --topology fat-tree:4:1 --exe "$SIM/bench/allreduce" -- 2 2>&1 | sed -n 's/.*bare_us=\([0-9.]*\).*/\1/p')
    t4=$("$DS" --build "$SIM" --hosts 16 --topology fat-tree:4:4 --exe "$SIM/bench/allreduce" -- 2 2>&1 | sed -n 's/.*bare_us=\([0-9.]*\).*/\1/p')
    if awk -v a="$t1" -v b="$t4" 'BEGIN { exit !(a > 0 && b >= 1.5 * a) }'; then ok "4:1 oversubscribed fat tree slows the all-reduce (${t1} -> ${t4} us)"
    else bad "oversubscribed fat tree" "all-reduce ${t1} -> ${t4} us"; fi
else
    bad "all-reduce calibration" "$SIM/bench/allreduce missing (make sim builds it)"
fi

# ---- real data: one shared read-only copy, same results as real processes ----
if [ -d /usr/share/datasets/fashion-mnist ]; then
    F=(train --sync bsp --data fashion-mnist --model mlp --batch 16 --steps 20 --lr 0.01 --eval-every 1000 --test-subset 1000 --quiet)
    "$DS" --build "$SIM" --hosts 4 -- "${F[@]}" --checkpoint "$WORK/fs.st" > "$WORK/fs.out" 2>&1
    "${MPIRUN[@]}" -np 4 "$REAL/dsgd" "${F[@]}" --checkpoint "$WORK/fr.st" > /dev/null 2>&1
    d=$(python3 "$HERE/ckpt_diff.py" "$WORK/fs.st" "$WORK/fr.st" 2>&1)
    if le "$d" 1e-5; then ok "Fashion-MNIST: simulated and real 4-rank bsp agree (max |diff| $d)"
    else bad "Fashion-MNIST simulated vs real" "max |diff| $d $(tail -2 "$WORK/fs.out")"; fi
    if [ -x /usr/bin/time ]; then
        # 32 private copies of the dataset as floats took 7 GB; shared bytes leave the models
        /usr/bin/time -f %M -o "$WORK/rss" "$DS" --build "$SIM" --hosts 32 -- "${F[@]}" --steps 2 > /dev/null 2>&1
        kb=$(tail -1 "$WORK/rss")
        if [ "${kb:-0}" -gt 0 ] && [ "$kb" -lt 1000000 ]; then ok "32 simulated ranks on Fashion-MNIST peak at $((kb / 1024)) MB"
        else bad "32 simulated ranks' memory" "peak ${kb:-?} kB"; fi
    fi
fi

# ---- every paradigm on a heterogeneous simulated cluster, with its figures ----
# 16 hosts, a quarter of them 4x slower; 128 hosts in experiments/sim_calibration.sh
H=(train --data synthetic --model mlp:32 --batch 32 --steps 30 --lr 0.05 --quiet)
while read -r name fields args; do
    # shellcheck disable=SC2086
    "$DS" --build "$SIM" --hosts 16 --slow-fraction 0.25:4 -- "${H[@]}" --sync $args \
        --metrics "$WORK/h-$name.jsonl" > "$WORK/h-$name.out" 2>&1
    missing=""
    for f in ${fields//,/ }; do
        v=$(json_field "$WORK/h-$name.jsonl" done "$f" 2>/dev/null)
        awk -v v="$v" 'BEGIN { exit !(v ~ /^[0-9.e+-]+$/ && v + 0 > 0) }' || missing="$missing $f=$v"
    done
    if [ -z "$missing" ]; then ok "$name on 16 heterogeneous simulated hosts ($fields > 0)"
    else bad "$name on 16 heterogeneous simulated hosts" "missing or zero:$missing $(tail -1 "$WORK/h-$name.out")"; fi
done <<'EOF_P'
bsp collectives bsp
asp staleness_max,server_updates asp --servers 2
ssp staleness_max,server_updates ssp --servers 2 --staleness 3
dssp staleness_max,server_updates dssp --servers 2
downpour server_updates downpour --servers 2 --push-every 2
easgd center_updates easgd --servers 2 --tau 2
gossip-pull mixes gossip --gossip pull
gossip-push mixes gossip --gossip push
selsync sync_fraction,syncs selsync
localsgd rounds localsgd --period 4
EOF_P

# dsgd-sim's own errors and exits: a divergence is dsgd's line and status 3
# (not SimGrid's backtrace and 134), no temporary folder is left, and values
# it cannot simulate are refused in one line naming the option
# (its temporary folder in a TMPDIR of this test's own: other runs of
# dsgd-sim on the machine do not count)
mkdir -p "$WORK/tmp"
before=$(ls -d "$WORK"/tmp/dsgd-sim-?????? 2>/dev/null | wc -l)
TMPDIR="$WORK/tmp" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 -- train --sync asp --data synthetic --model mlp:32 --lr 3 \
    --momentum 0.9 --steps 200 --quiet --slowdown 0=20 --metrics "$WORK/div.jsonl" > "$WORK/div.out" 2> "$WORK/div.err"
rc=$?
after=$(ls -d "$WORK"/tmp/dsgd-sim-?????? 2>/dev/null | wc -l)
# (the lead slowed: another worker usually diverges first and tells it)
if [ $rc = 3 ] && grep -q "training diverged" "$WORK/div.err" && ! grep -qv "^dsgd: " "$WORK/div.err" &&
   [ ! -e "$WORK/div.jsonl.part" ] && [ "$(json_field "$WORK/div.jsonl" done status 2>/dev/null)" = diverged ]; then
    ok "a simulated divergence exits 3 with dsgd's lines only, the metrics closed with status diverged"
else bad "simulated divergence" "exit $rc: $(head -c 300 "$WORK/div.err")"; fi
if [ "$after" -le "$before" ]; then ok "dsgd-sim leaves no temporary folder"; else bad "dsgd-sim temporary folders" "$before before, $after after"; fi
# a simulated run says where it ran (the config event's platform), and
# summarize.py keeps a uniform and a slowed cluster apart (it merged them as
# "2 runs"), while two seeds of one configuration make one row
P=(train --sync asp --data synthetic --model mlp:16 --steps 60 --quiet --eval-every 30)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 3 -- "${P[@]}" --seed 1 --metrics "$WORK/u1.jsonl" > /dev/null 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 3 -- "${P[@]}" --seed 2 --metrics "$WORK/u2.jsonl" > /dev/null 2>&1
# (worker 1 of asp's default one shard is host 2: --slow-workers counts
# workers as dsgd's --slowdown does)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 3 --slow-workers 1=4 -- "${P[@]}" --seed 1 --metrics "$WORK/s1.jsonl" > /dev/null 2>&1
plat=$(python3 -c 'import json,sys; p=json.loads(open(sys.argv[1]).readline())["platform"]; print(p["hosts"], p["slow_hosts"], p["host_slowdown"])' "$WORK/s1.jsonl" 2>&1)
if [ "$plat" = "3 1 [1, 1, 4]" ]; then ok "a simulated run's config event records its platform (hosts, link, slow hosts, ...); --slow-workers 1=4 under asp slows host 2"
else bad "platform in the config event" "$plat"; fi
# hosts and workers: --slow-workers W is dsgd's worker W (--servers S: host
# S+W; sandblaster: 1+S+W; all-reduce: W); --slow numbers hosts and is
# refused in one line where the two differ (it slowed a shard's neighbour)
sp=$("$DS" --hosts 5 --slow-workers 1=4 --print-platform -- train --sync=asp --servers 2 | grep -o 'speed="[^"]*"' | tr '\n' ' ')
sb=$("$DS" --hosts 6 --slow-workers 0=10 --print-platform -- train --sync sandblaster --servers 1 | grep -o 'speed="[^"]*"' | tr '\n' ' ')
sa=$("$DS" --hosts 3 --slow-workers 1=4 --print-platform -- train --sync bsp | grep -o 'speed="[^"]*"' | tr '\n' ' ')
if [ "$sp" = 'speed="1Gf" speed="1Gf" speed="1Gf" speed="0.25Gf" speed="1Gf" ' ] &&
   [ "$sb" = 'speed="1Gf" speed="1Gf" speed="0.1Gf" speed="1Gf" speed="1Gf" speed="1Gf" ' ] &&
   [ "$sa" = 'speed="1Gf" speed="0.25Gf" speed="1Gf" ' ]; then
    ok "--slow-workers: worker 1 of asp with 2 shards is host 3, sandblaster's replica 0 host 2, bsp's worker 1 host 1"
else bad "--slow-workers mapping" "asp: $sp; sandblaster: $sb; bsp: $sa"; fi
refused "--slow R=F with shards in the command" "--slow-workers" "$DS" --hosts 5 --slow 3=4 --print-platform -- train --sync asp --servers 2
refused "--slow-workers beyond the workers" "worker 0 <= W < 3" "$DS" --hosts 5 --slow-workers 3=4 --print-platform -- train --sync asp --servers 2
# --regime: K = R / R_here, R = 40% of a V100's 15.7 TFLOP/s FP32 peak,
# R_here = resnet:8,8's measured 64 x 14076288 FLOPs in 0.0186016 s;
# applied, the hosts' speed is K Gf and the link 10 GbE's 1.25e9 B/s
k=$(awk 'BEGIN { printf "%.6g", 0.4 * 15.7e12 / (64 * 14076288 / 0.0186016) }')
out=$("$DS" --regime v100,10gbe,resnet:8,8 2>&1); rc=$?
got=$(echo "$out" | sed -n 's/^ *dsgd-sim --compute-scale \([0-9.e+]*\) --net 10gbe$/\1/p')
if [ $rc = 0 ] && awk -v a="$got" -v b="$k" 'BEGIN { exit !(a > 0 && a / b > 0.999 && a / b < 1.001) }'; then
    ok "--regime v100,10gbe,resnet:8,8 prints --compute-scale $got --net 10gbe (K = R / R_here = $k)"
else bad "--regime v100,10gbe,resnet:8,8" "exit $rc, want K $k: $out"; fi
pl=$("$DS" --regime v100,10gbe --print-platform -- train --model resnet:8,8 2>/dev/null | grep -o 'id="node-0" speed="[^"]*"\|id="node-0-link" bandwidth="[^"]*"' | tr '\n' ' ')
if [ "$pl" = "id=\"node-0\" speed=\"$(awk -v k="$k" 'BEGIN { printf "%.6g", k }')Gf\" id=\"node-0-link\" bandwidth=\"1250000000Bps\" " ]; then
    ok "--regime v100,10gbe -- train --model resnet:8,8 sets the hosts' speed and the 10 GbE link"
else bad "--regime applied" "$pl"; fi
refused "--regime with an unknown accelerator" "unknown accelerator 'rtx9090'" "$DS" --hosts 2 --regime rtx9090,10gbe -- train
refused "--regime for a model it has no figure for" "no measured step for --model lenet" "$DS" --hosts 2 --regime v100,10gbe -- train --model lenet
refused "--regime with --compute-scale" "--regime sets the compute scale" "$DS" --regime v100,10gbe --compute-scale 3 -- train
# --regime-here: R_here from a run's own metrics (the asp run above: mlp:16)
kh=$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
c = ev[0]; d = ev[-1]
print("%.6g" % (0.4 * 15.7e12 / (c["config"]["batch"] * c["train_flops_per_sample"] / d["compute_s_per_step"])))' "$WORK/u1.jsonl" 2>&1)
kr=$("$DS" --regime v100,10gbe --regime-here "$WORK/u1.jsonl" --print-platform -- train --model mlp:16 2>&1 >/dev/null)
if [[ "$kr" == *"mlp:16 at --compute-scale $kh --net 10gbe"* ]]; then ok "--regime-here: this machine's rate from a run's metrics (K $kh)"
else bad "--regime-here" "want K $kh: $kr"; fi
python3 "$HERE/../experiments/summarize.py" "$WORK/sum.md" 0.5 "$WORK/u1.jsonl" "$WORK/u2.jsonl" "$WORK/s1.jsonl" > /dev/null 2>&1
rows=$(grep -c '^| asp' "$WORK/sum.md" 2>/dev/null)
if [ "$rows" = 2 ] && grep -q '^| asp .*platform host_slowdown=\[1, 1, 4\].*| 1 |' "$WORK/sum.md" && grep -q '^| asp .*| 2 |' "$WORK/sum.md"; then
    ok "summarize.py: the slowed cluster is its own row, named by what sets it apart; two seeds are one row"
else bad "summarize.py groups" "$(cat "$WORK/sum.md" 2>/dev/null | head -c 600)"; fi

echo "<platform" > "$WORK/bad.xml"
refused "--compute-scale inf" "--compute-scale" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --compute-scale inf -- train
refused "--bandwidth 1e400Gbps" "bandwidth" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --bandwidth 1e400Gbps -- train
refused "--latency 1e400s" "latency" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --latency 1e400s -- train
refused "--hosts 70000" "--hosts 70000" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 70000 -- train
refused "a bad --eager" "--eager" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --eager 64k -- train
refused "a bad --transient" "--transient" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --transient 2-5:4:1:3 -- train
refused "--transient with --print-platform" "--print-platform" "$HERE/../scripts/dsgd-sim" --hosts 4 --transient 1-2:4:1:3 --print-platform
refused "a malformed platform file is named" "$WORK/bad.xml" "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --platform "$WORK/bad.xml" -- train

# run from another folder, a checkout's dsgd-sim finds the checkout's build
if [ "$(cd "$HERE/.." && pwd)/build-sim" -ef "$SIM" ]; then
    if (cd "$WORK" && "$HERE/../scripts/dsgd-sim" --hosts 2 -- train --data synthetic:256 --model mlp:8 --steps 2 --sync bsp --quiet \
            > "$WORK/elsewhere.out" 2>&1); then ok "dsgd-sim run from another folder finds the checkout's build-sim"
    else bad "dsgd-sim from another folder" "$(tail -c 300 "$WORK/elsewhere.out")"; fi
fi

summary sim
