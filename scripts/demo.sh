#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs the main job: gpt_train, a
# character-level GPT trained in lazy mode (one graph per step, compiled
# once, then served from the cache).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target gpt_train
./build/examples/gpt_train "$@"
