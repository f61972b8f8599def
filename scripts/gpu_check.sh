#!/usr/bin/env bash
# Prepares, on this machine (no GPU needed), the GPU check of the cuda
# driver layer for one short run on a machine with an NVIDIA GPU where
# nothing can be installed: cuda_driver_gpu_test, every shared library
# it loads (ldd; glibc's own libraries and libcuda excepted, the GPU
# machine has newer ones), and the test kernels (PTX, cubins, ptxas -v
# reports), as ONE compressed tarball, plus run.sh, which on the GPU
# machine unpacks it to /tmp, runs the tests and writes a report
# (gtest XML, the log, the environment) to $OUT.
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
fi
binary=$build/test/cuda/cuda_driver_gpu_test
kernels=$build/test/cuda/kernels
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

# ldd lists every library loaded, transitively: "name => path (address)".
# glibc's libraries and the loader stay the GPU machine's (its glibc is
# newer; ours would not load under it), and libcuda is the driver's.
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so)'
ldd "$binary" | while read -r name arrow path _; do
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
# /tmp, runs cuda_driver_gpu_test with the bundle's libraries and writes
# the report to $OUT (default: report/ next to this script):
#   environment.txt, cuda_driver_gpu_test.xml (gtest), .log, summary.txt.
# Exit code: the test's (0 passed, 77 no usable GPU, else failed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/report}
mkdir -p "$out"
# Unpacks the bundle into $1 and runs the test from there.
run_from() {
  tar -xzf "$here/mstep_gpu_bundle.tar.gz" -C "$1" || { echo "run.sh: cannot unpack into $1" >&2; return 1; }
  bundle=$1/mstep_gpu
  LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout 200 "$bundle/bin/cuda_driver_gpu_test" --kernel_dir="$bundle/kernels" \
    --gtest_output=xml:"$out/cuda_driver_gpu_test.xml" > "$out/cuda_driver_gpu_test.log" 2>&1
}
work=$(mktemp -d /tmp/mstep_gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  tar -xzOf "$here/mstep_gpu_bundle.tar.gz" mstep_gpu/MANIFEST
} > "$out/environment.txt"
run_from "$work"
status=$?
if [ "$status" = 126 ]; then
  # /tmp mounted noexec: unpack next to this script instead.
  echo "run.sh: cannot execute from /tmp, unpacking next to run.sh" | tee -a "$out/environment.txt"
  mkdir -p "$here/unpacked"
  run_from "$here/unpacked"
  status=$?
fi
cat "$out/cuda_driver_gpu_test.log"
echo "cuda_driver_gpu_test exit code: $status" | tee "$out/summary.txt"
exit $status
RUN
chmod +x "$out/run.sh"
echo "gpu_check.sh: $tarball ($((size / 1024)) KiB) and $out/run.sh"
