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
# Prints, per bucket size (1, 25, 100 MiB; "25:1" is a 25 MiB cap with a
# 1 MiB first bucket, PyTorch's default):
#   step_ms_1x1      1 rank x 1 thread, no DDP
#   step_ms_2solo    2 independent processes at once, no DDP: the compute
#                    of a 2-rank step with the cores' shared memory traffic
#   step_ms_2x1      2 ranks x 1 thread under mpirun, DDP (rank 0's)
#   efficiency       weak scaling, throughput per rank: 1x1 / 2x1 (target >= 0.9)
#   allreduce_ms     the step's gradients all-reduced alone, in the same
#                    buckets (bench/ddp_allreduce_bench, cpu device: every
#                    bucket in flight at once, as in the step)
#   exposed_ms       2x1 - 2solo: the time the step waits on the all-reduce
#                    after the backward has ended
#   exposed/allreduce  the overlap figure: 0 is full overlap, 1 none
#   wait_ms r0/r1    each rank's time in mpi.wait per step of the replayed
#                    step (MSTEP_CPU_PROFILE): what the step waits for its
#                    collectives after the backward. The rank that ends its
#                    backward first also waits for the other (imbalance);
#                    the smaller of the two is closer to the transfer left
#                    over after the backward
#   wait/allreduce   min(wait) / allreduce_ms
# and PyTorch DDP (gloo) at 1 and 2 ranks, bucket 25 MiB, with its efficiency.
#
# Usage: bash bench/ddp_scaling.sh [--build DIR] [--steps N] [--buckets "1 25 100 25:1"] [--quick]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

B=build STEPS=12 BUCKETS="1 25 100 25:1" REPS=6
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
# From one rank's stderr, for the step executable (the profile with the
# most calls): "<mpi.wait ms per step> <waits that found the transfer
# complete>/<waits>".
wait_ms() {
  awk '/^mstep cpu profile: [0-9]+ calls/ { n = $4; take = (n > best); if (take) best = n; next }
       take && /by kernel:/ { w = 0; if (match($0, /mpi\.wait [0-9.]+ ms/)) { split(substr($0, RSTART, RLENGTH), f, " "); w = f[2] } }
       take && /collectives: [0-9]+ of [0-9]+ waits/ { c = $2 "/" $4; take = 0 }
       END { printf "%.1f %s", w, c }' "$1"
}
prof=$(mktemp -d)
printf '%-10s %12s %10s %13s %11s %17s %15s %15s %13s\n' bucket_mb step_ms_2x1 efficiency allreduce_ms \
  exposed_ms exposed/allreduce wait_ms_r0/r1 wait/allreduce done_early_r0
for spec in $BUCKETS; do
  mb=${spec%%:*} first=0
  [ "$spec" != "$mb" ] && first=${spec#*:}
  out=$("${MPIRUN[@]}" -x MSTEP_CPU_PROFILE=1 bash -c 'exec "$@" 2>"'"$prof"'/err.$OMPI_COMM_WORLD_RANK"' _ \
         "$B/examples/gpt_train" --ddp --bucket-mb "$mb" --first-bucket-mb "$first" "${GPT[@]}")
  t2=$(step_ms <<<"$out")
  threads=$(sed -n 's/.* \([0-9]*\) cpu thread(s) per rank.*/\1/p' <<<"$out")
  read -r w0 done0 <<<"$(wait_ms "$prof/err.0")"
  read -r w1 _ <<<"$(wait_ms "$prof/err.1")"
  ar=$("${MPIRUN[@]}" -x MSTEP_DEVICE=cpu "$B/bench/ddp_allreduce_bench" "$params" "$mb" 10 "$first" | awk '/^allreduce_ms/ { print $2 }')
  awk -v mb="$spec" -v t1="$t1" -v t2="$t2" -v solo="$t2solo" -v ar="$ar" -v w0="$w0" -v w1="$w1" \
      -v d="$done0" 'BEGIN {
    exposed = t2 - solo; if (exposed < 0) exposed = 0
    w = (w0 < w1 ? w0 : w1)
    printf "%-10s %12.1f %10.3f %13.1f %11.1f %17.2f %15s %15.2f %13s\n", mb, t2, t1 / t2, ar, exposed,
           (ar > 0 ? exposed / ar : 0), w0 "/" w1, (ar > 0 ? w / ar : 0), d }'
done
echo "mstep: ${threads:-?} cpu thread(s) per rank (gpt_train's data-parallel line); done_early_r0: rank 0's" \
     "collective waits (buckets and the loss, over all steps) that found the transfer complete"
rm -rf "$prof"

VENV=${MSTEP_PEERS_VENV:-$HOME/.cache/mstep/peers-venv}
if [ -x "$VENV/bin/python" ]; then
  peer() {  # peer NP
    mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to core -x OMP_NUM_THREADS=1 \
      "$VENV/bin/python" bench/peers/torch_ddp.py --threads 1 --bucket-mb 25 --reps "$REPS" |
      awk '/^RESULT/ { for (i = 1; i <= NF; ++i) { if ($i ~ /^value=/) v = substr($i, 7); if ($i ~ /^threads=/) t = substr($i, 9) } print v, t }'
  }
  read -r p1 pt <<<"$(peer 1)"
  read -r p2 _ <<<"$(peer 2)"
  echo "PyTorch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') DDP gloo, bucket 25 MiB, $pt thread(s) per rank:" \
       "step_ms_1x1 $p1  step_ms_2x1 $p2  efficiency $(awk -v a="$p1" -v b="$p2" 'BEGIN { printf "%.3f", a / b }')"
else
  echo "PyTorch DDP: no peers venv at $VENV (bash bench/peers/setup_venv.sh makes it)"
fi
