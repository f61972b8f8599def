#!/usr/bin/env bash
# Compile here, run there (scripts/gpu_check.sh's training steps): mnist_mlp's
# replay step exported on ref with fusion off, compiled for cuda by
# mstep-compile without a GPU; mstep-run loads it where a GPU is and, here,
# says why it cannot run it. mstep-compile's errors for inputs it cannot
# compile; compare_step_outputs.py passes equal outputs and fails changed
# ones.
#   aot_compile_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
root=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
compile=$build/tools/mstep-compile/mstep-compile
run=$build/tools/mstep-run/mstep-run
mnist=$build/examples/mnist_mlp
export MSTEP_CACHE=
cd "$tmp"

# (mnist_mlp exits 1 when 4 steps leave the accuracy under 50%.)
MSTEP_FUSE=0 "$mnist" --synthetic --device ref --mode replay --max-steps 4 --save ref.mstep > /dev/null
[ -s ref.mstep ] || fail "mnist_mlp saved no step"
"$compile" ref.mstep --device cuda -o cuda.mstep > log 2>&1 || fail "mstep-compile: $(cat log)"
grep -q "cuda, 2 segment(s)" log || fail "unexpected report: $(cat log)"
# Each segment's plan summarized (the launches a replay makes, by kind).
grep -Eq "^mstep-compile: segment 1: [0-9]+ steps: [0-9]+ kernel launches \([0-9]+ copies, [0-9]+ row-wise, [0-9]+ fused\), [0-9]+ cuBLASLt \([0-9]+ transposed, [0-9]+ with an epilogue\), [0-9]+ cuDNN; [0-9]+ aliases; arena" log ||
  fail "no plan summary for segment 1: $(cat log)"
[ -s cuda.mstep ] || fail "no cuda.mstep"
if "$run" cuda.mstep --list > log 2>&1; then
  grep -q "cuda" log || fail "mstep-run --list does not name cuda: $(cat log)"
else
  grep -q "exported for backend 'cuda', which cannot run here: cuda: unavailable" log ||
    fail "mstep-run's error does not say why cuda cannot run: $(cat log)"
fi

# Errors: a step exported with fusion on, a backend without an
# ahead-of-time compile, a step exported on cpu, a file that is no step.
expect_error() {  # expect_error WHAT TEXT ARGS...
  local what=$1 text=$2
  shift 2
  "$compile" "$@" > log 2>&1
  local rc=$?
  [ "$rc" = 1 ] || fail "$what: exit $rc, expected 1: $(cat log)"
  grep -q -- "$text" log || fail "$what: the error does not say '$text': $(cat log)"
}
"$mnist" --synthetic --device ref --mode replay --max-steps 4 --save fused.mstep > /dev/null
expect_error "fused" "export it again with MSTEP_FUSE=0" fused.mstep --device cuda -o x.mstep
expect_error "cpu target" "cpu cannot compile ahead of time without its device" \
  ref.mstep --device cpu -o x.mstep
MSTEP_FUSE=0 "$mnist" --synthetic --device cpu --mode replay --max-steps 4 --save cpu.mstep > /dev/null
expect_error "cpu export" "export it on ref" cpu.mstep --device cuda -o x.mstep
echo "not a step" > junk.mstep
expect_error "junk" "junk.mstep" junk.mstep --device cuda -o x.mstep
[ ! -e x.mstep ] || fail "a failed compile wrote x.mstep"
"$compile" ref.mstep --device nosuch -o x.mstep > log 2>&1
[ $? = 2 ] && grep -q "no compile half for --device nosuch" log || fail "bad --device: $(cat log)"

# The comparator: equal outputs pass, a changed weight fails.
"$run" ref.mstep --steps 2 --outputs a.safetensors > /dev/null || fail "mstep-run on ref"
printf '* 1e-4 0\n' > tolerance
python3 "$root/test/cuda/gpu/compare_step_outputs.py" a.safetensors a.safetensors tolerance > log ||
  fail "equal outputs do not compare equal: $(cat log)"
python3 - a.safetensors b.safetensors <<'PY'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
size = struct.unpack_from("<Q", data, 0)[0]
info = json.loads(data[8:8 + size])["fc2.weight"]
at = 8 + size + info["data_offsets"][0] + 4 * 7
value = struct.unpack_from("<f", data, at)[0]
struct.pack_into("<f", data, at, value + 0.01)
open(sys.argv[2], "wb").write(data)
PY
python3 "$root/test/cuda/gpu/compare_step_outputs.py" a.safetensors b.safetensors tolerance > log &&
  fail "a changed weight compares equal: $(cat log)"
grep -q "^FAIL fc2.weight" log || fail "the comparison does not name fc2.weight: $(cat log)"
echo "aot_compile_test: ok"
