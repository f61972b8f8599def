#!/usr/bin/env bash
# Prepares, on this machine (no GPU needed), the GPU check of the cuda
# runtime half (driver layer, backend, allocator, cuBLASLt, cuDNN SDPA) for one short
# run on a machine with an NVIDIA GPU where
# nothing can be installed: cuda_driver_gpu_test, every shared library
# it loads (ldd; glibc's own libraries and libcuda excepted, the GPU
# machine has newer ones), and the test kernels (PTX, cubins, ptxas -v
# reports), and, where the cuda compile half is built,
# cuda_codegen_gpu_test with the kernels the compile half generated here
# (test/cuda/CodegenCase.h: PTX, cubins, inputs, expected outputs; no
# MLIR travels), as ONE compressed tarball, plus run.sh, which on the GPU
# machine unpacks it to /tmp, runs the tests and writes a report
# (gtest XML, the logs, the environment) to $OUT. cuBLASLt (540 MB) is not
# bundled, nor is cuDNN (~1 GB): run.sh finds the GPU machine's and reports where.
#
#   scripts/gpu_check.sh [--build-dir DIR] [--out DIR] [--no-build]
#     --build-dir  the configured build tree (default build/)
#     --out        where the bundle goes (default gpu_bundle/, ignored by git)
#     --no-build   use what is built (the packaging test does)
# Then, on the GPU machine, from the folder that holds the bundle folder:
#   OUT=/some/report/dir bash gpu_bundle/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/gpu_bundle
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    *) echo "gpu_check.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
max_bytes=$((40 * 1024 * 1024))

if [ "$do_build" = 1 ]; then
  cmake --build "$build" --target cuda_driver_gpu_test
  # Built only with the compile half (ptxas and libdevice found).
  if cmake --build "$build" --target help | grep -q '^cuda_codegen_gpu_test\b'; then
    cmake --build "$build" --target cuda_codegen_gpu_test
  fi
fi
binary=$build/test/cuda/cuda_driver_gpu_test
kernels=$build/test/cuda/kernels
codegen_binary=$build/test/cuda/cuda_codegen_gpu_test
codegen_cases=$build/test/cuda/codegen_cases
binaries=("$binary")
if [ ! -x "$binary" ]; then
  echo "gpu_check.sh: no $binary; configure with the CUDA toolkit (nvcc, ptxas, cuda.h) found and build cuda_driver_gpu_test" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bundle=$stage/mstep_gpu
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/kernels"
cp "$binary" "$bundle/bin/"
cp "$kernels"/test_kernels.* "$bundle/kernels/"
if [ -x "$codegen_binary" ]; then
  if [ ! -f "$codegen_cases/cases.txt" ]; then
    echo "gpu_check.sh: $codegen_binary is built but $codegen_cases/cases.txt is not; build cuda_codegen_case_files" >&2
    exit 1
  fi
  cp "$codegen_binary" "$bundle/bin/"
  cp -r "$codegen_cases" "$bundle/codegen_cases"
  binaries+=("$codegen_binary")
fi

# ldd lists every library loaded, transitively: "name => path (address)".
# glibc's libraries and the loader stay the GPU machine's (its glibc is
# newer; ours would not load under it), and libcuda is the driver's.
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so)'
for each in "${binaries[@]}"; do ldd "$each"; done | sort -u | while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [[ "$name" =~ $system ]]; then continue; fi
  if [ "$path" = "not" ]; then
    echo "gpu_check.sh: $binary needs $name, which is not found here" >&2
    exit 1
  fi
  cp -L "$path" "$bundle/lib/$name"
done

{
  echo "mstep GPU check bundle"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(ldd --version | head -1)"
  echo "files:"
  (cd "$bundle" && find . -type f | sort | sed 's/^/  /')
} > "$bundle/MANIFEST"

mkdir -p "$out"
tarball=$out/mstep_gpu_bundle.tar.gz
tar -C "$stage" -czf "$tarball" mstep_gpu
size=$(stat -c %s "$tarball")
if [ "$size" -gt "$max_bytes" ]; then
  echo "gpu_check.sh: $tarball is $size bytes, over the 40 MiB limit" >&2
  exit 1
