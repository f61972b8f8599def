#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs the main job: gpt_train, a
# character-level GPT, first in lazy mode (trace every step, one graph per
# step compiled once and then served from the cache), then in replay mode
# (one step captured into an mstep::Graph and replayed from static
# tensors), and prints both modes' step time and host time per step.
# Extra arguments go to both runs (e.g. --steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target gpt_train
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
./build/examples/gpt_train --mode lazy "$@" | tee "$out/lazy.txt"
echo
echo "=== the same training, captured once and replayed ==="
./build/examples/gpt_train --mode replay --samples 0 "$@" | tee "$out/replay.txt" | grep -E "^step |steps in "
echo
echo "=== lazy vs replay (steady-state steps; host = step time minus time inside executables) ==="
grep -h '^mode ' "$out/lazy.txt" "$out/replay.txt"
