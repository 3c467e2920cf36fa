#!/usr/bin/env bash
# Makes the checkpoints of tests/old-checkpoints: one short run per case of
# ./cases, with a dsgd built from an older commit (say which in the commit
# that adds them). tests/compat.sh resumes each with today's dsgd: a change
# of the checkpoint format must keep these loading.
# Usage: tests/old-checkpoints/make.sh OLD_DSGD
set -u
DSGD=$(realpath "${1:?usage: make.sh OLD_DSGD}")
cd "$(dirname "$0")"
. ../lib.sh
COMMON=(--data synthetic --model logreg --batch 16 --lr 0.05 --seed 3 --steps 20 --test-subset 256 --quiet)
grep -v '^#' cases | while IFS='|' read -r name np flags; do
    # shellcheck disable=SC2086
    if [ "$np" = 1 ]; then "$DSGD" train "${COMMON[@]}" $flags --checkpoint "$name.safetensors" >/dev/null </dev/null
    else "${MPIRUN[@]}" -np "$np" "$DSGD" train "${COMMON[@]}" $flags --checkpoint "$name.safetensors" >/dev/null </dev/null; fi
    echo "$name: $? $(stat -c %s "$name.safetensors" 2>/dev/null) bytes"
done
