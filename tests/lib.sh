# Helpers shared by the shell test suites (sourced, not run). A suite
# begins
#     set -u
#     . "$(dirname "$0")/lib.sh"
#     suite_begin NAME "$@"
# and may then override what suite_begin set (DSGD, the EXIT trap). A suite
# with another preamble (a simulated build, no build) sets BUILD or REAL and
# WORK itself before sourcing this file, which calls lib_env at once.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/mpi-env.sh"
# lib_env: what depends on the build under test and $WORK. The launcher for
# ${REAL:-${BUILD:-build}} (Open MPI or MPICH): MPIRUN, MPI_RECOVER, MPI_TCP,
# MPI_RANK_VAR; root and oversubscription allowed. Every launch is bounded
# (tests/bounded; DSGD_LAUNCH_LIMIT=S CMD for another limit than 300 s): a
# job still running then is stopped, and summary counts it as a failure.
# Safe to call again: each call starts from mpi_env's MPIRUN.
lib_env() {
    mpi_env "${REAL:-${BUILD:-build}}"
    if [ -n "${WORK:-}" ]; then export DSGD_HANG_LOG="$WORK/hung.log"; fi
    MPIRUN=("$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bounded" "${MPIRUN[@]}")
    # a rank's default thread count follows OMP_NUM_THREADS; the suites
    # state their threads or test the default themselves
    unset OMP_NUM_THREADS
    # "${RECORD_RC[@]}" CMD...: run CMD and write its exit status to
    # $WORK/rc.RANK (the launcher's own status says little once recovery is
    # on). MPICH's mpiexec -disable-auto-cleanup tells survivors of a death
    # with SIGUSR1, which would kill the wrapping shell; the trap keeps it
    # waiting.
    RECORD_RC=(sh -c 'trap : USR1; "$0" "$@"; echo $? > "'"${WORK:-.}"'/rc.$'"$MPI_RANK_VAR"'"')
}
lib_env
# suite_begin NAME [BUILD_DIR]: the common preamble. Sets BUILD (default
# build), DSGD=$BUILD/dsgd, HERE (this folder, absolute) and WORK (a new
# /tmp/dsgd-NAME-XXXXXX), removes WORK on exit (EXIT trap: a suite with more
# to clean up replaces it with its own, which removes WORK too), then lib_env
# for that build and WORK.
suite_begin() {
    BUILD=${2:-build}
    DSGD="$BUILD/dsgd"
    HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    WORK=$(mktemp -d "/tmp/dsgd-$1-XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
    lib_env
}
pass=0 fail=0
# DSGD_TEST_TIMES=1: each result line ends with the seconds since the
# previous one (which checks make a suite slow)
_last=${EPOCHREALTIME/,/.} _took=""
_took() {
    _took=""
    [ "${DSGD_TEST_TIMES:-0}" = 1 ] || return 0
    local now=${EPOCHREALTIME/,/.}
    _took=$(awk -v a="$_last" -v b="$now" 'BEGIN { printf "  [%.1f s]", b - a }')
    _last=$now
}
ok() { pass=$((pass + 1)); _took; echo "ok   $1$_took"; }
bad() { fail=$((fail + 1)); _took; echo "FAIL $1: $2$_took"; }
# json_field FILE EVENT FIELD: the field of the last record with that event
json_field() {
    python3 -c 'import json,sys
v=None
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["event"]==sys.argv[2]: v=r[sys.argv[3]]
print(v)' "$@"
}
# le A B, ge A B: A is a finite decimal number ("", None, nan, inf, an
# error message are not) and A <= B, A >= B as numbers
is_num() {
    local re='^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$'
    [[ $1 =~ $re ]]
}
le() { is_num "$1" && awk -v a="$1" -v b="$2" 'BEGIN{exit !(a + 0 <= b + 0)}'; }
ge() { is_num "$1" && awk -v a="$1" -v b="$2" 'BEGIN{exit !(a + 0 >= b + 0)}'; }
# side FN ARGS...: run a case (a function that ends in ok or bad) in the
# background while the suite goes on, in a folder of its own (WORK is
# $WORK/side.N inside it); at most SIDE_JOBS (default 2) at once. For cases
# that mostly wait (a freeze, a --timeout, a --time-limit): side by side
# they cost the longest one's time, not the sum. side_join waits for them
# and prints their lines in the order they started, counting the results.
_side_n=0 _side_shown=0 _side_pids=()
side() {
    local live p
    for (( ; ; )); do
        live=()
        for p in "${_side_pids[@]}"; do kill -0 "$p" 2>/dev/null && live+=("$p"); done
        [ "${#live[@]}" -lt "${SIDE_JOBS:-2}" ] && break
        wait -n "${live[@]}"
    done
    _side_n=$((_side_n + 1))
    local dir="$WORK/side.$_side_n" hang="${DSGD_HANG_LOG:-}"
    mkdir -p "$dir"
    ( WORK=$dir; lib_env; DSGD_HANG_LOG=$hang; pass=0 fail=0; "$@" ) > "$dir/out" 2>&1 &
    _side_pids+=($!)
}
side_join() {
    local p i line n
    for p in "${_side_pids[@]}"; do wait "$p"; done
    for i in $(seq $((_side_shown + 1)) "$_side_n"); do
        n=0
        while IFS= read -r line; do
            case $line in
                "ok   "*) pass=$((pass + 1)); n=$((n + 1)) ;;
                "FAIL "*) fail=$((fail + 1)); n=$((n + 1)) ;;
                "skip "*) n=$((n + 1)) ;;
            esac
            echo "$line"
        done < "$WORK/side.$i/out"
        [ "$n" -gt 0 ] || bad "case $i run beside the others ($(head -c 200 "$WORK/side.$i/out"))" "it reported nothing"
    done
    _side_shown=$_side_n _side_pids=()
}
# summary NAME: the closing line tests/run.sh reads; exit status = any failure
summary() {
    if [ -s "${DSGD_HANG_LOG:-}" ]; then
        cat "$DSGD_HANG_LOG"
        fail=$((fail + $(grep -c . "$DSGD_HANG_LOG")))
    fi
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
# refused NAME NEEDLE CMD...: CMD must fail within REFUSE_LIMIT seconds
# (default 20) with one stderr line containing NEEDLE. Needs $WORK.
refused() {
    local name=$1 needle=$2 limit=${REFUSE_LIMIT:-20}
    shift 2
    timeout "$limit" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
    local rc=$? lines
    lines=$(grep -c . "$WORK/stderr")
    if [ $rc -eq 0 ]; then bad "$name" "accepted (exit 0)"
    elif [ $rc -eq 124 ]; then bad "$name" "hung (killed after $limit s)"
    elif [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines: $(head -c 400 "$WORK/stderr")"
    elif ! grep -q -- "$needle" "$WORK/stderr"; then bad "$name" "error lacks '$needle': $(cat "$WORK/stderr")"
    else ok "$name"; fi
}
# launch NP ARGS...: dsgd train on NP ranks (NP = 1: no launcher), bounded
# as every launch is. Needs $DSGD.
launch() {
    local np=$1
    shift
    if [ "$np" = 1 ]; then timeout 300 "$DSGD" train "$@"
    else "${MPIRUN[@]}" -np "$np" "$DSGD" train "$@"; fi
}
# need_fashion SUITE MODEL: end the suite with a skip line unless
# Fashion-MNIST is installed (and MODEL builds on it).
need_fashion() {
    "$DSGD" train --data fashion-mnist --model "$2" --steps 1 --train-subset 64 --test-subset 16 --quiet > /dev/null 2>&1 && return 0
    echo "skip: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
    echo "$1: 0 passed, 0 failed"
    exit 0
}
# rank_pid RANK NEEDLE: the pid of world rank RANK of the dsgd run whose
# command line contains NEEDLE (e.g. its metrics path). Needs $DSGD.
rank_pid() {
    local p
    for p in $(pgrep -f "^$DSGD train.*$2"); do
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qE "^(OMPI_COMM_WORLD_RANK|PMI_RANK)=$1\$" && echo $p
    done
}
