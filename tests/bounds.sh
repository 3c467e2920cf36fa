#!/usr/bin/env bash
# Bounded runs on real processes, one paradigm of each family: with
# --time-limit every worker stops at its first decision after the limit and
# the final evaluation follows the final synchronization (bounds_check.py;
# clocks of different processes may differ by the barrier's exit skew);
# --target-acc stops at the first evaluation that reaches it and records the
# time to target; --eval-every-s evaluates on the clock; bad values are
# refused with one line.
# Usage: tests/bounds.sh BUILD_DIR   (prints "bounds: N passed, M failed")
set -u
. "$(dirname "$0")/lib.sh"
suite_begin bounds "$@"

LIMIT=1
C=(--data synthetic:2048 --model mlp:32 --batch 32 --epochs 100000 --lr 0.05 --test-subset 256 --quiet)
limit_case() {   # NAME NP LOCKSTEP -- dsgd flags
    local name=$1 np=$2 lock=$3
    shift 4
    if "${MPIRUN[@]}" -np "$np" "$DSGD" train "${C[@]}" --time-limit "$LIMIT" "$@" --metrics "$WORK/$name.jsonl" \
            > "$WORK/$name.out" 2>&1; then
        local flags=(--skew 0.05)
        [ "$lock" = 1 ] && flags+=(--lockstep)
        if msg=$(python3 "$HERE/bounds_check.py" "$WORK/$name.jsonl" "$LIMIT" "${flags[@]}"); then ok "$name: $msg"
        else bad "$name --time-limit" "$msg"; fi
    else
        bad "$name --time-limit" "$(tail -3 "$WORK/$name.out")"
    fi
}
limit_case none 1 1 -- --sync none
limit_case bsp 3 1 -- --sync bsp
limit_case localsgd 3 1 -- --sync localsgd --period 4
limit_case ssp 4 0 -- --sync ssp --staleness 2 --slowdown 2=5
limit_case easgd 3 0 -- --sync easgd
limit_case gossip-push 3 0 -- --sync gossip --gossip push
limit_case gossip-round 2 1 -- --sync gossip --gossip round
limit_case sandblaster 4 1 -- --sync sandblaster --batch-total 512
limit_case downpour-mp2 5 0 -- --sync downpour --model-parallel 2
# Where the lead's training time went (the done event's shares): every wait
# is counted once, the stop decisions' all-reduces as communication and as
# a share of their own, so computing, communicating and the update make up
# the step.
for name in localsgd bsp; do
    if msg=$(python3 "$HERE/shares_check.py" "$WORK/$name.jsonl" 2>&1); then ok "$name --time-limit: the shares add up: $msg"
    else bad "$name --time-limit: the shares" "$msg"; fi
done

# --target-acc: the run stops at the first evaluation at or above the target
T=(--data synthetic:2048 --model mlp:32 --batch 32 --epochs 100000 --lr 0.02 --test-subset 256 --eval-every 5
   --target-acc 0.9 --quiet)
target_case() {   # NAME NP -- dsgd flags
    local name=$1 np=$2
    shift 3
    if "${MPIRUN[@]}" -np "$np" "$DSGD" train "${T[@]}" "$@" --metrics "$WORK/t$name.jsonl" > "$WORK/t$name.out" 2>&1 &&
        msg=$(python3 - "$WORK/t$name.jsonl" 0.9 <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
target = float(sys.argv[2])
evals = [r for r in recs if r["event"] == "eval"]
done = recs[-1]
first = next((e for e in evals if e["test_acc"] >= target), None)
assert done["stop_reason"] == "target_acc", done["stop_reason"]
assert done["target_reached"] is True
# the evaluation that reached it is the first such, and the training stopped there
assert first is not None and done["ttt_step"] == first["step"], (done["ttt_step"], first)
assert done["steps"] == first["step"], (done["steps"], first["step"])
assert 0 < done["ttt_train_s"] <= done["ttt_wall_s"] <= done["wall_s"]
assert abs(done["ttt_wall_s"] - first["run_s"]) < 1e-6
print(f"stopped at step {done['steps']} (acc {first['test_acc']:.3f}), time to target {done['ttt_train_s']:.3f} s training, {done['ttt_wall_s']:.3f} s")
PY
); then ok "$name --target-acc: $msg"
    else bad "$name --target-acc" "$msg $(tail -2 "$WORK/t$name.out")"; fi
}
target_case bsp 3 -- --sync bsp
target_case localsgd 2 -- --sync localsgd --period 5
target_case sandblaster 3 -- --sync sandblaster --batch-total 512 --eval-every 1

