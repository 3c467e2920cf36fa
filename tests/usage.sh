#!/usr/bin/env bash
# What a user meets before training: every script's --help prints a usage
# and exits 0 (and starts nothing); dsgd train --help lists every flag once,
# in groups, with the file names a data directory needs; --data mnist gives
# a hint that works on Debian; make install (PREFIX, DESTDIR) installs dsgd,
# dsgd-plot, dsgd-sim and the man page, and the installed dsgd runs.
# Usage: tests/usage.sh BUILD_DIR   (prints "usage: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin usage "$@"
ROOT=$(cd "$HERE/.." && pwd)
DSGD="$ROOT/$BUILD/dsgd"
[ -x "$DSGD" ] || DSGD="$BUILD/dsgd"

# every script: a usage on stdout, exit 0, within 20 s, nothing else run
cd "$ROOT"
for s in scripts/demo scripts/install-deps scripts/dsgd-sim scripts/dsgd-regime scripts/dsgd-plot experiments/*.sh "python3 experiments/summarize.py" "python3 experiments/regime.py" "python3 experiments/sim_links.py"; do
    [ "$s" = experiments/lib.sh ] && continue
    timeout -k 5 20 $s --help > "$WORK/out" 2> "$WORK/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -qi '^usage: ' "$WORK/out" && [ ! -s "$WORK/err" ] && [ "$(grep -c . "$WORK/out")" -le 60 ] &&
        ! grep -qE '^\s*(set -e|\. |exp_args|mpi_env|import )' "$WORK/out"; then
        ok "$s --help: a usage, exit 0"
    else bad "$s --help" "exit $rc, $(grep -c . "$WORK/out") lines, usage line: $(grep -ci '^usage: ' "$WORK/out"), stderr: $(head -c 200 "$WORK/err")"; fi
done

# dsgd train --help: grouped; every flag of the configuration exactly once
"$DSGD" train --help > "$WORK/help" 2>&1
missing=""
for g in general data "how long, and when to evaluate" "stragglers and faults" output selsync "parameter server" dssp gossip sandblaster; do
    grep -q "^$g:$" "$WORK/help" || missing+=" '$g'"
done
if [ -z "$missing" ]; then ok "dsgd train --help is grouped (general, data, bounds, faults, output, each paradigm)"
else bad "dsgd train --help groups" "missing headings:$missing"; fi
"$DSGD" train --data synthetic:64 --model logreg --steps 1 --quiet --metrics "$WORK/m.jsonl" > /dev/null 2>&1
python3 - "$WORK/m.jsonl" "$WORK/help" > "$WORK/flags" <<'PY'
import json, re, sys
cfg = json.loads(open(sys.argv[1]).readline())["config"]
listed = re.findall(r"^  --([a-z-]+)", open(sys.argv[2]).read(), re.M)
dup = sorted({f for f in listed if listed.count(f) > 1})
print(f"{len(cfg)} {len(listed)} missing={sorted(set(cfg) - set(listed))} unknown={sorted(set(listed) - set(cfg))} twice={dup}")
PY
read -r ncfg nlisted rest < "$WORK/flags"
if [ "$ncfg" = "$nlisted" ] && [ "$rest" = "missing=[] unknown=[] twice=[]" ]; then ok "dsgd train --help lists each of the $ncfg flags once"
else bad "dsgd train --help flags" "$(cat "$WORK/flags")"; fi
if grep -q "train-images-idx3-ubyte" "$WORK/help" && grep -q "t10k-labels-idx1-ubyte" "$WORK/help" &&
    grep -q "data_batch_1.bin" "$WORK/help" && grep -q "test_batch.bin" "$WORK/help"; then
    ok "dsgd train --help names the files of a data directory (IDX and CIFAR-10)"
else bad "data directory names in --help" "$(grep -A3 '^data:' "$WORK/help" | head -4)"; fi

# --data mnist: no Debian package has MNIST; the hint must not name one
if [ -d /usr/share/datasets/mnist ]; then
    echo "skip --data mnist hint: /usr/share/datasets/mnist exists here"
else
    REFUSE_LIMIT=30 refused "--data mnist says what to do (no Debian package has it)" "pass --data DIR" \
        "$DSGD" train --data mnist --steps 1
    if grep -q "apt-get install dataset-mnist" "$WORK/stderr"; then bad "--data mnist hint" "names a package that does not exist"; fi
fi

# make install
if make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$WORK/inst" PREFIX=/usr > "$WORK/install.log" 2>&1 &&
    "$WORK/inst/usr/bin/dsgd" version > "$WORK/version" 2>&1 && grep -q '^dsgd [0-9]' "$WORK/version"; then
    ok "make install DESTDIR=... PREFIX=/usr: the installed dsgd runs ($(head -1 "$WORK/version"))"
else bad "make install" "$(tail -3 "$WORK/install.log") $(cat "$WORK/version" 2>/dev/null)"; fi
lack=""
for f in bin/dsgd bin/dsgd-plot bin/dsgd-sim bin/dsgd-regime bin/dsgd-cluster bin/dsgd-cluster-agent bin/dsgd-summarize share/man/man1/dsgd.1; do
    [ -s "$WORK/inst/usr/$f" ] || lack+=" $f"
done
for f in dsgd-plot dsgd-sim dsgd-regime dsgd-summarize; do "$WORK/inst/usr/bin/$f" --help 2>&1 | grep -qi '^usage: ' || lack+=" $f--help"; done
# the installed dsgd-sim finds dsgd-regime beside it (from another folder)
k=$(scripts/dsgd-regime v100,10gbe,mlp 2>/dev/null | grep -o -- '--compute-scale [0-9.]* --net 10gbe')
[ -n "$k" ] && (cd "$WORK" && "$WORK/inst/usr/bin/dsgd-sim" --regime v100,10gbe,mlp) 2>&1 | grep -q -- "$k" || lack+=" dsgd-sim--regime"
# the whole of dsgd-cluster's usage (it stopped mid-sentence), and no checkout's path in dsgd-sim's
"$WORK/inst/usr/bin/dsgd-cluster" --help 2>&1 | tail -1 | grep -q '\.$' || lack+=" dsgd-cluster--help(cut)"
! "$WORK/inst/usr/bin/dsgd-sim" --help 2>&1 | grep -q 'runs build-sim' || lack+=" dsgd-sim--help(build-sim)"
if [ -z "$lack" ]; then ok "make install puts dsgd, dsgd-plot, dsgd-sim with dsgd-regime, dsgd-cluster and its agent, dsgd-summarize and dsgd(1) under PREFIX; the scripts' --help and dsgd-sim --regime work there"
else bad "installed files" "missing or broken:$lack"; fi
if command -v man > /dev/null; then
    if MANWIDTH=80 man --warnings -l "$WORK/inst/usr/share/man/man1/dsgd.1" > "$WORK/man" 2> "$WORK/manerr" &&
        [ ! -s "$WORK/manerr" ] && grep -q "EXIT STATUS" "$WORK/man"; then ok "the man page renders without warnings"
    else bad "man page" "$(head -c 300 "$WORK/manerr")"; fi
fi
summary usage
