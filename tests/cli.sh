#!/usr/bin/env bash
# End-to-end tests of the dsgd command: training to a stated accuracy, exact
# resume, evaluation of a checkpoint, the metrics file, the checkpoint read
# by plain Python, and one-line errors on bad input with no files left behind.
# Usage: tests/cli.sh BUILD_DIR   (prints "cli: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin cli "$@"

# expect_error NAME NEEDLE CMD...: non-zero exit, exactly one stderr line
# naming the problem, and no file created in $WORK/out.
expect_error() {
    local name=$1 needle=$2
    shift 2
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"
    "$@" >"$WORK/stdout" 2>"$WORK/stderr"
    local rc=$? lines
    lines=$(grep -c . "$WORK/stderr")
    if [ $rc -eq 0 ]; then bad "$name" "exit 0"
    elif [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines: $(head -c 400 "$WORK/stderr")"
    elif ! grep -q -- "$needle" "$WORK/stderr"; then bad "$name" "error lacks '$needle': $(cat "$WORK/stderr")"
    elif [ -n "$(ls -A "$WORK/out")" ]; then bad "$name" "left files: $(ls -A "$WORK/out")"
    else ok "$name"; fi
}

# mkidx DIR NAME MAGIC COUNT [H W]: a raw IDX file with deterministic content
mkidx() {
    perl -e 'my ($m,$n,$h,$w)=@ARGV; if ($h) { print pack("N4",$m,$n,$h,$w); print pack("C*", map { ($_*37)%256 } 0..$n*$h*$w-1) }
             else { print pack("N2",$m,$n); print pack("C*", map { $_%10 } 0..$n-1) }' "$3" "$4" "${5:-}" "${6:-}" > "$1/$2"
}

OUT="$WORK/out"
TRAIN_COMMON=(--data synthetic --model mlp:32 --batch 32 --lr 0.05 --quiet)

# ---- help lists every flag with its default ----
"$DSGD" train --help > "$WORK/help" 2>&1
missing=""
for f in model data sync epochs steps batch lr momentum seed metrics eval-every checkpoint resume optimizer weight-decay lr-schedule lr-warmup partition; do
    grep -q -- "--$f " "$WORK/help" || missing="$missing $f"
done
if [ -z "$missing" ] && grep -q -- "--batch N.*(default: 64)" "$WORK/help"; then ok "help lists flags with defaults"
else bad "help lists flags with defaults" "missing:$missing"; fi

# ---- what a run prints ----
"$DSGD" version > "$WORK/ver" 2>&1
want_lib="Open MPI"; [ "$MPI_IMPL" = mpich ] && want_lib=MPICH
if grep -q '^dsgd [0-9]' "$WORK/ver" && grep -q "^mpi: $want_lib" "$WORK/ver"; then ok "dsgd version names the MPI library ($(grep '^mpi:' "$WORK/ver" | cut -c1-40))"
else bad "dsgd version" "$(head -c 300 "$WORK/ver")"; fi
P=(train --data synthetic --model mlp:32 --batch 32 --lr 0.05 --steps 40 --eval-every 1000)
# piped output (and any multi-process run) gets a plain progress line every
# --progress-every seconds; 0 makes that every step, so it cannot depend on speed
"$DSGD" "${P[@]}" --progress-every 0 | cat > "$WORK/p1.out" 2>&1
"${MPIRUN[@]}" -np 2 "$DSGD" "${P[@]}" --sync bsp --progress-every 0 > "$WORK/p2.out" 2>&1
"$DSGD" "${P[@]}" --progress-every 0 --quiet | cat > "$WORK/pq.out" 2>&1
for f in p1 p2; do
    steps=$(grep -E '^epoch .* step +[0-9]+  of 40 ' "$WORK/$f.out" | awk '{print $4}' | tr '\n' ' ')
    if [ "$steps" = "$(seq 1 40 | tr '\n' ' ')" ] && ! grep -q $'\r' "$WORK/$f.out"; then ok "piped progress ($f): a plain line per step at --progress-every 0"
    else bad "piped progress ($f)" "steps [$steps]: $(head -c 300 "$WORK/$f.out")"; fi
done
if [ "$(grep -c . "$WORK/pq.out")" = 1 ] && grep -q "^done:" "$WORK/pq.out"; then ok "--quiet silences progress lines"
else bad "--quiet" "$(head -c 300 "$WORK/pq.out")"; fi
# the printed configuration: the paradigm's own flags and changed ones; the metrics keep all
"$DSGD" "${P[@]}" --momentum 0.9 --metrics "$WORK/cfg.jsonl" > "$WORK/c1.out" 2>&1
"${MPIRUN[@]}" -np 2 "$DSGD" "${P[@]}" --sync gossip > "$WORK/c2.out" 2>&1
cfg1=$(sed -n '/^config:/,/^model /p' "$WORK/c1.out") cfg2=$(sed -n '/^config:/,/^model /p' "$WORK/c2.out")
if grep -q "momentum=0.9" <<< "$cfg1" && grep -q "sync=none" <<< "$cfg1" && ! grep -qE "gossip=|tau=|staleness=|servers=" <<< "$cfg1" &&
   grep -q "gossip=pull" <<< "$cfg2" && grep -q "beta=0.5" <<< "$cfg2" && ! grep -qE "tau=|momentum=|period=" <<< "$cfg2" &&
   [ "$(python3 -c 'import json,sys; c=json.loads(open(sys.argv[1]).readline())["config"]; print(c["tau"], c["gossip"])' "$WORK/cfg.jsonl")" = "4 pull" ]
then ok "configuration printout: the paradigm's flags and changed ones only; metrics keep every flag"
else bad "configuration printout" "$cfg1 // $cfg2"; fi
# headers: a model-parallel run counts the whole model and its replicas;
# Sandblaster counts iterations and its ranks' roles
"${MPIRUN[@]}" -np 4 "$DSGD" train --data synthetic --model mlp:64 --sync bsp --model-parallel 2 --steps 3 > "$WORK/h1.out" 2>&1
"${MPIRUN[@]}" -np 4 "$DSGD" train --data synthetic --model logreg --sync sandblaster --servers 1 --steps 3 > "$WORK/h2.out" 2>&1
# mlp:64 on 8x8 inputs and 4 classes: 64*64+64 + 64*4+4 = 4420 parameters
if grep -q "^model mlp:64: 4420 parameters" "$WORK/h1.out" && grep -q "ranks: 2 replicas x 2 model-parallel partitions (each rank holds 2210 parameters)" "$WORK/h1.out" &&
   grep -q "ranks: 1 coordinator, 1 shard, 2 replicas; 3 iterations of 4096 samples" "$WORK/h2.out" &&
   grep -q "^iter      3  loss" "$WORK/h2.out" && ! grep -q "^epoch" "$WORK/h2.out" && grep -q "after 3 iterations" "$WORK/h2.out"
then ok "headers: model-parallel counts the whole model and 2 replicas; Sandblaster counts iterations"
else bad "headers" "$(grep -E '^(model|ranks|iter|epoch|done)' "$WORK/h1.out" "$WORK/h2.out" | head -8)"; fi
# the example in --fail's error is valid for the run it reports
"${MPIRUN[@]}" -np 2 "$DSGD" train --data synthetic --sync bsp --steps 3 --fail 2@5 > /dev/null 2> "$WORK/f.err"
ex=$(sed -n 's/.*e\.g\. \([0-9]*@[0-9]*\).*/\1/p' "$WORK/f.err" | head -1)
# (the run stops at step 3, before the example's step 50)
if grep -q "worker index 0 <= W < 2" "$WORK/f.err" && [ -n "$ex" ] &&
   "${MPIRUN[@]}" -np 2 "$DSGD" train --data synthetic --sync bsp --steps 3 --fail "$ex" --quiet > /dev/null 2>&1
then ok "--fail's error names worker indices and gives a valid example ($ex)"
else bad "--fail error" "$(cat "$WORK/f.err")"; fi
grep -q -- "--fail S.*worker W exits" "$WORK/help" && ok "--help: --fail names a worker index" || bad "--help --fail" "$(grep -- --fail "$WORK/help")"

# ---- training reaches a stated accuracy on real data ----
# 10k Fashion-MNIST samples, 2 epochs of mlp: 0.78 leaves margin below the
# 0.80 this reaches, and is far above chance (0.10).
if [ -d /usr/share/datasets/fashion-mnist ]; then
    "$DSGD" train --data fashion-mnist --train-subset 10000 --test-subset 2000 --model mlp --epochs 2 \
        --batch 64 --lr 0.02 --momentum 0.9 --quiet --metrics "$WORK/fm.jsonl" > "$WORK/fm.out" 2>&1
    acc=$(json_field "$WORK/fm.jsonl" done test_acc)
    if ge "$acc" 0.78; then ok "mlp on 10k Fashion-MNIST reaches 0.78 (got $acc)"
    else bad "mlp on 10k Fashion-MNIST" "test_acc $acc < 0.78"; fi
    "$DSGD" train --data fashion-mnist --train-subset 6000 --test-subset 1000 --model lenet --epochs 2 \
        --batch 32 --lr 0.02 --momentum 0.9 --quiet --metrics "$WORK/le.jsonl" > "$WORK/le.out" 2>&1
    acc=$(json_field "$WORK/le.jsonl" done test_acc)
    if ge "$acc" 0.70; then ok "lenet on 6k Fashion-MNIST reaches 0.70 (got $acc)"
    else bad "lenet on 6k Fashion-MNIST" "test_acc $acc < 0.70"; fi
else
    bad "Fashion-MNIST training" "dataset-fashion-mnist is not installed (scripts/install-deps)"
fi

# ---- an 8x8 IDX dataset trains like any other ----
mkdir -p "$WORK/idx8"
mkidx "$WORK/idx8" train-images-idx3-ubyte 2051 600 8 8
mkidx "$WORK/idx8" train-labels-idx1-ubyte 2049 600
mkidx "$WORK/idx8" t10k-images-idx3-ubyte 2051 100 8 8
mkidx "$WORK/idx8" t10k-labels-idx1-ubyte 2049 100
gzip -k "$WORK/idx8/train-images-idx3-ubyte" && rm "$WORK/idx8/train-images-idx3-ubyte"
if "$DSGD" train --data "$WORK/idx8" --model mlp:16 --epochs 1 --batch 16 --quiet > "$WORK/idx8.out" 2>&1 &&
   grep -q "done: test accuracy" "$WORK/idx8.out"; then ok "8x8 IDX directory (one file gzipped) trains"
else bad "8x8 IDX directory" "$(cat "$WORK/idx8.out")"; fi

# ---- metrics file: JSON lines, config first, done last ----
"$DSGD" train "${TRAIN_COMMON[@]}" --epochs 2 --eval-every 20 --metrics "$WORK/m.jsonl" > /dev/null 2>&1
if python3 -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
assert rs[0]["event"]=="config" and rs[0]["config"]["model"]=="mlp:32"
assert rs[-1]["event"]=="done"
ev=[r for r in rs if r["event"]=="eval"]
assert len(ev)>=6 and all(k in ev[0] for k in ("step","epoch","test_acc","test_loss","train_loss","time"))
d=rs[-1]
assert all(k in d for k in ("steps","samples","bytes_sent","wall_s","train_s"))
assert d["samples"]==d["steps"]*32 and d["test_acc"]>0.9
ts=[r["time"] for r in rs]; assert ts==sorted(ts)' "$WORK/m.jsonl" 2>"$WORK/py.err" && [ ! -e "$WORK/m.jsonl.part" ]; then
    ok "metrics JSONL has config, eval and done records"
else bad "metrics JSONL" "$(cat "$WORK/py.err")"; fi

# ---- exact resume: k steps + resume == uninterrupted ----
for model in mlp:32 lenet; do
    data=(--data synthetic --model "$model" --batch 32 --lr 0.05 --momentum 0.9 --quiet)
    [ "$model" = lenet ] && data=(--data "$WORK/idx12" --model lenet --batch 16 --lr 0.02 --momentum 0.9 --quiet)
    if [ "$model" = lenet ]; then
        mkdir -p "$WORK/idx12"
        mkidx "$WORK/idx12" train-images-idx3-ubyte 2051 200 12 12
        mkidx "$WORK/idx12" train-labels-idx1-ubyte 2049 200
        mkidx "$WORK/idx12" t10k-images-idx3-ubyte 2051 50 12 12
        mkidx "$WORK/idx12" t10k-labels-idx1-ubyte 2049 50
    fi
    "$DSGD" train "${data[@]}" --epochs 3 --checkpoint "$WORK/full.st" > /dev/null 2>&1
    k=37; [ "$model" = lenet ] && k=17   # 12 steps per epoch there: crosses an epoch boundary
    "$DSGD" train "${data[@]}" --epochs 3 --steps $k --checkpoint "$WORK/half.st" > /dev/null 2>&1
    "$DSGD" train "${data[@]}" --epochs 3 --resume "$WORK/half.st" --checkpoint "$WORK/resumed.st" > /dev/null 2>&1
    if [ -s "$WORK/full.st" ] && cmp -s "$WORK/full.st" "$WORK/resumed.st"; then
        ok "$model: resume after $k steps gives the uninterrupted run's checkpoint bit for bit"
    else bad "$model resume" "checkpoints differ"; fi
done

# ---- the cosine schedule spans the run when --steps goes past --epochs ----
# It spanned --epochs alone: with --epochs 0 it was 0 steps long and every
# step trained at rate 0 (--lr 0.05 and 0.5 ended at the same, initial,
# parameters), and the steps past --epochs 1 trained at rate 0 (the run
# ended where the one-epoch run did). Both differences were exactly 0.
CS=(train --data synthetic:256 --model mlp:16 --batch 32 --lr-schedule cosine --quiet)
"$DSGD" "${CS[@]}" --epochs 0 --steps 30 --lr 0.05 --checkpoint "$WORK/cos1.st" > /dev/null 2>&1
"$DSGD" "${CS[@]}" --epochs 0 --steps 30 --lr 0.5 --checkpoint "$WORK/cos2.st" > /dev/null 2>&1
"$DSGD" "${CS[@]}" --epochs 1 --lr 0.05 --checkpoint "$WORK/cos3.st" > /dev/null 2>&1
"$DSGD" "${CS[@]}" --epochs 1 --steps 30 --lr 0.05 --checkpoint "$WORK/cos4.st" > /dev/null 2>&1
d12=$(python3 "$HERE/ckpt_diff.py" "$WORK/cos1.st" "$WORK/cos2.st" 2>&1)
d34=$(python3 "$HERE/ckpt_diff.py" "$WORK/cos3.st" "$WORK/cos4.st" 2>&1)
if ge "$d12" 1e-3 && ge "$d34" 1e-3; then
    ok "cosine with --epochs 0 --steps 30 trains (--lr 0.05 and 0.5 end $d12 apart), and past --epochs 1 ($d34 from the one-epoch run)"
else bad "cosine schedule's length" "max |diff| --lr 0.05 vs 0.5 at --epochs 0: '$d12'; --epochs 1 vs --epochs 1 --steps 30: '$d34'"; fi

# ---- dsgd eval reproduces the final accuracy ----
"$DSGD" train "${TRAIN_COMMON[@]}" --epochs 1 --checkpoint "$WORK/e.st" --metrics "$WORK/e.jsonl" > /dev/null 2>&1
want=$(json_field "$WORK/e.jsonl" done test_acc)
got=$("$DSGD" eval --checkpoint "$WORK/e.st" --data synthetic 2>&1 | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
if [ -n "$got" ] && awk -v a="$got" -v b="$want" 'BEGIN{exit !((a-b)^2 < 1e-8)}'; then ok "eval of the checkpoint gives the run's accuracy ($got)"
else bad "eval of the checkpoint" "eval says '$got', training said '$want'"; fi

# ---- the checkpoint is plain safetensors: readable with json + struct ----
if python3 - "$WORK/e.st" > "$WORK/st.out" 2>&1 <<'EOF'
import json, struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
md = hdr.pop("__metadata__")
assert md["format"] == "dsgd" and md["model"] == "mlp:32", md
# version 2: the CRC-32 of the whole file with the crc32 value read as zeros
field = ('"crc32":"%s"' % md["crc32"]).encode()
assert raw[8:8 + n].count(field) == 1
assert int(md["crc32"], 16) == zlib.crc32(raw.replace(field, b'"crc32":"00000000"')), "crc"
# the safetensors rules: spans tile the data exactly, sizes match the shapes
spans = sorted((t["data_offsets"][0], t["data_offsets"][1], t["shape"]) for t in hdr.values())
at = 0
for b, e, shape in spans:
    count = 1
    for d in shape: count *= d
    assert b == at and e - b == 4 * count, (b, e, shape)
    at = e
assert at == len(data) and raw[8:8 + n].rstrip(b" ").endswith(b"}")
w = hdr["layer1.dense.weight"]
assert w["dtype"] == "F32" and w["shape"] == [32, 64], w
b, e = w["data_offsets"]
vals = struct.unpack("<%df" % (32 * 64), data[b:e])
assert all(abs(v) < 10 for v in vals)
assert hdr["layer3.dense.weight"]["shape"] == [4, 32]
EOF
then ok "checkpoint loads with Python's json + struct by the safetensors rules"
else bad "checkpoint in Python" "$(cat "$WORK/st.out")"; fi

# ---- bad input: one line, non-zero exit, nothing written ----
M=(--metrics "$OUT/m.jsonl" --checkpoint "$OUT/c.st")
expect_error "missing data directory" "does not exist" "$DSGD" train --data /nonexistent/fmnist "${M[@]}"
# an empty directory's error names every format dsgd reads (it named the IDX files only)
mkdir -p "$WORK/empty"
expect_error "empty data directory names IDX (raw or .gz) and CIFAR-10 files" \
    "train-images-idx3-ubyte.*\.gz.*data_batch_1\.bin.*test_batch\.bin" "$DSGD" train --data "$WORK/empty" "${M[@]}"
# one CIFAR-10 training batch of five: refused, naming what is there and what
# is not (it trained on a fifth of CIFAR-10 without a word); --data-partial
# trains on it and the start-up lines say what is missing
mkdir -p "$WORK/cifar1"
python3 -c 'import sys
for name, n in (("data_batch_1.bin", 64), ("test_batch.bin", 16)):
    open(sys.argv[1] + "/" + name, "wb").write(b"".join(bytes([i % 10]) + bytes([i % 256]) * 3072 for i in range(n)))' "$WORK/cifar1"
expect_error "a partial CIFAR-10 set is refused, naming the files found and missing" \
    "has data_batch_1.bin and test_batch.bin but not data_batch_2.bin, data_batch_3.bin, data_batch_4.bin and data_batch_5.bin.*--data-partial" \
    "$DSGD" train --data "$WORK/cifar1" --model logreg --steps 2 "${M[@]}"
if "$DSGD" train --data "$WORK/cifar1" --data-partial --model logreg --batch 16 --steps 2 > "$WORK/partial.out" 2>&1 &&
    grep -q "^data: a partial CIFAR-10 set (--data-partial): data_batch_1.bin of the 5 training batches, without data_batch_2.bin" "$WORK/partial.out"; then
    ok "--data-partial trains on a partial CIFAR-10 set and says what it lacks"
else bad "--data-partial" "$(head -c 400 "$WORK/partial.out")"; fi
mkdir -p "$WORK/trunc"; cp "$WORK/idx8/"* "$WORK/trunc/"
sz=$(stat -c %s "$WORK/trunc/train-images-idx3-ubyte.gz"); truncate -s $((sz / 2)) "$WORK/trunc/train-images-idx3-ubyte.gz"
expect_error "truncated .gz" "truncated" "$DSGD" train --data "$WORK/trunc" --model mlp:8 "${M[@]}"
mkdir -p "$WORK/magic"; cp "$WORK/idx8/"* "$WORK/magic/"
mkidx "$WORK/magic" t10k-images-idx3-ubyte 2050 100 8 8
expect_error "wrong magic" "not an IDX image file" "$DSGD" train --data "$WORK/magic" --model mlp:8 "${M[@]}"
mkdir -p "$WORK/count"; cp "$WORK/idx8/"* "$WORK/count/"
mkidx "$WORK/count" t10k-labels-idx1-ubyte 2049 99
expect_error "image/label count mismatch" "do not belong together" "$DSGD" train --data "$WORK/count" --model mlp:8 "${M[@]}"
expect_error "unknown model" "unknown model 'resnet9'" "$DSGD" train --data synthetic --model resnet9 "${M[@]}"
expect_error "lenet on 8x8" "at least 12x12" "$DSGD" train --data synthetic --model lenet "${M[@]}"
expect_error "unknown flag" "unknown flag --bacth" "$DSGD" train --bacth 64 "${M[@]}"
expect_error "flag without value" "--lr needs a value" "$DSGD" train --lr
expect_error "non-numeric value" "--epochs wants a decimal integer" "$DSGD" train --epochs three "${M[@]}"
expect_error "zero batch" "--batch must be a positive" "$DSGD" train --data synthetic --batch 0 "${M[@]}"
expect_error "negative learning rate" "--lr must be positive" "$DSGD" train --data synthetic --lr -0.1 "${M[@]}"
expect_error "unknown sync" "unknown --sync 'allreduce'" "$DSGD" train --data synthetic --sync allreduce "${M[@]}"
expect_error "unknown --denormals" "unknown --denormals 'ieee'" "$DSGD" train --data synthetic --denormals ieee "${M[@]}"
expect_error "unknown --wait" "unknown --wait 'busy'" "$DSGD" train --data synthetic --wait busy "${M[@]}"
expect_error "unknown command" "unknown command" "$DSGD" fit
cp "$WORK/e.st" "$WORK/corrupt.st"
printf '\x55' | dd of="$WORK/corrupt.st" bs=1 seek=$(( $(stat -c %s "$WORK/e.st") - 10 )) conv=notrunc 2>/dev/null
expect_error "corrupt checkpoint (resume)" "CRC32" "$DSGD" train "${TRAIN_COMMON[@]}" --resume "$WORK/corrupt.st" "${M[@]}"
expect_error "corrupt checkpoint (eval)" "CRC32" "$DSGD" eval --checkpoint "$WORK/corrupt.st" --data synthetic
head -c 50 "$WORK/e.st" > "$WORK/short.st"
expect_error "truncated checkpoint" "truncated" "$DSGD" eval --checkpoint "$WORK/short.st" --data synthetic
expect_error "checkpoint of another model" "pass --model mlp:32" "$DSGD" train --data synthetic --model mlp:64 --resume "$WORK/e.st" "${M[@]}"
expect_error "checkpoint on other data" "trained on 1x8x8" "$DSGD" eval --checkpoint "$WORK/e.st" --data "$WORK/idx12"
expect_error "missing checkpoint" "cannot open checkpoint" "$DSGD" eval --checkpoint "$WORK/nope.st" --data synthetic
# A resnet checkpoint altered, its CRC recomputed: a negative running
# variance (the ReLU after it hid the NaN it gives: eval printed an ordinary
# accuracy, and a resumed run saved the value again), and a weight of its
# size in another shape (once "model 'resnet:8,4' does not match model
# 'resnet:8,4' ... pass --model", a flag dsgd eval does not take).
RN=(--data synthetic:256 --model resnet:8,4 --batch 16 --quiet)
"$DSGD" train "${RN[@]}" --steps 5 --checkpoint "$WORK/rn.st" > /dev/null 2>&1
python3 - "$WORK/rn.st" "$WORK" <<'PY'
import json, struct, sys, zlib
src = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", src[:8])[0]
h = json.loads(src[8:8 + n])
def save(raw, path):
    field = ('"crc32":"%s"' % h["__metadata__"]["crc32"]).encode()
    i = raw.index(field) + len('"crc32":"')
    raw[i:i + 8] = b"00000000"
    raw[i:i + 8] = b"%08x" % zlib.crc32(bytes(raw))
    open(path, "wb").write(raw)
raw = bytearray(src)
b = 8 + n + h["layer3.bn.running_var"]["data_offsets"][0] + 4
raw[b:b + 4] = struct.pack("<f", -1)
save(raw, sys.argv[2] + "/rn-var.st")
raw = bytearray(src)
old = b'"layer2.conv.weight":{"dtype":"F32","shape":[4,4,3,3]'
i = raw.index(old)
raw[i:i + len(old)] = old.replace(b"[4,4,3,3]", b"[4,4,9,1]")
save(raw, sys.argv[2] + "/rn-shape.st")
PY
VAR="-1 at index 1 of 'layer3.bn.running_var', a running variance, which cannot be negative"
expect_error "negative running variance (eval)" "$VAR" "$DSGD" eval --checkpoint "$WORK/rn-var.st" --data synthetic:256
expect_error "negative running variance (resume)" "$VAR" "$DSGD" train "${RN[@]}" --steps 8 --resume "$WORK/rn-var.st" "${M[@]}"
SHAPE="tensor 'layer2.conv.weight' is .4,4,9,1., but model 'resnet:8,4' on 1x8x8 inputs needs .4,4,3,3.; the file was altered"
expect_error "a tensor of another shape (eval)" "$SHAPE" "$DSGD" eval --checkpoint "$WORK/rn-shape.st" --data synthetic:256
expect_error "a tensor of another shape (resume)" "$SHAPE" "$DSGD" train "${RN[@]}" --steps 8 --resume "$WORK/rn-shape.st" "${M[@]}"
# an unwritable checkpoint path fails cleanly and removes the partial metrics
expect_error "unwritable checkpoint" "cannot write --checkpoint" "$DSGD" train "${TRAIN_COMMON[@]}" --epochs 1 \
    --metrics "$OUT/m.jsonl" --checkpoint "$OUT/missing-dir/c.st"
expect_error "--sync none on 2 ranks" "--sync none trains in one process" "${MPIRUN[@]}" -np 2 "$DSGD" train --data synthetic "${M[@]}"

summary cli
