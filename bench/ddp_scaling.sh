#!/usr/bin/env bash
# Data-parallel scaling of the GPT-mini step on this machine (issue 23):
# mstep's nn::DistributedDataParallel over Open MPI against PyTorch 2.x DDP
# over gloo, same model, ranks and threads. A bench, not a test.
#
# The step: examples/gpt_train's GPT-mini (dim 256, 4 layers, 4 heads, seq
# 256, vocab 1024, batch 8 per rank, full-length sequences, AdamW, no
# clipping; --mode replay), the model of bench/peers.sh's gpt_step_ms.
# Every rank runs one thread (OMP_NUM_THREADS=1) on a core of its own.
#
# Prints, per bucket size (1, 25, 100 MiB):
#   step_ms_1x1      1 rank x 1 thread, no DDP
#   step_ms_2solo    2 independent processes at once, no DDP: the compute
#                    of a 2-rank step with the cores' shared memory traffic
#   step_ms_2x1      2 ranks x 1 thread under mpirun, DDP (rank 0's)
#   efficiency       weak scaling, throughput per rank: 1x1 / 2x1 (target >= 0.9)
#   allreduce_ms     the step's gradients all-reduced alone, in the same
#                    buckets (bench/ddp_allreduce_bench)
#   exposed_ms       2x1 - 2solo: the time the step waits on the all-reduce
#                    after the backward has ended
#   exposed/allreduce  the overlap figure: 0 is full overlap, 1 none
# and PyTorch DDP (gloo) at 1 and 2 ranks, bucket 25 MiB, with its efficiency.
#
# Usage: bash bench/ddp_scaling.sh [--build DIR] [--steps N] [--buckets "1 25 100"] [--quick]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

B=build STEPS=12 BUCKETS="1 25 100" REPS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --build) B=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --buckets) BUCKETS=$2; shift ;;
    --quick) STEPS=5 BUCKETS=25 REPS=2 ;;
    *) echo "ddp_scaling.sh: unknown argument $1 (see the usage at the top)" >&2; exit 2 ;;
  esac
  shift
done
for exe in examples/gpt_train bench/ddp_allreduce_bench; do
  [ -x "$B/$exe" ] || { echo "ddp_scaling.sh: $B/$exe is missing: build it first" >&2; exit 2; }
done
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core -x OMP_NUM_THREADS=1)
GPT=(--device cpu --mode replay --dim 256 --layers 4 --heads 4 --seq 256 --batch 8 --vocab 1024
     --padding 0 --clip 0 --samples 0 --steps "$STEPS")
export OMP_NUM_THREADS=1
step_ms() { awk '/^mode .*step_ms/ { for (i = 1; i <= NF; ++i) if ($i == "step_ms") print $(i + 1) }'; }
echo "ddp_scaling: $(date -u '+%F %T UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores (load average $(cut -d" " -f1-3 /proc/loadavg) before the runs), 1 thread per rank, $STEPS steps"

out=$(taskset -c 0 "$B/examples/gpt_train" "${GPT[@]}")
t1=$(step_ms <<<"$out")
params=$(awk '/^gpt_train:/ { for (i = 1; i <= NF; ++i) if ($i == "parameters;") print $(i - 1) }' <<<"$out")
taskset -c 0 "$B/examples/gpt_train" "${GPT[@]}" >/tmp/ddp_solo0.$$ &
taskset -c 1 "$B/examples/gpt_train" "${GPT[@]}" >/tmp/ddp_solo1.$$
wait
t2solo=$(cat /tmp/ddp_solo0.$$ /tmp/ddp_solo1.$$ | step_ms | sort -g | tail -1)
rm -f /tmp/ddp_solo0.$$ /tmp/ddp_solo1.$$
echo "GPT-mini: $params parameters ($(awk -v p="$params" 'BEGIN { printf "%.1f", p * 4 / 1048576 }') MiB of f32 gradients)"
echo "step_ms_1x1 $t1   step_ms_2solo $t2solo"
printf '%-10s %12s %10s %13s %11s %17s\n' bucket_mb step_ms_2x1 efficiency allreduce_ms exposed_ms exposed/allreduce
for mb in $BUCKETS; do
  t2=$("${MPIRUN[@]}" "$B/examples/gpt_train" --ddp --bucket-mb "$mb" "${GPT[@]}" | step_ms)
  ar=$("${MPIRUN[@]}" "$B/bench/ddp_allreduce_bench" "$params" "$mb" 10 | awk '/^allreduce_ms/ { print $2 }')
  awk -v mb="$mb" -v t1="$t1" -v t2="$t2" -v solo="$t2solo" -v ar="$ar" 'BEGIN {
    exposed = t2 - solo; if (exposed < 0) exposed = 0
    printf "%-10s %12.1f %10.3f %13.1f %11.1f %17.2f\n", mb, t2, t1 / t2, ar, exposed, (ar > 0 ? exposed / ar : 0) }'
done

VENV=${MSTEP_PEERS_VENV:-$HOME/.cache/mstep/peers-venv}
if [ -x "$VENV/bin/python" ]; then
  peer() {  # peer NP
    mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to core -x OMP_NUM_THREADS=1 \
      "$VENV/bin/python" bench/peers/torch_ddp.py --threads 1 --bucket-mb 25 --reps "$REPS" |
      awk '/^RESULT/ { for (i = 1; i <= NF; ++i) if ($i ~ /^value=/) print substr($i, 7) }'
  }
  p1=$(peer 1) p2=$(peer 2)
  echo "PyTorch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') DDP gloo, bucket 25 MiB:" \
       "step_ms_1x1 $p1  step_ms_2x1 $p2  efficiency $(awk -v a="$p1" -v b="$p2" 'BEGIN { printf "%.3f", a / b }')"
else
  echo "PyTorch DDP: no peers venv at $VENV (bash bench/peers/setup_venv.sh makes it)"
fi
