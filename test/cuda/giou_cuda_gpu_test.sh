#!/usr/bin/env bash
# The GIoU custom op's CUDA kernels on a GPU (label gpu; exit 77 where cuda
# is unavailable): test/export/giou_export_worker.cpp's box-regressor step
# (giou_loss, giou_loss_backward, SGD) exported on ref with ref's losses
# and weights over 4 batches, compiled for cuda by mstep-compile (the ops'
# CUDA C++ through NVRTC), replayed by mstep-run kernel by kernel and
# through one CUDA graph, compared with ref by compare_step_outputs.py
# (f32: 1e-4 of each tensor's largest value). scripts/gpu_check.sh bundles
# the same step for a GPU machine.
#   giou_cuda_gpu_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plugin=$build/examples/libmstep_giou_plugin.so
MSTEP_FUSE=0 MSTEP_CACHE= "$build/test/mstep_giou_export_worker" "$tmp" ref 4 > /dev/null
"$build/tools/mstep-compile/mstep-compile" "$tmp/step.mstep" --device cuda --plugin "$plugin" \
  -o "$tmp/giou.cuda.mstep" > /dev/null
MSTEP_CACHE= "$build/tools/mstep-run/mstep-run" --plugin "$plugin" "$tmp/step.mstep" \
  --inputs "$tmp/inputs.safetensors" --steps 4 --outputs "$tmp/expected.safetensors" > /dev/null
printf '%s\n' '* 1e-4 0' > "$tmp/tolerance"
for mode in "" --device-graph; do
  set +e
  MSTEP_CACHE= "$build/tools/mstep-run/mstep-run" --plugin "$plugin" "$tmp/giou.cuda.mstep" $mode \
    --inputs "$tmp/inputs.safetensors" --steps 4 --outputs "$tmp/got.safetensors" > "$tmp/run.log" 2>&1
  status=$?
  set -e
  if [ "$status" != 0 ]; then
    if grep -q "cuda: unavailable" "$tmp/run.log"; then
      grep "cuda: unavailable" "$tmp/run.log" | head -1
      exit 77
    fi
    cat "$tmp/run.log"
    exit 1
  fi
  python3 "$root/test/cuda/gpu/compare_step_outputs.py" "$tmp/expected.safetensors" \
    "$tmp/got.safetensors" "$tmp/tolerance"
  echo "giou ${mode:-kernel by kernel}: PASS"
done
