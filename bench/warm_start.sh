#!/usr/bin/env bash
# Warm start: a new gpt_train process with a populated disk cache
# (MSTEP_CACHE) reaching its first training step. One cold run fills a
# fresh cache directory; then WARM_RUNS warm runs; prints the median:
#   warm_start_ms <x> cold_start_ms <y>
# Usage: bench/warm_start.sh [build-dir]   (default: build)
set -euo pipefail
build=${1:-build}
exe="$build/examples/gpt_train"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ready_ms() { grep -o 'first_step_ready_ms [0-9.]*' | awk '{print $2}'; }
cold=$(MSTEP_CACHE="$dir,true,1024" "$exe" --steps 1 --samples 0 | ready_ms)
warm=()
for _ in 1 2 3 4 5; do warm+=("$(MSTEP_CACHE="$dir" "$exe" --steps 1 --samples 0 | ready_ms)"); done
median=$(printf '%s\n' "${warm[@]}" | sort -n | sed -n 3p)
echo "warm_start_ms $median cold_start_ms $cold"
