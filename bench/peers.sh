#!/usr/bin/env bash
# mstep's cpu backend against its peers, like for like, on this machine.
#
# Prints one line per metric, peer and thread setting:
#   metric[peer]  mstep  peer  ratio  threads
# Units are in the metric's name: _ms is milliseconds per step or call
# (lower is better), _gbps and _gflops are rates (higher is better). ratio
# is peer/mstep for times and mstep/peer for rates, so ratio > 1 always
# means mstep is faster. threads is mstep's/the peer's thread count: 1/1
# and 2/2 are equal threads; best:M/P is each side at its fastest setting.
#
# Metrics (bench/peers/*.py, torch_mlp_step.cpp and cpu_kernels_bench.cpp
# say exactly what each side runs):
#   mlp_step_ms      examples/mnist_mlp's training step (replay mode) against
#                    the same model, loss and Adadelta in libtorch 1.13 C++,
#                    PyTorch 2.x eager and torch.compile, and JAX jit.
#   gpt_step_ms      GPT-mini (dim 256, 4 layers, 4 heads, seq 256, batch 8,
#                    vocab 1024) training step, full-length sequences, AdamW,
#                    no clipping on either side: examples/gpt_train (replay,
#                    --padding 0 --clip 0) against PyTorch 1.13 and 2.x eager,
#                    torch.compile and JAX jit.
#   gpt_padded_step_ms  what valid_seq_len saves: mstep on right-padded
#                    batches (lengths in [128, 256]) against mstep computing
#                    full-length ones; at the highest thread count only.
#   sdpa_fwd_bwd_ms  causal attention forward + backward, batch 4, 4 heads,
#                    seq 1024, head dim 64: mstep's flash kernel against
#                    attention written out (matmul, mask, softmax, matmul) in
#                    PyTorch 1.13, 2.x and JAX, and PyTorch 2.x's fused
#                    F.scaled_dot_product_attention.
#   sdpa_gflops_vs_matmul  mstep's attention GFLOP/s (useful causal FLOPs)
#                    against oneDNN's 1024^3 matmul: the machine's measured
#                    matmul throughput (ratio = fraction of it).
#   elementwise_gbps relu(a*b+c)*d over 16M f32 against a STREAM triad in the
#                    same process; bytes include write-allocate traffic.
#   matmul_ms        1024^3 f32 against oneDNN (same process), PyTorch, JAX.
#   trace_ns_per_op  a 1,000-op chain on 8 elements, end to end on both
#                    sides (mstep: trace, cache hit, execute, read; libtorch
#                    1.13 C++: dispatch, run, read). trace_host_ns_per_op is
#                    mstep's share outside its executable, without a peer.
#
# Threads: every process runs under `taskset -c 0-(N-1)` with
# OMP_NUM_THREADS=N (mstep's kernels, oneDNN and libgomp-based peers),
# OPENBLAS_NUM_THREADS=N (Debian's PyTorch 1.13 runs its GEMMs in OpenBLAS),
# MKL_NUM_THREADS=N, and each peer sets its own count too
# (torch.set_num_threads; JAX has no thread-count flag, so the pinning is
# what holds it to N cores).
#
# Rounds: each round runs every side once per thread count, mstep and the
# peers one after another (the machine's speed drifts); each figure is the
# median over the rounds (3).
#
# Peers from PyPI live in a virtual environment made on the first run and
# reused ($MSTEP_PEERS_VENV, default ~/.cache/mstep/peers-venv; see
# bench/peers/setup_venv.sh). A peer that cannot run is named with the reason.
#
# Usage: bash bench/peers.sh [--quick] [--build DIR] [--threads "1 2"] [--rounds N]
#   --quick: fewer steps and one round, to check the script (noisy figures).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

B=build QUICK=0 ROUNDS=3
THREADS="1 $(nproc)"
[ "$(nproc)" = 1 ] && THREADS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ROUNDS=1 ;;
    --build) B=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    *) echo "peers.sh: unknown argument $1 (see the usage at the top of bench/peers.sh)" >&2; exit 2 ;;
  esac
  shift
done
for exe in examples/mnist_mlp examples/gpt_train bench/cpu_kernels_bench; do
  if [ ! -x "$B/$exe" ]; then
    echo "peers.sh: $B/$exe is missing: build it first (cmake --build $B --target $(basename "$exe"))" >&2
    exit 2
  fi
done
if [ ! -x "$B/bench/torch_mlp_step" ] || [ ! -x "$B/bench/trace_bench" ]; then
  echo "# libtorch peers (torch_mlp_step, trace_bench) skipped: not built, as CMake found no" \
       "libtorch (Debian's libtorch-dev; scripts/setup.sh installs it)"
fi
MAX_T=$(echo "$THREADS" | tr ' ' '\n' | sort -n | tail -1)

if [ "$QUICK" = 1 ]; then
  MLP_STEPS=40 GPT_STEPS=4 MIN_TIME=0.1 PEER_QUICK=--quick
else
  MLP_STEPS=200 GPT_STEPS=6 MIN_TIME=0.5 PEER_QUICK=
fi

