#!/usr/bin/env bash
# scripts/dsgd-plot: every figure is written as a whole PNG and SVG from
# real metrics files (curves, a staleness histogram, selsync's sync
# fraction, a scaling curve); repeats of one configuration are one curve
# with a band (and one row of summarize.py), configurations that would be
# labelled alike are named apart, --label names a run; figures without data are skipped; a missing,
# corrupt or foreign file is refused with one line and leaves no figure.
# Usage: tests/plot.sh BUILD_DIR   (prints "plot: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin plot "$@"
PLOT="$HERE/../scripts/dsgd-plot"
if ! command -v gnuplot > /dev/null; then
    bad "gnuplot" "not installed (scripts/install-deps)"; summary plot; exit 1
fi
C=(--data synthetic:1024 --model mlp:16 --batch 16 --lr 0.05 --test-subset 128 --quiet)
T=(--epochs 1000 --target-acc 0.8 --eval-every 4)
"$DSGD" train "${C[@]}" "${T[@]}" --metrics "$WORK/none.jsonl" > /dev/null 2>&1
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" "${T[@]}" --sync bsp --metrics "$WORK/bsp2.jsonl" > /dev/null 2>&1
"${MPIRUN[@]}" -np 3 "$DSGD" train "${C[@]}" --steps 40 --eval-every 10 --sync ssp --staleness 2 --metrics "$WORK/ssp.jsonl" > /dev/null 2>&1
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --steps 60 --eval-every 10 --sync selsync --window 5 --metrics "$WORK/selsync.jsonl" > /dev/null 2>&1
ALL=("$WORK"/none.jsonl "$WORK"/bsp2.jsonl "$WORK"/ssp.jsonl "$WORK"/selsync.jsonl)

# FILE: a whole PNG (signature, IHDR, IEND) or SVG (opens and closes the svg element)
valid() {
    python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
if p.endswith(".png"):
    ok = b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR" and b[-8:-4] == b"IEND"
else:
    t = b.decode("utf-8", "replace")
    ok = "<svg" in t[:2000] and t.rstrip().endswith("</svg>")
sys.exit(0 if ok and len(b) > 1000 else 1)
PY
}
if out=$("$PLOT" --out "$WORK/figs" "${ALL[@]}" 2>&1); then
    missing=""
    for f in accuracy_time accuracy_samples accuracy_epochs staleness sync_fraction scaling; do
        for e in png svg; do valid "$WORK/figs/$f.$e" || missing+=" $f.$e"; done
    done
    if [ -z "$missing" ]; then ok "dsgd-plot writes all 6 figures as valid PNG and SVG from 4 runs"
    else bad "dsgd-plot figures" "missing or invalid:$missing ($out)"; fi
else
    bad "dsgd-plot" "$out"
fi
# figures are written as any file is under the caller's umask (they were 0600)
mode=$(stat -c %a "$WORK/figs/accuracy_time.png" 2>/dev/null)
want=$(printf '%o' $((0666 & ~$(umask))))
if [ "$mode" = "$want" ]; then ok "figures have the mode the umask gives ($mode)"
else bad "figure mode" "$mode, not $want"; fi
# the curves carry one title per run, labelled by paradigm and flags
if grep -q "ssp s=2, N=2" "$WORK/figs/accuracy_time.svg" && grep -q "selsync" "$WORK/figs/accuracy_time.svg"; then
    ok "curves are labelled by paradigm, flags and workers"
