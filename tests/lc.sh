#!/usr/bin/env bash
# The locally connected model (--model lc): it learns Fashion-MNIST in a
# few hundred steps, alone and under bsp; a run resumes bit for bit; its
# checkpoint names the per-position weights and biases by their shapes and
# evaluates as the run's final evaluation did; synthetic images of a chosen
# shape feed it; bad specs and grids are refused in one line; split into
# spatial blocks (--model-parallel) it follows the single process's losses
# under none, bsp and downpour, with the halo the formula says.
# Usage: tests/lc.sh BUILD_DIR   (prints "lc: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin lc "$@"

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
    if ge "$acc" 0.65; then ok "$s trains lc on $np rank(s): test accuracy $acc (floor 0.65)"
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
refused "lc negative padding (once taken for the default)" "0 <= p < k .*p=-1" "$DSGD" train "${S[@]}" --model lc:8:p=-1
refused "lc field given twice" "--model lc:8:k=3:k=5: k= is given twice" "$DSGD" train "${S[@]}" --model lc:8:k=3:k=5
refused "lc deeper than the image" "--model lc:4,4,4,4,4" "$DSGD" train "${S[@]}" --model lc:4,4,4,4,4
refused "bad synthetic shape" "synthetic" "$DSGD" train --data synthetic:256,3x20 --model lc --steps 2 --quiet
# 28x28 pools to 14, 7, 3, 1: one position cannot be cut in two
REFUSE_LIMIT=60 refused "a grid that does not tile an lc layer" "--model-parallel 2: its 1x2 grid of blocks does not tile layer 10" \
    "${MPIRUN[@]}" -np 2 "$DSGD" train "${S[@]}" --model lc:2,2,2,2 --sync bsp --model-parallel 2

# ---- spatial model parallelism: the same run on 1, 2 (1x2) and 4 (2x2) blocks ----
# Every position computes what it computed alone; only the sum of the
# classifier's logits over the blocks changes its order. The halo per step is the formula:
# lc:4,6:k=3 pools 28x28x4 to 14x14x4, and layer 2's 3x3 fields reach one
# row and column into the neighbours' blocks, forward and backward.
# loss_gap A B N: the largest relative difference between two runs' N
# evaluated training losses (nothing if either has not N)
loss_gap() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def losses(p):
    return [e["train_loss"] for e in map(json.loads, open(p)) if e.get("event") == "eval" and e.get("train_loss") is not None]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == int(sys.argv[3]), (len(a), len(b))
print("%.3g" % max(abs(x - y) / abs(x) for x, y in zip(a, b)))
PY
}
P=(--model lc:4,6:k=3 --data "$DATA" --train-subset 1600 --test-subset 200 --batch 32 --steps 50 --lr 0.02
   --momentum 0.9 --eval-every 5 --quiet)
for M in 1 2 4; do
    launch $M "${P[@]}" --sync none --model-parallel $M --metrics "$WORK/sp$M.jsonl" --checkpoint "$WORK/sp$M.st" > "$WORK/sp$M.out" 2>&1
done
for M in 2 4; do
    d=$(loss_gap "$WORK/sp1.jsonl" "$WORK/sp$M.jsonl" 10)
    if le "$d" 1e-5; then ok "--model-parallel $M (spatial blocks) follows the single-process losses over 50 steps (max relative difference $d)"
    else bad "--model-parallel $M losses" "'$d': $(tail -c 300 "$WORK/sp$M.out")"; fi
    c=$(python3 "$HERE/ckpt_diff.py" "$WORK/sp1.st" "$WORK/sp$M.st" 2>&1)
    if le "$c" 1e-4; then ok "--model-parallel $M assembles the whole checkpoint from its blocks (max |diff| $c from the single process's)"
    else bad "--model-parallel $M checkpoint" "$c"; fi
done
# The lead's halo: layer 2's output blocks follow its pooling (14 rows
# pool to 7, cut 3 + 4, so blocks of 6 and 8 rows) while its input blocks
# are 7 + 7, so the lead's fields need nothing of the others and it sends
# them the 2 rows and/or columns next to theirs; what returns in the
# backward pass is their gradient, sent by the others. 1x2: 2 columns of
# 14 rows; 2x2: 2 columns of 7 rows, 2 rows of 7 columns and a 2x2 corner;
# 4 channels, 32 samples, 4 bytes.
h2=$(json_field "$WORK/sp2.jsonl" done halo_bytes_per_step 2>/dev/null)
[ "$h2" = $((2 * 14 * 4 * 32 * 4)) ] && ok "1x2 blocks: the lead sends $h2 halo bytes per step, as the formula says" \
    || bad "1x2 halo bytes" "'$h2', want $((2 * 14 * 4 * 32 * 4))"
