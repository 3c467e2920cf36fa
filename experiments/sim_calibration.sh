#!/usr/bin/env bash
# Does a simulated second mean anything? Compares the simulator with this
# machine and with cost models, and measures the simulator itself. Prints one
# table per part (markdown); docs/simulation.md shows a run of it.
#
#   A  one host: simulated step time vs the same run's real step time, per model
#   B  2 and 4 ranks of bsp and asp: simulated (one 2-core host, messages through
#      its memory) vs real processes
#   C  all-reduce of the mlp gradient at N = 2..256: simulated vs the alpha-beta
#      cost of the algorithm the selector picks
#   D  the simulator: wall time and peak memory, one epoch of bsp/asp/gossip/easgd
#      at 64..1024 hosts
#   E  every paradigm at 128 hosts, a quarter of them 4x slower: runs, and its
#      staleness/sync figures
#
# Usage: experiments/sim_calibration.sh [PARTS] [REPEATS]   e.g. "ABC" 5
#   (default: ABCDE, 3 repeats for the timed comparisons). Needs make, make sim,
#   dataset-fashion-mnist and GNU time (/usr/bin/time). The machine's load
#   shows in A and B: they report the median and the spread of the repeats.
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -euo pipefail
PARTS=${1:-ABCDE}
REPS=${2:-3}
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
W=$(mktemp -d /tmp/dsgd-simcal-XXXXXX)
trap 'rm -rf "$W"' EXIT
DS=scripts/dsgd-sim
for f in build/dsgd build-sim/dsgd build-sim/bench/allreduce /usr/bin/time; do
    [ -x "$f" ] || { echo "sim_calibration: $f missing (make && make sim; GNU time: apt-get install time)" >&2; exit 1; }
done
[ -d /usr/share/datasets/fashion-mnist ] || { echo "sim_calibration: needs dataset-fashion-mnist" >&2; exit 1; }

field() { python3 -c 'import json,sys
v=None
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["event"]==sys.argv[2]: v=r.get(sys.argv[3])
print(v)' "$@"; }
# stats V...: "median min max" of the arguments
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }'; }

# ---- A: one host, per model ----
# SMPI times a rank's computation in CPU time of its thread, so a busy
# machine does not stretch simulated time; the real run's wall time is
# stretched by whatever else runs. So the real side is given both ways: wall
# time per step, and CPU time per step (user+sys of a run of S steps minus one
# of S/4 steps, divided by 3S/4: start-up and evaluation cancel).
if [[ $PARTS == *A* ]]; then
    echo "## A. One host: simulated vs real time per step (median of $REPS, [min, max])"
    echo
    echo "Fashion-MNIST, --sync none, one process; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| model | batch | real wall ms/step | real CPU ms/step | simulated ms/step | error vs CPU | error vs wall |"
    echo "|---|---|---|---|---|---|---|"
    for spec in "logreg 64 12000" "mlp 64 1600" "lenet 32 600"; do
        read -r model batch steps <<< "$spec"
        C=(train --sync none --model "$model" --data fashion-mnist --batch "$batch" --lr 0.01
           --eval-every 100000 --test-subset 500 --quiet)
        q=$((steps / 4))
        real=() cpu=() sim=()
        for ((i = 0; i < REPS; i++)); do
            nice -n 5 /usr/bin/time -f "%U %S" -o "$W/a.cpu" build/dsgd "${C[@]}" --steps "$steps" --metrics "$W/a.jsonl" > /dev/null
            real+=("$(awk -v t="$(field "$W/a.jsonl" done train_s)" -v s="$steps" 'BEGIN { print t / s * 1e3 }')")
            c1=$(awk '{ print $1 + $2 }' "$W/a.cpu")
            nice -n 5 /usr/bin/time -f "%U %S" -o "$W/a.cpu" build/dsgd "${C[@]}" --steps "$q" > /dev/null
            cpu+=("$(awk -v a="$c1" -v b="$(awk '{ print $1 + $2 }' "$W/a.cpu")" -v d="$((steps - q))" 'BEGIN { print (a - b) / d * 1e3 }')")
            nice -n 5 "$DS" --hosts 1 -- "${C[@]}" --steps "$steps" --metrics "$W/a.jsonl" > /dev/null
            sim+=("$(awk -v t="$(field "$W/a.jsonl" done train_s)" -v s="$steps" 'BEGIN { print t / s * 1e3 }')")
        done
        read -r rm rlo rhi <<< "$(stats "${real[@]}")"
        read -r cm clo chi <<< "$(stats "${cpu[@]}")"
        read -r sm slo shi <<< "$(stats "${sim[@]}")"
        echo "| $model | $batch | $rm [$rlo, $rhi] | $cm [$clo, $chi] | $sm [$slo, $shi] | $(pct "$sm" "$cm") | $(pct "$sm" "$rm") |"
    done
    echo
