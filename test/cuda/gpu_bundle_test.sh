#!/usr/bin/env bash
# scripts/gpu_check.sh's bundle, checked without a GPU: one tarball under
# 40 MiB holding the test binary, the kernels and every library the binary
# loads but glibc's and libcuda; unpacked, the binary resolves every such
# library from the bundle, lists its tests, and run.sh writes a report in
# which the driver is "unavailable" (exit 77) where no GPU is. Where the
# cuda compile half is built, cuda_codegen_gpu_test and its generated cases
# are in it too (and it skips the same way), with the training steps that
# mstep-compile made for cuda, mstep-run and its libraries.
#   gpu_bundle_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$root/scripts/gpu_check.sh" --no-build --build-dir "$build" --out "$tmp/bundle"
tarball=$tmp/bundle/mstep_gpu_bundle.tar.xz
[ -f "$tarball" ] || fail "no tarball"
[ -x "$tmp/bundle/run.sh" ] || fail "no run.sh"
# Each training step is also replayed with every cuBLASLt epilogue as its
# plan's fallback kernels (what a cuBLASLt without the algorithm runs).
grep -q 'MSTEP_CUDA_NO_EPILOGUES=\$fallback' "$tmp/bundle/run.sh" ||
  fail "run.sh replays no step with the epilogue fallbacks"
[ "$(stat -c %s "$tarball")" -le $((40 * 1024 * 1024)) ] || fail "tarball over 40 MiB"

listing=$(tar -tJf "$tarball")
for file in bin/cuda_driver_gpu_test kernels/test_kernels.compute_80.ptx \
            kernels/test_kernels.sm_80.cubin kernels/test_kernels.sm_90.cubin \
            kernels/test_kernels.sm_90.ptxas.txt MANIFEST; do
  grep -qx "mstep_gpu/$file" <<<"$listing" || fail "the tarball has no $file"
done
# Every library ldd names for the built binary is there (glibc's and
# libcuda excepted, and those are not).
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so)'
needed=0
while read -r name arrow _; do
  [ "$arrow" = "=>" ] || continue
  if [[ "$name" =~ $system ]]; then
    grep -q "lib/$name\$" <<<"$listing" && fail "the tarball bundles the system's $name"
    continue
  fi
  grep -qx "mstep_gpu/lib/$name" <<<"$listing" || fail "the tarball has no lib/$name"
  needed=$((needed + 1))
done < <(for binary in "$build"/test/cuda/cuda_driver_gpu_test "$build"/test/cuda/cuda_codegen_gpu_test; do
           [ -x "$binary" ] && ldd "$binary"; done | sort -u)
[ "$needed" -gt 0 ] || fail "ldd named no library to bundle (libstdc++ at least)"

mkdir "$tmp/x"
tar -xJf "$tarball" -C "$tmp/x"
bundle=$tmp/x/mstep_gpu
# With the bundle's libraries first, each non-system library resolves there.
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  [[ "$name" =~ $system ]] && continue
  [ "$path" = "$bundle/lib/$name" ] || fail "$name resolves to $path, not the bundle's"
done < <(LD_LIBRARY_PATH=$bundle/lib ldd "$bundle/bin/cuda_driver_gpu_test")
LD_LIBRARY_PATH=$bundle/lib "$bundle/bin/cuda_driver_gpu_test" --gtest_list_tests > "$tmp/list" \
  || fail "the bundled binary does not start"
tests="DriverLoads CudaBackendGpuTest CublasLtGpuTest CudaDeviceFaultGpuTest"
# The cuDNN SDPA tests are built where cudnn_graph.h is (as here).
[ -e /usr/local/cuda/include/cudnn_graph.h ] && tests="$tests CudnnSdpaGpuTest"
for test in $tests; do
  grep -q "$test" "$tmp/list" || fail "the bundled binary lists no $test tests"
done

