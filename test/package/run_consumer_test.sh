#!/usr/bin/env bash
# run_consumer_test.sh <build-dir>: checks that an mstep build installs as a
# usable package. Installs <build-dir> into a temporary prefix, then
#  1. checks the exported targets name no private dependency (MLIR, LLVM,
#     oneDNN, OpenMP, the static compiler libraries);
#  2. configures and builds test/package/ with find_package(mstep CONFIG),
#     with MLIR/LLVM/dnnl find_package calls disabled, and runs it;
#  3. compiles consumer.cpp (and consumer.c with the C API) with the flags
#     of pkg-config (mstep.pc, mstep-c.pc) and runs it.
# Exits nonzero, with a message naming the failed step, on any failure.
# Needs the build's mstep and mstep-opt (and mstep_c if it has one) built.
set -euo pipefail

fail() { echo "package_consumer: FAILED: $*" >&2; exit 1; }

[ $# -eq 1 ] || fail "usage: $0 <mstep-build-dir>"
build=$(cd "$1" 2>/dev/null && pwd) || fail "build directory '$1' does not exist"
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$build/CMakeCache.txt" ] || fail "'$build' is not a configured CMake build directory"
[ -f "$build/lib/libmstep.so" ] ||
  fail "'$build/lib/libmstep.so' is missing: build first (ninja -C $build mstep mstep-opt)"

# The consumer uses the compilers of the mstep build (same C++ ABI), with no
# compiler launcher (ccache): it is a few seconds of compiling.
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1; }
cxx=$(cache_value CMAKE_CXX_COMPILER)
cc=$(cache_value CMAKE_C_COMPILER)
[ -n "$cxx" ] || cxx=c++
[ -n "$cc" ] || cc=cc

work=$(mktemp -d "${TMPDIR:-/tmp}/mstep-package-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

echo "== installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install $build (is every installed target built?)"; }

config=$(find "$prefix" -name mstepConfig.cmake -print -quit)
[ -n "$config" ] || fail "no mstepConfig.cmake under $prefix"
targets=$(dirname "$config")/mstepTargets.cmake
[ -f "$targets" ] || fail "no mstepTargets.cmake next to $config"
# The usage requirements (INTERFACE_* properties, any LINK_ONLY entry) must
# name only absl and mstep's own targets. IMPORTED_LINK_DEPENDENT_LIBRARIES
# (mstepTargets-<config>.cmake) may name LLVM or DNNL::dnnl: CMake uses it
# only for -rpath-link, and skips a name that is not a target in the
# consumer, which step 2 checks by building with those packages disabled.
if grep -nE 'INTERFACE_[A-Z_]+ ".*(MLIR|LLVM|DNNL|dnnl|OpenMP|\bg?omp\b|mstep_passes|mstep_dialect|/usr/lib/llvm)' \
     "$(dirname "$config")"/mstepTargets*.cmake ||
   grep -nE 'LINK_ONLY|mstep_passes|mstep_dialect' "$(dirname "$config")"/mstepTargets*.cmake; then
  fail "the exported targets (lines above) need a private dependency of libmstep: consumers would need it"
fi
has_c_api=0
if grep -q 'mstep::mstep_c' "$targets"; then has_c_api=1; fi

echo "== find_package(mstep): configuring and building test/package"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
env -u CMAKE_CXX_COMPILER_LAUNCHER -u CMAKE_C_COMPILER_LAUNCHER \
  cmake -S "$here" -B "$work/consumer" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON \
    >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring test/package with find_package(mstep CONFIG)"; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building test/package against the installed mstep"; }
"$work/consumer/consumer_cpp" || fail "consumer_cpp (find_package build) exited with $?"
if [ -x "$work/consumer/consumer_c" ]; then
  "$work/consumer/consumer_c" || fail "consumer_c (find_package build) exited with $?"
elif [ $has_c_api -eq 1 ] && [ -f "$here/consumer.c" ]; then
  fail "the package exports mstep::mstep_c but test/package built no consumer_c"
fi

echo "== pkg-config: building consumer.cpp with mstep.pc"
command -v pkg-config >/dev/null || fail "pkg-config not found (apt-get install pkg-config)"
pcdir=$(dirname "$(find "$prefix" -name mstep.pc -print -quit)")
[ "$pcdir" != . ] || fail "no mstep.pc under $prefix"
libdir=$(find "$prefix" -name libmstep.so -printf '%h' -quit)
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$(pkg-config --cflags --libs mstep) || fail "pkg-config --cflags --libs mstep"
# shellcheck disable=SC2086  # the flags are a word list
"$cxx" -std=c++20 -O1 "$here/consumer.cpp" $flags -Wl,-rpath,"$libdir" \
  -o "$work/consumer_cpp_pc" || fail "compiling consumer.cpp with \`pkg-config mstep\`: $flags"
"$work/consumer_cpp_pc" || fail "consumer.cpp (pkg-config build) exited with $?"
if [ $has_c_api -eq 1 ] && [ -f "$here/consumer.c" ]; then
  echo "== pkg-config: building consumer.c with mstep-c.pc"
  cflags=$(pkg-config --cflags --libs mstep-c) || fail "pkg-config --cflags --libs mstep-c"
  # shellcheck disable=SC2086
  "$cc" -std=c11 -O1 "$here/consumer.c" $cflags -Wl,-rpath,"$libdir" \
    -o "$work/consumer_c_pc" || fail "compiling consumer.c with \`pkg-config mstep-c\`: $cflags"
  "$work/consumer_c_pc" || fail "consumer.c (pkg-config build) exited with $?"
fi
echo "package_consumer: OK (installed package found by CMake and pkg-config$(
  [ $has_c_api -eq 1 ] && echo ', C API included'))"
