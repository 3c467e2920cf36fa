#!/usr/bin/env bash
# Sandblaster L-BFGS on Fashion-MNIST (logreg, full batch of 60000 samples
# per L-BFGS iteration, 1 shard).
#   1. accuracy: 2 replicas, 120 iterations: the first iteration and time at
#      which the test accuracy reaches TARGET, and the final accuracy.
#   2. backup tasks: 4 replicas, replica 0 ten times slower, 10 iterations;
#      time per pass (one distributed evaluation of f and ∇f over the batch)
#      and per L-BFGS iteration, with and without backup tasks, against no
#      straggler; the coordinator's portion counters. Run on a simulated
#      cluster (scripts/dsgd-sim: one host per rank, the straggler's host 10x
#      slower) when the SimGrid build exists, because on a machine with fewer
#      cores than ranks the replicas share cores and a sleeping straggler
#      only hands its core to the others; then on this machine with
#      --slowdown for comparison.
# Usage: experiments/sandblaster.sh [BUILD_DIR] [TARGET]     (default build, 0.84)
# Writes the metrics of every run to experiments/out/sb-*.jsonl.
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
set -euo pipefail
BUILD=${1:-build}
# a build directory given is the caller's (the default, the repository's)
[ -z "${1-}" ] || [[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
TARGET=${2:-0.84}
cd "$(dirname "$0")/.."
# the launcher of the build's MPI (Open MPI or MPICH), root and oversubscription allowed
. scripts/mpi-env.sh
mpi_env "$BUILD"
OUT=experiments/out
mkdir -p "$OUT"
BASE=(train --data fashion-mnist --model logreg --sync sandblaster --servers 1 --quiet)

echo "== 1. accuracy: logreg, full batch, 1 shard + 2 replicas, 120 L-BFGS iterations =="
"${MPIRUN[@]}" -np 4 "$BUILD/dsgd" "${BASE[@]}" --steps 120 --eval-every 5 --metrics "$OUT/sb-acc.jsonl" > /dev/null
python3 - "$OUT/sb-acc.jsonl" "$TARGET" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
t = float(sys.argv[2])
hit = next((r for r in rs if r["event"] == "eval" and r["test_acc"] >= t), None)
d = rs[-1]
start = next(r["time"] for r in rs if r["event"] == "config")
if hit:
    print("test accuracy %.4f reached after %d L-BFGS iterations, %.1f s into the run (start-up included)"
          % (hit["test_acc"], hit["step"], hit["time"] - start))
else:
    print("test accuracy %.2f not reached" % t)
print("final: test accuracy %.4f after %d iterations (%d function evaluations), %.1f s training, %.1f s wall"
      % (d["test_acc"], d["steps"], d["lbfgs_evals"], d["train_s"], d["wall_s"]))
PY

figures() {   # FILE LABEL
    python3 - "$1" "$2" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])][-1]
print("%-34s %8.4f %8.4f %7d %7d %8d %9d %9d" % (sys.argv[2], d["pass_s_mean"], d["train_s"] / d["steps"], d["passes"],
      d["portions_per_batch"], d["duplicates_issued"], d["duplicates_discarded"], d["portions_counted"]))
PY
}
header() { printf '%-34s %8s %8s %7s %7s %8s %9s %9s\n' run s/pass s/iter passes P dup_iss dup_disc counted; }
ratios() {   # FAST SLOW NOBACKUP
    python3 - "$@" <<'PY'
import json, sys
f, s, n = ([json.loads(l) for l in open(p)][-1] for p in sys.argv[1:4])
it = lambda d: d["train_s"] / d["steps"]
print("straggler with backup tasks: %.2fx the time per pass, %.2fx per iteration of the run without straggler"
      % (s["pass_s_mean"] / f["pass_s_mean"], it(s) / it(f)))
print("straggler without backup tasks: %.2fx per pass, %.2fx per iteration"
      % (n["pass_s_mean"] / f["pass_s_mean"], it(n) / it(f)))
PY
}
B=("${BASE[@]}" --steps 10 --eval-every 1000)

if [ -x build-sim/dsgd ] && command -v smpirun > /dev/null; then
    echo
    echo "== 2a. backup tasks, simulated cluster: 6 hosts (coordinator, shard, 4 replicas), replica 0's host 10x slower =="
    header
    scripts/dsgd-sim --hosts 6 -- "${B[@]}" --metrics "$OUT/sb-sim-fast.jsonl" > /dev/null 2>&1
    figures "$OUT/sb-sim-fast.jsonl" "no straggler"
    scripts/dsgd-sim --hosts 6 --slow-workers 0=10 -- "${B[@]}" --metrics "$OUT/sb-sim-slow.jsonl" > /dev/null 2>&1
    figures "$OUT/sb-sim-slow.jsonl" "straggler, backup tasks"
    scripts/dsgd-sim --hosts 6 --slow-workers 0=10 -- "${B[@]}" --no-backup-tasks --metrics "$OUT/sb-sim-nobk.jsonl" > /dev/null 2>&1
    figures "$OUT/sb-sim-nobk.jsonl" "straggler, --no-backup-tasks"
    ratios "$OUT/sb-sim-fast.jsonl" "$OUT/sb-sim-slow.jsonl" "$OUT/sb-sim-nobk.jsonl"
else
    echo "(no SimGrid build: make sim for the simulated-cluster figures)"
fi

echo
echo "== 2b. backup tasks on this machine ($(nproc) cores for 6 ranks): --slowdown 0=10 =="
header
"${MPIRUN[@]}" -np 6 "$BUILD/dsgd" "${B[@]}" --metrics "$OUT/sb-real-fast.jsonl" > /dev/null
figures "$OUT/sb-real-fast.jsonl" "no straggler"
"${MPIRUN[@]}" -np 6 "$BUILD/dsgd" "${B[@]}" --slowdown 0=10 --metrics "$OUT/sb-real-slow.jsonl" > /dev/null
figures "$OUT/sb-real-slow.jsonl" "straggler, backup tasks"
"${MPIRUN[@]}" -np 6 "$BUILD/dsgd" "${B[@]}" --slowdown 0=10 --no-backup-tasks --metrics "$OUT/sb-real-nobk.jsonl" > /dev/null
figures "$OUT/sb-real-nobk.jsonl" "straggler, --no-backup-tasks"
ratios "$OUT/sb-real-fast.jsonl" "$OUT/sb-real-slow.jsonl" "$OUT/sb-real-nobk.jsonl"
