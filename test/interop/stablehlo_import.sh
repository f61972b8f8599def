#!/usr/bin/env bash
# The interop test of StableHLO in: JAX lowers and runs two programs
# (jax_stablehlo_programs.py: an MLP training step with hand-written SGD,
# a transformer block's forward), and stablehlo_import_worker imports each
# module with mstep::import_stablehlo, runs it on DEVICE and compares with
# JAX's results within the tolerances the script derives.
#
#   stablehlo_import.sh WORKER DEVICE
#
# JAX comes from PyPI, pinned, in the virtual environment that
# bench/peers/setup_venv.sh makes once ($MSTEP_INTEROP_VENV, default
# ~/.cache/mstep/interop-venv), shared with stablehlo_interop.sh. When it
# is missing and cannot be installed (no network), the test is skipped
# (exit 77, which ctest reports as not run), saying why.
set -euo pipefail
WORKER=$1 DEVICE=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV=${MSTEP_INTEROP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mstep/interop-venv}
mkdir -p "$(dirname "$VENV")"
(
  flock 9
  bash "$root/bench/peers/setup_venv.sh" "$VENV" jax >/dev/null
) 9>"$VENV.lock" || true
if [ ! -f "$VENV/jax.ok" ]; then
  reason=$(cat "$VENV/jax.skip" 2>/dev/null || echo "no $VENV/jax.ok was written")
  rm -f "$VENV/jax.skip"  # the next run tries again
  echo "stablehlo_import: SKIPPED: JAX cannot be installed from PyPI into $VENV: $reason" >&2
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$VENV/bin/python" "$here/jax_stablehlo_programs.py" --dir "$dir"
for program in mlp_step transformer_forward; do
  "$WORKER" "$dir" "$program" "$DEVICE"
done
