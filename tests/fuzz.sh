#!/usr/bin/env bash
# libFuzzer runs of every harness in fuzz/ (built by make fuzz-build), each
# for FUZZ_SECONDS (default 5: the short run of make test) or, if FUZZ_RUNS
# is set (make fuzz: 10.5 million), for that many executions, starting from
# the seeds in fuzz/seeds/NAME. A crash, leak,
# sanitizer report or timeout fails the harness and leaves the input in
# BUILD/crash-NAME-*. Prints executions and executions per second.
# Usage: tests/fuzz.sh BUILD_FUZZ_DIR   (prints "fuzz: N passed, M failed")
set -u
BUILD=${1:-build-fuzz}
SECS=${FUZZ_SECONDS:-5}
RUNS=${FUZZ_RUNS:-}
LIMIT=(-max_total_time="$SECS")
[ -n "$RUNS" ] && LIMIT=(-runs="$RUNS")
cd "$(dirname "$0")/.."
. tests/lib.sh
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for name in idx cifar checkpoint options; do
    bin="$BUILD/fuzz_$name"
    if [ ! -x "$bin" ]; then bad "fuzz $name" "$bin is not built (make fuzz-build needs clang)"; continue; fi
    corpus="$BUILD/corpus/$name"
    mkdir -p "$corpus"
    log="$BUILD/fuzz-$name.log"
    nice -n 5 "$bin" "${LIMIT[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$BUILD/crash-$name-" "$corpus" "fuzz/seeds/$name" > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    if [ $rc -eq 0 ] && [ -n "$execs" ]; then ok "fuzz $name: $execs executions ($rate/s), 0 crashes"
    else bad "fuzz $name" "exit $rc after ${execs:-?} executions: $(grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log")"; fi
done
summary fuzz