codegen=0
if [ -x "$build/test/cuda/cuda_codegen_gpu_test" ]; then
  codegen=1
  # The compile half's cases travel as files (no MLIR in the tarball).
  for file in bin/cuda_codegen_gpu_test codegen_cases/cases.txt codegen_cases/fma_relu/case.txt \
              codegen_cases/fma_relu/k0.ptx codegen_cases/fma_relu/k0.sm_90.cubin \
              codegen_cases/fma_relu/v3.expected.f32 codegen_cases/column_sum/v1.bound.f32 \
              codegen_cases/linear_relu_fallback/case.txt; do
    grep -qx "mstep_gpu/$file" <<<"$listing" || fail "the tarball has no $file"
  done
  grep -qi "libMLIR\|libLLVM" <<<"$listing" && fail "the tarball bundles MLIR or LLVM"
  # libmstep_compiler only as its runtime-only stand-in (lib/compiler/absent).
  grep -qx "mstep_gpu/lib/libmstep_compiler.so" <<<"$listing" || fail "the tarball has no compiler stand-in"
  nm -D --defined-only "$bundle/lib/libmstep_compiler.so" | grep -q "_ZN4mlir\\|_ZNK4mlir" &&
    fail "the bundled libmstep_compiler is the real compiler, not the stand-in"
  # The examples, lazily and captured from the disk cache filled for cuda.
  for file in bin/gpt_train bin/mnist_mlp bin/run_examples.sh bin/compare_example_losses.py \
              lib/libmstep.so examples/sonnets.txt examples/mnist_mlp.args examples/mnist_mlp.ref.txt \
              examples/gpt_train_f32.args examples/gpt_train_bf16.tolerance; do
    grep -qx "mstep_gpu/$file" <<<"$listing" || fail "the tarball has no $file"
  done
  grep -q "^mstep_gpu/examples/cache/cuda-[0-9a-f]*\.mstep$" <<<"$listing" ||
    fail "the tarball's disk cache has no cuda entry"
  grep -q "^mstep_gpu/examples/cache/ref-" <<<"$listing" && fail "the tarball's disk cache has ref entries"
  # The examples resolve every library but glibc's from the bundle.
  for example in gpt_train mnist_mlp; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      [[ "$name" =~ $system ]] && continue
      [ "$path" = "$bundle/lib/$name" ] || fail "$example: $name resolves to $path, not the bundle's"
    done < <(LD_LIBRARY_PATH=$bundle/lib ldd "$bundle/bin/$example")
  done
  # The training steps: compiled here, replayed there by mstep-run (the
  # runtime alone), against ref's outputs.
  for file in bin/mstep-run bin/compare_step_outputs.py lib/libmstep_runtime.so \
              steps/mnist_mlp.cuda.mstep steps/mnist_mlp.expected.safetensors \
              steps/mnist_mlp.tolerance steps/gpt_train_bf16.cuda.mstep steps/gpt_train_ddp.cuda.mstep \
              steps/giou.cuda.mstep steps/giou.args steps/giou.inputs.safetensors \
              lib/libmstep_giou_plugin.so; do
    grep -qx "mstep_gpu/$file" <<<"$listing" || fail "the tarball has no $file"
  done
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ "$name" =~ $system ]] && continue
    [ "$path" = "$bundle/lib/$name" ] || fail "cuda_codegen_gpu_test: $name resolves to $path, not the bundle's"
  done < <(LD_LIBRARY_PATH=$bundle/lib ldd "$bundle/bin/cuda_codegen_gpu_test")
fi

# run.sh writes its report; without a GPU the driver is unavailable.
set +e
# (Unpacking with python3's tarfile, run.sh's way where a machine has no xz;
# the listing and unpacking above used tar's.)
OUT=$tmp/report MSTEP_BUNDLE_UNPACK=python bash "$tmp/bundle/run.sh" > "$tmp/run.out" 2>&1
status=$?
set -e
for file in environment.txt cuda_driver_gpu_test.xml cuda_driver_gpu_test.log \
            cuda_device_fault_gpu_test.xml cuda_device_fault_gpu_test.log summary.txt; do
  [ -f "$tmp/report/$file" ] || fail "run.sh wrote no $file (exit $status):
$(cat "$tmp/run.out")"
done
grep -q "^mstep GPU check bundle" "$tmp/report/environment.txt" ||
  fail "environment.txt has no MANIFEST: python3's tarfile did not unpack the bundle"
if [ "$status" = 77 ]; then
  grep -q "cuda: unavailable: " "$tmp/report/cuda_driver_gpu_test.log" \
    || fail "exit 77 without the unavailable reason"
elif [ "$status" != 0 ]; then
  fail "run.sh exited $status:
$(cat "$tmp/run.out")"
fi
grep -q "libcublasLt" <<<"$listing" && fail "the tarball bundles cuBLASLt (the GPU machine has it)"
grep -q "libcublasLt.so.13: " "$tmp/report/environment.txt" || fail "environment.txt says nothing of cuBLASLt"
grep -q "libcudnn" <<<"$listing" && fail "the tarball bundles cuDNN (the GPU machine has it)"
grep -q "libcudnn.so.9: " "$tmp/report/environment.txt" || fail "environment.txt says nothing of cuDNN"
grep -q "cuda_device_fault_gpu_test exit code: " "$tmp/report/summary.txt" || fail "no fault run in summary.txt"
if [ "$codegen" = 1 ]; then
  [ -f "$tmp/report/cuda_codegen_gpu_test.log" ] || fail "run.sh wrote no cuda_codegen_gpu_test.log"
  if [ "$status" = 77 ]; then
    grep -q "cuda_codegen_gpu_test exit code: 77" "$tmp/report/summary.txt" \
      || fail "cuda_codegen_gpu_test did not skip without a GPU: $(cat "$tmp/report/cuda_codegen_gpu_test.log")"
    grep -q "cuda: unavailable: " "$tmp/report/cuda_codegen_gpu_test.log" \
      || fail "cuda_codegen_gpu_test skipped without the unavailable reason"
  fi
fi
echo "bundle ok: $needed libraries, run.sh exit $status"
grep "cuda: unavailable" "$tmp/report/cuda_driver_gpu_test.log" | head -1 || true
