#!/usr/bin/env bash
# Filling the disk cache for another device (MSTEP_CACHE=<dir>,,,<backend>,
# lib/runtime/CrossDeviceCache.h) and running from it without the compiler
# (lib/compiler/absent's libmstep_compiler first on LD_LIBRARY_PATH): the
# way the GPU check runs the examples on a GPU machine that has no MLIR
# (scripts/gpu_check.sh). Here the other device is xla (its compile half
# compiles ahead of time and its stored form loads without the compiler),
# filled from ref:
# - the GPU check's own runner (test/cuda/gpu/run_examples.sh, on xla):
#   mnist_mlp and gpt_train, lazy and replayed from the filled cache with
#   the stand-in: nothing compiles, lazy and replayed losses equal as
#   printed and near ref's (compare_example_losses.py);
# - gpt_train's losses from the cache equal a normal xla run's;
# - a graph that is not in the cache (another batch size) fails naming the
#   stand-in and how to fill the cache, with exit status 2, not a crash;
# - a fourth field that names no backend is a warning naming the backends.
#
#   cross_device_cache.sh MNIST_MLP GPT_TRAIN ABSENT_COMPILER_DIR SOURCE_DIR
set -euo pipefail
mnist_mlp=$1
gpt_train=$2
absent=$3
root=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f ${2:-} ]] && cat "$2" >&2; exit 1; }
[[ -f $absent/libmstep_compiler.so ]] || fail "no stand-in compiler library in $absent"
runtime_only() { env LD_LIBRARY_PATH="$absent${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

# The GPU check's layout: bin/ (the examples, the runner), examples/ (the
# cache, each example's arguments, tolerance and ref's output).
bundle=$tmp/bundle
examples=$bundle/examples
mkdir -p "$bundle/bin" "$examples"
ln -s "$mnist_mlp" "$bundle/bin/mnist_mlp"
ln -s "$gpt_train" "$bundle/bin/gpt_train"
cp "$root/test/cuda/gpu/run_examples.sh" "$root/test/cuda/gpu/compare_example_losses.py" "$bundle/bin/"
gpt_args="--dim 32 --layers 1 --heads 2 --seq 32 --batch 4 --vocab 64 --samples 0 --dropout 0.1"
fill() {  # NAME TOLERANCE EXAMPLE STEPS_FLAG STEPS ARGS...
  local name=$1 tolerance=$2 example=$3 steps_flag=$4 steps=$5
  shift 5
  local rc=0
  MSTEP_CACHE="$examples/cache,,,xla" "$bundle/bin/$example" --device ref --mode replay "$@" \
    "$steps_flag" "$steps" > "$examples/$name.ref.txt" 2>&1 || rc=$?
  [[ $rc -le 1 ]] || fail "$example on ref exited $rc" "$examples/$name.ref.txt"
  grep -q "is not stored for xla" "$examples/$name.ref.txt" &&
    fail "$name: a graph was not stored for xla" "$examples/$name.ref.txt"
  echo "$example $steps_flag $steps $*" > "$examples/$name.args"
  echo "$tolerance" > "$examples/$name.tolerance"
}
fill mnist_mlp 1e-4 mnist_mlp --max-steps 6 --synthetic --log-every 1
# shellcheck disable=SC2086
fill gpt_train 1e-3 gpt_train --steps 6 $gpt_args
rm -f "$examples"/cache/ref-*.mstep
runtime_only bash "$bundle/bin/run_examples.sh" "$bundle" "$tmp/out" "$tmp/work" xla \
  > "$tmp/examples.log" 2>&1 || fail "run_examples.sh on xla from the filled cache" "$tmp/examples.log"
for name in mnist_mlp gpt_train; do
  grep -q "^$name: PASS" "$tmp/examples.log" || fail "$name did not pass" "$tmp/examples.log"
done
grep -q "^lazy / replayed step time: " "$tmp/examples.log" || fail "no lazy / replayed ratio" "$tmp/examples.log"

# The cache's graphs are xla's own: the losses of a normal xla run.
losses() { grep -oE 'loss [0-9.]+' "$1"; }
# shellcheck disable=SC2086
"$gpt_train" --device xla --mode lazy --steps 6 $gpt_args > "$tmp/xla.txt" 2>&1
diff <(losses "$tmp/xla.txt") <(losses "$tmp/out/examples/gpt_train.lazy.txt") > "$tmp/diff" ||
  fail "losses from the cache differ from a normal xla run's" "$tmp/diff"
cat "$tmp/examples.log"
echo "mnist_mlp and gpt_train, lazy and replayed, ran on xla from the filled cache without the compiler"

# A graph the cache does not have: an error naming the stand-in, exit 2.
rc=0
# shellcheck disable=SC2086
runtime_only env MSTEP_CACHE="$tmp/work/cache" "$gpt_train" $gpt_args --batch 2 --steps 2 \
  --device xla --mode lazy > "$tmp/miss" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "a graph missing from the cache: exit $rc, not 2" "$tmp/miss"
grep -q "needs the compiler, and this libmstep_compiler is the runtime-only stand-in" "$tmp/miss" ||
  fail "the miss does not name the stand-in" "$tmp/miss"
grep -q "MSTEP_CACHE=<dir>,,,<backend>" "$tmp/miss" || fail "the miss does not say how to fill the cache" "$tmp/miss"

# A fourth field that names no backend.
rc=0
env MSTEP_CACHE="$tmp/cache2,,,nosuch" "$mnist_mlp" --synthetic --max-steps 2 --device ref \
  > "$tmp/bad" 2>&1 || rc=$?
[[ $rc -le 1 ]] || fail "mnist_mlp with an unknown backend in MSTEP_CACHE exited $rc" "$tmp/bad"
grep -q "names backend 'nosuch', which this build does not have (it has .*xla" "$tmp/bad" ||
  fail "an unknown backend in MSTEP_CACHE is not named" "$tmp/bad"
echo "PASS"
