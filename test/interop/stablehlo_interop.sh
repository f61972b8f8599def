#!/usr/bin/env bash
# The interop test of StableHLO out: mstep exports a training step
# (test/export/export_worker.cpp: mode stablehlo, mnist_mlp; stablehlo_gpt,
# GPT-mini), a real consumer runs it step after step and run_stablehlo.py
# compares its losses and weights with mstep's ref backend.
#
#   stablehlo_interop.sh WORKER MODE jax|iree STEPS [run_stablehlo.py options]
#
# The consumers come from PyPI, pinned, in a virtual environment made once
# by bench/peers/setup_venv.sh ($MSTEP_INTEROP_VENV, default
# ~/.cache/mstep/interop-venv; later runs reuse it). When they cannot be
# installed (no network, no wheel for this platform) the test FAILS saying
# why: an interop test that did not run is not a pass.
set -euo pipefail
WORKER=$1 MODE=$2 CONSUMER=$3 STEPS=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV=${MSTEP_INTEROP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mstep/interop-venv}
mkdir -p "$(dirname "$VENV")"
# ctest runs the consumers' tests in parallel: one makes the environment.
(
  flock 9
  bash "$root/bench/peers/setup_venv.sh" "$VENV" jax iree
) 9>"$VENV.lock"
if [ ! -f "$VENV/$CONSUMER.ok" ]; then
  reason=$(cat "$VENV/$CONSUMER.skip" 2>/dev/null || echo "no $VENV/$CONSUMER.ok was written")
  rm -f "$VENV/$CONSUMER.skip"  # the next run tries again
  echo "stablehlo_interop: FAILED: the $CONSUMER consumer cannot be installed from PyPI into $VENV:" \
       "$reason. These tests need network access to PyPI once (the environment is kept);" \
       "pip's log: $VENV/pip.log" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$WORKER" "$MODE" "$dir" "$STEPS"
"$VENV/bin/python" "$here/run_stablehlo.py" --consumer "$CONSUMER" --dir "$dir" --steps "$STEPS" "$@"
