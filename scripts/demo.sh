#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target lazy_demo
./build/examples/lazy_demo
