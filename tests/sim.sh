#!/usr/bin/env bash
# The SimGrid build: the same sources under smpirun on a generated platform.
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
    if awk -v a="$acc" 'BEGIN{exit !(a >= 0.9)}'; then ok "4-rank bsp under smpirun trains (test_acc $acc)"
    else bad "4-rank bsp under smpirun" "test_acc $acc"; fi
    "${MPIRUN[@]}" -np 4 "$REAL/dsgd" "${C[@]}" --checkpoint "$WORK/real.st" > /dev/null 2>&1
    d=$(python3 "$HERE/ckpt_diff.py" "$WORK/sim.st" "$WORK/real.st" 2>&1)
    # same arithmetic; only the all-reduce's summation order may differ
    if awk -v d="$d" 'BEGIN{exit !(d != "" && d+0 <= 1e-5)}'; then ok "simulated and real 4-rank bsp agree (max |diff| $d)"
    else bad "simulated vs real bsp" "max |diff| $d"; fi
else
    bad "4-rank bsp under smpirun" "$(tail -5 "$WORK/sim.out")"
fi

# A 4x slower host stretches simulated time: BSP waits for the straggler.
# Here a step is ~1/4 computation and ~3/4 all-reduce on the simulated
# network, so a 4x slower host should make it ~1.8x longer; assert 1.4x.
S=(train --sync bsp --data synthetic --model mlp:256,256 --batch 256 --steps 10 --eval-every 1000 --quiet)
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 -- "${S[@]}" --metrics "$WORK/fast.jsonl" > /dev/null 2>&1
"$HERE/../scripts/dsgd-sim" --build "$SIM" --hosts 4 --slow 1=4 -- "${S[@]}" --metrics "$WORK/slow.jsonl" > /dev/null 2>&1
t1=$(json_field "$WORK/fast.jsonl" done train_s); t4=$(json_field "$WORK/slow.jsonl" done train_s)
if awk -v a="$t1" -v b="$t4" 'BEGIN{exit !(a > 0 && b >= 1.4 * a)}'; then ok "a 4x slower simulated host slows bsp (${t1}s -> ${t4}s simulated)"
else bad "slow simulated host" "train_s ${t1} -> ${t4}"; fi

summary sim
