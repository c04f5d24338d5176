#!/usr/bin/env bash
# Runs autotune_benchmark at np=2: rounds of one launch per hand-set fusion threshold and one with
# HOROVOD_AUTOTUNE=1 starting from 64 KB (5 rounds; --quick: 1). Each autotune launch, once it
# decided, also measures its tuned parameters against every hand-set threshold side by side
# (--compare: the target; autotune_benchmark.cc says why). Then the same for 200 x 4 KB gradients,
# where 64 KB is a poor start (autotune launches only: the comparison inside them is the target).
# Then the tables and the TARGET lines. Every launch runs the same settle phase before it measures.
#   autotune_benchmark.sh BENCHMARK_BINARY [--quick] -- MPIRUN_COMMAND...
set -euo pipefail
BIN="$1"; shift
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
[ "${1:-}" = "--" ] && shift
MPIRUN=("$@")
RESULTS="$(mktemp)"; COMPARE="$(mktemp)"; SMALL_RESULTS="$(mktemp)"; SMALL_COMPARE="$(mktemp)"
trap 'rm -f "$RESULTS" "$COMPARE" "$SMALL_RESULTS" "$SMALL_COMPARE"' EXIT
if [ "$QUICK" = 1 ]; then
  ARGS=(--steps 2 --warmup 1 --settle-steps 80); TUNE=(1 2 3)   # warmup samples, steps per sample, max samples
  THRESHOLDS="65536 8388608"; ROUNDS=1; IN_LAUNCH=(--compare-rounds 1 --compare-steps 1)
  SMALL_LAUNCHES=1; SMALL_ARGS=(--steps 5 --warmup 1 --settle-steps 80 --compare-rounds 1 --compare-steps 5)
else
  ARGS=(--steps 20 --warmup 3 --settle-steps 200); TUNE=(2 5 16)
  THRESHOLDS="65536 1048576 8388608 33554432 134217728"; ROUNDS=5; IN_LAUNCH=(--compare-rounds 5 --compare-steps 5)
  SMALL_LAUNCHES=3; SMALL_ARGS=(--steps 200 --warmup 3 --settle-steps 300 --compare-rounds 5 --compare-steps 50)
fi
# Rounds alternate every configuration, so a slow minute on a shared machine hits them alike, and
# each round starts one configuration later than the last, so none always runs first (the order
# is cyclic: each still follows the same neighbour). The report takes each configuration's median
# launch, and pairs each autotune launch with the best hand-set configuration's launch of the
# same round.
CONFIGS=($THRESHOLDS autotune)
autotune_launch() {  # autotune_launch BENCHMARK_ARGS...
  HOROVOD_FUSION_THRESHOLD=65536 HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_WARMUP_SAMPLES=${TUNE[0]} \
    HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE=${TUNE[1]} HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=${TUNE[2]} \
    "${MPIRUN[@]}" -np 2 -x HOROVOD_FUSION_THRESHOLD -x HOROVOD_AUTOTUNE -x HOROVOD_AUTOTUNE_WARMUP_SAMPLES \
    -x HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE -x HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES "$BIN" \
    --label "autotune from 64 KB" --compare "${THRESHOLDS// /,}" "$@" >/dev/null
}
launch() {
  if [ "$1" = autotune ]; then
    autotune_launch --results "$RESULTS" "${ARGS[@]}" --compare-results "$COMPARE" "${IN_LAUNCH[@]}"
  else
    HOROVOD_FUSION_THRESHOLD=$1 "${MPIRUN[@]}" -np 2 -x HOROVOD_FUSION_THRESHOLD "$BIN" \
      --label "hand-set $(($1 / 1024)) KB" --results "$RESULTS" "${ARGS[@]}" >/dev/null
  fi
}
for round in $(seq 0 $((ROUNDS - 1))); do
  for k in $(seq 0 $((${#CONFIGS[@]} - 1))); do
    launch "${CONFIGS[$(((k + round) % ${#CONFIGS[@]}))]}"
  done
done
for k in $(seq 1 $SMALL_LAUNCHES); do
  autotune_launch --set small --results "$SMALL_RESULTS" --compare-results "$SMALL_COMPARE" "${SMALL_ARGS[@]}"
done
echo "Autotune: warmup ${TUNE[0]} samples, ${TUNE[1]} steps per sample, ${TUNE[2]} trials; each row is $ROUNDS launches"
echo "(rounds alternate the configurations, each round starting one later; the median launch counts), each measured over ${ARGS[1]} ResNet-50 steps after the same ${ARGS[5]}-step settle phase (every step followed by a poll of the tuner; autotune must decide within it) and ${ARGS[3]} warmup steps."
echo "Inside each autotune launch: ${IN_LAUNCH[1]} rounds of every configuration, each switched to on every rank and measured over ${IN_LAUNCH[3]} steps after one warmup step."
echo
echo "### ResNet-50 gradients"
echo
"$BIN" --report "$RESULTS" --compare-report "$COMPARE"
echo
echo "### small(200 x 4 KB) gradients: $SMALL_LAUNCHES autotune launches, each switching between its tuned parameters and every hand-set threshold: ${SMALL_ARGS[7]} rounds of ${SMALL_ARGS[9]} steps"
echo
"$BIN" --compare-report "$SMALL_COMPARE" --set small
echo
echo "Tuned in those launches (threshold B, cycle ms, cache; own measurement over ${SMALL_ARGS[1]} steps):"
awk -F, '{printf "- %s, %s, %s: %.3f GB/s, settled after %s steps\n", $3, $4, $5, $2 / 1e9, $6}' "$SMALL_RESULTS"
