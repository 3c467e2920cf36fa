#!/usr/bin/env bash
# Simulated against real, shaped links: the same runs on a cluster of
# network namespaces (scripts/dsgd-cluster, one rank per host, links shaped
# with tc's tbf) and on scripts/dsgd-sim with the same bandwidth, one host
# per rank. bsp (per layer, or bsp-bucket: one all-reduce a step) and
# localsgd (H = 4): time per step; the parameter-server paradigms (asp and
# ssp with one shard on host 0, asp2 with two on hosts 0 and 1, downpour
# with the eager-sized pushes of mlp:16, async easgd) and gossip (pull or
# gossip-push): time per epoch of the training subset, 1280 samples per
# worker. Prints a markdown table: the real
# median [min, max] of the repeats, the simulated time, and the error of the
# simulated against the real median, with SMPI's default message model
# (every message waits for its receive) and with --eager 65536 (Open MPI's
# eager limit over TCP); for bsp also the all-reduce's bandwidth
# cost 2(N-1)/N x gradient bytes / link rate and the measured step over it.
#
# --compute none runs every case without its forward and backward passes
# (dsgd train --compute none): the same messages, and a step's time is its
# communication and the paradigm's own arithmetic. On a machine with fewer
# cores than hosts the ranks' computing competes with their TCP work and
# the reference stops being one of links; without it, what is compared is
# the network model alone.
#
# Links have bandwidth but no added delay (tc's netem is not available on
# every kernel): the real latency is the kernel's and the MPI's (veth,
# bridge, TCP: 4-15 us one way on the machines measured). Each cluster's
# is measured when it comes up (bench/ps_bench latency between hosts 0 and
# 1: half the median round trip of 300 one-byte pings) and the simulated
# links get it (--latency), and the simulated bandwidth is what TCP carries
# on the shaped link: tc counts each frame's headers, and a full frame of
# 1514 bytes carries 1448 of payload, so 95.6% of the rate. Both are listed
# under the table (docs/simulation.md, "The links themselves").
#
# Usage: experiments/net_calibration.sh [--quick] [--repeats R] [--mpi openmpi|mpich]
#                                       [--rates "100mbit 1gbit"] [--ns "2 3 4"] [--paradigms "bsp asp gossip"|all]
#                                       [--compute full|none] [--build DIR] [--sim-build DIR]
#   full: 100mbit and 1gbit, N = 2, 3, 4, bsp/asp/gossip, 3 repeats (8
#   minutes on a quiet 2-core machine); --paradigms all: every case above
#   (a case that needs more hosts than N, asp2 at N = 2, is skipped). --quick: 1gbit, N = 2 and 4, bsp
#   and asp, 1 repeat (about 2 minutes). Needs root (network namespaces),
#   make, make sim, and dataset-fashion-mnist. Timings need a quiet machine:
#   the load average at the start is printed with the table.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0 REPS="" MPI=openmpi COMPUTE=full ORATES="" ONS="" OPARS="" OBIN="" SIMB=build-sim
while [ $# -gt 0 ]; do
    case "$1" in --repeats|--mpi|--rates|--ns|--paradigms|--build|--sim-build|--compute) [ $# -ge 2 ] || { echo "net_calibration: $1 needs a value" >&2; exit 2; } ;; esac
    case "$1" in
        --quick) QUICK=1; shift ;;
        --repeats) REPS=$2; shift 2 ;;
        --mpi) MPI=$2; shift 2 ;;
        --rates) ORATES=$2; shift 2 ;;
        --ns) ONS=$2; shift 2 ;;
        --paradigms) OPARS=$2; shift 2 ;;
        --build) OBIN=$2/dsgd; shift 2 ;;
        --compute) COMPUTE=$2; shift 2
                   case "$COMPUTE" in full|none) ;; *) echo "net_calibration: --compute is full or none, not '$COMPUTE'" >&2; exit 2 ;; esac ;;
        --sim-build) SIMB=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "net_calibration: unknown option '$1' (--quick, --repeats R, --mpi openmpi|mpich, --rates, --ns, --paradigms, --compute full|none, --build, --sim-build)" >&2; exit 2 ;;
    esac
done
if [ $QUICK = 1 ]; then RATES=(1gbit); NS=(2 4); PARS=(bsp asp); REPS=${REPS:-1}
else RATES=(100mbit 1gbit); NS=(2 3 4); PARS=(bsp asp gossip); REPS=${REPS:-3}; fi
[ -z "$ORATES" ] || read -r -a RATES <<< "$ORATES"
[ -z "$ONS" ] || read -r -a NS <<< "$ONS"
[ -z "$OPARS" ] || read -r -a PARS <<< "$OPARS"
[ "${PARS[*]}" != all ] || PARS=(bsp bsp-bucket localsgd asp asp2 ssp downpour easgd gossip gossip-push)
BIN=build/dsgd; [ "$MPI" = mpich ] && BIN=build-mpich/dsgd
[ -z "$OBIN" ] || BIN=$OBIN
PSB=$(dirname "$BIN")/bench/ps_bench
for f in "$BIN" "$PSB" "$SIMB/dsgd"; do
    [ -x "$f" ] || { echo "net_calibration: $f missing (make$([ "$MPI" = mpich ] && echo ' MPI=mpich') $PSB && make sim)" >&2; exit 1; }
