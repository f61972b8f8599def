#!/usr/bin/env bash
# Installs every Debian package mstep needs to build, test and benchmark.
# Idempotent: safe to run again; apt-get skips what is already installed.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # compiler stack
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  # kernels and utilities (Debian's dnnl-config.cmake needs OpenCL)
  libdnnl-dev ocl-icd-opencl-dev libabsl-dev
  # test and benchmark
  libgtest-dev libgmock-dev libbenchmark-dev
  # fuzz test (test/fuzz): clang and its libFuzzer + sanitizer runtimes
  clang-19 libclang-rt-19-dev
  # oracle (python3-torch) and benchmark peer (libtorch-dev + OpenBLAS)
  python3-torch python3-numpy libtorch-dev libopenblas0-pthread
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
