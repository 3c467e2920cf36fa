#!/usr/bin/env bash
# The test runner: every unit-test binary, then the end-to-end CLI tests.
# Ends with one line "N passed, M failed" and exits non-zero on any failure.
# Usage: tests/run.sh BUILD_DIR   (make test / make test SANITIZE=1 call it)
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
# the launcher follows the MPI the build is linked with (Open MPI or MPICH)
. scripts/mpi-env.sh
mpi_env "$BUILD"
echo "tests: $BUILD/dsgd, $MPI_IMPL, launched with ${MPIRUN[*]}"
if [ "${SANITIZE:-0}" = 1 ]; then
    # Unit tests run without MPI and with LeakSanitizer on. Processes that
    # initialise MPI (the CLI tests) run with leak detection off: Open MPI's
    # components keep allocations until exit and unload before LeakSanitizer
    # can name them; ASan's memory errors and UBSan stay on everywhere.
    export ASAN_OPTIONS="detect_leaks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi

passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log" "$log.rc"' EXIT
run_part() {
    local name=$1
    shift
    local t0=$SECONDS
    # a part still running after DSGD_PART_LIMIT s (default 1200) is stopped
    # and fails (its MPI launches have their own, shorter limit: tests/bounded)
    # its processor time (user + system, of every process it waited for)
    # beside its wall time: a part far below its wall time is waiting
    local TIMEFORMAT='%U %S' cpu rc
    cpu=$( { time timeout -k 10 "${DSGD_PART_LIMIT:-1200}" "$@" > "$log" 2>&1; echo "rc $?" >&3; } 3> "$log.rc" 2>&1 )
    rc=$(sed -n 's/^rc //p' "$log.rc")
    cat "$log"
    if [ $rc -eq 124 ] || [ $((SECONDS - t0)) -ge "${DSGD_PART_LIMIT:-1200}" ]; then
        echo "FAIL $name: stopped after ${DSGD_PART_LIMIT:-1200} s (hung)"
        failed=$((failed + 1))
        return
    fi
    local line p f
    line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $name: exited $rc without a summary line"
        failed=$((failed + 1))
        return
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited $rc after its tests passed (sanitizer report above?)"
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
    echo "  ($name: $((SECONDS - t0)) s, processor $(echo "$cpu" | awk '{printf "%.0f", $1 + $2}') s)"
}

# the sources alone: no include of a higher layer's header (docs/design.md)
run_part layers tests/layers.sh "$BUILD"
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_part "$(basename "$t")" "$t"
done
[ "${SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS="detect_leaks=0"
run_part cli tests/cli.sh "$BUILD"
run_part robust tests/robust.sh "$BUILD"
run_part mpi tests/mpi.sh "$BUILD"
run_part ps tests/ps.sh "$BUILD"
run_part pslayer tests/pslayer.sh "$BUILD"
run_part sandblaster tests/sandblaster.sh "$BUILD"
run_part decentral tests/decentral.sh "$BUILD"
run_part mp tests/mp.sh "$BUILD"
run_part bounds tests/bounds.sh "$BUILD"
run_part resume tests/resume.sh "$BUILD"
run_part compat tests/compat.sh "$BUILD"
run_part resnet tests/resnet.sh "$BUILD"
run_part threads tests/threads.sh "$BUILD"
run_part lc tests/lc.sh "$BUILD"
run_part preempt tests/preempt.sh "$BUILD"
run_part outputs tests/outputs.sh "$BUILD"
run_part blas tests/blas.sh "$BUILD"
run_part plot tests/plot.sh "$BUILD"
run_part usage tests/usage.sh "$BUILD"
# Hosts in network namespaces (tests/cluster.sh): skips with one line where
# namespaces cannot be created (no root) and under the sanitizers;
# DSGD_CLUSTER_TESTS=0 leaves it out.
if [ "${DSGD_CLUSTER_TESTS:-1}" = 1 ]; then run_part cluster tests/cluster.sh "$BUILD"
else echo "skip cluster: DSGD_CLUSTER_TESTS=0"; fi
# The simulated build (SimGrid) and the fuzz harnesses (clang) are built
# with Open MPI's tools whatever MPI=: they are tested once, with the plain
# Open MPI build.
once=0
[ "${SANITIZE:-0}" = 1 ] || [ "$MPI_IMPL" = mpich ] || once=1
[ $once = 1 ] || echo "skip sim, bounds_sim, experiments, figures, scripts, fuzz: they run with the plain Open MPI build (make test)"
[ $once = 0 ] || run_part sim tests/sim.sh build-sim "$BUILD"
[ $once = 0 ] || run_part bounds_sim tests/bounds_sim.sh build-sim
[ $once = 0 ] || run_part experiments tests/experiments.sh build-sim "$BUILD"
[ $once = 0 ] || run_part figures tests/figures.sh
# the scripts given hostile text: shell and gnuplot, whatever the MPI
[ $once = 0 ] || run_part scripts tests/scripts.sh "$BUILD"
# a short libFuzzer run of every harness (FUZZ_SECONDS each, default 5;
# make fuzz runs long)
[ $once = 0 ] || run_part fuzz tests/fuzz.sh build-fuzz

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