# asynchronous workers: the lead tells the others (parameter server: through
# the shards' replies; gossip: a message); every worker stops
for s in asp "gossip --gossip pull"; do
    if DSGD_LAUNCH_LIMIT=120 "${MPIRUN[@]}" -np 4 "$DSGD" train "${T[@]}" --sync $s --metrics "$WORK/ta.jsonl" > "$WORK/ta.out" 2>&1 &&
        [ "$(json_field "$WORK/ta.jsonl" done stop_reason)" = target_acc ]; then
        ok "$s --target-acc: every worker stops (steps $(json_field "$WORK/ta.jsonl" done worker_steps))"
    else bad "$s --target-acc" "$(tail -2 "$WORK/ta.out")"; fi
done

# --target-window 3: the target is reached at the first evaluation where the
# mean of the last three reaches it (not at the first lucky one)
"${MPIRUN[@]}" -np 2 "$DSGD" train "${T[@]}" --sync bsp --lr 0.01 --target-acc 0.8 --target-window 3 --metrics "$WORK/tw.jsonl" > "$WORK/tw.out" 2>&1
r=$(python3 - "$WORK/tw.jsonl" <<'PY' 2>&1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
e, d = [r["test_acc"] for r in ev if r["event"] == "eval"], ev[-1]
steps = [r["step"] for r in ev if r["event"] == "eval"]
i = next(i for i in range(2, len(e)) if sum(e[i - 2:i + 1]) / 3 >= 0.8)
one = next(i for i in range(len(e)) if e[i] >= 0.8)
ok = d["target_reached"] is True and d["ttt_step"] == steps[i] and d["target_window"] == 3 and d["steps"] == steps[i] and one < i
print("ok" if ok else "bad", steps[one], steps[i], d.get("ttt_step"), d.get("target_window"))
PY
)
read -r v one three got _ <<< "$r"
if [ "$v" = ok ]; then ok "--target-window 3: reached at step $three, where the mean of three evaluations first reaches 0.8 (one evaluation did at step $one)"
else bad "--target-window" "$r $(tail -2 "$WORK/tw.out")"; fi

# --lr-horizon time: the cosine schedule decays over the time limit (the
# evaluations' lr follows the half cosine of their run_s; the run ends
# near rate 0), with the lockstep ranks on one agreed time
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync bsp --lr 0.1 --time-limit 1 --eval-every-s 0.2 --lr-schedule cosine \
    --lr-horizon time --metrics "$WORK/lh.jsonl" > "$WORK/lh.out" 2>&1
r=$(python3 - "$WORK/lh.jsonl" <<'PY' 2>&1
import json, math, sys
ev = [r for r in (json.loads(l) for l in open(sys.argv[1])) if r["event"] == "eval"]
cos = lambda t: 0.1 * 0.5 * (1 + math.cos(math.pi * min(1, t)))
lr, t = [r["lr"] for r in ev], [r["run_s"] for r in ev]
# an evaluation's lr is its last step's, read at the time the ranks agreed on after it: a step before run_s, give or take the ranks' start skew
ok = len(ev) >= 4 and all(cos(x + 0.02) - 1e-6 <= y <= cos(x - 0.1) + 1e-6 for x, y in zip(t, lr)) and lr[-1] < 0.005 and lr == sorted(lr, reverse=True)
print("ok" if ok else "bad", " ".join("%.3f@%.2fs" % (y, x) for x, y in zip(t, lr)))
PY
)
if [ "${r%% *}" = ok ]; then ok "--lr-horizon time: the rate follows the cosine over the 1 s limit (${r#ok })"
else bad "--lr-horizon time" "$r $(tail -2 "$WORK/lh.out")"; fi
refused "--lr-horizon time without --time-limit is refused" "needs --lr-schedule cosine and --time-limit" \
    "$DSGD" train "${C[@]}" --lr-schedule cosine --lr-horizon time
refused "--target-window without --target-acc is refused" "needs --target-acc" "$DSGD" train "${C[@]}" --target-window 3