fi

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the mstep GPU check on a machine with an NVIDIA GPU (made by
# scripts/gpu_check.sh): unpacks the bundle (next to this script) into
# /tmp, runs cuda_driver_gpu_test with the bundle's libraries and the GPU
# machine's cuBLASLt and cuDNN (found here, not bundled), then (when bundled)
# cuda_codegen_gpu_test (the compile half's kernels), and writes the report to
# $OUT (default: report/ next to this script): environment.txt,
# cuda_driver_gpu_test.xml (gtest) and .log (driver layer, backend,
# cuBLASLt, cuDNN SDPA), cuda_device_fault_gpu_test.xml and .log (the device fault,
# in a process of its own, last: it leaves the context unusable),
# cuda_codegen_gpu_test.log (PASS/FAIL per case, BANDWIDTH), summary.txt.
# Exit code: 0 all passed, 77 no usable GPU, else the first failure's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/report}
mkdir -p "$out"

# libcublasLt.so.13: the loader's cache, the CUDA toolkit, then pip's
# nvidia-cublas wheel (PyTorch's) under any nvidia package path.
find_cublaslt() {
  local path dir
  path=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13 /{print $NF; exit}')
  if [ -n "$path" ]; then dirname "$path"; return 0; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda*/lib64 \
             /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libcublasLt.so.13" ]; then echo "$dir"; return 0; fi
  done
  for python in python3 /usr/bin/python3; do
    command -v "$python" > /dev/null 2>&1 || continue
    for dir in $("$python" -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null); do
      path=$(find "$dir" -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
      if [ -n "$path" ]; then dirname "$path"; return 0; fi
    done
  done
  return 1
}
cublaslt_dir=$(find_cublaslt || true)

# libcudnn.so.9 (about 1 GB with its engines: never bundled). The binary
# searches itself (lib/backends/cuda/CudnnApi.h: the loader's path,
# $MSTEP_CUDNN_LIBRARY, the toolkit's lib64, python3's nvidia.cudnn);
# this finds it the same way and, where the loader would not, names it
# in MSTEP_CUDNN_LIBRARY and puts its folder (with the sub-libraries it
# loads, libcudnn_graph.so.9 and the engines) on LD_LIBRARY_PATH.
find_cudnn() {
  local path dir python
  path=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
  if [ -n "$path" ]; then echo "$path"; return 0; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda*/lib64 \
             /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libcudnn.so.9" ]; then echo "$dir/libcudnn.so.9"; return 0; fi
  done
  for python in python3 /usr/bin/python3; do
    command -v "$python" > /dev/null 2>&1 || continue
    dir=$("$python" -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    if [ -n "$dir" ] && [ -e "$dir/libcudnn.so.9" ]; then echo "$dir/libcudnn.so.9"; return 0; fi
  done
  return 1
}
cudnn_library=$(find_cudnn || true)
cudnn_dir=
if [ -n "$cudnn_library" ]; then
  cudnn_dir=$(dirname "$cudnn_library")
  export MSTEP_CUDNN_LIBRARY=${MSTEP_CUDNN_LIBRARY:-$cudnn_library}
fi

# Unpacks the bundle into $1.
unpack_into() {
  tar -xzf "$here/mstep_gpu_bundle.tar.gz" -C "$1" || { echo "run.sh: cannot unpack into $1" >&2; return 1; }
  bundle=$1/mstep_gpu
}
# Runs the test binary from $bundle: run_test NAME TIMEOUT GTEST_FILTER.
run_test() {
  LD_LIBRARY_PATH="$bundle/lib${cublaslt_dir:+:$cublaslt_dir}${cudnn_dir:+:$cudnn_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout "$2" "$bundle/bin/cuda_driver_gpu_test" --kernel_dir="$bundle/kernels" \
    --gtest_filter="$3" --gtest_output=xml:"$out/$1.xml" > "$out/$1.log" 2>&1
}
work=$(mktemp -d /tmp/mstep_gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  echo "CPU threads: $(nproc)"
  echo "libcublasLt.so.13: ${cublaslt_dir:-not found (the cuBLASLt tests fail)}"
  echo "libcudnn.so.9: ${cudnn_library:-not found (the cuDNN SDPA tests fail)}"
  tar -xzOf "$here/mstep_gpu_bundle.tar.gz" mstep_gpu/MANIFEST
} > "$out/environment.txt"
unpack_into "$work"
run_test cuda_driver_gpu_test 240 '-CudaDeviceFaultGpuTest.*'
status=$?
if [ "$status" = 126 ]; then
  # /tmp mounted noexec: unpack next to this script instead.
  echo "run.sh: cannot execute from /tmp, unpacking next to run.sh" | tee -a "$out/environment.txt"
  mkdir -p "$here/unpacked"
  unpack_into "$here/unpacked"
  run_test cuda_driver_gpu_test 240 '-CudaDeviceFaultGpuTest.*'
  status=$?
fi
# The compile half's kernels (built here, run from the bundle's files);
# its matmul steps are cuBLASLt calls, so cuBLASLt's folder is on the path.
codegen_status=
if [ -x "$bundle/bin/cuda_codegen_gpu_test" ]; then
  LD_LIBRARY_PATH="$bundle/lib${cublaslt_dir:+:$cublaslt_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout 120 "$bundle/bin/cuda_codegen_gpu_test" --case_dir="$bundle/codegen_cases" \
    > "$out/cuda_codegen_gpu_test.log" 2>&1
  codegen_status=$?
fi
run_test cuda_device_fault_gpu_test 30 'CudaDeviceFaultGpuTest.*'
fault_status=$?
cat "$out/cuda_driver_gpu_test.log" "$out/cuda_device_fault_gpu_test.log"
[ -n "$codegen_status" ] && cat "$out/cuda_codegen_gpu_test.log"
if [ -n "$cublaslt_dir" ]; then echo "libcublasLt.so.13 from $cublaslt_dir"; else echo "libcublasLt.so.13 not found"; fi
if [ -n "$cudnn_library" ]; then echo "libcudnn.so.9 from $cudnn_library"; else echo "libcudnn.so.9 not found"; fi
{
  echo "cuda_driver_gpu_test exit code: $status"
  echo "cuda_device_fault_gpu_test exit code: $fault_status"
  echo "cuda_codegen_gpu_test exit code: ${codegen_status:-not bundled}"
} | tee "$out/summary.txt"
if [ "$status" = 0 ] && [ "$fault_status" != 0 ] && [ "$fault_status" != 77 ]; then status=$fault_status; fi
if [ "$status" = 0 ] && [ -n "$codegen_status" ] && [ "$codegen_status" != 0 ] && [ "$codegen_status" != 77 ]; then
  status=$codegen_status
fi
exit $status
RUN
chmod +x "$out/run.sh"
echo "gpu_check.sh: $tarball ($((size / 1024)) KiB) and $out/run.sh"
