#!/usr/bin/env bash
# mstep-aot (tools/mstep-aot): a module with no callouts (an MLP forward
# with an in-place weight update) becomes a shared object whose only
# dependencies are oneDNN, libc and libm and whose one export is
# mstep_step; its header documents every argument and the temp size; a C11
# program built against the header computes what plain C loops compute
# (mlp_forward_main.c). A step with attention forward and backward
# (attention_step.mlir) builds too, with the same dependencies. A step saved
# with two segments (two_segment_worker) becomes one function whose --data
# values and in-place update a second C program checks (two_segment_main.c).
# So does a small conv net's step (conv_step.mlir: convolutions, pools, a
# sum over dims 0, 2 and 3, pad, gather, scatter_add), whose convolutions
# a C program checks against plain loops (conv_step_main.c), and a step with
# bf16 matmuls (bf16_matmul.mlir, checked by bf16_matmul_main.c), and a bf16
# conv layer's step (conv_bf16_step.mlir). A step the function
# calls out for (an all_reduce) is refused with the op named, and bad
# arguments are errors.
#
#   mstep_aot_test.sh MSTEP_AOT CC SOURCE_DIR TWO_SEGMENT_WORKER
set -euo pipefail
aot=$1
cc=$2
src=$3
worker=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f ${2:-} ]] && cat "$2" >&2; exit 1; }
cd "$tmp"

# 1. The object and its header.
"$aot" "$src/test/aot/mlp_forward.mlir" -o libstep.so --header mlp_forward.h >log 2>&1 ||
  fail "mstep-aot on mlp_forward.mlir" log
for line in "int mstep_step(const void\* const\* inputs, void\* const\* outputs, void\* temp);" \
            "  0  arg0  f32 \[8, 16\]  input$" \
            "  1  arg1  f32 \[16, 32\]  parameter$" \
            "  3  arg3  f32 \[32, 4\]  parameter, updated in place by output 1$" \
            "  0  result0  f32 \[8, 4\]  output$" \
            "  1  result1  f32 \[32, 4\]  the new value of input 3 (arg3); in place: may be input 3's buffer$" \
            "^#define MSTEP_STEP_TEMP_BYTES [1-9][0-9]*$" \
            "^#define MSTEP_STEP_OUTPUT_UPDATES {-1, 3}$"; do
  grep -q -- "$line" mlp_forward.h || fail "the header does not say: $line" mlp_forward.h
done

# 2. Its dependencies: oneDNN (the gemms), libc and libm, nothing else (no
#    OpenMP runtime, no mstep library); its one export is mstep_step.
libdir=$(dirname "$(${cc} -print-file-name=libc.so.6)")
nm -D --defined-only "$libdir/libc.so.6" "$libdir/libm.so.6" 2>/dev/null | awk '{print $3}' |
  sed 's/@.*//' | sort -u >libc_symbols
check_dependencies() { # SO [gemm|matmul]: the step has the convolutions' im2col
  # gemms (they call dnnl_sgemm) or matmuls (mstep_xla_gemm_f32/bf16 run a
  # oneDNN primitive: dnnl_primitive_execute)
  readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >needed
  grep -v -E '^(libdnnl\.so(\.[0-9]+)*|libc\.so\.6|libm\.so\.6)$' needed >others || true
  [[ ! -s others ]] || fail "$1 needs more than oneDNN, libc and libm" others
  nm -D --defined-only "$1" | awk '$2 ~ /[TtWw]/ {print $3}' >exports
  [[ "$(cat exports)" == mstep_step ]] || fail "$1 exports more than mstep_step" exports
  nm -D --undefined-only "$1" | awk '{print $2}' | sed 's/@.*//' >undefined
  if [[ -n ${2:-} ]]; then
    local entry=dnnl_sgemm
    [[ $2 == matmul ]] && entry=dnnl_primitive_execute
    grep -q '^libdnnl\.so' needed || fail "$1 does not link oneDNN" needed
    grep -q "^$entry\$" undefined || fail "the ${2}s of $1 do not call $entry" undefined
  fi
  { grep -v '^dnnl_' undefined || true; } | sort -u | comm -23 - libc_symbols >unknown
  [[ ! -s unknown ]] || fail "$1 calls symbols outside oneDNN, libc and libm" unknown
}
check_dependencies libstep.so matmul

