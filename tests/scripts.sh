#!/usr/bin/env bash
# The scripts against hostile text. Every field that reaches gnuplot or a
# shell is given backquotes, $( ), single and double quotes, spaces, a
# newline and semicolons, each payload touching a CANARY file were it ever
# run: dsgd-plot's --title, --label and --out, every string of a metrics
# file's configuration, the metrics files' names and TMPDIR;
# dsgd-cluster's names, hosts, rates and paths (--rc-dir, --dsgd,
# DSGD_CLUSTER_STATE) as far as they go without network namespaces (the
# launches themselves are tests/cluster.sh's), and its agent's host and
# cluster name; dsgd-sim's options; the experiments' --out. No run may
# create a canary, and each either works or fails with one line. Also: the
# experiments resolve a relative --out against the caller's directory, and
# dsgd-cluster says in one line that a cluster is not up.
# Usage: tests/scripts.sh BUILD_DIR   (prints "scripts: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin scripts "$@"
ROOT=$(cd "$HERE/.." && pwd)
SC=$ROOT/scripts
EX=$ROOT/experiments
# every command runs from here, so that a payload that ran would leave its
# canary here (or, for the experiments, which work from the repository, in
# ROOT: removed on exit with the relative --out a wrong run would make there)
RUN=$WORK/run
REL=rel-scripts-$$
mkdir -p "$RUN"
BUILD=$(cd "$BUILD" && pwd)
trap 'rm -rf "$WORK" "${ROOT:?}/$REL"; rm -f "$ROOT"/CANARY*' EXIT
cd "$RUN" || exit 1

P=(
    '`touch CANARY_bq`'
    '$(touch CANARY_dollar)'
    "q'; system('touch CANARY_sq'); print 'it''s"
    'say "hi"; system("touch CANARY_dq"); print "'
    $'two\nsystem("touch CANARY_nl")\n`touch CANARY_nl2`'
    '; touch CANARY_semi; '
    $'spaced  out \t text'
    "all: 'q' \"d\" \`touch CANARY_mix\` \$(touch CANARY_mix2); x \\ _^{}@&~ \\\\ \\n"
)

# canaries: the canary files there are (removed, so that the next case
# starts clean), one a line
canaries() {
    { find "$WORK" -type f -name 'CANARY*'; ls -d "$ROOT"/CANARY* 2>/dev/null; } | tee "$WORK/canaries"
    while IFS= read -r f; do rm -f "$f"; done < "$WORK/canaries"
}
# attempt CMD...: run CMD (at most 60 s; a function of this file too, when
# exported); RC is its exit status, WHY empty when it created no canary and
# worked or failed with one line on stderr, else what went wrong
export WORK SC EX
attempt() {
    timeout 60 bash -c '"$@"' attempt "$@" > "$WORK/stdout" 2> "$WORK/stderr" < /dev/null
    RC=$?
    local c lines
    c=$(canaries)
    lines=$(grep -c '' "$WORK/stderr")
    WHY=""
    if [ -n "$c" ]; then WHY="ran a command from the text: $(echo "$c" | tr '\n' ' ')"
    elif [ $RC = 124 ]; then WHY="hung (stopped after 60 s)"
    elif [ $RC != 0 ] && [ "$lines" != 1 ]; then WHY="exit $RC with $lines lines on stderr: $(head -c 300 "$WORK/stderr")"
    fi
}
# each WHAT MODE CMD...: CMD once for every payload, which stands for @P@
# wherever it is in a word (and whose index is $PI). MODE: any (works or
# fails with one line), works (exit 0), refused (fails with one line)
each() {
    local what=$1 mode=$2 i p args a
    shift 2
    for i in "${!P[@]}"; do
        p=${P[$i]}
        args=()
        # (the replacement quoted: bash would put the matched text for a '&')
        for a in "$@"; do args+=("${a//@P@/"$p"}"); done
        export PI=$i
        attempt "${args[@]}"
        if [ -z "$WHY" ] && [ "$mode" = works ] && [ $RC != 0 ]; then WHY="exit $RC: $(head -c 300 "$WORK/stderr")"; fi
        if [ -z "$WHY" ] && [ "$mode" = refused ] && [ $RC = 0 ]; then WHY="accepted (exit 0)"; fi
        if [ -n "$WHY" ]; then bad "$what" "payload $i ($(printf %q "$p")): $WHY"; return; fi
    done
    ok "$what: ${#P[@]} payloads, none ran, each $([ "$mode" = any ] && echo "worked or was refused in one line" || echo "$mode")"
}

