#!/usr/bin/env bash
# The recipe of the stand-alone C training example (train_mlp.c):
# 1. mnist_mlp saves its captured training step, on ref with fusion off
#    (the form mstep-aot compiles; --synthetic data here);
# 2. mstep-aot turns it into libstep.so + step.h + step.bin (the values);
# 3. cc builds train_mlp.c (C11) with the header, the shared C data code and
#    libstep.so; it trains from step 5 to STEPS and prints the losses.
#
#   build_and_run.sh BUILD_DIR CC WORK_DIR STEPS [MNIST_MLP_FLAGS...]
# MNIST_MLP_FLAGS (e.g. --autocast bf16) go to the exporting mnist_mlp run.
# Exit status: 77 when mstep-aot refuses the step (its function still calls
# out to the runtime for some ops; the message lists them), else the
# first failing command's.
set -euo pipefail
build=$1
cc=$2
work=$3
steps=$4
shift 4
src=$(cd "$(dirname "$0")/../.." && pwd)
cd "$work"
MSTEP_FUSE=0 "$build/examples/mnist_mlp" --synthetic --device ref --mode replay --max-steps 4 \
  --save step.mstep "$@" >export.log 2>&1 || { rc=$?; [[ $rc -eq 1 ]] || { cat export.log >&2; exit $rc; }; }
rc=0
"$build/tools/mstep-aot/mstep-aot" step.mstep -o libstep.so --header step.h --data step.bin \
  >aot.log 2>&1 || rc=$?
if [[ $rc -ne 0 ]]; then
  cat aot.log >&2
  grep -q "calls out to the runtime" aot.log && exit 77
  exit $rc
fi
"$cc" -std=c11 -O2 -Wall -Wextra -Wpedantic -I. -I"$src" "$src/examples/aot_c/train_mlp.c" \
  "$src/examples/common/mnist_data.c" -L. -lstep -lz -lm -Wl,-rpath,"$work" -o train_mlp
./train_mlp step.bin --first-step 4 --steps "$steps" --synthetic