# 3. A C11 program against the header: the step's numbers.
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I. "$src/test/aot/mlp_forward_main.c" \
  -L. -lstep -lm -Wl,-rpath,"$tmp" -o mlp_forward >log 2>&1 || fail "building the C program" log
./mlp_forward >log 2>&1 || fail "the stand-alone step's results" log

# 4. A saved step of two segments: one function, its values in --data.
MSTEP_FUSE=0 "$worker" two.mstep >log 2>&1 || fail "two_segment_worker" log
"$aot" two.mstep -o libtwo.so --header two.h --data two.bin >log 2>&1 ||
  fail "mstep-aot on a two-segment step" log
grep -q "  1  w  f32 \[4, 4\]  input, updated in place by output" two.h ||
  fail "the header does not show w updated in place" two.h
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I. "$src/test/aot/two_segment_main.c" \
  -L. -ltwo -lm -Wl,-rpath,"$tmp" -o two_segment >log 2>&1 || fail "building the C program" log
./two_segment two.bin >log 2>&1 || fail "the two-segment step's results" log

# 4b. Attention (sdpa and its backward) is a loop nest in the function: a
#     step with it is accepted and needs nothing more.
"$aot" "$src/test/aot/attention_step.mlir" -o libattention.so --header attention.h >log 2>&1 ||
  fail "mstep-aot on attention_step.mlir (the step should not call out)" log
check_dependencies libattention.so

# 4d. Convolutions and their gradients (im2col + dnnl_sgemm), pools, a sum
#     over dims that are not one block, pad, gather and scatter_add are
#     loops in the function too; a C program checks the convolutions.
"$aot" "$src/test/aot/conv_step.mlir" -o libconv.so --header conv.h >log 2>&1 ||
  fail "mstep-aot on conv_step.mlir (the step should not call out)" log
check_dependencies libconv.so gemm
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I. "$src/test/aot/conv_step_main.c" \
  -L. -lconv -lm -Wl,-rpath,"$tmp" -o conv_step >log 2>&1 || fail "building the conv C program" log
./conv_step >log 2>&1 || fail "the stand-alone conv step's results" log

# 4c. --xla-memory-limit: the chain of test/passes/mstep-xla-remat.mlir
#     recomputes its cheap value, so its temp shrinks under the limit; a
#     limit that cannot be met is a compile error with the smallest one.
chain=$src/test/passes/mstep-xla-remat.mlir
"$aot" "$chain" -o libfree.so --header free.h >log 2>&1 || fail "mstep-aot on the chain" log
"$aot" "$chain" -o liblimit.so --header limit.h --xla-memory-limit=16896 >log 2>&1 ||
  fail "mstep-aot on the chain under --xla-memory-limit=16896" log
temp_of() { sed -n 's/^#define MSTEP_STEP_TEMP_BYTES \([0-9]*\)$/\1/p' "$1"; }
free_temp=$(temp_of free.h)
limit_temp=$(temp_of limit.h)
[[ -n $free_temp && -n $limit_temp && $limit_temp -le 16896 && $limit_temp -lt $free_temp ]] ||
  fail "temp $limit_temp under --xla-memory-limit=16896, $free_temp without" limit.h
rc=0
"$aot" "$chain" -o x.so --header x.h --xla-memory-limit=9000 >log 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "mstep-aot under an unmeetable limit exited $rc, expected 1" log
grep -q "the smallest limit that can be met is 16896" log ||
  fail "the error does not give the smallest limit" log