fi

# ---- B: 2 and 4 ranks on this machine, real and simulated ----
if [[ $PARTS == *B* ]]; then
    # This machine as a platform: one host, 2 cores, messages through its
    # memory at the shm preset (or SIMCAL_SHM_BW / SIMCAL_SHM_LAT, e.g. fitted
    # from `mpirun -np 2 build/bench/allreduce` on a quiet machine:
    # Rabenseifner at N=2 takes 2a + n/b).
    bwB=${SIMCAL_SHM_BW:-5GBps} latB=${SIMCAL_SHM_LAT:-0.5us}
    echo "## B. bsp and asp on this machine: simulated vs real time per epoch (median of $REPS, [min, max])"
    echo
    echo "Platform: one host with 2 cores (--topology host:2), memory link $bwB and $latB."
    echo "Fashion-MNIST, first 12000 training samples, mlp, batch 64, one epoch; asp with 1 server."
    echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg). The error is against the real median and,"
    echo "in brackets, against the fastest real run (the least disturbed by other load)."
    echo
    echo "| paradigm | ranks | real s/epoch | simulated s/epoch | error |"
    echo "|---|---|---|---|---|"
    for spec in "bsp 2" "bsp 4" "asp 2" "asp 4"; do
        read -r sync np <<< "$spec"
        extra=()
        [ "$sync" = asp ] && extra=(--servers 1)
        C=(train --sync "$sync" "${extra[@]}" --model mlp --data fashion-mnist --train-subset 12000 --test-subset 500
           --epochs 1 --batch 64 --lr 0.01 --quiet)
        real=() sim=()
        for ((i = 0; i < REPS; i++)); do
            nice -n 5 mpirun -q -np "$np" build/dsgd "${C[@]}" --metrics "$W/b.jsonl" > /dev/null
            real+=("$(field "$W/b.jsonl" done train_s)")
            nice -n 5 "$DS" --hosts "$np" --topology host:2 --net shm --bandwidth "$bwB" --latency "$latB" \
                -- "${C[@]}" --metrics "$W/b.jsonl" > /dev/null
            sim+=("$(field "$W/b.jsonl" done train_s)")
        done
        read -r rm rlo rhi <<< "$(stats "${real[@]}")"
        read -r sm slo shi <<< "$(stats "${sim[@]}")"
        echo "| $sync | $np | $rm [$rlo, $rhi] | $sm [$slo, $shi] | $(pct "$sm" "$rm") ($(pct "$sm" "$rlo")) |"
    done
    echo
fi

# ---- C: the all-reduce against its cost model ----
if [[ $PARTS == *C* ]]; then
    echo "## C. All-reduce of the mlp gradient (940584 bytes): simulated vs alpha-beta"
    echo
    echo "Flat switch, --net 10gbe (a = 20 us host to host, b = 10 Gb/s). Under Open MPI dsgd"
    echo "asks for Rabenseifner's algorithm (recursive-halving reduce-scatter, recursive-doubling"
    echo "all-gather) on a power of two of 16 or more, T = 2 log2(N) a + 2 (N-1)/N n/b, and the"
    echo "ring below (--coll ompi follows; the model column says which). Under MPICH dsgd asks"
    echo "for the ring at every count (--coll mpich follows): T = 2 (N-1) a + 2 (N-1)/N n/b."
    echo
    echo "| N | Open MPI's choice: model us | --coll ompi us | error | ring model us | --coll mpich us | error |"
    echo "|---|---|---|---|---|---|---|"
    # the alpha-beta cost in us of ALG (ring or Rabenseifner) on N hosts
    model_us() { awk -v n="$1" -v alg="$2" 'BEGIN { a = alg == "ring" ? 2 * (n - 1) : 2 * log(n) / log(2)
        printf "%.1f", (a * 20e-6 + 2 * (n - 1) / n * 940584 / 1.25e9) * 1e6 }'; }
    for n in 2 4 8 16 32 64 128 256; do
        alg=ring; [ "$n" -ge 16 ] && alg=Rabenseifner
        mr=$(model_us "$n" "$alg") md=$(model_us "$n" ring)
        o=$(nice -n 5 "$DS" --hosts "$n" --exe build-sim/bench/allreduce -- 2 | sed -n 's/.*bare_us=\([0-9.]*\).*/\1/p')
        p=$(nice -n 5 "$DS" --hosts "$n" --coll mpich --exe build-sim/bench/allreduce -- 2 | sed -n 's/.*bare_us=\([0-9.]*\).*/\1/p')
        echo "| $n | $mr ($alg) | $o | $(pct "$o" "$mr") | $md | $p | $(pct "$p" "$md") |"
    done
    echo