h4=$(json_field "$WORK/sp4.jsonl" done halo_bytes_per_step 2>/dev/null)
[ "$h4" = $(((14 + 14 + 4) * 4 * 32 * 4)) ] && ok "2x2 blocks: the lead sends $h4 halo bytes per step, as the formula says" \
    || bad "2x2 halo bytes" "'$h4', want $(((14 + 14 + 4) * 4 * 32 * 4))"
# the lead holds its blocks of the lc layers and the classifier's columns of
# its block's features: 14x14 positions of layer 1 (4 x 9 weights + 4
# biases each), 6x6 of layer 2 (6 x 36 + 6), 10 x (6 channels x 3x3) + 10 biases
n4=$(json_field "$WORK/sp4.jsonl" config nparams_per_rank 2>/dev/null)
[ "$n4" = $((196 * 40 + 36 * 222 + 10 * 54 + 10)) ] && ok "2x2 blocks: the lead holds $n4 of $(json_field "$WORK/sp4.jsonl" config nparams) parameters" \
    || bad "2x2 parameters per rank" "'$n4', want $((196 * 40 + 36 * 222 + 10 * 54 + 10))"
# colour, stride 2, no pooling, tanh: blocks of 10x8 and 5x4 positions
Q=(--model lc:4,4:k=5:s=2:pool=1:tanh --data synthetic:256,3x20x16 --batch 16 --steps 30 --lr 0.02 --eval-every 5 --quiet)
for M in 1 4; do launch $M "${Q[@]}" --model-parallel $M --metrics "$WORK/sq$M.jsonl" > "$WORK/sq$M.out" 2>&1; done
d=$(loss_gap "$WORK/sq1.jsonl" "$WORK/sq4.jsonl" 6)
if le "$d" 1e-5; then ok "2x2 blocks of a stride-2, unpooled tanh lc model on 3x20x16 images follow one process (max relative difference $d)"
else bad "2x2 blocks, stride 2, tanh" "'$d': $(tail -c 300 "$WORK/sq4.out")"; fi

# a whole checkpoint resumes on blocks as it does on one process
for M in 1 2; do
    launch $M "${P[@]}" --sync none --model-parallel $M --steps 60 --resume "$WORK/sp1.st" --checkpoint "$WORK/rs$M.st" > "$WORK/rs$M.out" 2>&1
done
c=$(python3 "$HERE/ckpt_diff.py" "$WORK/rs1.st" "$WORK/rs2.st" 2>&1)
if le "$c" 1e-4; then ok "a single process's checkpoint resumes on 1x2 blocks as on one process (max |diff| $c after 10 more steps)"
else bad "resume on blocks" "$c: $(tail -c 300 "$WORK/rs2.out")"; fi
# under bsp, 2 replicas of 2 blocks follow 2 data-parallel ranks
launch 2 "${P[@]}" --sync bsp --metrics "$WORK/b1.jsonl" > "$WORK/b1.out" 2>&1
launch 4 "${P[@]}" --sync bsp --model-parallel 2 --metrics "$WORK/b2.jsonl" > "$WORK/b2.out" 2>&1
a=$(json_field "$WORK/b1.jsonl" done test_loss 2>/dev/null); b=$(json_field "$WORK/b2.jsonl" done test_loss 2>/dev/null)
if [ -n "$a" ] && awk -v a="$a" -v b="$b" 'BEGIN{d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-5 * a)}'; then
    ok "bsp with 2 replicas of 2 blocks ends at the test loss of bsp on 2 ranks ($b against $a)"
else bad "bsp with spatial blocks" "'$b' against '$a': $(tail -c 300 "$WORK/b2.out")"; fi
# downpour: one replica of 2 blocks and a shard, against one worker and a shard
launch 2 "${P[@]}" --sync downpour --servers 1 --metrics "$WORK/d1.jsonl" > "$WORK/d1.out" 2>&1
launch 3 "${P[@]}" --sync downpour --servers 1 --model-parallel 2 --metrics "$WORK/d2.jsonl" > "$WORK/d2.out" 2>&1
a=$(json_field "$WORK/d1.jsonl" done test_loss 2>/dev/null); b=$(json_field "$WORK/d2.jsonl" done test_loss 2>/dev/null)
if [ -n "$a" ] && awk -v a="$a" -v b="$b" 'BEGIN{d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-4 * a)}'; then
    ok "downpour with a replica of 2 blocks ends at the test loss of one worker ($b against $a)"
else bad "downpour with spatial blocks" "'$b' against '$a': $(tail -c 300 "$WORK/d2.out")"; fi

summary lc
