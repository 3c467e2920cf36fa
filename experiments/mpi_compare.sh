#!/usr/bin/env bash
# Every paradigm under Open MPI and under MPICH with the same small flags:
# final test accuracy and loss, and whether the final parameters are the
# same bits. Prints a markdown table.
# Usage: experiments/mpi_compare.sh [--openmpi BUILD] [--mpich BUILD] [--out DIR]
# (defaults build, build-mpich, experiments/out/mpi_compare). Both builds
# must exist: make && make MPI=mpich.
#
# Deterministic paradigms (no asynchrony: the same arithmetic in the same
# order whatever the timing) must give bit-identical checkpoints under both
# MPIs; collective paradigms run on 2 workers, where a sum of two terms does
# not depend on the MPI's reduction algorithm. Asynchronous paradigms mix
# whatever has arrived (and servers sum in arrival order), so their result
# depends on timing: each runs REPEATS times (default 3) under each MPI, and
# the MPIs agree "within noise" when their mean accuracies differ by no more
# than the two ranges (max - min) together, or 0.02 if that is larger.
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -uo pipefail
OMPI=build MPICH=build-mpich OUT=experiments/out/mpi_compare
# a directory given is the caller's: made absolute before the cd below
# (the defaults are the repository's)
path_opt() {   # VAR OPTION [VALUE]
    [ $# -ge 3 ] && [ -n "$3" ] || { echo "mpi_compare.sh: $2 needs a directory" >&2; exit 2; }
    if [[ $3 = /* ]]; then printf -v "$1" '%s' "$3"; else printf -v "$1" '%s' "$PWD/$3"; fi
}
while [ $# -gt 0 ]; do
    case $1 in
        --openmpi) path_opt OMPI "$@"; shift 2 ;;
        --mpich) path_opt MPICH "$@"; shift 2 ;;
        --out) path_opt OUT "$@"; shift 2 ;;
        *) echo "mpi_compare.sh: unknown argument '$1'; usage: experiments/mpi_compare.sh [--openmpi BUILD] [--mpich BUILD] [--out DIR]" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
for b in "$OMPI" "$MPICH"; do
    [ -x "$b/dsgd" ] || { echo "mpi_compare.sh: $b/dsgd is missing; build it (make, make MPI=mpich)" >&2; exit 1; }
done
. scripts/mpi-env.sh
mkdir -p "$OUT"

D=(--data fashion-mnist --train-subset 6000 --test-subset 2000 --model mlp:64 --batch 32 --lr 0.05 --seed 7 --quiet)
# name|kind|ranks|flags (kind: det = deterministic, async)
CASES=(
    "none|det|1|--sync none --steps 300"
    "bsp|det|2|--sync bsp --steps 300"
    "localsgd|det|2|--sync localsgd --period 4 --steps 300"
    "fedavg|det|2|--sync fedavg --period 4 --steps 300"
    "selsync|det|2|--sync selsync --steps 300"
    "bsp-ps|async|3|--sync bsp-ps --servers 1 --steps 300"
    "asp|async|3|--sync asp --servers 1 --steps 300"
    "ssp|async|3|--sync ssp --servers 1 --staleness 3 --steps 300"
    "dssp|async|3|--sync dssp --servers 1 --staleness-low 1 --staleness-high 4 --steps 300"
    "downpour|async|3|--sync downpour --servers 1 --steps 300"
    "easgd|async|3|--sync easgd --servers 1 --steps 300"
    "gossip pull|async|2|--sync gossip --gossip pull --steps 300"
    "gossip push|async|2|--sync gossip --gossip push --steps 300"
    "gossip round|det|2|--sync gossip --gossip round --steps 300"
    "sandblaster|async|4|--sync sandblaster --servers 1 --batch-total 2000 --steps 10"
    "lbfgs|det|1|--sync lbfgs --batch-total 2000 --steps 10"
    "model-parallel|det|2|--sync none --model-parallel 2 --steps 300"
)

# run BUILD TAG NP FLAGS...: one run; prints "acc loss" or "failed"
run() {
    local build=$1 tag=$2 np=$3
    shift 3
    mpi_env "$build"
    rm -f "$OUT/$tag.jsonl" "$OUT/$tag.st"
    if timeout -k 10 600 "${MPIRUN[@]}" -np "$np" "$build/dsgd" train "${D[@]}" "$@" \
        --metrics "$OUT/$tag.jsonl" --checkpoint "$OUT/$tag.st" > "$OUT/$tag.out" 2>&1; then
        python3 -c 'import json,sys
d=[json.loads(l) for l in open(sys.argv[1])][-1]
print("%.4f %.6f" % (d["test_acc"], d["test_loss"]))' "$OUT/$tag.jsonl"
    else
        echo "failed"
    fi
}

echo "Open MPI: $("$OMPI/dsgd" version | sed -n 's/^mpi: //p' | cut -c1-60)"
echo "MPICH: $("$MPICH/dsgd" version | sed -n 's/^mpi: //p' | cut -c1-60)"
echo "flags: ${D[*]}"
echo
R=${REPEATS:-3}
echo "| paradigm | ranks | kind | Open MPI acc / loss | MPICH acc / loss | same bits | verdict |"
echo "|---|---|---|---|---|---|---|"
bad=0
# stats FILE...: "mean min max" of the accuracies (first field of each line)
stats() { awk '{s += $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1} END {printf "%.4f %.4f %.4f", s / NR, lo, hi}'; }
# mixes TAG: gossip's mixes in that run's done record
mixes() { python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1].get("mixes"))' "$OUT/$1.jsonl" 2>/dev/null; }
for c in "${CASES[@]}"; do
    IFS='|' read -r name kind np flags <<< "$c"
    tag=${name// /-}
    read -ra F <<< "$flags"
    n=1; [ "$kind" = async ] && n=$R
    ores=() mres=() note=""
    for i in $(seq 1 "$n"); do
        sfx=""; [ "$i" -gt 1 ] && sfx=$i
        ores+=("$(run "$OMPI" "$tag-openmpi$sfx" "$np" "${F[@]}")")
        mres+=("$(run "$MPICH" "$tag-mpich$sfx" "$np" "${F[@]}")")
        [[ $name == gossip* ]] && note+="$(mixes "$tag-openmpi$sfx")/$(mixes "$tag-mpich$sfx") "
    done
    same="-"
    if [ -s "$OUT/$tag-openmpi.st" ] && [ -s "$OUT/$tag-mpich.st" ]; then
        d=$(python3 tests/ckpt_diff.py "$OUT/$tag-openmpi.st" "$OUT/$tag-mpich.st" 2>/dev/null)
        if [ "$d" = 0 ] || [ "$d" = 0.0 ]; then same=yes; else same="no (max diff $d)"; fi
    fi
    if printf '%s\n' "${ores[@]}" "${mres[@]}" | grep -q failed; then
        verdict="run failed (see $OUT/$tag-*.out)"
        o=failed m=failed
    elif [ "$kind" = det ]; then
        o=${ores[0]/ / \/ } m=${mres[0]/ / \/ }
        [ "$same" = yes ] && verdict="bit-identical" || verdict="DIFFERS"
    else
        read -r om olo ohi < <(printf '%s\n' "${ores[@]}" | stats)
        read -r mm mlo mhi < <(printf '%s\n' "${mres[@]}" | stats)
        o="$om ($olo..$ohi)" m="$mm ($mlo..$mhi)"
        verdict=$(awk -v om="$om" -v mm="$mm" -v os="$(awk -v a="$olo" -v b="$ohi" 'BEGIN{print b-a}')" \
                      -v ms="$(awk -v a="$mlo" -v b="$mhi" 'BEGIN{print b-a}')" 'BEGIN{
            d = mm - om; if (d < 0) d = -d; lim = os + ms; if (lim < 0.02) lim = 0.02
            printf (d <= lim ? "within noise" : "OUTSIDE noise"); printf " (mean acc differs by %.4f, limit %.4f)", d, lim }')
        [ -n "$note" ] && verdict+="; mixes per run, Open MPI/MPICH: $note"
    fi
    case $verdict in bit-identical|within*) ;; *) bad=$((bad + 1)) ;; esac
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$np" "$kind" "$o" "$m" "$same" "$verdict"
done
echo
[ "$R" -gt 1 ] && echo "Asynchronous rows: mean test accuracy over $R runs (min..max); the loss and the bits are the first run's."
echo "$bad of ${#CASES[@]} paradigms differ between the MPIs beyond what their kind allows"
[ "$bad" -eq 0 ]
