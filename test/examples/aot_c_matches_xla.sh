#!/usr/bin/env bash
# The stand-alone C example (examples/aot_c): mnist_mlp's training step
# saved, compiled by mstep-aot into libstep.so and driven by a C11 program
# with no mstep library prints, from step 5 on, the losses of
# mnist_mlp --device xla (replay mode, the same batches and RNG stream)
# within 1e-5 relative. Exits 77 (skipped), with mstep-aot's message, while
# the step function still calls out to the runtime for some of the step's
# ops: a stand-alone step cannot call out, and nothing else is checked then.
#
#   aot_c_matches_xla.sh BUILD_DIR CC SOURCE_DIR
set -euo pipefail
build=$1
cc=$2
src=$3
steps=10
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f ${2:-} ]] && cat "$2" >&2; exit 1; }

rc=0
bash "$src/examples/aot_c/build_and_run.sh" "$build" "$cc" "$tmp" "$steps" >"$tmp/c.out" 2>"$tmp/c.err" || rc=$?
if [[ $rc -eq 77 ]]; then
  echo "SKIP: mstep-aot refuses mnist_mlp's step:" >&2
  cat "$tmp/c.err" >&2
  exit 77
fi
[[ $rc -eq 0 ]] || { cat "$tmp/c.err" >&2; fail "the C example exited $rc" "$tmp/c.out"; }
rc=0
"$build/examples/mnist_mlp" --synthetic --device xla --mode replay --max-steps "$steps" \
  --print-losses >"$tmp/xla.out" 2>&1 || rc=$?
[[ $rc -eq 0 || $rc -eq 1 ]] || fail "mnist_mlp --device xla exited $rc" "$tmp/xla.out"
/usr/bin/python3 - "$tmp/xla.out" "$tmp/c.out" "$steps" <<'PY' || fail "the C example's losses differ from xla's" "$tmp/c.out"
import re, sys
def losses(path):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+) loss ([-0-9.e+]+)$", open(path).read(), re.M)}
want, got, steps = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3])
assert sorted(got) == list(range(5, steps + 1)), sorted(got)
for step in range(5, steps + 1):
    w, g = want[step], got[step]
    assert abs(w - g) <= 1e-5 * abs(w), ("step", step, w, g)
print("aot_c: steps 5..%d equal mnist_mlp --device xla's losses within 1e-5" % steps)
PY
