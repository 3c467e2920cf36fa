#!/usr/bin/env bash
# Which BLAS kernels run (util/blas.h): dsgd version and the config event
# say which and why; a user's OPENBLAS_CORETYPE stands; --blas auto corrects
# kernels below what the CPU takes (OPENBLAS_CORETYPE=Prescott stands for
# OpenBLAS's fallback on a CPU it does not know), also under mpirun, and
# trains to the same accuracy; a --blas OpenBLAS does not know is refused.
# Usage: tests/blas.sh BUILD_DIR   (prints "blas: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin blas "$@"

T=(--data synthetic --model mlp:64 --batch 32 --lr 0.05 --quiet --steps 300 --eval-every 300)
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
best=""
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then best=SkylakeX
elif has avx2 && has fma; then best=Haswell; fi
field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

out=$("$DSGD" version 2>&1)
if grep -q "^blas: OpenBLAS [A-Za-z]* (" <<< "$out" && grep -q "^cpu: " <<< "$out"; then ok "dsgd version says which kernels run and why: $(grep '^blas' <<< "$out")"
else bad "dsgd version" "$out"; fi
out=$(OPENBLAS_CORETYPE=Prescott "$DSGD" version 2>&1)
if grep -q "^blas: OpenBLAS Prescott (OPENBLAS_CORETYPE=Prescott, the user's choice" <<< "$out"; then ok "a user's OPENBLAS_CORETYPE stands: $(grep '^blas' <<< "$out")"
else bad "OPENBLAS_CORETYPE=Prescott" "$out"; fi
refused "--blas naming kernels OpenBLAS does not have" "has no kernels of that name" "$DSGD" train "${T[@]}" --blas Bogus

if [ -z "$best" ]; then
    echo "skip the correction: this CPU has neither AVX2+FMA nor AVX-512"
else
    OPENBLAS_CORETYPE=Prescott "$DSGD" train "${T[@]}" --metrics "$WORK/slow.jsonl" > /dev/null 2>&1
    OPENBLAS_CORETYPE=Prescott "$DSGD" train "${T[@]}" --blas auto --metrics "$WORK/fix.jsonl" > /dev/null 2> "$WORK/fix.err"
    c1=$(field "$WORK/slow.jsonl" blas_core) c2=$(field "$WORK/fix.jsonl" blas_core)
    a1=$(json_field "$WORK/slow.jsonl" done test_acc 2>/dev/null) a2=$(json_field "$WORK/fix.jsonl" done test_acc 2>/dev/null)
    if [ "$c1" = Prescott ] && [ "$c2" = "$best" ] && [ ! -s "$WORK/fix.err" ] && ge "$a1" 0.9 && ge "$a2" 0.9 &&
       awk -v a="$a1" -v b="$a2" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }'; then
        ok "--blas auto over the Prescott fallback runs $best kernels (nothing on stderr) and trains to the same accuracy ($a2 against $a1)"
    else bad "--blas auto" "cores '$c1' -> '$c2' (want $best), accuracy $a1 / $a2, stderr: $(head -c 300 "$WORK/fix.err")"; fi
    if grep -q "dsgd's choice for this" <<< "$(field "$WORK/fix.jsonl" blas)"; then ok "the config event says why: $(field "$WORK/fix.jsonl" blas)"
    else bad "config event's blas" "$(field "$WORK/fix.jsonl" blas)"; fi
    # every rank starts again with the kernels, under the launcher
    OPENBLAS_CORETYPE=Prescott "${MPIRUN[@]}" -np 2 "$DSGD" train "${T[@]}" --sync bsp --blas auto --metrics "$WORK/mpi.jsonl" > "$WORK/mpi.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && [ "$(field "$WORK/mpi.jsonl" blas_core)" = "$best" ] && ge "$(json_field "$WORK/mpi.jsonl" done test_acc 2>/dev/null)" 0.9; then
        ok "under $MPI_IMPL, bsp on 2 ranks with --blas auto: $best kernels, trained"
    else bad "--blas auto under mpirun" "exit $rc: $(tail -c 300 "$WORK/mpi.out")"; fi
    "$DSGD" train "${T[@]}" --blas Prescott --metrics "$WORK/forced.jsonl" > /dev/null 2>&1
    if [ "$(field "$WORK/forced.jsonl" blas_core)" = Prescott ]; then ok "--blas Prescott runs OpenBLAS's Prescott kernels"
    else bad "--blas Prescott" "core '$(field "$WORK/forced.jsonl" blas_core)'"; fi
fi
summary blas
