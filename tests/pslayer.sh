#!/usr/bin/env bash
# The parameter-server layer on its own (src/ps: push, pull, the gates, a
# dead worker), without any paradigm or model: tests/mpi_ps.c under mpirun,
# one shard and two, ASP and staleness 0, and a worker that dies, each
# through shared memory (--ps-transport auto, all ranks on one host) and by
# message only.
# Usage: tests/pslayer.sh BUILD_DIR   (prints "pslayer: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin pslayer "$@"
PROG=$(cd "$BUILD" && pwd)/tests/mpi_ps
[ -x "$PROG" ] || { bad "mpi_ps" "$PROG is missing (make test builds it)"; summary pslayer; exit; }

# CASE "MODE SHARDS RANKS"
for case in "kv 1 3" "kv 2 5" "bsp 1 3" "bsp 2 4" "dead 1 4" "dead 2 4"; do
  for tr in auto messages; do
    read -r mode S np <<< "$case"
    recover=()
    [ "$mode" = dead ] && recover=("${MPI_RECOVER[@]}")   # the others go on when one exits
    DSGD_LAUNCH_LIMIT=60 "${MPIRUN[@]}" "${recover[@]}" -np "$np" "$PROG" "$mode" "$S" "$tr" > "$WORK/out" 2> "$WORK/err" < /dev/null
    rc=$?
    lines=0
    while read -r word rest; do
        case $word in
            ok) ok "$rest"; lines=$((lines + 1)) ;;
            FAIL) bad "$mode S=$S $tr" "$rest"; lines=$((lines + 1)) ;;
        esac
    done < "$WORK/out"
    # a run whose checks passed may still end non-zero under recovery
    # (the launcher reports the dead process); one with no checks failed
    if [ $lines -eq 0 ]; then bad "$mode S=$S $tr ranks=$np" "no result (exit $rc): $(head -c 300 "$WORK/err")"
    elif [ $rc -ne 0 ] && [ "$mode" != dead ]; then bad "$mode S=$S $tr ranks=$np" "exit $rc: $(head -c 300 "$WORK/err")"; fi
  done
done
summary pslayer
