#!/usr/bin/env bash
# The examples themselves on the GPU (issue 22 §4), run by gpu_bundle/run.sh
# with the bundle's libraries on LD_LIBRARY_PATH:
#
#   run_examples.sh BUNDLE OUT WORK [DEVICE]
#
# (DEVICE: cuda; ctest -R cross_device_cache runs it here on xla.)
# scripts/gpu_check.sh ran each example here on ref with the disk cache
# filled for cuda (MSTEP_CACHE=<dir>,,,cuda) and bundled the cache, the
# example binaries and libmstep_compiler's runtime-only stand-in (no MLIR
# there). Each example then runs on cuda lazily and captured (Graph
# capture: its replays are CUDA graph launches) with MSTEP_CACHE on a copy
# of that cache: no graph compiles (MSTEP_LOG_RECOMPILES names any; the
# stand-in would refuse it); compare_example_losses.py checks the lazy and
# replayed losses are equal as printed and near ref's. Each example's
# "mode ..." line has its step time (wall_ms_per_step: through the read of
# the loss) and host time per step; lazy over replayed is printed.
# examples.log gets everything; exit status 0 when every example passed.
#
# BUNDLE/examples/NAME.args: "EXAMPLE STEPS_FLAG STEPS ARGS..." (@EXAMPLES@:
# that folder); NAME.tolerance: the loss tolerance relative to ref's;
# NAME.ref.txt: ref's output (the fill run).
set -uo pipefail
bundle=$1
out=$2
work=$3
device=${4:-cuda}
examples=$bundle/examples
mkdir -p "$out/examples"
# The disk cache refuses a directory others can write (it runs its code).
mkdir -p "$work" && rm -rf "$work/cache" && cp -r "$examples/cache" "$work/cache" &&
  chmod -R go-rwx "$work/cache" || { echo "run_examples.sh: cannot copy the cache to $work"; exit 1; }
status=0
for args in "$examples"/*.args; do
  name=$(basename "$args" .args)
  read -r example steps_flag steps rest < <(sed "s|@EXAMPLES@|$examples|g" "$args")
  echo "== $name: $example $rest $steps_flag $steps"
  result=0
  for mode in lazy replay; do
    log=$out/examples/$name.$mode.txt
    MSTEP_CACHE=$work/cache MSTEP_LOG_RECOMPILES=1 timeout 300 \
      "$bundle/bin/$example" --device "$device" --mode $mode $rest "$steps_flag" "$steps" > "$log" 2>&1
    rc=$?
    # 1: a short run did not reach the example's accuracy or loss bar.
    if [ $rc != 0 ] && [ $rc != 1 ]; then
      echo "$mode: exit $rc"; tail -5 "$log"; result=$rc
    fi
    if grep -q "compiling graph" "$log"; then
      echo "$mode: a graph was compiled (not in the filled cache)"; grep "compiling graph" "$log"; result=1
    fi
    grep -E "^mode |^steps [0-9]+-[0-9]+: step_ms|^replay graph" "$log" | sed "s/^/$mode: /"
  done
  python3 "$bundle/bin/compare_example_losses.py" "$examples/$name.ref.txt" \
    "$out/examples/$name.lazy.txt" "$out/examples/$name.replay.txt" "$(cat "$examples/$name.tolerance")" ||
    result=1
  # Lazy over replayed, per step (gpt_train's wall_ms_per_step).
  lazy=$(grep -oE 'wall_ms_per_step [0-9.]+' "$out/examples/$name.lazy.txt" | cut -d' ' -f2)
  replay=$(grep -oE 'wall_ms_per_step [0-9.]+' "$out/examples/$name.replay.txt" | cut -d' ' -f2)
  if [ -n "$lazy" ] && [ -n "$replay" ]; then
    echo "lazy / replayed step time: $(awk -v a="$lazy" -v b="$replay" 'BEGIN { printf "%.2f", a / b }')"
  fi
  echo "$name: $([ $result = 0 ] && echo PASS || echo "FAIL (exit $result)")"
  [ $result = 0 ] || status=$result
done
exit $status
