#!/usr/bin/env bash
# The locally connected model (--model lc): it learns Fashion-MNIST in a
# few hundred steps, alone and under bsp; a run resumes bit for bit; its
# checkpoint names the per-position weights and biases by their shapes and
# evaluates as the run's final evaluation did; synthetic images of a chosen
# shape feed it; bad specs and --model-parallel are refused in one line.
# Usage: tests/lc.sh BUILD_DIR   (prints "lc: N passed, M failed")
set -u
BUILD=${1:-build}
DSGD="$BUILD/dsgd"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/dsgd-lc-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/lib.sh"

DATA=fashion-mnist
need_fashion lc lc

# ---- it learns: 2 epochs of 2000 samples (126 steps of 32) ----
# Measured: 0.81 alone, 0.82 under bsp on 2 workers (63 steps each);
# chance is 0.10, and the floor leaves room for summation order.
T=(--model lc --data "$DATA" --train-subset 2000 --test-subset 500 --batch 32 --epochs 2 --lr 0.05 --momentum 0.9 --quiet)
for np in 1 2; do
    s=none; [ $np = 2 ] && s=bsp
    launch $np "${T[@]}" --sync $s --metrics "$WORK/t$np.jsonl" > "$WORK/t$np.out" 2>&1
    acc=$(json_field "$WORK/t$np.jsonl" done test_acc 2>/dev/null)
    if awk -v a="$acc" 'BEGIN{exit !(a != "" && a + 0 >= 0.65)}'; then ok "$s trains lc on $np rank(s): test accuracy $acc (floor 0.65)"
    else bad "$s trains lc" "test accuracy '$acc' below 0.65: $(tail -c 300 "$WORK/t$np.out")"; fi
done

# ---- bit-exact resume ----
E=(--model lc:4,6:k=5:s=1:p=2 --data "$DATA" --train-subset 512 --test-subset 200 --batch 32 --quiet --lr 0.05
   --optimizer nesterov --momentum 0.9 --weight-decay 5e-4 --epochs 2 --eval-every 10)
launch 1 "${E[@]}" --checkpoint "$WORK/full.st" --metrics "$WORK/full.jsonl" > "$WORK/full.out" 2>&1
launch 1 "${E[@]}" --steps 13 --checkpoint "$WORK/half.st" > "$WORK/half.out" 2>&1
launch 1 "${E[@]}" --resume "$WORK/half.st" --checkpoint "$WORK/res.st" > "$WORK/res.out" 2>&1
if [ -s "$WORK/full.st" ] && cmp -s "$WORK/full.st" "$WORK/res.st"; then
    ok "lc resumed after 13 steps: the final checkpoint equals the uninterrupted run's byte for byte"
else
    bad "lc resumed after 13 steps" "max |diff| $(python3 "$HERE/ckpt_diff.py" "$WORK/full.st" "$WORK/res.st" 2>&1): $(tail -c 300 "$WORK/res.out")"
fi
python3 - "$WORK/full.st" <<'PY' && ok "the checkpoint holds each lc layer's weight as (OH, OW, OC, C, KH, KW) and its bias as (OC, OH, OW)" || bad "lc checkpoint tensors" "see above"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
hdr = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
shapes = {k: v["shape"] for k, v in hdr.items() if k != "__metadata__"}
assert shapes["layer0.lc.weight"] == [28, 28, 4, 1, 5, 5], shapes
assert shapes["layer0.lc.bias"] == [4, 28, 28], shapes
assert shapes["layer3.lc.weight"] == [14, 14, 6, 4, 5, 5], shapes
assert shapes["layer3.lc.bias"] == [6, 14, 14], shapes
assert shapes["layer7.dense.weight"] == [10, 294], shapes
PY

# ---- a checkpoint evaluates as the run's own final evaluation did ----
want=$(json_field "$WORK/full.jsonl" done test_acc)
got=$("$DSGD" eval --checkpoint "$WORK/full.st" --data "$DATA" --test-subset 200 2>&1 | sed -nE 's/.*test accuracy ([0-9.]+).*/\1/p')
if [ -n "$got" ] && awk -v a="$got" -v b="$want" 'BEGIN{exit !(a - b < 1e-4 && b - a < 1e-4)}'; then
    ok "dsgd eval of the lc checkpoint gives the run's final test accuracy ($got)"
else bad "lc checkpoint evaluation" "eval '$got', run '$want'"; fi

# ---- synthetic images of a chosen shape: colour, not square, stride 2 ----
launch 1 --data synthetic:256,3x20x16 --model lc:4,4:k=5:s=2:pool=1 --batch 16 --steps 20 --lr 0.05 \
    --metrics "$WORK/syn.jsonl" --quiet > "$WORK/syn.out" 2>&1
if [ "$(json_field "$WORK/syn.jsonl" config nparams 2>/dev/null)" = $((80 * (4 * 75 + 4) + 20 * (4 * 100 + 4) + 80 * 4 + 4)) ] &&
   [ "$(json_field "$WORK/syn.jsonl" done status 2>/dev/null)" = ok ]; then
    ok "lc:4,4:k=5:s=2:pool=1 trains on synthetic 3x20x16 images ($(json_field "$WORK/syn.jsonl" config nparams) parameters)"
else bad "lc on synthetic 3x20x16" "$(tail -c 300 "$WORK/syn.out")"; fi

# ---- refused in one line ----
S=(--data "$DATA" --train-subset 256 --test-subset 64 --steps 2 --quiet)
refused "lc channel count not a number" "--model lc:8,x" "$DSGD" train "${S[@]}" --model lc:8,x
refused "lc unknown field" "unknown field 'kernel'" "$DSGD" train "${S[@]}" --model lc:8:kernel=3
refused "lc padding as wide as the kernel" "p < k" "$DSGD" train "${S[@]}" --model lc:8:k=3:p=3
refused "lc deeper than the image" "--model lc:4,4,4,4,4" "$DSGD" train "${S[@]}" --model lc:4,4,4,4,4
refused "bad synthetic shape" "synthetic" "$DSGD" train --data synthetic:256,3x20 --model lc --steps 2 --quiet
REFUSE_LIMIT=60 refused "lc with --model-parallel 2" "--model-parallel 2" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${S[@]}" --model lc --sync bsp --model-parallel 2

summary lc
