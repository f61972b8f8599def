#!/usr/bin/env bash
# Prepares, on this machine (no GPU needed), the GPU check of the cuda
# runtime half (driver layer, backend, allocator, cuBLASLt, cuDNN SDPA) for one short
# run on a machine with an NVIDIA GPU where
# nothing can be installed: cuda_driver_gpu_test, every shared library
# it loads (ldd; glibc's own libraries and libcuda excepted, the GPU
# machine has newer ones), and the test kernels (PTX, cubins, ptxas -v
# reports), and, where the cuda compile half is built,
# cuda_codegen_gpu_test with the kernels the compile half generated here
# (test/cuda/CodegenCase.h: PTX, cubins, inputs, expected outputs; no
# MLIR travels), as ONE xz-compressed tarball (binaries and libraries
# stripped), plus run.sh, which on the GPU
# machine unpacks it to /tmp, runs the tests and writes a report
# (gtest XML, the logs, the environment) to $OUT. cuBLASLt (540 MB) is not
# bundled, nor is cuDNN (~1 GB): run.sh finds the GPU machine's and reports where.
#
#   scripts/gpu_check.sh [--build-dir DIR] [--out DIR] [--no-build] [--bench]
#     --build-dir  the configured build tree (default build/)
#     --out        where the bundle goes (default gpu_bundle/, ignored by git)
#     --no-build   use what is built (the packaging test does)
#     --bench      also the GPT-mini bf16 step at the peers' size (bench/peers.sh:
#                  dim 256, 4 layers, seq 256, batch 8) timed by mstep-run
#                  against PyTorch eager and torch.compile on the same GPU
# Then, on the GPU machine, from the folder that holds the bundle folder:
#   OUT=/some/report/dir bash gpu_bundle/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/gpu_bundle
do_build=1
bench=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --bench) bench=1; shift ;;
    *) echo "gpu_check.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
max_bytes=$((40 * 1024 * 1024))

if [ "$do_build" = 1 ]; then
  cmake --build "$build" --target cuda_driver_gpu_test
  # Built only with the compile half (ptxas and libdevice found).
  if cmake --build "$build" --target help | grep -q '^cuda_codegen_gpu_test\b'; then
    cmake --build "$build" --target cuda_codegen_gpu_test
  fi
  cmake --build "$build" --target mstep-run mstep-compile mnist_mlp gpt_train mstep_compiler_absent \
    mstep_giou_export_worker mstep_giou_plugin
fi
binary=$build/test/cuda/cuda_driver_gpu_test
kernels=$build/test/cuda/kernels
codegen_binary=$build/test/cuda/cuda_codegen_gpu_test
codegen_cases=$build/test/cuda/codegen_cases
binaries=("$binary")
if [ ! -x "$binary" ]; then
  echo "gpu_check.sh: no $binary; configure with the CUDA toolkit (nvcc, ptxas, cuda.h) found and build cuda_driver_gpu_test" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bundle=$stage/mstep_gpu
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/kernels"
cp "$binary" "$bundle/bin/"
cp "$kernels"/test_kernels.* "$bundle/kernels/"
if [ -x "$codegen_binary" ]; then
  if [ ! -f "$codegen_cases/cases.txt" ]; then
    echo "gpu_check.sh: $codegen_binary is built but $codegen_cases/cases.txt is not; build cuda_codegen_case_files" >&2
    exit 1
  fi
  cp "$codegen_binary" "$bundle/bin/"
  cp -r "$codegen_cases" "$bundle/codegen_cases"
  binaries+=("$codegen_binary")
fi

