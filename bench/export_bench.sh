#!/usr/bin/env bash
# Exported steps against in-process replay (issue 17's targets):
#  - mstep-run's host time per replay (outside the executables) of the
#    mnist_mlp step, next to replay_bench's in-process replay() figure, both
#    measured here, in this run: target mstep-run <= in-process + 1 us;
#  - the time mstep-run takes to load the exported gpt_train step (dlopen
#    of its kernels, oneDNN primitives recreated): target < 50 ms.
# Usage: bash bench/export_bench.sh [build-dir]   (threads: OMP_NUM_THREADS, default 1)
set -euo pipefail
build=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
dir=$(mktemp -d "${TMPDIR:-/tmp}/mstep-export-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS, $(date -u +%F)"

in_process=()
exported=()
for rep in 1 2 3; do
  line=$("$build/bench/replay_bench" --steps 300 --reps 3 --save "$dir/mlp.mstep" | tee /dev/stderr | grep -o 'replay() alone [0-9.]* us' | grep -o '[0-9.]*')
  in_process+=("$line")
  run=$("$build/tools/mstep-run/mstep-run" "$dir/mlp.mstep" --steps 300 --time | grep -o 'replay_host_us [0-9.]*' | grep -o '[0-9.]*$')
  exported+=("$run")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "mnist_mlp replay host us: in-process replay() $(median "${in_process[@]}") (runs: ${in_process[*]}), mstep-run $(median "${exported[@]}") (runs: ${exported[*]})"

"$build/examples/gpt_train" --mode replay --steps 3 --samples 0 --save "$dir/gpt.mstep" >/dev/null
loads=()
for rep in 1 2 3 4 5; do
  loads+=("$("$build/tools/mstep-run/mstep-run" "$dir/gpt.mstep" --list | grep -o "loaded in [0-9.]*" | grep -o "[0-9.]*$")")
done
echo "gpt_train exported step: load $(median "${loads[@]}") ms (runs: ${loads[*]}); $(du -k "$dir/gpt.mstep" | cut -f1) KiB"
