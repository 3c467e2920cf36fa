#!/usr/bin/env bash
# DistBelief's Figure 3 in shape (Dean et al., NIPS 2012): the speed-up of
# one model replica split into M = 1, 2, 4, ... 64 spatial blocks of a
# locally connected model, for three model sizes, on a simulated cluster of
# 1 Gb Ethernet hosts that each compute SCALE times faster than one core
# of this machine (DistBelief's machines had 16 cores; --compute-scale).
# Each run trains a few steps on synthetic images (--sync none
# --model-parallel M); the step time is the simulated training time over
# the steps, the speed-up is M = 1's step time over M's.
# Usage: experiments/lc_speedup.sh [--quick] [--keep | --report] [--out DIR] [--sim-build DIR]
# Writes DIR/summary.md, DIR/speedup.tsv, DIR/figures/speedup.png, DIR/metrics/.
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args lc_speedup "$@"
need_sim
SCALE=16
BW=1Gbps
if [ "$QUICK" = 1 ]; then
    MS=(1 2 4); STEPS=2; BATCH=8
    MODELS=("tiny|lc:4,8:k=3|synthetic:64,1x32x32")
else
    MS=(1 2 4 8 16 32 64); STEPS=3; BATCH=32
    # name | spec | data: 64x64 and 128x128 images pool to 32/16 and 64/32,
    # which an 8x8 grid tiles evenly
    MODELS=("small|lc:8,16:k=5|synthetic:64,1x64x64"
            "medium|lc:16,32:k=5|synthetic:64,1x128x128"
            "large|lc:16,32:k=7|synthetic:64,3x128x128")
fi
summary_head "DistBelief Figure 3: speed-up of one replica split into spatial blocks" \
    "Simulated hosts on $BW links, each $SCALE times one core of this machine; --sync none --model-parallel M, $STEPS steps of batch $BATCH on synthetic images; speed-up = step time at M = 1 over step time at M."
printf 'model\tparams\tM\tstep_s\tspeedup\thalo_bytes_per_step\thalo_wait_share\tparams_per_rank\n' > "$OUT/speedup.tsv"
for m in "${MODELS[@]}"; do
    IFS='|' read -r name spec data <<< "$m"
    echo "== $name: $spec on $data =="
    for M in "${MS[@]}"; do
        sim_run "$name-$M" "$M" "$SCALE:" "$BW" -- --model "$spec" --data "$data" --batch "$BATCH" --steps "$STEPS" \
            --test-subset 8 --lr 0.0001 --sync none --model-parallel "$M" --quiet || true
    done
done
SUMMARY=$SUMMARY python3 - "$OUT" "${MODELS[@]}" -- "${MS[@]}" <<'PY'
import json, os, sys
out = sys.argv[1]
i = sys.argv.index("--")
models, ms = sys.argv[2:i], [int(x) for x in sys.argv[i + 1:]]
rows, md = [], []
md.append("| model | parameters | " + " | ".join("M = %d" % m for m in ms) + " |")
md.append("|---|---|" + "---|" * len(ms))
for m in models:
    name, spec, data = m.split("|")
    base, cells, nparams = None, [], "?"
    for M in ms:
        try:
            ev = {e["event"]: e for e in map(json.loads, open("%s/metrics/%s-%d.jsonl" % (out, name, M)))}
        except (OSError, ValueError):
            cells.append("failed"); continue
        cfg, done = ev.get("config", {}), ev.get("done")
        if not done or done.get("status") != "ok":
            cells.append("failed"); continue
        nparams = cfg.get("nparams", "?")
        step = done["train_s"] / done["steps"]
        base = step if M == 1 else base
        sp = base / step if base else float("nan")
        rows.append("%s\t%s\t%d\t%.6g\t%.4g\t%s\t%s\t%s" % (name, nparams, M, step, sp, done.get("halo_bytes_per_step", 0),
                    done.get("halo_wait_share", 0), cfg.get("nparams_per_rank", nparams)))
        cells.append("%.2f× (%.3g s)" % (sp, step))
    md.append("| %s `%s` %s | %s | %s |" % (name, spec, data.split(":")[1].split(",")[1], nparams, " | ".join(cells)))
open(out + "/speedup.tsv", "a").write("\n".join(rows) + "\n")
open(os.environ["SUMMARY"], "a").write("Speed-up (simulated step time):\n\n" + "\n".join(md) + "\n\n")
PY
# speed-up against M, one line per model, the ideal dashed. gnuplot runs
# in OUT and is given only names relative to it: OUT may hold quotes, and
# gnuplot would end a string at one
gp="$OUT/figures/speedup.gp"
{
    echo "set terminal pngcairo size 800,560 font 'sans,11'"
    echo "set output 'figures/speedup.png'"
    echo "set title 'Speed-up of one replica split into M spatial blocks (simulated, $BW, ${SCALE}x a core)'"
    echo "set xlabel 'blocks M (machines per model)'; set ylabel 'speed-up over M = 1'"
    echo "set logscale x 2; set logscale y 2; set grid; set key outside below horizontal"
    echo "set xrange [1:${MS[-1]}]"
    printf "plot x title 'ideal' dt 2 lc rgb 'gray'"
    for m in "${MODELS[@]}"; do
        IFS='|' read -r name spec data <<< "$m"
        printf ", 'speedup.tsv' using (strcol(1) eq '%s' ? \$3 : 1/0):5 with linespoints lw 2 title '%s (%s)'" \
            "$name" "$name" "$spec"
    done
    echo
} > "$gp"
(cd "$OUT" && gnuplot figures/speedup.gp) 2> "$OUT/logs/plot.log" || { echo "gnuplot failed: $(cat "$OUT/logs/plot.log")" >&2; exit 1; }
wall_report
summary_done