# Whole training steps (where the compile half is built): each example's
# replay step exported on ref with fusion off, compiled here for cuda by
# mstep-compile (the cuda pipeline fuses it), and ref's outputs over 4
# replays (mstep-run --outputs: the losses and the final weights) as the
# expectation; on the GPU machine the bundle's mstep-run (the runtime half
# alone) replays the cuda file and compare_step_outputs.py checks it.
#   add_step NAME TOLERANCES EXAMPLE ARGS...
# TOLERANCES: the lines of compare_step_outputs.py's tolerance file
# ("PATTERN REL ABS": the largest error allowed, relative to each tensor's
# largest |ref| value, or absolute).
compiler_tool=$build/tools/mstep-compile/mstep-compile
runner=$build/tools/mstep-run/mstep-run
add_step() {
  local name=$1 tolerance=$2 example=$3
  shift 3
  local steps=$bundle/steps ref=$stage/$name.ref.mstep
  mkdir -p "$steps"
  # (mnist_mlp exits 1 when a short run leaves the accuracy under 50%.)
  MSTEP_FUSE=0 MSTEP_CACHE= "$build/examples/$example" --device ref --mode replay --save "$ref" "$@" > /dev/null || true
  [ -f "$ref" ] || { echo "gpu_check.sh: $example did not save its step" >&2; exit 1; }
  "$compiler_tool" "$ref" --device cuda -o "$steps/$name.cuda.mstep" > /dev/null
  MSTEP_CACHE= "$runner" "$ref" --steps 4 --outputs "$steps/$name.expected.safetensors" > /dev/null
  printf '%s\n' "$tolerance" > "$steps/$name.tolerance"
}
if [ -x "$codegen_binary" ] && [ -x "$compiler_tool" ] && [ -x "$runner" ]; then
  # f32: the longest sums (784-term dot products, reduced in another order
  # by cuBLASLt) are within k*u*sum|x*w| ~ 5e-5 of each other relative to
  # their magnitudes; 1e-4 leaves room for the update's sqrt/div chain.
  add_step mnist_mlp '* 1e-4 0' mnist_mlp --synthetic --max-steps 5
  # bf16 matmuls and attention (f32 accumulation, bf16 results: u = 2^-8):
  # a few bf16 roundings apart, 2e-2 of each tensor's largest value. But
  # the key third of each qkv bias has a zero true gradient (softmax is
  # unchanged by a shift of every key), so AdamW moves it on rounding
  # noise by up to lr (6e-3) a step, either way: 2 * lr * 4 steps.
  # Full-length windows (--padding 0) here; the examples below run bf16
  # with padded windows (cuDNN with the i64 lengths converted to i32).
  # f32, padded windows (right-padded valid_seq_len): attention composed of
  # cuBLASLt matmuls and mstep's row kernels (cuDNN takes no f32). A deeper
  # graph than mnist's (two blocks, attention, layer norms, cross-entropy
  # over the vocabulary) and four AdamW steps: 1e-3 of each tensor's largest
  # value; the key bias as below.
  add_step gpt_train_f32 $'blocks\\.[0-9]+\\.qkv\\.bias 1e-3 0.048\n* 1e-3 0' \
    gpt_train --steps 3
  add_step gpt_train_bf16 $'blocks\\.[0-9]+\\.qkv\\.bias 2e-2 0.048\n* 2e-2 0' \
    gpt_train --steps 3 --autocast bf16 --padding 0
  # Data parallel in a world of one (issue 23): gpt_train --ddp's step (the
  # loss's mean all_reduce, world_size 1) with each collective an NCCL call
  # on a 1-rank communicator (run.sh finds libnccl.so.2, never bundled); an
  # all_reduce of one rank is the identity, so ref's outputs hold, as for
  # gpt_train_f32. Small dims: the bundle's size limit (about 0.5 MiB
  # compressed). The default buckets: the gradients flattened into them
  # (mstep.cat: copy kernels, or written in place at aligned offsets) after
  # the bucket rebuild of the first step.
  add_step gpt_train_ddp $'blocks\\.[0-9]+\\.qkv\\.bias 1e-3 0.048\n* 1e-3 0' \
    gpt_train --steps 3 --ddp --dim 32 --layers 1 --heads 2 --seq 32 --batch 4
  # A custom op's CUDA C++ kernels (issue 22 §3): the GIoU loss's box
  # regressor step (test/export/giou_export_worker.cpp: forward, the
  # giou_loss and giou_loss_backward custom ops, SGD) exported on ref with
  # 4 batches, and ref's losses and weights over them; mstep-compile builds the
  # ops' kernels with NVRTC here (the plugin registers them). mstep-run
  # loads the plugin there (giou.args: its extra arguments). f32 with
  # 32-term sums in the matmuls' backward: 1e-4 of each tensor's largest value.
  giou=$stage/giou
  mkdir -p "$giou"
  MSTEP_FUSE=0 MSTEP_CACHE= "$build/test/mstep_giou_export_worker" "$giou" ref 4 > /dev/null
  plugin=$build/examples/libmstep_giou_plugin.so
  "$compiler_tool" "$giou/step.mstep" --device cuda --plugin "$plugin" \
    -o "$bundle/steps/giou.cuda.mstep" > /dev/null
  # ref's outputs as mstep-run writes them (the worker's own replay agrees bitwise:
  # ctest -R exported_custom_op_round_trip).
  MSTEP_CACHE= "$runner" --plugin "$plugin" "$giou/step.mstep" --inputs "$giou/inputs.safetensors" \
    --steps 4 --outputs "$bundle/steps/giou.expected.safetensors" > /dev/null
  cp "$giou/inputs.safetensors" "$bundle/steps/giou.inputs.safetensors"
  printf '%s\n' '* 1e-4 0' > "$bundle/steps/giou.tolerance"
  echo '--plugin @BUNDLE@/lib/libmstep_giou_plugin.so --inputs @BUNDLE@/steps/giou.inputs.safetensors' \
    > "$bundle/steps/giou.args"
  cp "$plugin" "$bundle/lib/"
  # The examples themselves on the GPU, lazily and captured (issue 22 §4;
  # test/cuda/gpu/run_examples.sh runs them there): each runs here on ref
  # in replay mode with the disk cache filled for cuda too
  # (MSTEP_CACHE=<dir>,,,cuda: every graph also compiled by the cuda
  # compile half; a replay-mode run meets every graph a lazy run does).
  # There they run from that cache with libmstep_compiler's runtime-only
  # stand-in (lib/compiler/absent: no MLIR travels), so nothing compiles.
  #   add_example NAME TOLERANCE FILL_STEPS RUN_STEPS EXAMPLE ARGS...
  # (FILL_STEPS = RUN_STEPS where ref's losses are compared: gpt_train's
  # learning-rate schedule spans the run.)
  # TOLERANCE: each printed loss's distance from ref's, relative to it.
  examples=$bundle/examples
  mkdir -p "$examples/cache"
  cp "$root/examples/data/sonnets.txt" "$examples/"
  fill=$stage/cuda_cache
  add_example() {
    local name=$1 tolerance=$2 fill_steps=$3 run_steps=$4 example=$5
    shift 5
    local steps_flag=--steps text=()
    [ "$example" = mnist_mlp ] && steps_flag=--max-steps
    [ "$example" = gpt_train ] && text=(--text "$examples/sonnets.txt")
    local rc=0
    MSTEP_CACHE="$fill,,,cuda" "$build/examples/$example" --device ref --mode replay "${text[@]}" "$@" \
      "$steps_flag" "$fill_steps" > "$examples/$name.ref.txt" 2>&1 || rc=$?
    # (1: a short run under the example's accuracy or loss bar.)
    if [ $rc -gt 1 ] || grep -q "is not stored for cuda" "$examples/$name.ref.txt"; then
      echo "gpu_check.sh: $example $* did not fill the cache for cuda:" >&2
      grep -E "is not stored|error|$example:" "$examples/$name.ref.txt" >&2
      exit 1
    fi
    echo "$example $steps_flag $run_steps ${text:+--text @EXAMPLES@/sonnets.txt} $*" > "$examples/$name.args"
    echo "$tolerance" > "$examples/$name.tolerance"
  }
  # f32, 8 steps: the losses (6 decimals) within 1e-4 of ref's; dropout's
  # Philox numbers are ref's.
  add_example mnist_mlp 1e-4 8 8 mnist_mlp --synthetic --log-every 1
  # f32 with dropout (attention composed of our kernels, right-padded
  # windows, clipping): 1e-3; bf16 (cuDNN attention, right-padded windows:
  # i64 lengths converted to i32): 2e-2.
  add_example gpt_train_f32 1e-3 8 8 gpt_train --dim 64 --layers 2 --heads 2 --seq 64 --batch 8 \
    --samples 0 --dropout 0.1
  add_example gpt_train_bf16 2e-2 8 8 gpt_train --dim 64 --layers 2 --heads 2 --seq 64 --batch 16 \
    --samples 0 --autocast bf16
  if [ "$bench" = 1 ]; then
    # The bench's GPT-mini bf16 step, lazy against replayed (issue 22: replay
    # at least 1.3x faster than lazy mode on the GPU), 30 steps there and
    # here (the learning-rate schedule spans the run: ref's losses compare
    # only over a run of the same length).
    add_example gpt_bench 2e-2 30 30 gpt_train --dim 256 --layers 4 --heads 4 --seq 256 --batch 8 \
      --vocab 1024 --lr 3e-4 --samples 0 --clip 0 --padding 0 --autocast bf16
  fi
  cp "$fill"/cuda-*.mstep "$examples/cache/"
  cp "$build/examples/gpt_train" "$build/examples/mnist_mlp" "$root/test/cuda/gpu/run_examples.sh" \
    "$root/test/cuda/gpu/compare_example_losses.py" "$bundle/bin/"
  binaries+=("$build/examples/gpt_train" "$build/examples/mnist_mlp")
  if [ "$bench" = 1 ]; then
    # The peers' GPT-mini step (bench/peers.sh's mstep_gpt, in bf16), its
    # values zeroed (its time does not depend on them; the file shrinks to
    # its code), and the PyTorch peer of the same step.
    mkdir -p "$bundle/bench"
    MSTEP_FUSE=0 MSTEP_CACHE= "$build/examples/gpt_train" --device ref --mode replay --dim 256 \
      --layers 4 --heads 4 --seq 256 --batch 8 --vocab 1024 --lr 3e-4 --steps 2 --samples 0 \
      --clip 0 --padding 0 --autocast bf16 --save "$stage/gpt_bench.ref.mstep" > /dev/null
    # Compiled three times, to time the kernel forms against each other:
    # the defaults (row groups: the ops over the same rows in one
    # block-per-row kernel; one optimizer launch), a kernel per row op
    # (MSTEP_CUDA_ROW_REDUCTION=block), and the first forms
    # (thread, a launch per parameter: MSTEP_CUDA_OPTIMIZER=per_tensor, and
    # one thread per column: MSTEP_CUDA_COLUMN_REDUCTION=thread).
    # plans.txt has each plan's summary (launches, copies, cuBLASLt and
    # cuDNN calls).
    : > "$bundle/bench/plans.txt"
    for variant in "default" "block:block:multi" "first:thread:per_tensor:thread"; do
      IFS=: read -r name rows optimizer columns <<< "$variant"
      file=gpt_bench.cuda.mstep
      [ "$name" = default ] || file=gpt_bench.$name.cuda.mstep
      MSTEP_CUDA_ROW_REDUCTION=${rows:-fused} MSTEP_CUDA_OPTIMIZER=${optimizer:-multi} \
        MSTEP_CUDA_COLUMN_REDUCTION=${columns:-split} \
        "$compiler_tool" "$stage/gpt_bench.ref.mstep" --device cuda --zero-values \
        -o "$bundle/bench/$file" | sed "s/^/$name: /" >> "$bundle/bench/plans.txt"
    done
    cp "$root/bench/peers/torch_steps.py" "$root/bench/peers/peer_common.py" "$bundle/bench/"
  fi
  cp "$runner" "$bundle/bin/"
  cp "$root/test/cuda/gpu/compare_step_outputs.py" "$bundle/bin/"
  binaries+=("$runner")
