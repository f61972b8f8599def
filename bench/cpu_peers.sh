#!/usr/bin/env bash
# The cpu backend against its peers, measured in one run on this machine:
# kernel benchmarks (cpu_kernels_bench), then the two training steps.
#   mnist_mlp step: mstep replay on cpu vs libtorch C++ eager (torch_mlp_step)
#   GPT-mini step (dim 256, 4 layers, 4 heads, seq 256, batch 8, vocab 1024,
#   AdamW, causal): mstep replay on cpu vs PyTorch eager (python3-torch)
# Each step figure is the median of 3 runs, mstep and peer interleaved (the
# machine's speed drifts). libtorch/PyTorch use Debian's OpenBLAS
# (libopenblas0-pthread) when it is installed; the BLAS is printed.
# Usage: bash bench/cpu_peers.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
"$B/bench/cpu_kernels_bench" --benchmark_min_time=0.5
field() { awk -v k="$1" '{for (i = 1; i < NF; ++i) if ($i == k) {print $(i + 1); exit}}'; }
median() { sort -g | sed -n 2p; }
mlp=() torch_mlp=() gpt=() torch_gpt=()
for rep in 1 2 3; do
  mlp+=("$("$B/examples/mnist_mlp" --mode replay --device cpu --max-steps 120 --log-every 1000 | field step_ms)")
  line=$("$B/bench/torch_mlp_step" --steps 100)
  torch_mlp+=("$(echo "$line" | field torch_mlp_step_ms)")
  gpt+=("$("$B/examples/gpt_train" --device cpu --mode replay --dim 256 --layers 4 --heads 4 \
           --seq 256 --batch 8 --vocab 1024 --steps 8 --samples 0 | field step_ms)")
  gline=$(/usr/bin/python3 bench/peers/torch_gpt_step.py --steps 3)
  torch_gpt+=("$(echo "$gline" | field torch_gpt_step_ms)")
done
echo "$line"
echo "$gline"
echo "runs: mlp ${mlp[*]} / ${torch_mlp[*]}; gpt ${gpt[*]} / ${torch_gpt[*]}"
echo "mlp_step_ms $(printf '%s\n' "${mlp[@]}" | median) $(printf '%s\n' "${torch_mlp[@]}" | median)" \
     "gpt_step_ms $(printf '%s\n' "${gpt[@]}" | median) $(printf '%s\n' "${torch_gpt[@]}" | median)"
