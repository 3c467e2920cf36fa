#!/usr/bin/env bash
# Old checkpoints still resume: every checkpoint in tests/old-checkpoints,
# one per paradigm, made by an older dsgd (tests/old-checkpoints/make.sh;
# the commit that added them says which), is resumed by this build for a
# few more steps. A change of the checkpoint format or of a paradigm's
# saved state that breaks this breaks users' saved runs.
# Usage: tests/compat.sh BUILD_DIR   (prints "compat: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin compat "$@"

OLD=$HERE/old-checkpoints
COMMON=(--data synthetic --model logreg --batch 16 --lr 0.05 --seed 3 --steps 30 --test-subset 256 --quiet --timeout 20)
while IFS='|' read -r name np flags; do
    ck=$OLD/$name.safetensors
    [ -f "$ck" ] || { bad "$name" "$ck is missing (tests/old-checkpoints/make.sh makes it)"; continue; }
    at=20
    case $flags in *--steps*) at=$(echo "$flags" | sed -E 's/.*--steps ([0-9]+).*/\1/') ;; esac
    # shellcheck disable=SC2086
    out=$(launch "$np" "${COMMON[@]}" $flags --steps $((at + 4)) --resume "$ck" --checkpoint "$WORK/$name.safetensors" 2>&1 </dev/null)
    rc=$?
    # the shards' checkpoints hold the workers' mean step: at most the run's
    from=$(echo "$out" | sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' | head -n 1)
    if [ $rc -ne 0 ]; then bad "$name" "exit $rc resuming the old checkpoint: $(echo "$out" | grep -m1 'dsgd' | head -c 300)"
    elif [ -z "$from" ] || [ "$from" -lt 1 ] || [ "$from" -gt "$at" ]; then
        bad "$name" "not resumed from a step in 1..$at: $(echo "$out" | head -c 300)"
    elif [ ! -s "$WORK/$name.safetensors" ]; then bad "$name" "resumed, but wrote no checkpoint"
    else ok "$name ($np rank(s)): the old checkpoint resumes at step $from and the run goes on to step $((at + 4))"; fi
done < <(grep -v '^#' "$OLD/cases")
summary compat