fi

# ldd lists every library loaded, transitively: "name => path (address)".
# glibc's libraries and the loader stay the GPU machine's (its glibc is
# newer; ours would not load under it), and libcuda is the driver's.
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so)'
# libmstep_compiler resolves to its runtime-only stand-in (no MLIR, no LLVM).
for each in "${binaries[@]}"; do
  LD_LIBRARY_PATH=$build/lib/absent${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$each"
done | sort -u | while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [[ "$name" =~ $system ]]; then continue; fi
  if [ "$path" = "not" ]; then
    echo "gpu_check.sh: $binary needs $name, which is not found here" >&2
    exit 1
  fi
  cp -L "$path" "$bundle/lib/$name"
done

# The symbol tables and debug sections of the bundled binaries and
# libraries are most of their bytes and nothing on the GPU machine reads
# them: stripped (the dynamic symbols that loading needs stay).
find "$bundle/bin" "$bundle/lib" -type f | while read -r file; do
  [ "$(head -c 4 "$file")" = $'\x7fELF' ] || continue
  strip --strip-unneeded "$file" || { echo "gpu_check.sh: cannot strip $file" >&2; exit 1; }
done

{
  echo "mstep GPU check bundle"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(ldd --version | head -1)"
  echo "files:"
  (cd "$bundle" && find . -type f | sort | sed 's/^/  /')
} > "$bundle/MANIFEST"

mkdir -p "$out"
# xz rather than gzip: about a quarter smaller (oneDNN's library, the
# steps' weights and the codegen cases' data are most of it); run.sh
# unpacks it with python3's tarfile where the GPU machine has no xz.
rm -f "$out/mstep_gpu_bundle.tar.gz"  # an older bundle's
tarball=$out/mstep_gpu_bundle.tar.xz
tar -C "$stage" -cf - mstep_gpu | xz -6 -T0 > "$tarball"
size=$(stat -c %s "$tarball")
echo "gpu_check.sh: $tarball: $size bytes ($((size * 100 / max_bytes))% of the 40 MiB limit)"
if [ "$size" -gt "$max_bytes" ]; then
  echo "gpu_check.sh: $tarball is $size bytes, over the 40 MiB limit" >&2
  exit 1
fi

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the mstep GPU check on a machine with an NVIDIA GPU (made by
# scripts/gpu_check.sh): unpacks the bundle (next to this script) into
# /tmp, runs cuda_driver_gpu_test with the bundle's libraries and the GPU
# machine's cuBLASLt and cuDNN (found here, not bundled), then (when bundled)
# cuda_codegen_gpu_test (the compile half's kernels), and writes the report to
# $OUT (default: report/ next to this script): environment.txt,
# cuda_driver_gpu_test.xml (gtest) and .log (driver layer, backend,
# cuBLASLt, cuDNN SDPA), cuda_device_fault_gpu_test.xml and .log (the device fault,
# in a process of its own, last: it leaves the context unusable),
# cuda_codegen_gpu_test.log (PASS/FAIL per case, BANDWIDTH), steps.log (the
# training steps replayed by mstep-run against ref, and the replay-after-
# failure case), examples.log (mnist_mlp and gpt_train lazy and captured),
# bench.log (--bench),
# sanitize.log (MSTEP_SANITIZE=1), summary.txt.
# Exit code: 0 all passed, 77 no usable GPU, else the first failure's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/report}
mkdir -p "$out"

# libcublasLt.so.13: the loader's cache, the CUDA toolkit, then pip's
# nvidia-cublas wheel (PyTorch's) under any nvidia package path.
find_cublaslt() {
  local path dir
  path=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13 /{print $NF; exit}')
  if [ -n "$path" ]; then dirname "$path"; return 0; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda*/lib64 \
             /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libcublasLt.so.13" ]; then echo "$dir"; return 0; fi
  done
  for python in python3 /usr/bin/python3; do
    command -v "$python" > /dev/null 2>&1 || continue
    for dir in $("$python" -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null); do
      path=$(find "$dir" -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
      if [ -n "$path" ]; then dirname "$path"; return 0; fi
    done
  done
  return 1
}
cublaslt_dir=$(find_cublaslt || true)

# libcudnn.so.9 (about 1 GB with its engines: never bundled). The binary
# searches itself (lib/backends/cuda/CudnnApi.h: the loader's path,
# $MSTEP_CUDNN_LIBRARY, the toolkit's lib64, python3's nvidia.cudnn);
# this finds it the same way and, where the loader would not, names it
# in MSTEP_CUDNN_LIBRARY and puts its folder (with the sub-libraries it
# loads, libcudnn_graph.so.9 and the engines) on LD_LIBRARY_PATH.
find_cudnn() {
  local path dir python
  path=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
  if [ -n "$path" ]; then echo "$path"; return 0; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda*/lib64 \
             /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libcudnn.so.9" ]; then echo "$dir/libcudnn.so.9"; return 0; fi
  done
  for python in python3 /usr/bin/python3; do
    command -v "$python" > /dev/null 2>&1 || continue
    dir=$("$python" -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    if [ -n "$dir" ] && [ -e "$dir/libcudnn.so.9" ]; then echo "$dir/libcudnn.so.9"; return 0; fi
  done
  return 1
}
cudnn_library=$(find_cudnn || true)
cudnn_dir=
if [ -n "$cudnn_library" ]; then
  cudnn_dir=$(dirname "$cudnn_library")
  export MSTEP_CUDNN_LIBRARY=${MSTEP_CUDNN_LIBRARY:-$cudnn_library}
fi

# libnccl.so.2 for the collective steps (never bundled): the loader's,
# the toolkit's, or python3's nvidia.nccl wheel, named in MSTEP_NCCL_LIBRARY.
find_nccl() {
  local path dir python
  path=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  if [ -n "$path" ]; then echo "$path"; return 0; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libnccl.so.2" ]; then echo "$dir/libnccl.so.2"; return 0; fi
  done
  for python in python3 /usr/bin/python3; do
    command -v "$python" > /dev/null 2>&1 || continue
    dir=$("$python" -c 'import os, nvidia.nccl as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    if [ -n "$dir" ] && [ -e "$dir/libnccl.so.2" ]; then echo "$dir/libnccl.so.2"; return 0; fi
  done
  return 1
}
nccl_library=$(find_nccl || true)
[ -z "$nccl_library" ] || export MSTEP_NCCL_LIBRARY=${MSTEP_NCCL_LIBRARY:-$nccl_library}

# Unpacks the bundle into $1: tar with xz, or python3's tarfile (its
# lzma module) where this machine has no xz (or MSTEP_BUNDLE_UNPACK=python:
# the packaging test's check of that way).
unpack_into() {
  bundle=$1/mstep_gpu
  if [ "${MSTEP_BUNDLE_UNPACK:-}" != python ] && command -v xz > /dev/null 2>&1; then
    tar -xJf "$here/mstep_gpu_bundle.tar.xz" -C "$1" && return 0
  else
    python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    if hasattr(tarfile, "data_filter"):
        t.extractall(sys.argv[2], filter="data")
    else:
        t.extractall(sys.argv[2])' "$here/mstep_gpu_bundle.tar.xz" "$1" && return 0
  fi
  echo "run.sh: cannot unpack into $1" >&2
  return 1
}
# MSTEP_GPU_SECTIONS (comma-separated; default all): which of codegen,
# steps, examples and bench run, to fit a run into the GPU machine's
# time (the driver tests and the fault run always run). summary.txt has
# each section's time.
want() { [[ ",${MSTEP_GPU_SECTIONS:-codegen,steps,examples,bench}," == *",$1,"* ]]; }
timings=
# Runs a command with the bundle's libraries, cuBLASLt's and cuDNN's first
# on the loader's path.
with_libs() {
  LD_LIBRARY_PATH="$bundle/lib${cublaslt_dir:+:$cublaslt_dir}${cudnn_dir:+:$cudnn_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}
# Runs the test binary from $bundle: run_test NAME TIMEOUT GTEST_FILTER.
run_test() {
  with_libs \
    timeout "$2" "$bundle/bin/cuda_driver_gpu_test" --kernel_dir="$bundle/kernels" \
    --gtest_filter="$3" --gtest_output=xml:"$out/$1.xml" > "$out/$1.log" 2>&1
}
work=$(mktemp -d /tmp/mstep_gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  echo "CPU threads: $(nproc)"
  echo "libcublasLt.so.13: ${cublaslt_dir:-not found (the cuBLASLt tests fail)}"
  echo "libcudnn.so.9: ${cudnn_library:-not found (the cuDNN SDPA tests fail)}"
  echo "libnccl.so.2: ${nccl_library:-not found (the NCCL step, gpt_train_ddp, fails)}"
  unpack_into "$work"
  cat "$bundle/MANIFEST" 2>/dev/null || echo "MANIFEST: none (the bundle did not unpack)"
} > "$out/environment.txt"
run_test cuda_driver_gpu_test 240 '-CudaDeviceFaultGpuTest.*'
status=$?
if [ "$status" = 126 ]; then
  # /tmp mounted noexec: unpack next to this script instead.
  echo "run.sh: cannot execute from /tmp, unpacking next to run.sh" | tee -a "$out/environment.txt"
  mkdir -p "$here/unpacked"
  unpack_into "$here/unpacked"
  run_test cuda_driver_gpu_test 240 '-CudaDeviceFaultGpuTest.*'
  status=$?
fi
# Whole training steps (when bundled): the cuda file replayed 4 times by
# mstep-run, its outputs against ref's. steps.log has each step's figures
# (mstep-run --time) and the comparison, tensor by tensor.
# A step's extra mstep-run arguments (a plugin, its inputs): its .args
# file, with @BUNDLE@ for the bundle's folder; sets `extra`.
extra_args() {
  extra=()
  if [ -f "${1%.cuda.mstep}.args" ]; then
    read -ra extra < <(sed "s|@BUNDLE@|$bundle|g" "${1%.cuda.mstep}.args")
  fi
}
steps_status=
if [ -d "$bundle/steps" ] && want steps; then
  section_start=$SECONDS
  steps_status=0
  # Each step three times: kernel by kernel, then through one CUDA graph
  # (mstep-run --device-graph), then kernel by kernel with every cuBLASLt
  # epilogue (bias, ReLU/GELU, bias gradient) run as the plan's fallback
  # kernels (MSTEP_CUDA_NO_EPILOGUES=1: what a device whose cuBLASLt has no
  # algorithm for an epilogue runs; MSTEP_LOG_FALLBACK=1 lists them).
  for step in "$bundle"/steps/*.cuda.mstep; do
    for mode in "" --device-graph no-epilogues; do
      name=$(basename "$step" .cuda.mstep)${mode:+ $mode}
      extra_args "$step"
      flags=()
      fallback=0
      case "$mode" in
        no-epilogues) fallback=1 ;;
        ?*) flags=("$mode") ;;
      esac
      {
        echo "== $name"
        MSTEP_CUDA_NO_EPILOGUES=$fallback MSTEP_LOG_FALLBACK=$fallback with_libs \
          timeout 120 "$bundle/bin/mstep-run" "${extra[@]}" "$step" "${flags[@]}" --steps 4 --time --outputs "$work/got.safetensors" 2>&1 &&
          python3 "$bundle/bin/compare_step_outputs.py" "${step%.cuda.mstep}.expected.safetensors" \
            "$work/got.safetensors" "${step%.cuda.mstep}.tolerance"
        result=$?
        echo "$name: $([ $result = 0 ] && echo PASS || echo "FAIL (exit $result)")"
      } >> "$out/steps.log" 2>&1
      [ "$result" = 0 ] || steps_status=$result
    done
  done
  # The replay-after-failure case (issue 22 §4): the mnist_mlp step with
  # class index 12 (of 10) at step 1 of 4, through one CUDA graph and kernel
  # by kernel. Step 1 must fail naming the target and C; the graph's weights
  # after it must equal those after step 0 alone, bit for bit (the guarded
  # update wrote them back unchanged); and its 3 good steps must equal the
  # same run kernel by kernel, bit for bit.
  mnist=$bundle/steps/mnist_mlp.cuda.mstep
  if [ -f "$mnist" ]; then
    {
      echo "== replay after failure (mnist_mlp, class index 12 at step 1)"
      printf '%s\n' '* 0 0' > "$work/exact.tolerance"
      expect='mstep::nll_loss: target 12 at position 0 is out of range for C = 10 classes'
      failure_case() {
        local mode
        for mode in --device-graph ""; do
          with_libs timeout 120 "$bundle/bin/mstep-run" "$mnist" $mode --steps 4 --bad-value y:1:12 \
            --outputs "$work/failed${mode:+_graph}.safetensors" > "$work/failed.txt" 2>&1 || return 1
          cat "$work/failed.txt"
          grep '^step 1 failed: ' "$work/failed.txt" | grep -qF "$expect" ||
            { echo "no 'step 1 failed: ... $expect'"; return 1; }
        done
        echo "-- the graph's 3 good steps against kernel by kernel (bitwise)"
        python3 "$bundle/bin/compare_step_outputs.py" "$work/failed.safetensors" \
          "$work/failed_graph.safetensors" "$work/exact.tolerance" || return 1
        echo "-- the weights after the failed step against step 0 alone (bitwise)"
        with_libs timeout 120 "$bundle/bin/mstep-run" "$mnist" --device-graph --steps 2 \
          --bad-value y:1:12 --outputs "$work/after_failure.safetensors" > /dev/null 2>&1 || return 1
        with_libs timeout 120 "$bundle/bin/mstep-run" "$mnist" --device-graph --steps 1 \
          --outputs "$work/one_step.safetensors" > /dev/null 2>&1 || return 1
        python3 "$bundle/bin/compare_step_outputs.py" "$work/one_step.safetensors" \
          "$work/after_failure.safetensors" "$work/exact.tolerance"
      }
      failure_case
      result=$?
      echo "replay after failure: $([ $result = 0 ] && echo PASS || echo "FAIL (exit $result)")"
    } >> "$out/steps.log" 2>&1
    [ "$result" = 0 ] || steps_status=$result
  fi
  timings+="steps $((SECONDS - section_start)) s; "
fi
# The examples themselves (when bundled), lazily and captured, from the
# disk cache filled for cuda: examples.log (test/cuda/gpu/run_examples.sh).
examples_status=
if [ -d "$bundle/examples" ] && [ "$status" != 77 ] && want examples; then
  section_start=$SECONDS
  with_libs bash "$bundle/bin/run_examples.sh" "$bundle" "$out" "$work" > "$out/examples.log" 2>&1
  examples_status=$?
  timings+="examples $((SECONDS - section_start)) s; "
fi
# With MSTEP_SANITIZE=1: each training step replayed once under
# compute-sanitizer's initcheck and memcheck (the GPU machine's toolkit);
# sanitize.log counts the reports per kernel (a bf16 GPT step read 1.24 M
# never-written 2-byte values in an H200 run, from kernels not yet named).
if [ "${MSTEP_SANITIZE:-0}" = 1 ] && [ -d "$bundle/steps" ]; then
  sanitizer=$(ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  for step in "$bundle"/steps/*.cuda.mstep; do
    extra_args "$step"
    for tool in initcheck memcheck; do
      echo "== $(basename "$step" .cuda.mstep) $tool"
      with_libs \
        timeout 200 "${sanitizer:-compute-sanitizer}" --tool "$tool" --print-limit 1000000 \
        "$bundle/bin/mstep-run" "${extra[@]}" "$step" --steps 1 > "$work/sanitize.txt" 2>&1
      # "=========     at KERNEL+0x1f0 [in FILE]" follows each report;
      # cuKernelGetParamInfo's answers to the parameter probe are not errors.
      sed -n 's/^=========     at \(.*\)+0x[0-9a-f]*\( in .*\)\{0,1\}$/\1/p' "$work/sanitize.txt" | sort | uniq -c |
        sort -rn | head -20
      grep -v cuKernelGetParamInfo "$work/sanitize.txt" | grep "Program hit" | sort | uniq -c | head -5
      grep "ERROR SUMMARY" "$work/sanitize.txt"
    done
  done > "$out/sanitize.log" 2>&1
fi
# The GPT-mini bf16 step against PyTorch on this GPU (when bundled, with
# --bench): bench.log has mstep-run's replay figures (--time: median step
# time, through the read of the loss) and torch_steps.py's RESULT lines;
# profile.log the default plan's time per step (mstep-run --profile).
if [ -d "$bundle/bench" ] && want bench; then
  section_start=$SECONDS
  {
    cat "$bundle/bench/plans.txt"
    echo "== mstep replay (mstep-run, cuda plan compiled by mstep-compile)"
    with_libs \
      timeout 120 "$bundle/bin/mstep-run" "$bundle/bench/gpt_bench.cuda.mstep" --steps 50 --time 2>&1
    echo "== the same, a kernel per row op (MSTEP_CUDA_ROW_REDUCTION=block)"
    with_libs \
      timeout 120 "$bundle/bin/mstep-run" "$bundle/bench/gpt_bench.block.cuda.mstep" --steps 50 \
      --time 2>&1
    echo "== the same, the first forms (thread, MSTEP_CUDA_OPTIMIZER=per_tensor, MSTEP_CUDA_COLUMN_REDUCTION=thread)"
    with_libs \
      timeout 120 "$bundle/bin/mstep-run" "$bundle/bench/gpt_bench.first.cuda.mstep" --steps 50 \
      --time 2>&1
    echo "== mstep replay through one CUDA graph (mstep-run --device-graph)"
    with_libs \
      timeout 120 "$bundle/bin/mstep-run" "$bundle/bench/gpt_bench.cuda.mstep" --steps 50 --time \
      --device-graph 2>&1
    # Where the step's time goes, plan step by plan step (a timing event
    # after each; not a timing run): profile.log.
    echo "== the default plan profiled (mstep-run --profile, 10 steps): profile.log"
    with_libs \
      timeout 120 "$bundle/bin/mstep-run" "$bundle/bench/gpt_bench.cuda.mstep" --steps 10 \
      --profile > "$out/profile.log" 2>&1
    grep -A12 "^mstep cuda profile" "$out/profile.log"
    echo "== PyTorch $(python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())' 2>&1)"
    timeout 400 python3 "$bundle/bench/torch_steps.py" --threads 4 --cases gpt --device cuda \
      --autocast bf16 --modes "${MSTEP_BENCH_TORCH_MODES:-eager,compile,cudagraph}" 2>&1 | grep -v Warning
  } > "$out/bench.log" 2>&1
  timings+="bench $((SECONDS - section_start)) s; "
fi
# The compile half's kernels (built here, run from the bundle's files);
# its matmul steps are cuBLASLt calls, so cuBLASLt's folder is on the path.
codegen_status=
if [ -x "$bundle/bin/cuda_codegen_gpu_test" ] && want codegen; then
  section_start=$SECONDS
  with_libs \
    timeout 120 "$bundle/bin/cuda_codegen_gpu_test" --case_dir="$bundle/codegen_cases" \
    > "$out/cuda_codegen_gpu_test.log" 2>&1
  codegen_status=$?
  timings+="codegen $((SECONDS - section_start)) s; "
fi
run_test cuda_device_fault_gpu_test 30 'CudaDeviceFaultGpuTest.*'
fault_status=$?
cat "$out/cuda_driver_gpu_test.log" "$out/cuda_device_fault_gpu_test.log"
[ -n "$codegen_status" ] && cat "$out/cuda_codegen_gpu_test.log"
[ -n "$steps_status" ] && cat "$out/steps.log"
[ -n "$examples_status" ] && cat "$out/examples.log"
[ -f "$out/bench.log" ] && cat "$out/bench.log"
if [ -n "$cublaslt_dir" ]; then echo "libcublasLt.so.13 from $cublaslt_dir"; else echo "libcublasLt.so.13 not found"; fi
if [ -n "$cudnn_library" ]; then echo "libcudnn.so.9 from $cudnn_library"; else echo "libcudnn.so.9 not found"; fi
{
  echo "cuda_driver_gpu_test exit code: $status"
  echo "cuda_device_fault_gpu_test exit code: $fault_status"
  echo "cuda_codegen_gpu_test exit code: ${codegen_status:-not bundled}"
  echo "training steps (steps.log) exit code: ${steps_status:-not bundled}"
  echo "examples (examples.log) exit code: ${examples_status:-not run}"
  echo "section times: ${timings:-none}(total $SECONDS s)"
} | tee "$out/summary.txt"
if [ "$status" = 0 ] && [ "$fault_status" != 0 ] && [ "$fault_status" != 77 ]; then status=$fault_status; fi
if [ "$status" = 0 ] && [ -n "$codegen_status" ] && [ "$codegen_status" != 0 ] && [ "$codegen_status" != 77 ]; then
  status=$codegen_status
fi
if [ "$status" = 0 ] && [ -n "$steps_status" ] && [ "$steps_status" != 0 ]; then status=$steps_status; fi
if [ "$status" = 0 ] && [ -n "$examples_status" ] && [ "$examples_status" != 0 ]; then status=$examples_status; fi
exit $status
RUN
chmod +x "$out/run.sh"
echo "gpu_check.sh: $tarball ($((size / 1024)) KiB) and $out/run.sh"