done
BIN=$(readlink -f "$BIN") PSB=$(readlink -f "$PSB") SIMB=$(readlink -f "$SIMB")
[ -d /usr/share/datasets/fashion-mnist ] || { echo "net_calibration: needs dataset-fashion-mnist (scripts/install-deps)" >&2; exit 1; }
CL=scripts/dsgd-cluster
export DSGD_CLUSTER_NAME=ncal$$
why=$("$CL" check 2>&1) || { echo "net_calibration: $why" >&2; exit 1; }
W=$(mktemp -d /tmp/dsgd-netcal-XXXXXX) LATS=()
trap '"$CL" down > /dev/null 2>&1; rm -rf "$W"' EXIT

field() { python3 -c 'import json,sys
v=None
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["event"]==sys.argv[2]: v=r.get(sys.argv[3])
print(v)' "$@"; }
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4g %.4g %.4g\n", m, v[1], v[NR] }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }'; }
# sim_rate RATE: the payload rate of a tc rate, in SimGrid's spelling
# (100mbit -> 11954821Bps: 1448 of each 1514 bytes)
sim_rate() { awk -v r="$1" 'BEGIN{ m = (r ~ /gbit$/) ? 1e9 : (r ~ /mbit$/) ? 1e6 : 1e3; sub(/[kmg]bit$/, "", r); printf "%.0fBps\n", r * m / 8 * 1448 / 1514 }'; }

D=(--data fashion-mnist --model mlp --batch 64 --lr 0.05 --test-subset 500 --quiet --compute "$COMPUTE")
# args PARADIGM N: the training flags; bsp a fixed number of steps, the
# others one epoch of a subset whose size grows with the workers
# (empty: the case needs more hosts than N)
args() {
    case "$1" in
        bsp) echo "--sync bsp --steps 60 --eval-every 1000" ;;
        bsp-bucket) echo "--sync bsp --bucket-kb 1024 --steps 60 --eval-every 1000" ;;
        localsgd) echo "--sync localsgd --period 4 --steps 60 --eval-every 1000" ;;
        asp) echo "--sync asp --servers 1 --train-subset $((1280 * ($2 - 1))) --epochs 1" ;;
        asp2) if [ "$2" -ge 3 ]; then echo "--sync asp --servers 2 --train-subset $((1280 * ($2 - 2))) --epochs 1"; fi ;;
        ssp) echo "--sync ssp --staleness 2 --servers 1 --train-subset $((1280 * ($2 - 1))) --epochs 1" ;;
        downpour) echo "--sync downpour --model mlp:16 --servers 1 --train-subset $((1280 * ($2 - 1))) --epochs 1" ;;
        easgd) echo "--sync easgd --easgd-mode async --tau 4 --servers 1 --train-subset $((1280 * ($2 - 1))) --epochs 1" ;;
        gossip) echo "--sync gossip --gossip pull --train-subset $((1280 * $2)) --epochs 1" ;;
        gossip-push) echo "--sync gossip --gossip push --train-subset $((1280 * $2)) --epochs 1" ;;
        *) echo "net_calibration: unknown paradigm case '$1' (bsp bsp-bucket localsgd asp asp2 ssp downpour easgd gossip gossip-push, or all)" >&2; exit 2 ;;
    esac
}
# per PARADIGM FILE: seconds per step (bsp) or per epoch (train_s)
per() {
    local t s
    t=$(field "$2" done train_s)
    case "$1" in
        bsp|bsp-bucket|localsgd) s=$(field "$2" done steps); awk -v t="$t" -v s="$s" 'BEGIN{printf "%.6g\n", t / s}' ;;
        *) echo "$t" ;;
    esac
}

