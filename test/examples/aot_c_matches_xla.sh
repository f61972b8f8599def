#!/usr/bin/env bash
# The stand-alone C example (examples/aot_c): mnist_mlp's training step
# saved, compiled by mstep-aot into libstep.so and driven by a C11 program
# with no mstep library prints, from step 5 on, the losses of
# mnist_mlp --device xla (replay mode, the same batches and RNG stream)
# within 1e-5 relative. The same under --autocast bf16 (the matmuls in bf16,
# run by oneDNN's matmul primitive through the runtime's own
# mstep_xla_gemm_bf16, linked into the object), against
# mnist_mlp --device xla --autocast bf16 in lazy mode: the printed losses
# (6 decimals) equal. Exits 77 (skipped), with mstep-aot's message, while
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

# compare_losses WANT GOT relative|printed: steps 5..$steps of GOT (the C
# program's "step N loss X") against WANT (mnist_mlp's): within 1e-5
# relative, or printing the same at mnist_mlp's 6 decimals.
compare_losses() {
  /usr/bin/python3 - "$1" "$2" "$steps" "$3" <<'PY'
import re, sys
def losses(path):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+) loss ([-0-9.e+]+)$", open(path).read(), re.M)}
want, got, steps, how = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
assert sorted(got) == list(range(5, steps + 1)), sorted(got)
for step in range(5, steps + 1):
    w, g = want[step], got[step]
    if how == "relative":
        assert abs(w - g) <= 1e-5 * abs(w), ("step", step, w, g)
    else:
        assert "%.6f" % g == "%.6f" % w, ("step", step, w, g)
print("aot_c: steps 5..%d equal mnist_mlp --device xla's losses (%s)" % (steps, how))
PY
}

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
compare_losses "$tmp/xla.out" "$tmp/c.out" relative ||
  fail "the C example's losses differ from xla's" "$tmp/c.out"

mkdir "$tmp/bf16"
bash "$src/examples/aot_c/build_and_run.sh" "$build" "$cc" "$tmp/bf16" "$steps" --autocast bf16 \
  >"$tmp/c_bf16.out" 2>"$tmp/c_bf16.err" || { cat "$tmp/c_bf16.err" >&2; fail "the bf16 C example failed" "$tmp/c_bf16.out"; }
rc=0
"$build/examples/mnist_mlp" --synthetic --device xla --mode lazy --autocast bf16 --max-steps "$steps" \
  --print-losses >"$tmp/xla_bf16.out" 2>&1 || rc=$?
[[ $rc -eq 0 || $rc -eq 1 ]] || fail "mnist_mlp --device xla --autocast bf16 exited $rc" "$tmp/xla_bf16.out"
compare_losses "$tmp/xla_bf16.out" "$tmp/c_bf16.out" printed ||
  fail "the bf16 C example's losses differ from xla's" "$tmp/c_bf16.out"
