#!/usr/bin/env bash
# Sets up a fresh machine, builds into build/ and runs every test (ctest).
# Ends with one summary line: passed, failed and skipped, and names the
# skipped tests (each skip says why in its own output: a missing CPU feature,
# not running as root, a data package not installed; see README "Tests").
# Tests labelled gpu need a GPU and are left out (scripts/gpu_check.sh
# bundles them for a GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir build --output-on-failure -j"$(nproc)" -LE gpu "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
total=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$log" || true)
if [ -n "$total" ] && [ -n "$failed" ]; then
  if [ "$skipped" -gt 0 ]; then
    echo "skipped tests (why each skips: README, section Tests; rerun one with ctest -V -R NAME to see its reason):"
    grep -E '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$log"
  fi
  echo "tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$status"
