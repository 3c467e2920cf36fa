#!/usr/bin/env bash
# Hostile input and crashes: every numeric flag's syntax and range, damaged
# or crafted checkpoints, output paths that are not plain files, the same
# file under two names, data files that are FIFOs or damaged .gz streams,
# stale temporaries, and what a fault leaves behind. Each case is a defect
# found by fuzzing or by killing ranks; the comment names it.
# Usage: tests/robust.sh BUILD_DIR   (prints "robust: N passed, M failed")
set -u
BUILD=${1:-build}
DSGD="$BUILD/dsgd"
WORK=$(mktemp -d /tmp/dsgd-robust-XXXXXX)
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
T=(--data synthetic --model mlp:8 --batch 32 --quiet)

# ---- (10) one strict parser with a range for every numeric flag ----
refused "--lr 0x10 (hex) is refused" "--lr wants a decimal number" "$DSGD" train "${T[@]}" --lr 0x10
refused "--lr inf is refused" "--lr wants a decimal number" "$DSGD" train "${T[@]}" --lr inf
refused "--batch ' 64' is refused like '64 '" "--batch wants a decimal integer" "$DSGD" train "${T[@]}" --batch " 64"
refused "--batch '64 ' is refused" "--batch wants a decimal integer" "$DSGD" train "${T[@]}" --batch "64 "
refused "--momentum 1 is refused" "--momentum must be in \[0, 1)" "$DSGD" train "${T[@]}" --momentum 1
refused "--epochs 2^63-1 is refused, not overflowed" "--epochs must be in" "$DSGD" train "${T[@]}" --epochs 9223372036854775807
refused "--steps 2^63 overflows the parser and is refused" "--steps wants a decimal integer" "$DSGD" train "${T[@]}" --steps 9223372036854775808
for th in 0 -5 100000; do
    refused "dsgd eval --threads $th is refused" "--threads must be" "$DSGD" eval --checkpoint "$WORK/none.st" --threads "$th"
done

summary robust