# a target never reached: null time to target, the run ends on its steps
"$DSGD" train "${C[@]}" --epochs 1 --target-acc 1 --eval-every 20 --lr 0.0001 --metrics "$WORK/never.jsonl" > /dev/null 2>&1
r=$(python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; print(d["stop_reason"], d["target_reached"], d["ttt_train_s"], d["ttt_wall_s"])' "$WORK/never.jsonl" 2>&1)
if [ "$r" = "steps False None None" ]; then ok "an unreached target: time to target null, stopped by steps"
else bad "unreached target" "$r"; fi

# --eval-every-s: an evaluation at the first step end in each period of T
# seconds (never two in one period; a step longer than T, as on a stalled
# machine, may leave a period without one), replacing the per-epoch ones
"${MPIRUN[@]}" -np 2 "$DSGD" train "${C[@]}" --sync bsp --time-limit 1 --eval-every-s 0.25 --metrics "$WORK/es.jsonl" > /dev/null 2>&1
r=$(python3 -c '
import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
t=[e["run_s"] for e in ev if e["event"]=="eval"]
periodic=t[:-1]
slots=[int(x / 0.25) for x in periodic]
ok = 2 <= len(periodic) <= 4 and slots[0] >= 1 and all(a < b for a, b in zip(slots, slots[1:]))
print("ok" if ok else "bad", len(t) - 1, [round(x, 3) for x in t])' "$WORK/es.jsonl" 2>&1)
if [ "${r%% *}" = ok ]; then ok "--eval-every-s 0.25 over 1 s: ${r#ok }"
else bad "--eval-every-s" "$r"; fi

# --eval-offline: snapshots during the run, evaluated after it, are the
# evaluations the run would have made inline (deterministic runs: one
# worker for the parameter server), and the run is the same; nothing is
# left in TMPDIR
O=(--data synthetic:2048 --model mlp:32 --batch 32 --steps 60 --eval-every 15 --lr 0.05 --test-subset 256 --quiet)
offline_case() {   # NAME NP -- dsgd flags
    local name=$1 np=$2
    shift 3
    mkdir -p "$WORK/tmp"
    "${MPIRUN[@]}" -np "$np" "$DSGD" train "${O[@]}" "$@" --metrics "$WORK/in.jsonl" --checkpoint "$WORK/in.st" > "$WORK/in.out" 2>&1
    "${MPIRUN[@]}" -np "$np" env TMPDIR="$WORK/tmp" "$DSGD" train "${O[@]}" "$@" --eval-offline \
        --metrics "$WORK/off.jsonl" --checkpoint "$WORK/off.st" > "$WORK/off.out" 2>&1
    local msg d
    if ! msg=$(python3 "$HERE/offline_check.py" "$WORK/in.jsonl" "$WORK/off.jsonl" 2>&1); then
        bad "$name --eval-offline" "$msg: $(tail -2 "$WORK/off.out")"
    elif d=$(python3 "$HERE/ckpt_diff.py" "$WORK/in.st" "$WORK/off.st" 2>&1) && [ "$d" != 0 ]; then
        bad "$name --eval-offline changes the run" "max |diff| $d"
    elif [ -n "$(ls -A "$WORK/tmp")" ]; then
        bad "$name --eval-offline" "left $(ls "$WORK/tmp") in TMPDIR"
    else
        ok "$name --eval-offline: $msg; the same final model bit for bit"
    fi
}
offline_case none 1 -- --sync none
offline_case bsp 2 -- --sync bsp
offline_case asp 2 -- --sync asp
offline_case downpour 2 -- --sync downpour --server-opt adagrad --adagrad-lr 0.05
out=$("$DSGD" train "${O[@]}" --eval-offline --target-acc 0.5 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "eval-offline.*target-acc"; then ok "--eval-offline with --target-acc refused: $out"
else bad "--eval-offline --target-acc" "rc $rc: $out"; fi
out=$("${MPIRUN[@]}" -np 1 env TMPDIR=/proc/dsgd-none "$DSGD" train "${O[@]}" --eval-offline 2>&1)
rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q "^dsgd: error: .*--eval-offline: cannot create a temporary file in /proc/dsgd-none"; then
    ok "--eval-offline with a TMPDIR it cannot write: stops before training, in one line"
else bad "--eval-offline, unwritable TMPDIR" "rc $rc: $out"; fi

for bad_flag in "--target-acc 1.5" "--time-limit -1" "--eval-every-s -2"; do
    out=$("$DSGD" train "${C[@]}" $bad_flag 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^dsgd: error: --"; then ok "$bad_flag refused: $out"
    else bad "$bad_flag" "rc $rc: $out"; fi
done
summary bounds
