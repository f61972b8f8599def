#!/usr/bin/env bash
# mstep's xla backend side by side with its cpu backend and with XLA:CPU
# (jaxlib) and IREE (llvm-cpu) running mstep's own exported StableHLO of the
# same training step (issue 20's performance section). A sibling of
# bench/peers.sh rather than more of it: it needs the interop environment
# (jax and IREE), an export per model, and IREE takes ~20 s to compile the
# GPT-mini step, per thread count and round, which peers.sh's other
# metrics should not wait for.
#
# Prints bench/peers/summarize.py's table with mstep xla as "mstep":
#   metric[peer]  mstep-xla  peer  ratio  threads
# ratio = peer/mstep-xla (> 1: xla is faster); threads 1/1 and 2/2 are
# equal counts on both sides.
#
# Metrics (bench/xla_step_bench.cpp and bench/peers/stablehlo_steps.py say
# exactly what each side runs):
#   mlp_step_ms      mnist_mlp's training step (dropout, NLL, Adadelta,
#                    batch 200; two segments), replayed
#   gpt_step_ms      GPT-mini's (dim 256, 4 layers, 4 heads, seq 256, batch
#                    8, vocab 1024; cross entropy, AdamW, no clipping, no
#                    dropout), replayed
#   mlp_host_us, gpt_host_us  mstep's host time per replay (wall minus the
#                    time inside executables, median over the replays),
#                    xla against cpu only: the runtime's own work around
#                    the executables, the same code on both (a backend's
#                    dispatch inside run() is not in it)
#   mlp_compile_ms, gpt_compile_ms  compiling the replayed step: mstep's
#                    graph(s) (xla, cpu) and each consumer's compile of the
#                    exported module
# Same work on every side: the step is captured and exported once (on cpu,
# before timing) with its starting values and the batches of every timed
# step; mstep's runs start from the same seeds and batches, XLA and IREE
# from the exported values, and all run the same steps. The sanity lines
# check that the losses of the first and last step agree on every side.
#
# Threads: every process runs under `taskset -c 0-(N-1)` with
# OMP_NUM_THREADS=N (mstep's loops and oneDNN); XLA:CPU has no thread flag,
# the pinning bounds it; IREE's task system gets
# --task_topology_max_group_count=N. Rounds: each round runs every side
# once per thread count; each figure is the median over the rounds.
#
# Usage: bash bench/xla_peers.sh [--quick] [--build DIR] [--threads "1 2"] [--rounds N]
#                                [--models "mlp gpt"]
#   --quick: fewer steps and one round, to check the script (noisy figures).
#   --models: the models to run (default both; "mlp" skips GPT-mini, whose
#   IREE compile dominates the run time).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

B=build QUICK=0 ROUNDS=3 MODELS="mlp gpt"
THREADS="1 $(nproc)"
[ "$(nproc)" = 1 ] && THREADS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ROUNDS=1 ;;
    --build) B=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --models) MODELS=$2; shift ;;
    *) echo "xla_peers.sh: unknown argument $1 (see the usage at the top of bench/xla_peers.sh)" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$B/bench/xla_step_bench
if [ ! -x "$BENCH" ]; then
  echo "xla_peers.sh: $BENCH is missing: build it first (cmake --build $B --target xla_step_bench)" >&2
  exit 2
fi
if [ "$QUICK" = 1 ]; then
  MLP_STEPS=20 GPT_STEPS=3
else
  MLP_STEPS=100 GPT_STEPS=6
fi

VENV=${MSTEP_INTEROP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mstep/interop-venv}
mkdir -p "$(dirname "$VENV")"
(
  flock 9
  bash bench/peers/setup_venv.sh "$VENV" jax iree
) 9>"$VENV.lock"
CONSUMERS=
for c in jax iree; do
  if [ -f "$VENV/$c.ok" ]; then CONSUMERS="$CONSUMERS $c"; else
    echo "# $c skipped: $(cat "$VENV/$c.skip" 2>/dev/null || echo "not installed in $VENV")"
  fi
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results
: >"$RESULTS"

pinned() {  # pinned T cmd...: cmd on T cores with every thread knob at T
  local t=$1
  shift
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t MKL_NUM_THREADS=$t taskset -c "0-$((t - 1))" "$@"
}
side() {  # side NAME T cmd...: keeps cmd's RESULT lines; a failure is named
  local name=$1 t=$2
  shift 2
  if pinned "$t" "$@" >"$WORK/out" 2>"$WORK/err"; then
    grep -o 'RESULT .*' "$WORK/out" | sed "s/^/round=$round /" >>"$RESULTS"
  else
    echo "# $name at $t threads failed: $(tail -n 3 "$WORK/err" | tr '\n' ' ')" | tee -a "$WORK/failures"
  fi
}

# The exports: mstep's cpu backend captures each step once; its values
# before the first replay and the batches of every replay go with it.
for model in $MODELS; do
  steps=MLP_STEPS
  [ $model = gpt ] && steps=GPT_STEPS
  mkdir -p "$WORK/$model"
  if ! pinned 1 "$BENCH" --model $model --device cpu --steps "${!steps}" --export "$WORK/$model" \
      >/dev/null 2>"$WORK/err"; then
    echo "xla_peers.sh: exporting the $model step failed: $(tail -n 3 "$WORK/err")" >&2
    exit 1
  fi
done

start=$(date +%s)
for round in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    echo "# round $round/$ROUNDS, $t threads ($(($(date +%s) - start)) s; load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for model in $MODELS; do
      steps=MLP_STEPS
      [ $model = gpt ] && steps=GPT_STEPS
      for device in cpu xla; do
        side "mstep $device $model" "$t" "$BENCH" --model $model --device $device --steps "${!steps}"
      done
      for c in $CONSUMERS; do
        side "$c $model" "$t" "$VENV/bin/python" bench/peers/stablehlo_steps.py --consumer "$c" \
          --dir "$WORK/$model" --metric $model --threads "$t" --steps "${!steps}"
      done
    done
  done
done
echo "# measured in $(($(date +%s) - start)) s" >&2

/usr/bin/python3 bench/peers/summarize.py "$RESULTS" --quick "$QUICK" --mine mstep-xla \
  --same-inputs --title bench/xla_peers.sh
[ -f "$WORK/failures" ] && cat "$WORK/failures"
exit 0
