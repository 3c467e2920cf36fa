#!/usr/bin/env bash
# Single-process accuracy on the whole of Fashion-MNIST, 3 epochs: the MLP
# with the settings of the reference comparison (constant rate, then the same
# with the rate cut x0.1 after 2 epochs), and LeNet-5. Prints one line each.
# Usage: experiments/single.sh [BUILD_DIR] [SEEDS...]   (default seeds: 1 2)
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -euo pipefail
BUILD=${1:-build}
# a build directory given is the caller's (the default, the repository's)
[ -z "${1-}" ] || [[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
shift || true
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2)
cd "$(dirname "$0")/.."
run() {   # NAME ARGS...
    local name=$1 s acc
    shift
    for s in "${SEEDS[@]}"; do
        acc=$("$BUILD/dsgd" train --data fashion-mnist --epochs 3 --quiet --seed "$s" "$@" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
        echo "$name seed=$s test_acc=$acc"
    done
}
run "mlp, batch 64, lr 0.05, momentum 0.9" --model mlp --batch 64 --lr 0.05 --momentum 0.9
run "mlp, the same, lr x0.1 after 2 epochs" --model mlp --batch 64 --lr 0.05 --momentum 0.9 --lr-schedule step --lr-step-every 1874
run "lenet, batch 32, lr 0.025, momentum 0.9, lr x0.1 after 2 epochs" --model lenet --batch 32 --lr 0.025 --momentum 0.9 \
    --lr-schedule step --lr-step-every 3750
