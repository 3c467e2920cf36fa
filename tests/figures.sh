#!/usr/bin/env bash
# scripts/dsgd-plot on fixture metrics (the experiments' metrics files in
# docs/results/): every figure kind renders with no word from gnuplot (a
# warning fails), and the figures are ones a paper could print: the key
# below the plot, short tick labels, axes from 0, log axes fitted to the
# data, one colour per paradigm, simulated seconds named, a default title,
# the samples axis from every worker, "not reached" on the scaling figure,
# staleness in logarithmic bins (tests/figures_check.py reads the SVGs).
# Then every input or output error is one line and exit 1, and a full or
# read-only disk leaves no half-written figure.
# Usage: tests/figures.sh   (prints "figures: N passed, M failed");
# DSGD_PLOT=FILE tests another dsgd-plot (e.g. an older one).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT="$HERE/.."
PLOT=${DSGD_PLOT:-$ROOT/scripts/dsgd-plot}
ARC="$ROOT/docs/results"
WORK=$(mktemp -d /tmp/dsgd-figures-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# docs/results keeps each experiment's metrics in one archive: most cases
# read files unpacked from them; the jin figures read the archives
# themselves (all of one, and patterns through another)
RES="$WORK/res"
for e in jin dssp selsync; do mkdir -p "$RES/$e" && tar xzf "$ARC/$e/metrics.tar.gz" -C "$RES/$e"; done
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
if ! command -v gnuplot > /dev/null; then
    bad "gnuplot" "not installed (scripts/install-deps)"; echo "figures: $pass passed, $fail failed"; exit 1
fi
whole() {   # FILE: a whole PNG (signature .. IEND) or SVG (<svg .. </svg>)
    python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
if p.endswith(".png"):
    good = b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR" and b[-8:-4] == b"IEND"
else:
    good = b"<svg" in b[:4000] and b.rstrip().endswith(b"</svg>")
sys.exit(0 if good and len(b) > 5000 else 1)
PY
}
# render NAME FIGURES OPTIONS... -- FILES...: exit 0, nothing on stderr, each figure whole
render() {
    local name=$1 figs=$2
    shift 2
    "$PLOT" --out "$WORK/$name" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
    local rc=$? missing=""
    for f in $figs; do
        for e in png svg; do whole "$WORK/$name/$f.$e" || missing+=" $f.$e"; done
    done
    if [ $rc -ne 0 ]; then bad "$name: dsgd-plot" "exit $rc: $(head -c 300 "$WORK/$name.err")"
    elif [ -s "$WORK/$name.err" ]; then bad "$name: no warning from gnuplot" "$(head -c 400 "$WORK/$name.err")"
    elif [ -n "$missing" ]; then bad "$name: figures" "missing or not whole:$missing"
    else ok "$name: $figs rendered whole, no warning"; fi
}
D=$RES/dssp/metrics/cpu-hetero-8
render jin "accuracy_time accuracy_samples accuracy_epochs scaling" --time wall --target 0.82 "$ARC/jin/metrics.tar.gz"
render dssp "accuracy_time staleness" --time wall "$D"-bsp-ps.jsonl "$D"-ssp.jsonl "$D"-dssp.jsonl "$D"-asp.jsonl
render dssp_rev "accuracy_time staleness" --time wall "$D"-asp.jsonl "$D"-dssp.jsonl "$D"-ssp.jsonl "$D"-bsp-ps.jsonl
# metrics of the simulator (its config event says "clock":"simulated")
mkdir -p "$WORK/simm"
for f in "$RES"/selsync/metrics/1Gbps-8-label-skew+inject-{bsp,selsync-0.05}.jsonl; do
    sed '1s/"test_samples":\([0-9]*\)/"test_samples":\1,"clock":"simulated"/' "$f" > "$WORK/simm/$(basename "$f")"
done
render sim "accuracy_time sync_fraction" "$WORK"/simm/*.jsonl
# repeats: 3 seeds of each method and N make one point of the scaling
# figure, the median with the seeds' range as an error bar, and a method
# that mostly never got there is marked at the top
render jinrn "scaling" --time wall --target 0.80 "$ARC"/jin-resnet/metrics.tar.gz/metrics/{bsp,easgd,gossip}-*-lr0.1-*.jsonl
if grep -c 'runs: median, range' "$WORK/jinrn/scaling.svg" | grep -q '^[1-9]' &&
    [ "$(grep -o '(3 runs: median, range)' "$WORK/jinrn/scaling.svg" | sort -u | wc -l)" = 1 ] &&
    grep -q 'not reached (marked at the top)' "$WORK/jinrn/scaling.svg"; then
    ok "scaling with repeats: one point per method and N, the seeds' range as an error bar, easgd at 32 not reached"
else bad "scaling with repeats" "$(grep -o '<title>[^<]*</title>' "$WORK/jinrn/scaling.svg" | head -8)"; fi
python3 "$HERE/figures_check.py" "$PLOT" "$WORK/jin" "$WORK/dssp" "$WORK/dssp_rev" "$WORK/sim" "$RES" > "$WORK/checks" 2>&1 ||
    bad "figures_check.py" "$(tail -3 "$WORK/checks")"
while read -r status text; do
    case "$status" in ok) ok "$text" ;; FAIL) bad "${text%%: *}" "${text#*: }" ;; *) bad "figures_check.py" "$status $text" ;; esac
done < "$WORK/checks"

# every input or output error: one line, exit 1, no traceback
one_line() {   # NAME NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    timeout 60 "$PLOT" "$@" > /dev/null 2> "$WORK/err"
    local rc=$?
    if [ $rc -eq 1 ] && [ "$(grep -c . "$WORK/err")" -eq 1 ] && grep -q "^dsgd-plot: error: .*$needle" "$WORK/err"; then
        ok "$name: $(cat "$WORK/err")"
    else bad "$name" "exit $rc: $(head -c 300 "$WORK/err")"; fi
}
M=$RES/jin/metrics/bsp-4.jsonl
head -c 3000 /bin/sh > "$WORK/binary.jsonl"
one_line "a binary metrics file" "not a text file" --out "$WORK/o1" "$WORK/binary.jsonl"
one_line "a directory as metrics file" "cannot read" --out "$WORK/o1" "$WORK"
: > "$WORK/regular"
one_line "--out naming a regular file" "not a directory" --out "$WORK/regular" "$M"
one_line "--out ''" "needs a directory" --out "" "$M"
one_line "--out under a regular file" "cannot create" --out "$WORK/regular/figs" "$M"
one_line "--out /proc" "cannot write in" --out /proc "$M"
one_line "--target out of range" "test accuracy" --target 2 --out "$WORK/o1" "$M"

# a full disk and a read-only one: a small file system of our own (a user
# and mount namespace; skipped where the kernel does not allow one)
if unshare -rm true 2> /dev/null; then
    cat > "$WORK/inner.sh" <<'SH'
set -u
PLOT=$1 M=$2 DIR=$3 OPTS=$4
mount -t tmpfs -o "$OPTS" tmpfs "$DIR" || exit 99
"$PLOT" --out "$DIR" "$M" > /dev/null 2> "$DIR.err"
echo "rc $?"
for f in "$DIR"/* "$DIR"/.[!.]*; do [ -e "$f" ] && echo "file $f"; done
exit 0
SH
    M2=("$RES"/jin/metrics/bsp-4.jsonl)
    for case in "full:size=40k" "ro:size=1m,ro"; do
        name=${case%%:*} opts=${case#*:}
        mkdir -p "$WORK/$name"
        unshare -rm bash "$WORK/inner.sh" "$PLOT" "${M2[0]}" "$WORK/$name" "$opts" > "$WORK/$name.log" 2>&1
        rc=$(sed -n 's/^rc //p' "$WORK/$name.log")
        half=""
        # files were listed inside the namespace; whether each was whole is judged there too
        while read -r _ f; do
            case "$f" in *.png|*.svg) ;; *) half+=" $(basename "$f")" ;; esac
        done < <(grep '^file ' "$WORK/$name.log")
        if [ "$rc" = 1 ] && [ "$(grep -c . "$WORK/$name.err")" -eq 1 ] && grep -q '^dsgd-plot: error: ' "$WORK/$name.err" && [ -z "$half" ]; then
            ok "a $name disk: one line, no temporary file left: $(cat "$WORK/$name.err")"
        else bad "a $name disk" "rc ${rc:-?}, left:${half:- nothing}, stderr: $(head -c 300 "$WORK/$name.err" 2>/dev/null)"; fi
    done
    # figures that did get written on the full disk are whole
    cat > "$WORK/inner2.sh" <<'SH'
set -u
PLOT=$1 M=$2 DIR=$3 WHOLE=$4
mount -t tmpfs -o size=60k tmpfs "$DIR" || exit 99
"$PLOT" --out "$DIR" "$M" > /dev/null 2>&1
for f in "$DIR"/*; do [ -e "$f" ] || continue; bash -c "$WHOLE" _ "$f" || echo "half $(basename "$f")"; done
exit 0
SH
    mkdir -p "$WORK/full2"
    unshare -rm bash "$WORK/inner2.sh" "$PLOT" "${M2[0]}" "$WORK/full2" "$(declare -f whole); whole \"\$1\"" > "$WORK/full2.log" 2>&1
    if ! grep -q . "$WORK/full2.log"; then ok "a full disk: every figure left there is whole"
    else bad "a full disk" "$(head -5 "$WORK/full2.log")"; fi
else
    echo "skip full and read-only disks: no user namespaces here (unshare -rm)"
fi
echo "figures: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