# --- dsgd-plot -----------------------------------------------------------------
# metrics FILE PAYLOAD WORKERS SYNC: a small handmade metrics file of
# WORKERS workers whose every string in the configuration is PAYLOAD (and
# its --sync SYNC, or the payload), with the data of every figure: curves,
# a staleness histogram, sync fractions, a time to its target accuracy
metrics() {
    python3 - "$@" <<'PY'
import json, sys
path, p, workers, sync = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cfg = {k: p for k in ("model", "data", "partition", "slowdown", "server-opt", "easgd-mode", "gossip", "portion",
                      "augment", "lr-schedule", "optimizer", "metrics", "checkpoint", "resume", "fail", "wait")}
cfg.update({"sync": p if sync == "payload" else sync, "batch": 16, "target-acc": 0.5, "push-every": 2, "tau": 4})
recs = [{"event": "config", "time": 0.0, "config": cfg, "nparams": 100, "ranks": workers + 1, "workers": workers,
         "replicas": workers, "clock": "real"}]
for k in range(1, 5):
    recs.append({"event": "eval", "time": 0.1 * k, "step": 10 * k, "epoch": 0.25 * k, "samples": 160 * k * workers,
                 "run_s": 0.1 * k / workers, "train_s": 0.09 * k / workers, "test_acc": 0.2 * k, "test_loss": 2.0 / k,
                 "train_loss": 2.1 / k, "sync_fraction": 1.0 / k})
recs.append({"event": "done", "time": 0.5, "status": "ok", "steps": 40, "samples": 640 * workers, "test_acc": 0.8,
             "test_loss": 0.5, "wall_s": 0.5, "train_s": 0.4 / workers, "ttt_train_s": 0.27 / workers,
             "ttt_wall_s": 0.3 / workers, "staleness_hist": [5, 3, 2, 1, 1, 0, 1], "staleness_mean": 1.2,
             "staleness_max": 9})
with open(path, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in recs))
PY
}
export PLOT=$SC/dsgd-plot
if ! command -v gnuplot > /dev/null; then
    bad "gnuplot" "not installed (scripts/install-deps)"
