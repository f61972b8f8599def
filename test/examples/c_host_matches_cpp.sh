#!/usr/bin/env bash
# The C host trains like the C++ example: examples/c_host/mnist_c.c (C API
# only) and examples/mnist_mlp.cpp (C++ API), same seed and data, must print
# the same "step N loss X" lines to 1e-5, in lazy mode and with the C host
# replaying a captured step.
#
#   c_host_matches_cpp.sh MNIST_MLP MNIST_C [DEVICE]     (DEVICE: cpu, the default, ref, neuron or xla)
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 path/to/mnist_mlp path/to/mnist_c [cpu|ref|neuron|xla]" >&2
  exit 2
fi
mnist_mlp=$1
mnist_c=$2
device=${3:-cpu}
steps=12
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs one example into $tmp/NAME.out and keeps its loss lines in
# $tmp/NAME.losses. Exit status 1 only means the short run's test accuracy
# stayed under the examples' 50% bar, which this test does not judge; any
# other failure (2: an error) fails the test.
run() {
  local name=$1
  shift
  local rc=0
  "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    echo "FAIL: $* exited with $rc:" >&2
    cat "$tmp/$name.out" >&2
    exit 1
  fi
  grep -E '^step [0-9]+ loss ' "$tmp/$name.out" >"$tmp/$name.losses" || true
  if [[ $(wc -l <"$tmp/$name.losses") -ne $steps ]]; then
    echo "FAIL: $* printed $(wc -l <"$tmp/$name.losses") loss lines, want $steps:" >&2
    cat "$tmp/$name.out" >&2
    exit 1
  fi
}

# Compares two loss files line by line: same step numbers, |loss diff| <= 1e-5.
compare() {
  local want=$1 got=$2 what=$3
  if ! awk 'NR == FNR { step[FNR] = $2; loss[FNR] = $4; n = FNR; next }
            {
              d = $4 - loss[FNR]; if (d < 0) d = -d
              if ($2 != step[FNR] || d > 1e-5) bad = 1
            }
            END { if (FNR != n) bad = 1; exit bad }' "$tmp/$want.losses" "$tmp/$got.losses"; then
    echo "FAIL: $what: the losses differ (< C++ example, > C host):" >&2
    diff "$tmp/$want.losses" "$tmp/$got.losses" >&2 || true
    exit 1
  fi
  echo "ok: $what: $steps losses agree to 1e-5 (last: $(tail -n 1 "$tmp/$got.losses"))"
}

# The synthetic set whether or not Fashion-MNIST is installed: the same
# losses on every machine. Both hosts read files through the same C code.
common=(--synthetic --max-steps "$steps" --print-losses --device "$device")
run cpp_lazy "$mnist_mlp" "${common[@]}"
run c_lazy "$mnist_c" "${common[@]}"
run c_replay "$mnist_c" "${common[@]}" --mode replay
compare cpp_lazy c_lazy "C host lazy vs C++ lazy ($device)"
compare cpp_lazy c_replay "C host replay vs C++ lazy ($device)"

# The C host released every handle (mstep_context_release succeeded).
for name in c_lazy c_replay; do
  if ! grep -q '^all handles released$' "$tmp/$name.out"; then
    echo "FAIL: $name did not release every handle:" >&2
    cat "$tmp/$name.out" >&2
    exit 1
  fi
done
