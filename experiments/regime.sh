#!/usr/bin/env bash
# The regime: how long a step computes for each second it communicates, in
# the papers' settings and in dsgd's, and what a simulated cluster in the
# papers' regime costs on this machine.
#
# A step of batch B on a model of P parameters and F FLOPs per training
# sample (forward and backward) computes for B F / R seconds on a host of R
# FLOP/s, and sends about 8 P bytes over its link of bandwidth W (a push and
# a pull of 4-byte values, or a ring all-reduce's two passes). Its
# intrinsic compute-to-communication ratio is
#     ratio = (B F / R) / (8 P / W) = B (F / P) W / (8 R),
# the figure the done event's compute_comm_ratio measures when nothing else
# (stragglers, contention) makes a worker wait. F / P, the FLOPs per sample
# per parameter, is the model's part: 6 for a dense network (a
# multiply-add per weight forward, two backward), ~900 for ResNet-18 on
# 224x224 images, because a convolution reuses each weight at every position.
#
# For each of dsgd's candidate models this script measures, on one process
# and one thread, batch 64: P and F (the config event), the seconds a step
# computes here (the done event), hence this machine's R; then for each
# paper's setting (its ratio estimated in experiments/regime.py from the
# paper's model and hardware, assumptions stated there) the compute scale K
# (scripts/dsgd-sim --compute-scale) that puts the model at that ratio on
# the paper's link, and what 1 000 steps of 16 simulated workers cost here
# (SimGrid runs every simulated rank's real computation on this machine:
# 16 000 steps of real compute, whatever K is).
# Usage: experiments/regime.sh [--quick] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md and DIR/metrics/ (default experiments/results/regime).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args regime "$@"
if [ "$QUICK" = 1 ]; then
    MODELS=(mlp:16 resnet:8,2); STEPS=4; DATA=(--data synthetic:512); B=16
else
    MODELS=(mlp resnet:8,4 resnet:8,8 resnet:14,8 resnet:20,16); STEPS=30; DATA=(--data fashion-mnist --test-subset 100); B=64
fi
summary_head "The regime: computation per second of communication" \
    "dsgd's models measured on one process and one thread (batch $B, $STEPS steps), against the papers' settings."
names=()
for m in "${MODELS[@]}"; do
    n=model-${m//[:,]/-}
    real_run "$n" 1 -- "${DATA[@]}" --model "$m" --batch "$B" --steps "$STEPS" --eval-every 1000000000 --quiet --threads 1
    names+=("$n")
done
# (the replacement quoted: bash would put the matched text for a '&' in OUT)
python3 experiments/regime.py "$B" "${names[@]/#/"$OUT/metrics/"}" >> "$SUMMARY"
wall_report
summary_done > /dev/null
echo "wrote $OUT/summary.md"
