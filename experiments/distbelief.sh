#!/usr/bin/env bash
# DistBelief (Dean et al., NIPS 2012): Downpour SGD with plain SGD, with
# Adagrad at the shards, and with Adagrad and a warm start, against
# Sandblaster L-BFGS and bsp, at 1 ... 32 replicas on a simulated 10 GbE
# cluster, Fashion-MNIST mlp, every run bounded by the same simulated time:
# time to target, and whether many replicas stay stable (final accuracy,
# diverged runs) with and without Adagrad.
# REGIME=resnet moves it to the paper's compute-to-communication ratio
# (0.21, docs/results.md "The regime"): resnet:8,8 on 1.27 Gb/s links, hosts
# 79x this machine's core, 1 ... 32 replicas; Downpour on S = N/4 shards
# (one for every 4 replicas) and on one, Adagrad's γ at the worker rate
# (0.1) and a tenth of it, a warm start; 3 seeds. (The paper advises a γ
# larger than the best fixed rate: here γ = 1 diverged within 4 steps at 4
# replicas, and γ = 0.1 already ended 20 points below γ = 0.01 there, since
# Adagrad's first step moves every weight by about γ.) The parameter
# servers' messages are simulated eagerly (--eager 65536), bsp's all-reduce
# with SMPI's default. Resumable with --keep.
# EXP_NS and EXP_SEEDS (space-separated) run a subset of the replica counts
# and seeds: two invocations, one per core, can share one --out.
# Usage: [REGIME=resnet] [EXP_NS=...] [EXP_SEEDS=...] experiments/distbelief.sh [--quick] [--keep | --report] [--out DIR] [--build DIR] [--sim-build DIR]
# Writes DIR/summary.md, DIR/figures/, DIR/metrics/ (default experiments/results/distbelief).
case "${1-}" in -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;; esac   # the header above
. "$(dirname "$0")/lib.sh"
exp_args distbelief "$@"
need_sim
ALLOW_FAIL=1
SEEDS=(0) SCALE=1 BW=10Gbps LR=0.05 GAMMAS=(0.05) BUCKET=() EAGER=0
shards() { echo 1; }
if [ "$QUICK" = 1 ]; then
    NS=(1 2); LIMIT=0.05; EVAL=0.01; TARGET=0.5; WARM=10
    DATA=(--data synthetic:1024 --model mlp:16 --batch 16 --test-subset 128)
    BT=256
    if [ "${REGIME:-mlp}" = resnet ]; then
        SEEDS=(1 2) GAMMAS=(0.05 0.5)
        shards() { echo $(($1 >= 2 ? 2 : 1)); }
    fi
elif [ "${REGIME:-mlp}" = resnet ]; then
    # the paper's ratio, 0.21: resnet:8,8 on 1.27 Gb/s links, hosts 79x
    NS=(1 4 16 32); LIMIT=0.6; EVAL=0.05; TARGET=0.80; WARM=100
    SCALE=79 BW=1.27Gbps LR=0.1 GAMMAS=(0.1 0.01)
    SEEDS=(1 2 3) BUCKET=(--bucket-kb 1024)   # bsp: one all-reduce a step
    DATA=(--data fashion-mnist --model resnet:8,8 --batch 64 --test-subset 1000)
    BT=2048
    shards() { echo $(($1 >= 4 ? $1 / 4 : 1)); }   # a shard for every 4 replicas
    # the shards' 20 KB messages leave eagerly, as a real MPI's do under its
    # 64 KiB limit (SMPI's default rendezvous serialized them: Downpour at 16
    # replicas made 90 steps instead of 191); bsp's all-reduce keeps the
    # default, which matches its α-β cost (docs/simulation.md "Messages")
    EAGER=65536
else
    NS=(1 2 4 8 16 32); LIMIT=10; EVAL=0.5; TARGET=0.82; WARM=200
    DATA=(--data fashion-mnist --model mlp --batch 64 --test-subset 2000)
    BT=6000