VENV=${MSTEP_PEERS_VENV:-$HOME/.cache/mstep/peers-venv}
bash bench/peers/setup_venv.sh "$VENV"
for peer in torch jax; do
  [ -f "$VENV/$peer.skip" ] && echo "# $peer (PyPI) peers skipped: $(cat "$VENV/$peer.skip")"
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results
: >"$RESULTS"

# pinned T cmd...: runs cmd on T cores with every thread knob at T.
pinned() {
  local t=$1
  shift
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t MKL_NUM_THREADS=$t taskset -c "0-$((t - 1))" "$@"
}

# side NAME T cmd...: runs one side, keeps its RESULT lines (tagged with the
# round); on failure says which side failed and why, and goes on.
side() {
  local name=$1 t=$2
  shift 2
  if pinned "$t" "$@" >"$WORK/out" 2>"$WORK/err"; then
    grep -o 'RESULT .*' "$WORK/out" | sed "s/^/round=$round /" >>"$RESULTS"
  else
    echo "# $name at $t threads failed: $(tail -n 3 "$WORK/err" | tr '\n' ' ')" | tee -a "$WORK/failures"
  fi
}

# mstep's examples print their own summaries: turn them into RESULT lines.
mstep_mlp() {
  # --epochs: the synthetic data set has 60 batches an epoch.
  "$B/examples/mnist_mlp" --mode replay --device cpu --epochs 100 --max-steps "$MLP_STEPS" \
    --log-every 10 | awk -v t="$OMP_NUM_THREADS" '
    /parameters\)/ { for (i = 1; i <= NF; ++i) if ($i == "parameters);") { p = $(i - 1); sub(/\(/, "", p) } }
    / loss / { for (i = 1; i < NF; ++i) if ($i == "loss") { if (first == "") first = $(i + 1); last = $(i + 1) } }
    / step_ms / { for (i = 1; i < NF; ++i) if ($i == "step_ms") ms = $(i + 1) }
    END { if (ms == "") exit 1
          printf "RESULT metric=mlp_step_ms impl=mstep value=%s threads=%s params=%s loss=%.3f->%.3f\n", ms, t, p, first, last }'
}
mstep_gpt() {  # mstep_gpt METRIC [gpt_train flags]
  local metric=$1
  shift
  "$B/examples/gpt_train" --device cpu --mode replay --dim 256 --layers 4 --heads 4 --seq 256 \
    --batch 8 --vocab 1024 --lr 3e-4 --steps "$GPT_STEPS" --samples 0 --clip 0 "$@" | awk -v t="$OMP_NUM_THREADS" -v m="$metric" '
    /^gpt_train:/ { for (i = 1; i <= NF; ++i) if ($i == "parameters;") p = $(i - 1) }
    /^loss / { first = $2; last = $4 }
    / step_ms / { for (i = 1; i < NF; ++i) if ($i == "step_ms") ms = $(i + 1) }
    END { if (ms == "") exit 1
          printf "RESULT metric=%s impl=mstep value=%s threads=%s params=%s loss=%.3f->%.3f\n", m, ms, t, p, first, last }'
}
export -f mstep_mlp mstep_gpt
export B MLP_STEPS GPT_STEPS

start=$(date +%s)
for round in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    echo "# round $round/$ROUNDS, $t threads ($(($(date +%s) - start)) s)" >&2
    side "mstep mnist_mlp" "$t" bash -c mstep_mlp
    if [ -x "$B/bench/torch_mlp_step" ]; then
      side "libtorch torch_mlp_step" "$t" "$B/bench/torch_mlp_step" --threads "$t" --steps "$MLP_STEPS"
    fi
    side "mstep gpt_train" "$t" bash -c 'mstep_gpt gpt_step_ms --padding 0'
    if [ "$t" = "$MAX_T" ]; then
      side "mstep gpt_train (padded)" "$t" bash -c 'mstep_gpt gpt_padded_step_ms'
    fi
    side "PyTorch 1.13 (Debian)" "$t" /usr/bin/python3 bench/peers/torch_steps.py --threads "$t" \
      --cases gpt,sdpa,matmul $PEER_QUICK
    if [ -f "$VENV/torch.ok" ]; then
      # One inductor cache per thread count: inductor bakes the count into its code.
      TORCHINDUCTOR_CACHE_DIR=$VENV/inductor-cache-t$t side "PyTorch 2.x" "$t" \
        "$VENV/bin/python" -W ignore bench/peers/torch_steps.py --threads "$t" $PEER_QUICK
    fi
    if [ -f "$VENV/jax.ok" ]; then
      side "JAX" "$t" "$VENV/bin/python" bench/peers/jax_steps.py --threads "$t" $PEER_QUICK
    fi
    side "mstep cpu_kernels_bench" "$t" "$B/bench/cpu_kernels_bench" --benchmark_min_time="$MIN_TIME" \
      --benchmark_color=false
    if [ -x "$B/bench/trace_bench" ]; then
      side "trace_bench" "$t" "$B/bench/trace_bench" --benchmark_color=false
    fi
  done
done
echo "# measured in $(($(date +%s) - start)) s" >&2

/usr/bin/python3 bench/peers/summarize.py "$RESULTS" --quick "$QUICK"
[ -f "$WORK/failures" ] && cat "$WORK/failures"
exit 0
