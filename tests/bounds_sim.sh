#!/usr/bin/env bash
# Acceptance of bounded runs on a simulated heterogeneous cluster: 16
# workers (two of them 4x and 2x slower hosts) under every paradigm with
# --time-limit: every worker stops within one step of the limit, and the
# final evaluation comes after the paradigm's final synchronization (the
# done event's per-worker stop times, checked by bounds_check.py). One
# simulated clock: no skew allowed.
# Usage: tests/bounds_sim.sh SIM_BUILD_DIR   (prints "bounds_sim: N passed, M failed")
set -u
SIM=${1:-build-sim}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/dsgd-bounds-sim-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$HERE/lib.sh"
if [ ! -x "$SIM/dsgd" ]; then
    bad "simulated build" "$SIM/dsgd missing (make sim)"
    summary bounds_sim; exit 1
fi
LIMIT=0.05
C=(train --data synthetic:2048 --model mlp:16 --batch 16 --epochs 1000 --lr 0.05 --test-subset 256
   --time-limit "$LIMIT" --quiet)
# NAME EXTRA_HOSTS LOCKSTEP -- dsgd flags: 16 workers plus the paradigm's
# server/coordinator ranks; workers 3 and 10 are slow (dsgd-sim --slow-workers)
case_() {
    local name=$1 extra=$2 lock=$3
    shift 4
    local h=$((16 + extra))
    if "$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts "$h" --slow-workers 3=4,10=2 -- "${C[@]}" "$@" \
            --metrics "$WORK/$name.jsonl" > "$WORK/$name.out" 2>&1; then
        local flags=()
        [ "$lock" = 1 ] && flags=(--lockstep)
        if msg=$(python3 "$HERE/bounds_check.py" "$WORK/$name.jsonl" "$LIMIT" "${flags[@]}"); then ok "sim $name: $msg"
        else bad "sim $name" "$msg"; fi
    else
        bad "sim $name" "$(tail -3 "$WORK/$name.out")"
    fi
}
case_ bsp 0 1 -- --sync bsp
case_ localsgd 0 1 -- --sync localsgd
# the simulated build's blocking stop decisions are communication too: here
# they make three quarters of a localsgd step, and when they were counted
# nowhere, computing and communicating covered 0.23 of the training time
if msg=$(python3 "$HERE/shares_check.py" "$WORK/localsgd.jsonl" 2>&1); then ok "sim localsgd: the shares add up: $msg"
else bad "sim localsgd: the shares" "$msg"; fi
case_ fedavg 0 1 -- --sync fedavg --fedavg-fraction 0.5
case_ selsync 0 1 -- --sync selsync
case_ bsp-ps 1 0 -- --sync bsp-ps
case_ asp 1 0 -- --sync asp
case_ ssp 1 0 -- --sync ssp --staleness 3
case_ dssp 1 0 -- --sync dssp
case_ downpour 1 0 -- --sync downpour
case_ easgd 1 0 -- --sync easgd
case_ easgd-sync 0 1 -- --sync easgd --easgd-mode sync
case_ gossip-pull 0 0 -- --sync gossip --gossip pull
case_ gossip-push 0 0 -- --sync gossip --gossip push
case_ gossip-round 0 1 -- --sync gossip --gossip round
case_ sandblaster 2 1 -- --sync sandblaster --batch-total 256
case_ bsp-mp2 0 1 -- --sync bsp --model-parallel 2
case_ downpour-mp2 1 0 -- --sync downpour --model-parallel 2
summary bounds_sim