else bad "curve labels" "$(grep -o '>[^<]*N=[0-9]*<' "$WORK/figs/accuracy_time.svg" | head -3)"; fi
# the title counts the ranks the runs share: 3 processes of ssp are 2
# workers and 1 server (it said "2 workers")
out=$("$PLOT" --out "$WORK/one-ssp" "$WORK/ssp.jsonl" 2>&1)
if grep -q "2 workers, 1 server<" "$WORK/one-ssp/accuracy_time.svg" 2>/dev/null; then ok "the title of an ssp run of 3 processes says 2 workers, 1 server"
else bad "the title's workers and servers" "$out $(grep -o 'worker[^<]*<' "$WORK/one-ssp/accuracy_time.svg" 2>/dev/null | head -2)"; fi
# bsp with and without --sync-bn are two configurations, not repeats of one
# (summarize.py grouped them into one row of 6 "seeds")
if out=$(python3 - "$PLOT" 2>&1 <<'EOF'
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("dsgd_plot", sys.argv[1])
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("dsgd_plot", loader))
loader.exec_module(m)
a = m.flag_label({"sync": "bsp", "partition": "label-skew"}, 8)
b = m.flag_label({"sync": "bsp", "sync-bn": True, "partition": "label-skew"}, 8)
assert a != b and "sync-bn" in b, (a, b)
print(f"'{a}' and '{b}'")
EOF
); then ok "bsp with --sync-bn is labelled apart: $out"
else bad "the --sync-bn label" "$out"; fi

# repeats of one configuration (seeds apart) are one curve, the median with
# the range as a band, and one row of summarize.py with median [min, max]
for s in 1 2 3; do
    "$DSGD" train "${C[@]}" --steps 40 --eval-every 5 --seed $s --metrics "$WORK/rep$s.jsonl" > /dev/null 2>&1
