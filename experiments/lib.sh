# Shared by the paper experiments (sourced): options, simulated and real
# runs into one results folder, the markdown summary and the figures.
#   SCRIPT [--quick] [--keep | --report] [--out DIR] [--build DIR] [--sim-build DIR]
# --keep: a run whose metrics file in DIR ends with its done event is not
# run again (an interrupted experiment continues where it stopped).
# --report: nothing runs; the summary and figures are made from the runs
# that finished (an experiment stopped part-way, reported as it stands).
# --quick runs a small subset (synthetic data, a tiny model, few workers,
# fractions of a simulated second) that CI runs to keep the script working;
# without it the full experiment runs (tens of minutes: not on a shared
# machine in a hurry). Results: DIR/metrics/*.jsonl, DIR/logs/*.log,
# DIR/summary.md, DIR/figures/.
set -euo pipefail
QUICK=0
KEEP=0
REPORT=0
OUT=""
BUILD=build
SIMBUILD=build-sim
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# path_opt VAR SCRIPT OPTION [VALUE]: VAR = VALUE, made absolute against the
# caller's directory (the scripts work from the repository's, so a relative
# --out would land there); no value or an empty one is one line and exit 2
path_opt() {
    [ $# -ge 4 ] && [ -n "$4" ] || { echo "$2: $3 needs a directory" >&2; exit 2; }
    if [[ $4 = /* ]]; then printf -v "$1" '%s' "$4"; else printf -v "$1" '%s' "$PWD/$4"; fi
}
exp_args() {   # NAME "$@"
    local name=$1
    shift
    # the paper's regime or the MLP's: a misspelt one would run the other
    case ${REGIME:-mlp} in
        mlp|resnet) ;;
        *) echo "$name: REGIME: '$REGIME' is not a regime (mlp, the default, or resnet)" >&2; exit 2 ;;
    esac
    while [ $# -gt 0 ]; do
        case "$1" in
            --quick) QUICK=1; shift ;;
            --keep) KEEP=1; shift ;;
            --report) KEEP=1; REPORT=1; shift ;;
            --out) path_opt OUT "$name" "$@"; shift 2 ;;
            --build) path_opt BUILD "$name" "$@"; shift 2 ;;
            --sim-build) path_opt SIMBUILD "$name" "$@"; shift 2 ;;
            -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
            *) echo "$name: unknown option '${1//$'\n'/\\n}' (--quick, --keep, --report, --out DIR, --build DIR, --sim-build DIR)" >&2; exit 2 ;;
        esac
    done
    local suffix=""
    [ "$QUICK" = 1 ] && suffix=-quick
    [ -n "$OUT" ] || OUT=experiments/results/$name$suffix
    # the default builds are the repository's (sim_run starts its runs
    # from elsewhere)
    [[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
    [[ $SIMBUILD = /* ]] || SIMBUILD=$ROOT/$SIMBUILD
    # the summary is written to a file of this invocation's own and put in
    # place whole at the end (summary_done): invocations sharing OUT each
    # leave a whole summary, the last to finish the one that stays
    SUMMARY=$OUT/summary.md.$$.part
    trap 'rm -f "$SUMMARY"' EXIT
    cd "$ROOT"
    mkdir -p "$OUT/metrics" "$OUT/logs" "$OUT/figures"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
}
# With --keep, whether run NAME already finished (its metrics end with the
# done event; a run stopped half-way is run again)
kept() {
    [ "$KEEP" = 1 ] && [ -s "$OUT/metrics/$1.jsonl" ] && tail -n 1 "$OUT/metrics/$1.jsonl" | grep -q '"event":"done"'
}
# exp_list VAR ARRAY REGEX WHAT: the words of the environment variable VAR
# (a subset of an experiment's sweep, e.g. EXP_NS="64 128") into ARRAY,
# each checked against REGEX; one that does not match, or a VAR set to
# nothing but blanks, is one line naming it and exit 2 (instead of runs
# that fail and are reported as results). Unset or empty: ARRAY keeps its
# default.
exp_list() {
    local var=$1 re=$3 what=$4 w
    local -n into=$2
    [ -n "${!var:-}" ] || return 0
    read -ra into <<< "${!var}"
    [ "${#into[@]}" -gt 0 ] || { echo "$(basename "$0" .sh): $var is blank: give $what, separated by spaces, or unset it" >&2; exit 2; }
    for w in "${into[@]}"; do
        [[ $w =~ ^($re)$ ]] || { echo "$(basename "$0" .sh): $var: '$w' is not $what" >&2; exit 2; }
    done
}
need_sim() {
    [ -x "$SIMBUILD/dsgd" ] || { echo "$SIMBUILD/dsgd missing: run make sim" >&2; exit 1; }
}
# Host speeds for dsgd-sim, as "SCALE:R=F,...": every host SCALE times
# faster than this machine (--compute-scale: a GPU-like compute scale), and
# hosts listed as R=F F times slower than that (--slow-hosts: hosts, shards
# included, not workers). HOSTS SCALE [R=F,...]
sim_speeds() {
    echo "$2:${3:-}"
}
# A simulated run: NAME HOSTS SPEEDS BANDWIDTH -- dsgd train flags
# (SIM_EXTRA: more dsgd-sim options, e.g. --transient). With
# ALLOW_FAIL=1 a failed run (a diverged one, say) is reported in the table
# instead of stopping the experiment.
ALLOW_FAIL=${ALLOW_FAIL:-0}
sim_run() {
    local name=$1 hosts=$2 speeds=$3 bw=$4
    shift 5
    if kept "$name"; then echo "  $name (kept)"; return 0; fi
    if [ "$REPORT" = 1 ]; then echo "  $name (not run: --report)"; return 0; fi
    echo "  $name"
    local t0=$SECONDS
    local slow=()
    [ -n "${speeds#*:}" ] && slow=(--slow-hosts "${speeds#*:}")
    # started in the metrics folder and given the file's bare name:
    # smpirun splits the program's arguments at spaces, and OUT may hold some
    # shellcheck disable=SC2086
    if ! (cd "$OUT/metrics" && "$ROOT/scripts/dsgd-sim" --build "$SIMBUILD" --hosts "$hosts" --compute-scale "${speeds%%:*}" \
            "${slow[@]}" ${SIM_EXTRA:-} --bandwidth "$bw" -- train "$@" --metrics "$name.jsonl") > "$OUT/logs/$name.log" 2>&1; then
        [ "$ALLOW_FAIL" = 1 ] && { echo "    failed: $(grep -m1 'dsgd: error' "$OUT/logs/$name.log" || tail -1 "$OUT/logs/$name.log")"; return 0; }
        echo "run $name failed:" >&2; tail -5 "$OUT/logs/$name.log" >&2; exit 1
    fi
    run_wall "$name" "$t0"
}
# Records a finished run's wall seconds in OUT/wall.tsv (a kept run keeps
# the line of the invocation that made it): NAME START_SECONDS. Several
# invocations may share OUT (EXP_SEEDS, EXP_METHODS): the update holds a
# lock, so that none loses another's line.
run_wall() {
    local w=$((SECONDS - $2))
    (
        flock 9
        { [ -f "$OUT/wall.tsv" ] && awk -F'\t' -v n="$1" '$1 != n' "$OUT/wall.tsv"; printf '%s\t%s\n' "$1" "$w"; } > "$OUT/wall.tsv.new" || true
        mv "$OUT/wall.tsv.new" "$OUT/wall.tsv"
    ) 9> "$OUT/wall.tsv.lock"
    echo "    ${w} s"
}
# Appends what the runs cost to summary.md: the sum of every run's wall
# seconds (kept runs included) and this invocation's own wall time
wall_report() {
    [ -f "$OUT/wall.tsv" ] || return 0
    awk -F'\t' -v inv="$SECONDS" '{ s += $2; n++ } END {
        printf "Wall time on this machine: %d runs, %.1f min in all (this invocation %.1f min).\n\n", n, s / 60, inv / 60 }' \
        "$OUT/wall.tsv" >> "$SUMMARY"
}
# A run on real processes: NAME NP -- dsgd train flags
real_run() {
    local name=$1 np=$2
    shift 3
    if kept "$name"; then echo "  $name (kept)"; return 0; fi
    if [ "$REPORT" = 1 ]; then echo "  $name (not run: --report)"; return 0; fi
    echo "  $name"
    local t0=$SECONDS
    if ! mpirun -q -np "$np" "$BUILD/dsgd" train "$@" --metrics "$OUT/metrics/$name.jsonl" > "$OUT/logs/$name.log" 2>&1; then
        echo "run $name failed:" >&2; tail -5 "$OUT/logs/$name.log" >&2; exit 1
    fi
    run_wall "$name" "$t0"
}
# Append a table of some runs to summary.md: TITLE TARGET BASELINE NAMES...
table() {
    local title=$1 target=$2 base=$3
    shift 3
    local files=() failed=()
    for n in "$@"; do
        if [ -f "$OUT/metrics/$n.jsonl" ]; then files+=("$OUT/metrics/$n.jsonl"); else failed+=("$n"); fi
    done
    python3 experiments/summarize.py "$OUT/table.part.md" "$target" --baseline "$base" --title "$title" "${files[@]}" > /dev/null
    {
        cat "$OUT/table.part.md"
        for n in "${failed[@]}"; do
            if [ "$REPORT" = 1 ]; then echo "- $n: not run (--report)"
            else echo "- $n failed: $(grep -m1 'dsgd: error' "$OUT/logs/$n.log" || tail -1 "$OUT/logs/$n.log")"; fi
        done
        echo
    } >> "$SUMMARY"
    rm -f "$OUT/table.part.md"
}
# Figures of some runs into figures/SUBDIR: SUBDIR TARGET NAMES...
figures() {
    local sub=$1 target=$2
    shift 2
    local files=()
    for n in "$@"; do [ -f "$OUT/metrics/$n.jsonl" ] && files+=("$OUT/metrics/$n.jsonl"); done
    # none has run yet (--report, or a run stopped early): no figure
    [ "${#files[@]}" -gt 0 ] || return 0
    # time since the common start, the clock the speed-ups use (summarize.py)
    scripts/dsgd-plot --time wall --out "$OUT/figures/$sub" --target "$target" "${files[@]}" > "$OUT/logs/plot-$sub.log"
}
# The command line of this invocation as the summary records it: REGIME
# and the sweep's subsets (EXP_*) where set, the script, --quick.
summary_command() {
    local v env=""
    [ "${REGIME:-mlp}" = mlp ] || env="REGIME=$REGIME "
    for v in EXP_LRS EXP_NS EXP_SEEDS EXP_METHODS; do
        [ -z "${!v:-}" ] || env+="$v=\"${!v}\" "
    done
    echo "$env$0$([ "$QUICK" = 1 ] && echo " --quick")"
}
summary_head() {   # TITLE TEXT
    { echo "# $1"; echo; echo "$2"; echo; echo "Command: \`$(summary_command)\` ($(date -u +%F))"; echo; } > "$SUMMARY"
}
# Puts this invocation's summary in place as OUT/summary.md (a rename: a
# reader never sees half of it) and prints it.
summary_done() {
    mv -f "$SUMMARY" "$OUT/summary.md"
    cat "$OUT/summary.md"
}