fi
# a subset, for two invocations at once (one per core) into one --out:
# EXP_NS="1 4 16" in one, EXP_NS=32 EXP_SEEDS="1 2" in the other
exp_list EXP_NS NS '[1-9][0-9]*' "a number of replicas (a whole number from 1)"
exp_list EXP_SEEDS SEEDS '[0-9]+' "a seed (a whole number)"
COMMON=("${DATA[@]}" --epochs 100000 --time-limit "$LIMIT" --eval-every-s "$EVAL" --eval-offline --quiet)
# Downpour's variants: METHOD:SHARDS:GAMMA (SHARDS s: S shards, growing
# with the replicas; GAMMA: Adagrad's at the shards, - for plain SGD;
# +warm: a warm start). The MLP regime: one shard, Adagrad's γ = the fixed
# rate (the paper suggests ~10x the best fixed rate; swept in the regime).
VARIANTS=(bsp downpour-sgd:1:- "downpour-adagrad:1:${GAMMAS[0]}" "downpour-adagrad-warm:1:${GAMMAS[0]}" sandblaster)
if [ "${#GAMMAS[@]}" -gt 1 ]; then
    VARIANTS=(bsp downpour-sgd:s:-)
    for g in "${GAMMAS[@]}"; do VARIANTS+=("downpour-adagrad:s:$g"); done
    VARIANTS+=("downpour-adagrad-warm:s:${GAMMAS[-1]}" "downpour-adagrad:1:${GAMMAS[-1]}" sandblaster)
fi
# a run's name: the variant (its shards and γ where the regime sweeps them), N, the seed
vname() {   # VARIANT N SEED
    local v=$1 base=${1%%:*} rest
    if [ "$v" != "$base" ] && [ "${#GAMMAS[@]}" -gt 1 ]; then
        rest=${v#*:}
        base+="-S${rest%%:*}"
        [ "${rest#*:}" = - ] || base+="-g${rest#*:}"
    fi
    echo "$base-$2$([ "$3" = 0 ] || echo "-seed$3")"
}
head="Simulated links of $BW, hosts ${SCALE}x this machine's core, model ${DATA[3]}; every run bounded by $LIMIT simulated s; target test accuracy $TARGET; worker lr $LR. N = model replicas."
if [ "${#GAMMAS[@]}" -gt 1 ]; then
    head+=" Downpour on S shards (-Ss: S grows with the replicas,$(for n in "${NS[@]}"; do printf ' %s at N = %s,' "$(shards "$n")" "$n"; done) or -S1: one shard), Adagrad's γ at the shards in the name (-gG); Sandblaster on the same S shards."
else
    head+=" One parameter-server shard."
fi
[ "${SEEDS[*]}" = 0 ] || head+=" Seeds ${SEEDS[*]}: a configuration's numbers are the median [min, max] over its seeds."
summary_head "DistBelief: Downpour (± Adagrad, ± warm start) against Sandblaster and bsp" "$head"
names=()
for N in "${NS[@]}"; do
    echo "== $N replicas =="
    row=()
    for seed in "${SEEDS[@]}"; do
        sflags=()
        [ "$seed" = 0 ] || sflags=(--seed "$seed")
        for v in "${VARIANTS[@]}"; do
            IFS=: read -r method sh gamma <<< "$v"
            S=1
            [ "$sh" = s ] && S=$(shards "$N")
            case $method in
                bsp) H=$N; flags=(--sync bsp --lr "$LR" "${BUCKET[@]}") ;;
                sandblaster) S=$(shards "$N"); H=$((N + S + 1)); flags=(--sync sandblaster --servers "$S" --batch-total "$BT" --lr "$LR") ;;
                *) H=$((N + S)); flags=(--sync downpour --servers "$S" --lr "$LR")
                   [ "$gamma" = - ] || flags+=(--server-opt adagrad --adagrad-lr "$gamma")
                   [ "$method" = downpour-adagrad-warm ] && flags+=(--warmup-steps "$WARM") ;;
            esac
            # with one replica, S shards is one shard: the -Ss variant runs, the -S1 one is the same run
            [ "$N" = 1 ] && [ "$sh" = 1 ] && [ "${#GAMMAS[@]}" -gt 1 ] && continue
            name=$(vname "$v" "$N" "$seed")
            SIM_EXTRA=""
            [ "$method" = bsp ] || SIM_EXTRA="--eager $EAGER"
            sim_run "$name" "$H" "$(sim_speeds "$H" "$SCALE")" "$BW" -- "${COMMON[@]}" "${sflags[@]}" "${flags[@]}"
            row+=("$name")
        done
    done
    table "$N replicas" "$TARGET" bsp "${row[@]}"
    names+=("${row[@]}")
done
figures all "$TARGET" "${names[@]}"
wall_report
summary_done
