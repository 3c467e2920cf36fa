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

# ---- (1) checkpoint metadata is range-checked: a negative step ----
# st_meta_v1 IN OUT KEY VALUE: a copy with one metadata value changed,
# written as a version-1 file (CRC-32 of the data only, which both the
# current and older readers verify), so only the value itself is wrong.
st_meta_v1() {
    python3 - "$@" <<'PY'
import json, struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); data = raw[8 + n:]
md = hdr["__metadata__"]
md[sys.argv[3]] = sys.argv[4]; md["version"] = "1"; md["crc32"] = "%08x" % zlib.crc32(data)
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}
"$DSGD" train "${T[@]}" --steps 20 --checkpoint "$WORK/ck.st" > /dev/null 2>&1
for step in -1 -5000; do
    st_meta_v1 "$WORK/ck.st" "$WORK/neg.st" step "$step"
    refused "--resume of a checkpoint at step $step is refused" "metadata 'step'" "$DSGD" train "${T[@]}" --steps 40 --resume "$WORK/neg.st"
done
st_meta_v1 "$WORK/ck.st" "$WORK/v1.st" step 20
"$DSGD" train "${T[@]}" --steps 40 --resume "$WORK/v1.st" > "$WORK/v1.out" 2>&1 && ok "a version-1 checkpoint still resumes" || bad "version-1 checkpoint" "$(cat "$WORK/v1.out")"

summary robust
