#!/usr/bin/env bash
# Soak: train asp and gossip for MINUTES each while, in every cycle, a random
# worker is killed with kill -9 and brought back by the next cycle's
# --resume. Each cycle is one job of --time-limit CYCLE seconds (the
# survivors run to the limit and write the checkpoint; the next job resumes
# it with every rank). Prints and writes a table per cycle: the victim, when
# it died, the survivors' exit codes, whether the job ended on its own, the
# checkpoint's step and update count before and after, and the test
# accuracy of the checkpoint; then the totals: cycles, hangs, cycles whose
# work was lost (the checkpoint did not advance), and the final accuracy.
# Usage: experiments/soak.sh [--minutes M] [--cycle S] [--only asp|gossip] [--quick] [--out DIR] [--build DIR] [--seed N]
# --quick: 2 cycles of 10 s per paradigm on synthetic data (about a minute).
# Exit status 1 if any cycle hung or lost its work, or a killed run left the
# checkpoint unreadable. Open MPI (mpirun --enable-recovery).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -euo pipefail
MINUTES=10
CYCLE=40
QUICK=0
OUT=""
BUILD=build
SEED=1
PARADIGMS="asp gossip"
# a directory given is the caller's: made absolute before the cd below
# (the defaults are the repository's)
path_opt() {   # VAR OPTION [VALUE]
    [ $# -ge 3 ] && [ -n "$3" ] || { echo "soak: $2 needs a directory" >&2; exit 2; }
    if [[ $3 = /* ]]; then printf -v "$1" '%s' "$3"; else printf -v "$1" '%s' "$PWD/$3"; fi
}
while [ $# -gt 0 ]; do
    case "$1" in --minutes|--cycle|--seed|--only) [ $# -ge 2 ] || { echo "soak: $1 needs a value" >&2; exit 2; } ;; esac
    case "$1" in
        --minutes) MINUTES=$2; shift 2 ;;
        --cycle) CYCLE=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --out) path_opt OUT "$@"; shift 2 ;;
        --build) path_opt BUILD "$@"; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --only) PARADIGMS=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "soak: unknown option '$1' (--minutes M, --cycle S, --only P, --quick, --out DIR, --build DIR, --seed N)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
[ -x "$BUILD/dsgd" ] || { echo "soak: $BUILD/dsgd missing: run make" >&2; exit 1; }
mpirun --version 2>/dev/null | grep -q "Open MPI" || { echo "soak: needs Open MPI's mpirun (--enable-recovery)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$QUICK" = 1 ]; then
    CYCLES_MAX=2; CYCLE=10; MINUTES=1
    D=(--data synthetic --model mlp:32 --batch 16 --lr 0.05 --test-subset 500)
    EVAL=(--data synthetic --test-subset 500)
else
    CYCLES_MAX=1000000
    D=(--data fashion-mnist --model mlp --batch 64 --lr 0.01 --test-subset 2000)
    EVAL=(--data fashion-mnist)
fi
[ -n "$OUT" ] || OUT=experiments/results/soak$([ "$QUICK" = 1 ] && echo -quick)
mkdir -p "$OUT"
RANDOM=$SEED

# the checkpoint's "step updates" (0 0 if there is none; "bad bad" if unreadable)
ck_state() {
    [ -s "$1" ] || { echo "0 0"; return; }
    python3 - "$1" <<'EOF' 2>/dev/null || echo "bad bad"
import json, re, struct, sys
f = open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
m = json.loads(f.read(n))["__metadata__"]
u = re.search(r"updates=(\d+)", m.get("sync_state", ""))
print(m["step"], u.group(1) if u else "-")
EOF
}

status=0
summary="$OUT/summary.md"
{
    echo "# Soak: kill -9 of a random worker in every cycle, resumed by the next"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${MINUTES} min per paradigm, cycles of ${CYCLE} s, seed $SEED; ${D[*]}"
} > "$summary"
for P in $PARADIGMS; do
    case $P in
        asp) NP=5; A=(--sync asp --servers 1); FIRST=1 ;;     # rank 0 is the shard
        gossip) NP=4; A=(--sync gossip); FIRST=0 ;;
    esac
    dir="$OUT/$P"
    rm -rf "$dir"; mkdir -p "$dir"
    ck="$dir/ck.st"
    cat > "$dir/rank.sh" <<'EOS'
out=$1
shift
r=$OMPI_COMM_WORLD_RANK
sh -c 'echo $$ > "$0"; exec "$@"' "$out/pid.$r" "$@"
echo $? > "$out/rc.$r"
EOS
    {
        echo
        echo "## $P ($NP ranks)"
        echo
        echo "| cycle | victim | killed at s | survivors' exit codes | ended by itself | step before → after | updates before → after | test acc |"
        echo "|---|---|---|---|---|---|---|---|"
    } | tee -a "$summary"
    t_end=$((SECONDS + ${MINUTES%.*} * 60))
    [ "$QUICK" = 1 ] && t_end=$((SECONDS + 3600))
    cycle=0 hangs=0 lost=0 acc=""
    while [ $SECONDS -lt $t_end ] && [ $cycle -lt $CYCLES_MAX ]; do
        cycle=$((cycle + 1))
        cd_="$dir/c$cycle"; mkdir -p "$cd_"
        read -r s0 u0 <<< "$(ck_state "$ck")"
        resume=(); [ -s "$ck" ] && resume=(--resume "$ck")
        victim=$((FIRST + RANDOM % (NP - FIRST)))
        delay=$((CYCLE * 3 / 10 + RANDOM % (CYCLE * 4 / 10 + 1)))
        timeout -s KILL $((CYCLE + 90)) mpirun -q --enable-recovery -np $NP sh "$dir/rank.sh" "$cd_" \
            "$BUILD/dsgd" train "${D[@]}" "${A[@]}" --seed "$SEED" --steps 100000000 --time-limit "$CYCLE" \
            --eval-every-s "$CYCLE" --timeout 4 --checkpoint "$ck" --checkpoint-every 500 --quiet \
            --metrics "$cd_/m.jsonl" "${resume[@]}" > "$cd_/stdout" 2> "$cd_/stderr" &
        job=$!
        t0=$SECONDS
        sleep "$delay"
        killed_at=$((SECONDS - t0))
        if [ -s "$cd_/pid.$victim" ]; then kill -9 "$(cat "$cd_/pid.$victim")" 2>/dev/null || true; fi
        rc_job=0
        wait $job || rc_job=$?
        ended=yes
        [ $rc_job -eq 137 ] && { ended="no (hung: killed at $((CYCLE + 90)) s)"; hangs=$((hangs + 1)); }
        rcs=""
        for ((r = 0; r < NP; r++)); do
            [ $r -eq $victim ] && continue
            rcs="$rcs$(cat "$cd_/rc.$r" 2>/dev/null || echo '?') "
        done
        read -r s1 u1 <<< "$(ck_state "$ck")"
        if [ "$s1" = bad ]; then acc="unreadable"; status=1
        else acc=$("$BUILD/dsgd" eval --checkpoint "$ck" "${EVAL[@]}" 2>&1 | sed -n "s/.*test accuracy \([0-9.]*\).*/\1/p" | head -1 || true); fi
        [ "$s1" = "$s0" ] && [ "$u1" = "$u0" ] && { lost=$((lost + 1)); status=1; }
        echo "| $cycle | rank $victim | $killed_at | ${rcs% } | $ended | $s0 → $s1 | $u0 → $u1 | ${acc:-?} |" | tee -a "$summary"
    done
    [ $hangs -gt 0 ] && status=1
    echo | tee -a "$summary"
    echo "$P: $cycle cycles, $cycle kills, $hangs hangs, $lost cycles whose work was lost; final test accuracy ${acc:-?}" | tee -a "$summary"
done
echo "soak: summary in $summary"
exit $status