done
out=$("$PLOT" --out "$WORK/rep" "$WORK"/rep[123].jsonl 2>&1)
# (against samples, where the seeds' evaluations fall at the same x: in
# time, runs of a few milliseconds may not overlap at all, and then they
# are one point with error bars both ways)
if [ $? -eq 0 ] && [ "$(grep -c 'none (3 runs: median, range)' "$WORK/rep/accuracy_samples.svg")" -ge 1 ] &&
   ! grep -q '>none<' "$WORK/rep/accuracy_samples.svg" && [ "$(grep -c "fill-opacity = '0.2" "$WORK/rep/accuracy_samples.svg")" -eq 2 ] &&
   [ "$(grep -c 'none (3 runs: median, range)' "$WORK/rep/accuracy_time.svg")" -ge 1 ] && ! grep -q '>none<' "$WORK/rep/accuracy_time.svg"; then
    ok "three seeds of one configuration: one curve with its range as a band (accuracy and loss)"
else bad "repeats in dsgd-plot" "$out $(grep -o 'none[^<]*' "$WORK/rep/accuracy_samples.svg" | head -3)"; fi
python3 "$HERE/../experiments/summarize.py" "$WORK/rep.md" 0.5 "$WORK"/rep[123].jsonl > /dev/null 2>&1
row=$(grep '^| none |' "$WORK/rep.md")
acc=$(python3 -c 'import json,statistics,sys
a=[[json.loads(l) for l in open(p) if "\"done\"" in l][-1]["test_acc"] for p in sys.argv[1:]]
print("%.4f [%.4f, %.4f]" % (statistics.median(a), min(a), max(a)))' "$WORK"/rep[123].jsonl)
if [ "$(grep -c '^| none |' "$WORK/rep.md")" = 1 ] && echo "$row" | grep -qF "| 3 | 1 | $acc |"; then
    ok "summarize.py: three seeds make one row, 3 runs, accuracy $acc"
else bad "repeats in summarize.py" "want '| 3 | 1 | $acc |' in: $(cat "$WORK/rep.md")"; fi

# runs whose labels would be the same are told apart by what differs
# between them (any flag but --seed: here --lr, which no label shows; they
# were one curve of "3 runs"), while seeds stay one curve
"$DSGD" train "${C[@]}" --steps 40 --eval-every 5 --seed 1 --lr 0.1 --metrics "$WORK/lr.jsonl" > /dev/null 2>&1
out=$("$PLOT" --out "$WORK/apart" "$WORK/rep1.jsonl" "$WORK/rep2.jsonl" "$WORK/lr.jsonl" 2>&1)
if [ $? -eq 0 ] && grep -qF '>none [lr=0.05] (2 runs: median, range)<' "$WORK/apart/accuracy_samples.svg" &&
    grep -qF '>none [lr=0.1]<' "$WORK/apart/accuracy_samples.svg" && ! grep -q '3 runs' "$WORK/apart/accuracy_samples.svg"; then
    ok "two configurations of one label are two curves, named by the flag that differs; two seeds are one"
else bad "labels apart by flag" "$out $(grep -o '<title>[^<]*' "$WORK/apart/accuracy_samples.svg" | tail -3)"; fi
# ... and by where a simulated run ran (the config event's platform): a
# cluster computing 4 times faster is another configuration
for f in rep1:1 rep2:1 rep3:4; do
    python3 -c 'import json, sys
src, scale, dst = sys.argv[1:]
with open(src) as i, open(dst, "w") as o:
    for line in i:
        r = json.loads(line)
        if r["event"] == "config":
            r["clock"] = "simulated"
            r["platform"] = {"hosts": 1, "bandwidth_Bps": 1.25e9, "latency_s": 2e-05, "topology": "flat",
                             "compute_scale": float(scale), "host_slowdown": [1], "slow_hosts": 0, "eager_bytes": 0}
        o.write(json.dumps(r) + "\n")' "$WORK/${f%:*}.jsonl" "${f#*:}" "$WORK/sim-${f%:*}.jsonl"
done
out=$("$PLOT" --out "$WORK/plat" "$WORK"/sim-rep[123].jsonl 2>&1)
if [ $? -eq 0 ] && grep -qF '>none [platform compute_scale=1.0] (2 runs: median, range)<' "$WORK/plat/accuracy_samples.svg" &&
    grep -qF '>none [platform compute_scale=4.0]<' "$WORK/plat/accuracy_samples.svg"; then
    ok "simulated runs on two platforms are two curves, named by what differs (compute scale)"
else bad "labels apart by platform" "$out $(grep -o '<title>[^<]*' "$WORK/plat/accuracy_samples.svg" | tail -3)"; fi
# --label FILE=TEXT names a run, FILE by any path to it (as summarize.py's);
# a FILE that is not plotted is refused
out=$(cd "$WORK" && "$PLOT" --out "$WORK/lab" --label lr.jsonl="rate 0.1" "$WORK/rep1.jsonl" "$WORK/./lr.jsonl" 2>&1)
if [ $? -eq 0 ] && grep -qF '>rate 0.1<' "$WORK/lab/accuracy_samples.svg" && grep -qF '>none<' "$WORK/lab/accuracy_samples.svg"; then
    ok "--label FILE=TEXT names the run, FILE given by another path to it"
else bad "--label" "$out $(grep -o '<title>[^<]*' "$WORK/lab/accuracy_samples.svg" | tail -3)"; fi

# a single-process run has no staleness, no sync fraction: skipped, said so
out=$("$PLOT" --out "$WORK/one" "$WORK/none.jsonl" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "staleness: no run has the data, skipped" && [ ! -e "$WORK/one/staleness.png" ] &&
    valid "$WORK/one/accuracy_epochs.png"; then ok "figures without data are skipped"
else bad "skipping figures without data" "$out"; fi

refused() {   # WHAT EXPECTED_TEXT FILES...
    local what=$1 want=$2
    shift 2
    out=$("$PLOT" --out "$WORK/bad" "$@" 2>&1)
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^dsgd-plot: error: .*$want" &&
        [ -z "$(ls -A "$WORK/bad" 2>/dev/null)" ]; then ok "$what refused: $out"
    else bad "$what" "rc $rc: $out"; fi
}
refused "a missing metrics file" "cannot read metrics file" "$WORK/none.jsonl" "$WORK/nope.jsonl"
head -c 150 "$WORK/bsp2.jsonl" > "$WORK/cut.jsonl"
refused "a truncated metrics file" "line 1 is not JSON" "$WORK/cut.jsonl"
echo '{"a": 1}' > "$WORK/foreign.jsonl"
refused "a JSON file that is not dsgd's" "no \"event\"" "$WORK/foreign.jsonl"
grep -v '"config"' "$WORK/none.jsonl" > "$WORK/noconfig.jsonl"
refused "metrics without a config event" "no config event" "$WORK/noconfig.jsonl"
refused "no files" "give one or more metrics files"
refused "a --label for a file not plotted" "--label names 'nope.jsonl', which is not one of the metrics files" \
    --label nope.jsonl=x "$WORK/none.jsonl"
summary plot
