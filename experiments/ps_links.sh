#!/usr/bin/env bash
# One parameter-server shard on a real, shaped link: asp and downpour with
# W workers on one shard (host 0), one rank per host of a namespaced cluster
# (scripts/dsgd-cluster), the mlp (a push and a reply are 940 KB each);
# with --paradigms sandblaster, W replicas pushing portions' gradient sums
# to one Sandblaster shard (host 1; host 0 is the coordinator), 5 L-BFGS
# iterations of 1280·W samples in 128-sample portions.
# Prints a markdown table: samples per second (median [min, max] of the
# repeats), and how the shard's link was used, sampled every 10 ms by
# experiments/link_use.py: the share of the busy span in which data came in,
# went out, and did both at once (each at >= half the link's rate). With
# --vs OLD_BIN, the same runs of another build too, alternating, and the
# ratio of the medians.
#
# Usage: experiments/ps_links.sh [--quick] [--repeats R] [--workers "2 4 7"]
#                                [--rates "100mbit 1gbit"] [--vs OLD_BIN] [BIN]
#   BIN: the dsgd to measure (default build/dsgd). Full: W = 2, 4 and 7,
#   100mbit and 1gbit, asp and downpour, 3 repeats. --quick: W = 4,
#   100mbit, asp, 1 repeat. Needs root and make; timings need a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3 WS="2 4 7" RATES="100mbit 1gbit" PARS="asp downpour" VS="" BIN=build/dsgd
while [ $# -gt 0 ]; do
    case "$1" in --repeats|--workers|--rates|--vs|--paradigms)
        [ $# -ge 2 ] || { echo "ps_links: $1 needs a value" >&2; exit 2; } ;; esac
    case "$1" in
        --quick) REPS=1 WS=4 RATES=100mbit PARS=asp; shift ;;
        --repeats) REPS=$2; shift 2 ;;
        --workers) WS=$2; shift 2 ;;
        --rates) RATES=$2; shift 2 ;;
        --paradigms) PARS=$2; shift 2 ;;
        --vs) VS=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "ps_links: unknown option '$1' (--quick, --repeats R, --workers LIST, --rates LIST, --paradigms LIST, --vs OLD_BIN)" >&2; exit 2 ;;
        *) BIN=$1; shift ;;
    esac
done
for f in "$BIN" $VS; do [ -x "$f" ] || { echo "ps_links: $f is not an executable dsgd (make)" >&2; exit 1; }; done
[ -d /usr/share/datasets/fashion-mnist ] || { echo "ps_links: needs dataset-fashion-mnist (scripts/install-deps)" >&2; exit 1; }
CL=scripts/dsgd-cluster
export DSGD_CLUSTER_NAME=pslk$$
why=$("$CL" check 2>&1) || { echo "ps_links: $why" >&2; exit 1; }
W=$(mktemp -d /tmp/dsgd-pslinks-XXXXXX)
trap '"$CL" down > /dev/null 2>&1; rm -rf "$W"' EXIT
bps() { awk -v r="$1" 'BEGIN{ m = (r ~ /gbit$/) ? 1e9 : (r ~ /mbit$/) ? 1e6 : 1e3; sub(/[kmg]bit$/, "", r); print r * m }'; }
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4g %.4g %.4g\n", m, v[1], v[NR] }'; }

# run BIN PARADIGM W RATE: prints "samples/s in_busy out_busy both_busy"
run() {
    local bin=$1 p=$2 w=$3 rate=$4 host=0 what=(--epochs 1)
    [ "$p" = sandblaster ] && host=1 what=(--steps 5 --batch-total $((1280 * w)) --portion 128)
    rm -f "$W/stop" "$W/m.jsonl"
    "$CL" exec "$host" python3 experiments/link_use.py --rate "$(bps "$rate")" --until "$W/stop" > "$W/use.json" &
    local mon=$!
    "$CL" mpirun --dsgd "$bin" -- train --data fashion-mnist --model mlp --batch 64 --lr 0.05 --test-subset 500 \
        --quiet --sync "$p" --servers 1 --train-subset $((1280 * w)) "${what[@]}" --metrics "$W/m.jsonl" > "$W/out" 2>&1 ||
        { touch "$W/stop"; wait "$mon" || true; echo "ps_links: run failed: $(tail -2 "$W/out")" >&2; exit 1; }
    touch "$W/stop"
    wait "$mon"
    python3 - "$W/m.jsonl" "$W/use.json" <<'EOF'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if '"done"' in l][-1]
u = json.load(open(sys.argv[2]))
print(done["samples"] / done["train_s"], u.get("in_busy", 0), u.get("out_busy", 0), u.get("both_busy", 0))
EOF
}

echo "## One shard on a shaped link ($(date -u +%Y-%m-%d), load average at start $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "mlp, batch 64, --servers 1, one rank per host; asp and downpour: one epoch of 1280 samples per worker,"
echo "the shard on host 0; sandblaster: 5 L-BFGS iterations of 1280·W samples in 128-sample portions, the"
echo "coordinator on host 0 and the shard on host 1;"
echo "samples/s median [min, max] of $REPS; link: in / out / both busy, medians."
echo
if [ -n "$VS" ]; then
    echo "| link | W | paradigm | $BIN | $VS | ratio | link ($BIN) | link ($VS) |"
    echo "|---|---|---|---|---|---|---|---|"
else
    echo "| link | W | paradigm | samples/s | link in / out / both |"
    echo "|---|---|---|---|---|"
fi
for rate in $RATES; do
    for w in $WS; do
        for p in $PARS; do
            hosts=$((w + 1)); [ "$p" = sandblaster ] && hosts=$((w + 2))
            "$CL" up "$hosts" --bandwidth "$rate" > /dev/null
            new=() old=() ni=() no=() nb=() oi=() oo=() ob=()
            for r in $(seq 1 "$REPS"); do
                read -r s i o b <<< "$(run "$BIN" "$p" "$w" "$rate")"
                new+=("$s") ni+=("$i") no+=("$o") nb+=("$b")
                if [ -n "$VS" ]; then
                    read -r s i o b <<< "$(run "$VS" "$p" "$w" "$rate")"
                    old+=("$s") oi+=("$i") oo+=("$o") ob+=("$b")
                fi
            done
            med() { stats "$@" | cut -d' ' -f1; }
            read -r m lo hi <<< "$(stats "${new[@]}")"
            link="$(med "${ni[@]}") / $(med "${no[@]}") / $(med "${nb[@]}")"
            if [ -n "$VS" ]; then
                read -r om olo ohi <<< "$(stats "${old[@]}")"
                olink="$(med "${oi[@]}") / $(med "${oo[@]}") / $(med "${ob[@]}")"
                ratio=$(awk -v a="$m" -v b="$om" 'BEGIN{printf "%.2f", a / b}')
                echo "| $rate | $w | $p | $m [$lo, $hi] | $om [$olo, $ohi] | $ratio | $link | $olink |"
            else
                echo "| $rate | $w | $p | $m [$lo, $hi] | $link |"
            fi
            "$CL" down > /dev/null
        done
    done
done