else
    # every figure from two runs whose configuration and file names hold
    # the payload: one of a paradigm whose flags in the key are the payload
    # (another paradigm for each payload), one whose paradigm is the
    # payload, keyed by --label with the payload; into an --out named with
    # it. The title is the payload given with --title (odd payloads) or the
    # default one, which shows the runs' model and data (even ones); it is
    # drawn as given.
    plot_all() {
        local p=$1 f needle syncs=(downpour gossip easgd sandblaster fedavg) title=() out="$WORK/o $1"
        rm -rf "$WORK/m" "$WORK/o"*
        mkdir -p "$WORK/m"
        metrics "$WORK/m/a $p.jsonl" "$p" 2 "${syncs[$((PI % ${#syncs[@]}))]}"
        metrics "$WORK/m/b $p.jsonl" "$p" 4 payload
        [ $((PI % 2)) = 0 ] || title=(--title "$p")
        "$PLOT" "${title[@]}" --label "$WORK/m/b $p.jsonl=$p" --out "$out" "$WORK/m"/*.jsonl || return
        for f in accuracy_time accuracy_samples accuracy_epochs staleness sync_fraction scaling; do
            [ -s "$out/$f.png" ] && [ -s "$out/$f.svg" ] || { echo "dsgd-plot: $f not drawn" >&2; return 1; }
        done
        needle=$(grep -o 'CANARY_[a-z0-9]*' <<< "$p" | head -n 1)
        grep -qF "${needle:-spaced}" "$out/accuracy_time.svg" || { echo "dsgd-plot: the title is not in the figure" >&2; return 1; }
    }
    export -f metrics plot_all
    each "dsgd-plot: the metrics' configuration and names, --title, --label, --out" works plot_all @P@
    metrics "$WORK/plain.jsonl" plain 2 ssp
    # TMPDIR, where the figures' data files are: quotes, backquotes and $( )
    # work; a line break, which gnuplot cannot be given in a file name, is
    # refused in one line
    mkdir -p "$WORK/t ${P[7]}" "$WORK/t ${P[4]}"
    attempt env TMPDIR="$WORK/t ${P[7]}" "$PLOT" --out "$WORK/ot" "$WORK/plain.jsonl"
    if [ -z "$WHY" ] && [ $RC = 0 ]; then ok "dsgd-plot under a TMPDIR with quotes, backquotes and \$( ) draws"
    else bad "dsgd-plot under a TMPDIR with quotes" "exit $RC $WHY: $(cat "$WORK/stderr")"; fi
    REFUSE_LIMIT=60 refused "dsgd-plot under a TMPDIR with a line break" "has a control character in it; set TMPDIR" \
        env TMPDIR="$WORK/t ${P[4]}" "$PLOT" --out "$WORK/ot" "$WORK/plain.jsonl"
fi

# --- dsgd-cluster and its agent, without namespaces ----------------------------
CL=$SC/dsgd-cluster
CN=sc$$
if why=$("$CL" check 2>&1); then
    # a cluster that is not up: every host command says so in one line,
    # with how to bring it up
    for c in "cut 1" "heal 1" "kill 1" "slow 1 1gbit" "exec 1 true"; do
        # shellcheck disable=SC2086
        refused "$c on a cluster that is not up says so" "cluster '$CN' is not up (start it with: scripts/dsgd-cluster up N --name $CN)" \
            "$CL" $c --name "$CN"
    done
else
    echo "skip: the host commands of a cluster that is not up need what dsgd-cluster check asks for: $why"
fi
each "dsgd-cluster --name" refused "$CL" status --name @P@
each "dsgd-cluster up --bandwidth" refused "$CL" up 2 --name @P@ --bandwidth @P@
each "dsgd-cluster cut HOST" refused "$CL" cut @P@ --name "$CN"
each "dsgd-cluster slow 1 RATE" refused "$CL" slow 1 @P@ --name "$CN"
state() { DSGD_CLUSTER_STATE="$WORK/state $1" "$CL" "${@:2}"; }
each "dsgd-cluster down under a DSGD_CLUSTER_STATE named with the payload" any state @P@ down --name "$CN"
each "dsgd-cluster mpirun's paths (--rc-dir, --dsgd, DSGD_CLUSTER_STATE) and numbers" refused \
    state @P@ mpirun --name "$CN" --rc-dir "$WORK/rc @P@" --dsgd "$WORK/bin @P@" --grace @P@ --hosts @P@ -- train
for o in --rc-dir --dsgd --grace --hosts --per-host --mpi; do
    refused "dsgd-cluster mpirun $o with no value" "needs" "$CL" mpirun --name "$CN" $o
done
AG=$SC/dsgd-cluster-agent
each "dsgd-cluster-agent: a host named with the payload" refused env DSGD_CLUSTER_NAME="$CN" "$AG" -x "h@P@" "touch CANARY_cmd"
# bash's arithmetic would run the $( ) of a name's subscript
each "dsgd-cluster-agent: an address whose last part is a subscripted name" refused \
    env DSGD_CLUSTER_NAME="$CN" "$AG" "10.213.0.PATH[@P@]" "touch CANARY_cmd"
each "dsgd-cluster-agent: DSGD_CLUSTER_NAME" refused env DSGD_CLUSTER_NAME=@P@ "$AG" h0 "touch CANARY_cmd"
refused "dsgd-cluster-agent -o with no value" "no host given" "$AG" -o

# --- dsgd-sim: every option, up to the platform ---------------------------------
SIM=$SC/dsgd-sim
for o in --hosts --net --bandwidth --latency --topology --speeds --slow --slow-hosts --slow-workers --slow-fraction \
         --transient --compute-scale --coll --eager --speed --platform --build --exe --regime --regime-here; do
    each "dsgd-sim $o" any "$SIM" "$o" "@P@" --print-platform
done
each "dsgd-sim --platform and --hostfile" any "$SIM" --platform "$WORK/p @P@.xml" --hostfile "$WORK/h @P@" -- train
each "dsgd-sim --build without a simulated build there" refused "$SIM" --build "$WORK/b @P@" -- train
# smpirun would split dsgd's arguments at spaces: refused in one line
each "dsgd-sim -- train --metrics" refused "$SIM" --build "$ROOT/build-sim" -- train --metrics "$WORK/m @P@"

# --- the experiments ---------------------------------------------------------------
# --out with no value: one line, not bash's "unbound variable"
refused "experiments: --out with no value" "jin: --out needs a directory" "$EX/jin.sh" --out
refused "experiments: --build with no value" "regime: --build needs a directory" "$EX/regime.sh" --build
refused "experiments/mpi_compare.sh --out with no value" "--out needs a directory" "$EX/mpi_compare.sh" --out
refused "experiments/soak.sh --out with no value" "--out needs a directory" "$EX/soak.sh" --out
# a relative --out is the caller's: started here, jin.sh makes its folders
# here, not in the repository (and then stops: no simulated build)
attempt "$EX/jin.sh" --quick --report --out "$REL" --sim-build "$WORK/nosim"
if [ -z "$WHY" ] && [ $RC != 0 ] &&
   [ -d "$RUN/$REL/metrics" ] && ! [ -e "$ROOT/$REL" ] && grep -q "$WORK/nosim/dsgd missing" "$WORK/stderr"; then
    ok "experiments: a relative --out and --sim-build are the caller's ($REL made here, not in the repository)"
else bad "experiments: a relative --out" "exit $RC, here: $(ls "$RUN"), in the repository: $(ls -d "$ROOT/$REL" 2>&1): $(cat "$WORK/stderr")"; fi
rm -rf "${RUN:?}/$REL" "${ROOT:?}/$REL"
each "experiments/jin.sh --out" refused "$EX/jin.sh" --quick --report --out "$WORK/x @P@" --sim-build "$WORK/nosim"
# lc_speedup.sh draws its figure with gnuplot from its own script: a stand-in
# simulated build (nothing runs under --report) takes it that far
mkdir -p "$WORK/fakesim"
printf '#!/bin/sh\nexit 1\n' > "$WORK/fakesim/dsgd"
chmod +x "$WORK/fakesim/dsgd"
lc() { "$EX/lc_speedup.sh" --quick --report --out "$WORK/lc $1" --sim-build "$WORK/fakesim" && [ -s "$WORK/lc $1/figures/speedup.png" ]; }
export -f lc
each "experiments/lc_speedup.sh --out (its gnuplot figure)" works lc @P@
# and with the simulated build, when there is one, for real: smpirun
# splits the program's arguments at spaces, so the runs start from their
# metrics folder and are given bare names
if [ -x "$ROOT/build-sim/dsgd" ] && command -v smpirun > /dev/null; then
    all="${P[7]}${P[4]}"
    attempt "$EX/lc_speedup.sh" --quick --out "$WORK/lcsim $all" --sim-build "$ROOT/build-sim"
    if [ -z "$WHY" ] && [ $RC = 0 ] && [ -s "$WORK/lcsim $all/figures/speedup.png" ] && grep -q '^| tiny .* 1.00×' "$WORK/lcsim $all/summary.md"; then
        ok "experiments/lc_speedup.sh --quick, simulated, into an --out named with the mixed payload and a line break"
    else bad "experiments/lc_speedup.sh --quick into an odd --out" "exit $RC $WHY: $(tail -c 300 "$WORK/stderr")"; fi
else echo "skip: lc_speedup.sh's simulated runs (no build-sim/dsgd: make sim)"; fi
# regime.sh runs two short real runs (Open MPI's mpirun) into an --out
# named with the mixed payload and the line break
if [ "$MPI_IMPL" = openmpi ]; then
    all="${P[7]}${P[4]}"
    attempt "$EX/regime.sh" --quick --out "$WORK/r $all" --build "$(cd "$BUILD" && pwd)"
    if [ -z "$WHY" ] && [ $RC = 0 ] && grep -q '^| mlp:16 |' "$WORK/r $all/summary.md"; then
        ok "experiments/regime.sh --quick into an --out named with the mixed payload and a line break"
    else bad "experiments/regime.sh --out" "exit $RC $WHY: $(tail -c 300 "$WORK/stderr")"; fi
fi
summary scripts