echo "## Real shaped links against dsgd-sim ($MPI, $(date -u +%Y-%m-%d), load average at start $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "mlp (Fashion-MNIST; downpour: mlp:16, 51 KB pushes), batch 64; bsp, bsp-bucket, localsgd: ms per step (60 steps); the others: s per epoch of 1280 samples per worker."
echo "Real: median [min, max] of $REPS runs; simulated: one run (gossip: the median of $REPS). Error: simulated against the real median.$([ "$COMPUTE" = none ] && echo " --compute none: no forward or backward passes, the same messages.")"
echo
echo "| link | N | paradigm | real | simulated | error | simulated, --eager 65536 | error | bandwidth cost | real / cost |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rate in "${RATES[@]}"; do
    for n in "${NS[@]}"; do
        "$CL" up "$n" --bandwidth "$rate" > /dev/null
        lat=$("$CL" mpirun --mpi "$MPI" --hosts 2 --dsgd "$PSB" --grace 5 -- latency 300 2> "$W/lat.err" | sed -n 's/.*one_way_us=\([0-9.]*\).*/\1/p')
        [ -n "$lat" ] || { echo "net_calibration: the latency probe failed: $(tail -2 "$W/lat.err")" >&2; exit 1; }
        LATS+=("$rate, N = $n: $lat us")
        for p in "${PARS[@]}"; do
            a=$(args "$p" "$n") || exit 2
            [ -n "$a" ] || continue
            read -r -a A <<< "$a"
            vals=()
            for r in $(seq 1 "$REPS"); do
                rm -f "$W/real.jsonl"
                "$CL" mpirun --mpi "$MPI" --dsgd "$BIN" -- train "${D[@]}" "${A[@]}" --metrics "$W/real.jsonl" > "$W/real.out" 2>&1 ||
                    { echo "net_calibration: real run failed: $(tail -2 "$W/real.out")" >&2; exit 1; }
                vals+=("$(per "$p" "$W/real.jsonl")")
            done
            read -r med lo hi <<< "$(stats "${vals[@]}")"
            # a simulated gossip run is not reproducible: SimGrid charges
            # each computing stretch the processor time it took here, and
            # whether a peer's copy is new when it is read depends on it
            # (three runs of gossip push on 3 hosts: 1, 3 and 1 mixes,
            # 1.46, 1.78 and 1.46 s), so its simulated side is the median
            # of as many runs as the real one
            sreps=1
            case "$p" in gossip*) sreps=$REPS ;; esac
            svals=() evals=()
            for r in $(seq 1 "$sreps"); do
                scripts/dsgd-sim --build "$SIMB" --hosts "$n" --bandwidth "$(sim_rate "$rate")" --latency "${lat}us" -- \
                    train "${D[@]}" "${A[@]}" --metrics "$W/sim.jsonl" > "$W/sim.out" 2>&1 ||
                    { echo "net_calibration: simulated run failed: $(tail -2 "$W/sim.out")" >&2; exit 1; }
                svals+=("$(per "$p" "$W/sim.jsonl")")
                # again with Open MPI's eager limit over TCP (64 KiB): messages
                # up to it go without waiting for their receive
                scripts/dsgd-sim --build "$SIMB" --hosts "$n" --bandwidth "$(sim_rate "$rate")" --latency "${lat}us" --eager 65536 -- \
                    train "${D[@]}" "${A[@]}" --metrics "$W/sime.jsonl" > "$W/sim.out" 2>&1 ||
                    { echo "net_calibration: simulated run (--eager 65536) failed: $(tail -2 "$W/sim.out")" >&2; exit 1; }
                evals+=("$(per "$p" "$W/sime.jsonl")")
            done
            read -r sim _ _ <<< "$(stats "${svals[@]}")"
            read -r sime _ _ <<< "$(stats "${evals[@]}")"
            unit=s scale=1 cost="" ratio=""
            case "$p" in bsp|bsp-bucket|localsgd) unit=ms scale=1000 ;; esac
            if [ "$p" = bsp ] || [ "$p" = bsp-bucket ]; then
                np=$(field "$W/real.jsonl" config nparams)
                bps=$(awk -v r="$rate" 'BEGIN{ m = (r ~ /gbit$/) ? 1e9 : (r ~ /mbit$/) ? 1e6 : 1e3; sub(/[kmg]bit$/, "", r); print r * m / 8 }')
                cost=$(awk -v p="$np" -v n="$n" -v b="$bps" 'BEGIN{printf "%.4g", 2 * (n - 1) / n * 4 * p / b * 1000}')
                ratio=$(awk -v m="$med" -v c="$cost" 'BEGIN{printf "%.2f", m * 1000 / c}')
                cost="$cost ms"
            fi
            f() { awk -v v="$1" -v s=$scale 'BEGIN{printf "%.4g", v * s}'; }
            echo "| $rate | $n | $p | $(f "$med") [$(f "$lo"), $(f "$hi")] $unit | $(f "$sim") $unit | $(pct "$sim" "$med") | $(f "$sime") $unit | $(pct "$sime" "$med") | $cost | $ratio |"
        done
        "$CL" down > /dev/null
    done
done
echo
echo "Simulated links: the real one-way latency measured on each cluster ($(IFS=';'; echo "${LATS[*]}" | sed 's/;/; /g')) and 1448/1514 of the rate."