fi

# one simulated run under GNU time: "wall_s peak_MB sim_train_s steps"
simrun() {   # OUT_PREFIX DSGD-SIM-ARGS... -- TRAIN-ARGS...
    local out=$1
    shift
    nice -n 5 /usr/bin/time -f "%e %M" -o "$out.time" "$DS" "$@" --metrics "$out.jsonl" > "$out.log" 2>&1 || true
    local t
    read -r wall kb < <(tail -1 "$out.time")
    t=$(field "$out.jsonl" done train_s 2>/dev/null || echo None)
    echo "$wall $((kb / 1024)) $t $(field "$out.jsonl" done steps 2>/dev/null || echo None)"
}

# ---- D: the simulator's own cost ----
if [[ $PARTS == *D* ]]; then
    echo "## D. The simulator: wall time and peak memory for one epoch (Fashion-MNIST, mlp, batch 16, --net 10gbe)"
    echo
    echo "| hosts | paradigm | wall s | peak MB | simulated train s | steps |"
    echo "|---|---|---|---|---|---|"
    for n in 64 128 256 1024; do
        for sync in bsp asp gossip easgd; do
            S=$((n / 32 > 1 ? n / 32 : 1))
            extra=()
            case $sync in asp|easgd) extra=(--servers "$S") ;; esac
            # asp applies every worker's gradient as it comes: with n workers
            # the rate must shrink like 1/n or it diverges (0.01 did at 128)
            [ "$sync" = asp ] && extra+=(--lr "$(awk -v n="$n" 'BEGIN { print 0.08 / n }')")
            read -r wall mb t steps <<< "$(simrun "$W/d-$n-$sync" --hosts "$n" -- train --sync "$sync" \
                --model mlp --data fashion-mnist --epochs 1 --batch 16 --eval-every 100000 --quiet --lr 0.01 "${extra[@]}")"
            echo "| $n | $sync${extra[*]:+ ${extra[*]}} | $wall | $mb | $t | $steps |"
        done
    done
    echo
fi

# ---- E: every paradigm, 128 heterogeneous hosts ----
if [[ $PARTS == *E* ]]; then
    echo "## E. Every paradigm at 128 simulated hosts, a quarter of them 4x slower"
    echo
    echo "Fashion-MNIST, mlp, batch 32, 20 steps per worker, --net 10gbe, --slow-fraction 0.25:4;"
    echo "lr 0.01, and 0.001 for the parameter-server paradigms (124 workers' gradients at 0.01 diverge)."
    echo
    echo "| paradigm | wall s | peak MB | simulated train s | test acc | figures |"
    echo "|---|---|---|---|---|---|"
    while read -r name figs args; do
        # shellcheck disable=SC2086
        read -r wall mb t _ <<< "$(simrun "$W/e-$name" --hosts 128 --slow-fraction 0.25:4 -- train \
            --model mlp --data fashion-mnist --batch 32 --steps 20 --lr 0.01 --test-subset 2000 --quiet --sync $args)"
        vals=""
        for f in ${figs//,/ }; do vals="$vals $f=$(field "$W/e-$name.jsonl" done "$f" 2>/dev/null)"; done
        echo "| $name | $wall | $mb | $t | $(field "$W/e-$name.jsonl" done test_acc 2>/dev/null) |$vals |"
    done <<'EOF'
bsp collectives bsp
asp staleness_mean,staleness_max asp --servers 4 --lr 0.001
ssp staleness_mean,staleness_max ssp --servers 4 --staleness 3 --lr 0.001
dssp staleness_mean,staleness_max dssp --servers 4 --lr 0.001
downpour staleness_mean,staleness_max downpour --servers 4 --push-every 2 --lr 0.001
easgd center_updates easgd --servers 4
gossip-pull mixes,consensus_distance gossip --gossip pull
gossip-push mixes,consensus_distance gossip --gossip push
selsync sync_fraction selsync
localsgd rounds localsgd --period 4
EOF
    echo
fi
