#!/usr/bin/env bash
# Resume for every paradigm (docs/checkpoints.md): the lockstep ones continue
# bit for bit (a run stopped after k steps and resumed ends with the
# uninterrupted run's checkpoint, byte for byte); the asynchronous ones
# continue from the saved global model, optimizer state and clocks; a run
# resumes on another number of workers where the paradigm allows it, and
# is refused with one line where it does not.
# Usage: tests/resume.sh BUILD_DIR   (prints "resume: N passed, M failed")
set -u
BUILD=${1:-build}
DSGD="$BUILD/dsgd"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/dsgd-resume-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/lib.sh"

# refused NAME NEEDLE CMD...: non-zero exit within 60 s, one stderr line
# containing NEEDLE.
refused() {
    local name=$1 needle=$2
    shift 2
    timeout 60 "$@" >"$WORK/stdout" 2>"$WORK/stderr"
    local rc=$? lines
    lines=$(grep -c . "$WORK/stderr")
    if [ $rc -eq 0 ]; then bad "$name" "accepted (exit 0)"
    elif [ $rc -eq 124 ]; then bad "$name" "hung (killed after 60 s)"
    elif [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines: $(head -c 400 "$WORK/stderr")"
    elif ! grep -q -- "$needle" "$WORK/stderr"; then bad "$name" "error lacks '$needle': $(cat "$WORK/stderr")"
    else ok "$name"; fi
}
# launch NP ARGS...: dsgd train on NP ranks (NP = 1: no launcher)
launch() {
    local np=$1
    shift
    if [ "$np" = 1 ]; then timeout 300 "$DSGD" train "$@"
    else timeout 300 "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@"; fi
}
# exact NAME NP K ARGS...: the uninterrupted run (ARGS fix its length) and a
# run stopped after K steps then resumed write the same final checkpoint.
exact() {
    local name=$1 np=$2 k=$3
    shift 3
    rm -f "$WORK/full.st" "$WORK/half.st" "$WORK/res.st"
    launch "$np" "$@" --checkpoint "$WORK/full.st" --metrics "$WORK/full.jsonl" > "$WORK/full.out" 2>&1
    launch "$np" "$@" --steps "$k" --checkpoint "$WORK/half.st" > "$WORK/half.out" 2>&1
    launch "$np" "$@" --resume "$WORK/half.st" --checkpoint "$WORK/res.st" --metrics "$WORK/res.jsonl" > "$WORK/res.out" 2>&1
    if [ -s "$WORK/full.st" ] && cmp -s "$WORK/full.st" "$WORK/res.st"; then
        ok "$name: resumed after $k steps, the final checkpoint equals the uninterrupted run's byte for byte (max |diff| 0)"
    else
        bad "$name resumed after $k steps" "max |diff| $(python3 "$HERE/ckpt_diff.py" "$WORK/full.st" "$WORK/res.st" 2>&1): $(tail -c 300 "$WORK/res.out")"
    fi
}

# ---- SelSync: every worker's replica, momentum and EWMA windows ----
# delta 0.04 with W = 10 on this data syncs most steps but not all after
# the warm-up, so a resume mid-run must reproduce each decision.
S=(--data synthetic --model mlp:16 --batch 32 --lr 0.05 --momentum 0.9 --quiet --sync selsync --delta 0.04 --window 10 --steps 120)
exact "selsync, 2 workers, momentum" 2 47 "${S[@]}"
syncs=$(json_field "$WORK/full.jsonl" done syncs); rsyncs=$(json_field "$WORK/res.jsonl" done syncs)
if awk -v s="$syncs" 'BEGIN{exit !(s > 60 && s < 120)}' && [ "$syncs" = "$rsyncs" ]; then
    ok "selsync: the run skips some synchronizations after the warm-up ($syncs of 120 steps synced) and the resumed run counts the same"
else bad "selsync sync counts" "uninterrupted $syncs, resumed $rsyncs (want 60 < syncs < 120, equal)"; fi
exact "selsync, 2 workers, resumed inside the warm-up" 2 7 "${S[@]}"
launch 2 "${S[@]}" --steps 47 --checkpoint "$WORK/sel.st" > /dev/null 2>&1
refused "selsync: 2 workers' state resumed with 3 workers is refused" "resume with 2 workers" \
    "${MPIRUN[@]}" -np 3 "$DSGD" train "${S[@]}" --resume "$WORK/sel.st"
refused "selsync: windows of W = 10 resumed with --window 25 is refused" "resume with --window 10" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${S[@]}" --window 25 --resume "$WORK/sel.st"

# ---- L-BFGS: curvature pairs, ρ, γ, f and the gradient at W ----
# A batch of 256 of the 4096 samples (a new batch each iteration), and the
# full batch of a 512-sample subset (the gradient at W is carried over).
LB=(--data synthetic --model mlp:16 --quiet --sync lbfgs --steps 30)
exact "lbfgs, batches of 256" 1 13 "${LB[@]}" --batch-total 256
exact "lbfgs, full batch" 1 11 "${LB[@]}" --train-subset 512
ev=$(json_field "$WORK/full.jsonl" done lbfgs_evals); rev=$(json_field "$WORK/res.jsonl" done lbfgs_evals)
if [ "$ev" = "$rev" ] && [ "$ev" != None ]; then ok "lbfgs: the resumed run's evaluation count continues to the uninterrupted run's ($ev)"
else bad "lbfgs evaluation count" "uninterrupted $ev, resumed $rev"; fi
launch 1 "${LB[@]}" --train-subset 512 --steps 11 --checkpoint "$WORK/lb.st" > /dev/null 2>&1
refused "lbfgs: 10 curvature pairs resumed with --lbfgs-history 5 is refused" "resume with --lbfgs-history 10" \
    "$DSGD" train "${LB[@]}" --train-subset 512 --lbfgs-history 5 --resume "$WORK/lb.st"

summary resume
