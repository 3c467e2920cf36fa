#!/usr/bin/env bash
# The paper experiments in their --quick form (simulated, seconds each): each
# runs end to end and writes its summary table and figures (and the spatial
# model-parallel speed-up, lc_speedup.sh, and evaluation.sh's table of how
# evaluating perturbs a run); docs/results.md's tables agree
# with their metrics.
# Usage: tests/experiments.sh SIM_BUILD_DIR BUILD_DIR   (prints "experiments: N passed, M failed")
set -u
SIM=${1:-build-sim}
REAL=${2:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/dsgd-exp-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$HERE/lib.sh"
for e in jin dssp selsync distbelief; do
    out="$WORK/$e"
    if "$HERE/../experiments/$e.sh" --quick --out "$out" --sim-build "$SIM" --build "$REAL" > "$WORK/$e.log" 2>&1; then
        rows=$(grep -c '^| [a-z]' "$out/summary.md")
        pngs=$(find "$out/figures" -name '*.png' -size +1k | wc -l)
        walls=$(wc -l < "$out/wall.tsv" 2>/dev/null || echo 0)
        if [ "$rows" -ge 4 ] && [ "$pngs" -ge 3 ] && ! grep -q 'failed' "$out/summary.md" &&
            [ "$walls" -ge 4 ] && grep -q "^Wall time on this machine: $walls runs" "$out/summary.md"; then
            ok "experiments/$e.sh --quick: $rows table rows, $pngs figures, $walls runs' wall times"
        else bad "experiments/$e.sh --quick" "$rows table rows, $pngs figures, $walls wall times: $(grep failed "$out/summary.md" | head -2)"; fi
    else
        bad "experiments/$e.sh --quick" "$(tail -3 "$WORK/$e.log")"
    fi
done
# The simulator against real shaped links (experiments/net_calibration.sh):
# a short form runs end to end, one row per case, numbers in every cell.
# How close the two are is an experiment's question, not a test's: this
# machine's load decides the real side (docs/simulation.md has the figures).
if why=$("$HERE/../scripts/dsgd-cluster" check 2>&1); then
    if "$HERE/../experiments/net_calibration.sh" --rates 1gbit --ns 2 --paradigms "bsp localsgd asp downpour gossip-push" \
        --repeats 1 --build "$REAL" --sim-build "$SIM" > "$WORK/netcal.md" 2> "$WORK/netcal.err" &&
        [ "$(grep -cE '^\| 1gbit \| 2 \| [a-z-]+ \| [0-9.e+-]+ \[[0-9.e+-]+, [0-9.e+-]+\] m?s \| [0-9.e+-]+ m?s \| [+-][0-9.]+% \| [0-9.e+-]+ m?s \| [+-][0-9.]+% \|' "$WORK/netcal.md")" = 5 ]; then
        ok "experiments/net_calibration.sh, 5 cases on 2 hosts at 1 Gbit/s: real and simulated times, both message models"
    else bad "experiments/net_calibration.sh" "$(tail -3 "$WORK/netcal.err") $(grep '^| 1gbit' "$WORK/netcal.md" | head -5)"; fi
else echo "skip net_calibration: $why"; fi
# --report: an experiment stopped part-way is summarized as it stands,
# running nothing; the runs it lacks are named
if [ -d "$WORK/jin/metrics" ]; then
    rm -f "$WORK/jin/metrics/gossip-4-lr0.05-seed2.jsonl"
    before=$(ls "$WORK/jin/metrics" | wc -l)
    if "$HERE/../experiments/jin.sh" --quick --report --out "$WORK/jin" --sim-build "$SIM" > "$WORK/jin-report.log" 2>&1 &&
        [ "$(ls "$WORK/jin/metrics" | wc -l)" = "$before" ] &&
        grep -q '^- gossip-4-lr0.05-seed2: not run (--report)$' "$WORK/jin/summary.md" &&
        grep -q '^- N = 4: .*gossip [0-9.]* s (1 of 2 seeds)' "$WORK/jin/summary.md"; then
        ok "experiments/jin.sh --report: ran nothing, named the missing run, counted its seeds"
    else bad "experiments/jin.sh --report" "$(tail -3 "$WORK/jin-report.log"; grep '^- ' "$WORK/jin/summary.md")"; fi
    # two invocations into one folder at once (one per core, as EXP_SEEDS
    # allows): one runs the missing run, the other reports meanwhile; the
    # summary that stays is one whole summary, not both interleaved, and
    # neither leaves a part behind
    "$HERE/../experiments/jin.sh" --quick --keep --out "$WORK/jin" --sim-build "$SIM" > "$WORK/jin-twice-1.log" 2>&1 &
    pid=$!
    for i in $(seq 300); do grep -q '^  gossip-4-lr0.05-seed2$' "$WORK/jin-twice-1.log" && break; sleep 0.05; done
    "$HERE/../experiments/jin.sh" --quick --report --out "$WORK/jin" --sim-build "$SIM" > "$WORK/jin-twice-2.log" 2>&1
    wait $pid
    heads=$(grep -c '^# Jin et al' "$WORK/jin/summary.md")
    cross=$(grep -c '^Crossover N' "$WORK/jin/summary.md")
    parts=$(find "$WORK/jin" -maxdepth 1 -name 'summary.md.*' | wc -l)
    if [ "$heads" = 1 ] && [ "$cross" = 1 ] && [ "$parts" = 0 ]; then
        ok "experiments/jin.sh: two invocations into one folder at once leave one whole summary"
    else bad "experiments/jin.sh, two invocations at once" "$heads titles, $cross crossover lines, $parts parts left in the summary"; fi
    # the summary records the subset it was asked for
    EXP_SEEDS=2 EXP_NS="2 4" "$HERE/../experiments/jin.sh" --quick --report --out "$WORK/jin" --sim-build "$SIM" > "$WORK/jin-sub.log" 2>&1
    if grep -q '^Command: `EXP_NS="2 4" EXP_SEEDS="2" [^`]*experiments/jin.sh --quick`' "$WORK/jin/summary.md"; then
        ok "experiments/jin.sh: the summary's command names the subset (EXP_NS, EXP_SEEDS) it was made for"
    else bad "experiments/jin.sh with EXP_SEEDS, EXP_NS" "$(grep '^Command' "$WORK/jin/summary.md")"; fi
fi
# Several invocations sharing an output folder (EXP_SEEDS, EXP_METHODS):
# runs finishing at once each keep their line of wall.tsv (40 at once)
mkdir -p "$WORK/walls"
(
    . "$HERE/../experiments/lib.sh"
    OUT=$WORK/walls
    for i in $(seq 40); do run_wall "run-$i" "$SECONDS" > /dev/null 2>&1 & done
    wait
)
walls=$(sort -u "$WORK/walls/wall.tsv" 2>/dev/null | grep -c '^run-[0-9]*'$'\t''[0-9]*$')
if [ "$walls" = 40 ]; then ok "experiments: 40 runs finishing at once into one folder each keep their wall time"
else bad "experiments: runs finishing at once into one folder" "$walls of 40 wall times kept"; fi
# A sweep's subset given wrong is refused before anything runs (it used to
# fail every run and report the failures as results, or stop on a shell
# arithmetic error)
for e in "jin|EXP_NS=4x|EXP_NS: '4x' is not a number of workers" "jin|EXP_LRS=fast|EXP_LRS: 'fast' is not a step size" \
         "jin|EXP_METHODS=asp|EXP_METHODS: 'asp' is not a method" "distbelief|EXP_SEEDS=one|EXP_SEEDS: 'one' is not a seed" \
         "jin|EXP_NS= |EXP_NS is blank" "dssp|REGIME=resnt|REGIME: 'resnt' is not a regime"; do
    IFS='|' read -r script var want <<< "$e"
    rm -rf "$WORK/bad"
    env REGIME=resnet "$var" "$HERE/../experiments/$script.sh" --out "$WORK/bad" --sim-build "$SIM" --build "$REAL" > "$WORK/bad.out" 2> "$WORK/bad.err"
    rc=$?
    if [ $rc = 2 ] && [ "$(wc -l < "$WORK/bad.err")" = 1 ] && grep -q "^$script: $want" "$WORK/bad.err" &&
        [ -z "$(ls -A "$WORK/bad/metrics" 2>/dev/null)" ]; then ok "experiments/$script.sh with '$var': refused in one line, nothing run"
    else bad "experiments/$script.sh with '$var'" "exit $rc: $(head -3 "$WORK/bad.err")"; fi
done
# Runs experiments/NAME.sh --quick into $WORK/NAME (out); fails the case
# and returns 1 if it did not run: NAME [more flags]
quick() {
    local e=$1
    shift
    out="$WORK/$e"
    "$HERE/../experiments/$e.sh" --quick --out "$out" --build "$REAL" "$@" > "$WORK/$e.log" 2>&1 && return 0
    bad "experiments/$e.sh --quick" "$(tail -3 "$WORK/$e.log")"
    return 1
}
# selsync.sh in the paper's regime: seeds make one row each, every run
# stops at its step budget, the acceptance lines give spreads
if REGIME=resnet quick selsync --sim-build "$SIM"; then
    rows=$(grep -c '^| [a-z].* | 2 | 4 | .* | steps |$' "$out/summary.md")
    spreads=$(grep -c '^- 1Gbps-4-.*δ=0\.3: acc [0-9.]* \[' "$out/summary.md")
    if [ "$rows" = 7 ] && [ "$spreads" = 2 ] && grep -q '^Command: `REGIME=resnet ' "$out/summary.md"; then
        ok "REGIME=resnet experiments/selsync.sh --quick: $rows rows of 2 seeds bounded by steps, spreads against bsp"
    else bad "REGIME=resnet experiments/selsync.sh --quick" "$rows rows, $spreads spread lines: $(cat "$out/summary.md")"; fi
fi
# distbelief.sh in the regime: Downpour's shards and Adagrad's γ tell its
# rows apart (one row per configuration, its seeds in it)
if REGIME=resnet quick distbelief --sim-build "$SIM"; then
    rows=$(grep -c '^| [a-z].* | 2 | 2 | ' "$out/summary.md")
    if [ "$rows" = 7 ] && grep -q '^| downpour server=adagrad γ=0.5 S=2 | 2 | 2 |' "$out/summary.md" &&
        grep -q '^| downpour server=adagrad γ=0.5 | 2 | 2 |' "$out/summary.md" && grep -q '^| sandblaster S=2 | 2 | 2 |' "$out/summary.md"; then
        ok "REGIME=resnet experiments/distbelief.sh --quick: $rows configurations at 2 replicas, shards and γ in their names"
    else bad "REGIME=resnet experiments/distbelief.sh --quick" "$rows rows: $(grep '^| ' "$out/summary.md")"; fi
fi
# dssp.sh in the regime: the regime's clusters with seeds, ratios with spreads
if REGIME=resnet quick dssp --sim-build "$SIM"; then
    rows=$(grep -c '^| [a-z].* | 2 | 4 | ' "$out/summary.md")
    if [ "$rows" = 4 ] && grep -q '^- rn-transient, 4 workers: dssp/ssp = [0-9.]* \[[0-9.]*, [0-9.]*\], .* (2 seeds)$' "$out/summary.md"; then
        ok "REGIME=resnet experiments/dssp.sh --quick: $rows paradigms of 2 seeds, dssp's ratios with their spread"
    else bad "REGIME=resnet experiments/dssp.sh --quick" "$rows rows: $(tail -5 "$out/summary.md")"; fi
fi
# evaluation.sh: none, inline and offline rows, the offline ones evaluated
if quick evaluation --sim-build "$SIM"; then
    rows=$(grep -c '^| \(real\|sim\)-' "$out/summary.md")
    evald=$(grep '^| sim-[a-z]* | offline | [1-9]' "$out/summary.md" | wc -l)
    if [ "$rows" = 9 ] && [ "$evald" = 2 ] && grep -q "^Wall time on this machine: 9 runs" "$out/summary.md"; then
        ok "experiments/evaluation.sh --quick: $rows rows, the simulated offline runs evaluated"
    else bad "experiments/evaluation.sh --quick" "$rows rows, $evald evaluated offline rows: $(cat "$out/summary.md")"; fi
fi
# regime.sh: the papers' table, the models measured, the compute scales
if quick regime; then
    models=$(grep -c '^| \(mlp\|resnet\):[0-9,]* | [0-9,]* |' "$out/summary.md")
    scales=$(grep -c '^| \(mlp\|resnet\):[0-9,]* | [0-9.]* Gb/s | .* K = ' "$out/summary.md")
    if [ "$models" = 2 ] && [ "$scales" = 2 ] && grep -q '^| Jin et al. 2016 | .* | 934 | 11.8 |$' "$out/summary.md"; then
        ok "experiments/regime.sh --quick: the papers' ratios, 2 models measured, their compute scales"
    else bad "experiments/regime.sh --quick" "$models models, $scales scale rows: $(cat "$out/summary.md")"; fi
fi
# DistBelief's Figure 3 on spatial blocks: a table row and a speed-up per M, and the figure
out="$WORK/lc_speedup"
if "$HERE/../experiments/lc_speedup.sh" --quick --out "$out" --sim-build "$SIM" > "$WORK/lc_speedup.log" 2>&1; then
    rows=$(awk -F'\t' 'NR > 1 && $5 > 0' "$out/speedup.tsv" | wc -l)
    if [ "$rows" = 3 ] && [ -s "$out/figures/speedup.png" ] && grep -q '^| tiny `lc:4,8:k=3`' "$out/summary.md" && ! grep -q failed "$out/summary.md"; then
        ok "experiments/lc_speedup.sh --quick: speed-ups at M = 1, 2, 4 and the figure"
    else bad "experiments/lc_speedup.sh --quick" "$rows rows: $(cat "$out/speedup.tsv")"; fi
else
    bad "experiments/lc_speedup.sh --quick" "$(tail -3 "$WORK/lc_speedup.log")"
fi
# docs/results.md's tables agree with the metrics beside it; a number
# changed by hand in one of them is caught, by name
RT="$HERE/../experiments/results_tables.py"
if out=$(python3 "$RT" --check 2>&1); then ok "docs/results.md and README.md: ${out#results_tables: }"
else bad "docs/results.md's tables and the claims of it and README.md against their metrics" "$out"; fi
sed '/<!-- table jin -->/,/<!-- end table -->/ s/| 8 | 0\.867 /| 8 | 0.877 /' "$HERE/../docs/results.md" > "$WORK/results.md"
out=$(python3 "$RT" --check "$WORK/results.md" 2>&1)
if [ $? = 1 ] && echo "$out" | grep -q "^results_tables: jin: differs from its metrics" && [ "$(echo "$out" | grep -c differs)" = 1 ]; then
    ok "a number changed in the jin table is caught: $(echo "$out" | head -1)"
else bad "results_tables.py on a changed table" "$out"; fi
# a number of the prose changed, or its sentence reworded so that it no
# longer says what the metrics are checked against: both caught
sed 's/all-reduce is first from 8 workers on/all-reduce is first from 16 workers on/' "$HERE/../README.md" > "$WORK/README.md"
sed 's/plain Downpour collapses to chance at 16–32/plain Downpour falls to chance at 16–32/' "$HERE/../docs/results.md" > "$WORK/results.md"
out=$(python3 "$RT" --check "$WORK/README.md" "$WORK/results.md" 2>&1)
if [ $? = 1 ] && echo "$out" | grep -q "^results_tables: claim '(\`experiments/jin.sh\`): all-reduce.*README.md says \['16'\], the metrics give \['8'\]" &&
    echo "$out" | grep -q "^results_tables: error: claim 'plain Downpour collapses.*not found in results.md"; then
    ok "a number changed in README.md's prose, and a claim's sentence reworded, are caught"
else bad "results_tables.py on changed prose" "$out"; fi
# the published metrics name no machine's paths: a run made with --out
# /some/dir records that path in its config event, which
# experiments/publish.py rewrites to the file's place in the repository
mkdir -p "$WORK/pubsrc/metrics/pilot" "$WORK/pubroot"
printf '{"event":"config","config":{"metrics":"%s/pubsrc/metrics/a.jsonl","sync":"bsp"}}\n{"event":"done"}\n' "$WORK" > "$WORK/pubsrc/metrics/a.jsonl"
printf '{"event":"config","config":{"metrics":"/elsewhere/b.jsonl"}}\n' > "$WORK/pubsrc/metrics/pilot/b.jsonl"
echo partial > "$WORK/pubsrc/metrics/c.jsonl.part"
echo "# summary" > "$WORK/pubsrc/summary.md"
# (inside the experiment's archive, which a second publish adds to and
# which the plotting and tables read in place)
A="$WORK/pubroot/docs/results/demo/metrics.tar.gz"
member() { python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); sys.stdout.write(t.extractfile(sys.argv[2]).read().decode())' "$A" "$1" 2>/dev/null; }
if out=$(python3 "$HERE/../experiments/publish.py" --root "$WORK/pubroot" "$WORK/pubsrc" demo 2>&1) &&
    member metrics/a.jsonl | grep -q '"metrics":"docs/results/demo/metrics.tar.gz/metrics/a.jsonl","sync":"bsp"' &&
    member metrics/pilot/b.jsonl | grep -q '"metrics":"docs/results/demo/metrics.tar.gz/metrics/pilot/b.jsonl"' &&
    [ "$(tar tzf "$A" | tr '\n' ' ')" = "metrics/a.jsonl metrics/pilot/b.jsonl " ] &&
    [ ! -e "$A.part" ] && [ ! -e "$WORK/pubroot/docs/results/demo/metrics" ] && [ -s "$WORK/pubroot/docs/results/demo/summary.md" ]; then
    ok "experiments/publish.py archives a run's metrics with their recorded paths made the repository's ($out)"
else bad "experiments/publish.py" "$out: $(tar tzf "$A" 2>&1 | head -5)"; fi
sum1=$(md5sum < "$A")
rm -r "$WORK/pubsrc/metrics/pilot"
printf '{"event":"config","config":{"metrics":"/x/d.jsonl","sync":"bsp","model":"mlp"},"workers":1}\n{"event":"eval","step":1,"time":1,"train_s":1,"test_acc":0.5,"test_loss":1}\n{"event":"done","test_acc":0.5}\n' > "$WORK/pubsrc/metrics/d.jsonl"
python3 "$HERE/../experiments/publish.py" --root "$WORK/pubroot" "$WORK/pubsrc" demo > /dev/null 2>&1
rm "$WORK/pubsrc/metrics/d.jsonl"
python3 "$HERE/../experiments/publish.py" --root "$WORK/pubroot" "$WORK/pubsrc" demo > /dev/null 2>&1
if [ "$(tar tzf "$A" | tr '\n' ' ')" = "metrics/a.jsonl metrics/d.jsonl metrics/pilot/b.jsonl " ] &&
    [ "$(md5sum < "$A")" != "$sum1" ] && cp "$A" "$WORK/again.tar.gz" &&
    python3 "$HERE/../experiments/publish.py" --root "$WORK/pubroot" "$WORK/pubsrc" demo > /dev/null 2>&1 &&
    cmp -s "$A" "$WORK/again.tar.gz"; then
    ok "a second publish into one experiment keeps its other runs; publishing the same runs again leaves the archive's bytes"
else bad "experiments/publish.py into an existing archive" "$(tar tzf "$A" 2>&1 | tr '\n' ' ')"; fi
# runs made again beside an experiment's: NAME/SUB, its own archive, the
# recorded paths its own; a NAME that leaves docs/results/ is refused in one
# line and writes nothing
S2="$WORK/pubroot/docs/results/demo/again/metrics.tar.gz"
if out=$(python3 "$HERE/../experiments/publish.py" --root "$WORK/pubroot" "$WORK/pubsrc" demo/again 2>&1) &&
    tar xzOf "$S2" --wildcards 'metrics/*.jsonl' 2>/dev/null | grep -q '"metrics":"docs/results/demo/again/metrics.tar.gz/metrics/'; then
    ok "publish into EXPERIMENT/SUB: an archive of its own beside the experiment's, paths made its own"
else bad "publish into EXPERIMENT/SUB" "$out: $(tar tzf "$S2" 2>&1 | head -3)"; fi
for name in .. demo/.. ../demo a/b/c; do
    rm -rf "$WORK/travroot"
    if ! out=$(python3 "$HERE/../experiments/publish.py" --root "$WORK/travroot/x" "$WORK/pubsrc" "$name" 2>&1) &&
        [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^publish: error: NAME '$name' must be a folder name" &&
        ! [ -e "$WORK/travroot" ]; then
        ok "publish NAME '$name' is refused in one line, nothing written"
    else bad "publish NAME '$name'" "$out; written: $(find "$WORK/travroot" 2>/dev/null | head -3)"; fi
done
# a damaged archive is named and left as it was, not overwritten with the new runs alone
mkdir -p "$WORK/badroot/docs/results/demo"
head -c $(($(stat -c %s "$A") / 2)) "$A" > "$WORK/badroot/docs/results/demo/metrics.tar.gz"
cp "$WORK/badroot/docs/results/demo/metrics.tar.gz" "$WORK/bad.before"
if ! out=$(python3 "$HERE/../experiments/publish.py" --root "$WORK/badroot" "$WORK/pubsrc" demo 2>&1) &&
    [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^publish: error: cannot read the archive '.*metrics.tar.gz'" &&
    cmp -s "$WORK/bad.before" "$WORK/badroot/docs/results/demo/metrics.tar.gz"; then
    ok "publish into a damaged archive: one line naming it, the archive left as it was"
else bad "publish into a damaged archive" "$out"; fi
if out=$(python3 "$HERE/../experiments/summarize.py" "$WORK/sum.md" 0.4 "$A/metrics/d*.jsonl" 2>&1) &&
    grep -q "bsp" "$WORK/sum.md" && python3 "$HERE/../experiments/summarize.py" "$WORK/sum2.md" 0.4 "$A" > /dev/null 2>&1 &&
    ! python3 "$HERE/../experiments/summarize.py" "$WORK/sum3.md" 0.4 "$A/metrics/zz*.jsonl" > "$WORK/zz.out" 2>&1 &&
    grep -q "no file in the archive .* matches 'metrics/zz\*.jsonl'" "$WORK/zz.out"; then
    ok "summarize.py reads runs inside an archive, by pattern or all of them; a pattern that matches none is named"
else bad "summarize.py on an archive" "$out $(cat "$WORK/zz.out" 2>/dev/null)"; fi
# the published metrics name no machine's paths (the archives searched inside)
bad_paths=$(for a in $(find "$HERE/../docs/results" -name '*.tar.gz'); do
    tar xzOf "$a" | grep -qE '"(metrics|checkpoint|resume|data|out)":"/' && echo "$a"; done
    grep -rlE '"(metrics|checkpoint|resume|data|out)":"/' --include='*.jsonl' "$HERE/../docs/results" 2>/dev/null)
if [ -z "$bad_paths" ] && [ -z "$(find "$HERE/../docs/results" -name '*.jsonl' | head -1)" ]; then
    ok "docs/results: the metrics are in archives, and none names an absolute path"
else bad "docs/results: loose metrics files, or absolute paths in published metrics" "$(echo "$bad_paths" | head -3) $(find "$HERE/../docs/results" -name '*.jsonl' | head -3)"; fi
# a claim's number is a number, not words up to the same ending in a later
# sentence (a reworded sentence then shows as "not found")
if out=$(python3 - "$HERE/../experiments" 2>&1 <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from results_tables import claim_regex
r = claim_regex("dssp ties ssp ({}× their time) here")
m = r.search("so dssp ties ssp (0.60 [0.51,\n1.00]× their time) here")
assert m and m.group(1) == "0.60 [0.51,\n1.00]", m
assert not r.search("dssp ties ssp (reworded). Elsewhere 2× their time) here"), "matched across a sentence"
assert not r.search("dssp ties ssp (0.8 | 0.9× their time) here"), "matched across a table cell"
try:
    claim_regex("every run ends at {}.")
    raise SystemExit("a template ending in '{}.' was accepted: it reads 0.89. as 0")
except AssertionError:
    pass
print("a claim's number spans neither sentences nor table cells, nor ends at a full stop")
EOF
); then ok "results_tables.py: $out"
else bad "results_tables.py's claim pattern" "$out"; fi
summary experiments