#     The limit counts the convolutions' scratch too: the smallest limit
#     the conv step can meet is its whole temp.
rc=0
"$aot" "$src/test/aot/conv_step.mlir" -o x.so --header x.h --xla-memory-limit=1000 >log 2>&1 ||
  rc=$?
[[ $rc -eq 1 ]] || fail "mstep-aot on the conv step under a limit of 1000 exited $rc, expected 1" log
grep -q "the smallest limit that can be met is $(temp_of conv.h)\$" log ||
  fail "the conv step's smallest limit is not its temp ($(temp_of conv.h) bytes)" log

# 5. A step with a callout is refused, naming the op; nothing is written.
rc=0
"$aot" "$src/test/aot/with_callout.mlir" -o callout.so --header callout.h >log 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "mstep-aot on a step with a callout exited $rc, expected 1" log
grep -q "calls out to the runtime for ops it does not compute itself: all_reduce (%" log ||
  fail "the refusal does not name all_reduce" log
[[ ! -e callout.so && ! -e callout.h ]] || fail "a refused step left files behind"

# 5b. bf16 matmuls, one with a bias folded into its epilogue, run the
#     runtime's mstep_xla_gemm_bf16 linked into the object: still only
#     oneDNN (its C API), libc and libm, one export, and each result
#     rounded once (bf16_matmul_main.c).
"$aot" "$src/test/aot/bf16_matmul.mlir" -o libbf16.so --header bf16_matmul.h >log 2>&1 ||
  fail "mstep-aot on bf16_matmul.mlir" log
check_dependencies libbf16.so
grep -q '^dnnl_primitive_execute$' undefined || fail "the bf16 gemms do not run a oneDNN primitive" undefined
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I. "$src/test/aot/bf16_matmul_main.c" \
  -L. -lbf16 -lm -Wl,-rpath,"$tmp" -o bf16_matmul >log 2>&1 || fail "building the bf16 C program" log
./bf16_matmul >log 2>&1 || fail "the stand-alone bf16 step's results" log

# 5c. bf16 convolutions (forward with a bias, both gradients) are im2col /
#     col2im loops around bf16 x bf16 -> f32 gemms: no callout, and
#     nothing beyond oneDNN, libc and libm (xla_conv_gemm_test checks the
#     numbers against ref and cpu).
"$aot" "$src/test/aot/conv_bf16_step.mlir" -o libconvbf16.so --header conv_bf16.h >log 2>&1 ||
  fail "mstep-aot on conv_bf16_step.mlir (the step should not call out)" log
check_dependencies libconvbf16.so gemm
# Their gemms are mstep_xla_gemm_bf16_f32's oneDNN bf16 matmul (dnnl_sgemm
# above is its fallback where oneDNN has no bf16 matmul).
grep -q '^dnnl_primitive_execute$' undefined ||
  fail "the bf16 conv gemms do not run a oneDNN primitive" undefined

# 6. Bad arguments.
expect_error() { # CODE TEXT COMMAND...
  local code=$1 text=$2 rc=0
  shift 2
  "$@" >log 2>&1 || rc=$?
  [[ $rc -eq $code ]] || fail "$* exited $rc, expected $code" log
  grep -q -- "$text" log || fail "$*: the error does not say '$text'" log
}
expect_error 2 "usage: mstep-aot" "$aot" "$src/test/aot/mlp_forward.mlir" -o x.so
expect_error 2 "unknown option --frobnicate" "$aot" --frobnicate
expect_error 2 "--data needs an exported step" \
  "$aot" "$src/test/aot/mlp_forward.mlir" -o x.so --header x.h --data x.bin
expect_error 2 "--xla-memory-limit: MSTEP_XLA_MEMORY_LIMIT='lots' is not a number of bytes" \
  "$aot" "$src/test/aot/mlp_forward.mlir" -o x.so --header x.h --xla-memory-limit=lots
expect_error 1 "no-such-step.mstep" "$aot" no-such-step.mstep -o x.so --header x.h
echo "mstep-aot: ok"
