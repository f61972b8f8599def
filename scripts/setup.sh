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
  # the oracle's virtual environment (below)
  python3-venv
  # data-parallel training (mstep::distributed): Open MPI and mpirun
  libopenmpi-dev openmpi-bin
  # real data for examples/mnist_mlp: Fashion-MNIST, gzipped IDX files
  dataset-fashion-mnist
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"

# The oracle's virtual environment: Debian's Python and PyTorch (system site
# packages) plus what Debian does not package, from PyPI: safetensors, with
# which test/unit/checkpoint_test.cpp has PyTorch read the files mstep writes.
# Made as the user who runs this script, at the path test/CMakeLists.txt
# expects; reused when it already imports everything.
ORACLE_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/mstep/oracle-venv"
if ! "$ORACLE_VENV/bin/python" -c "import torch, safetensors.torch" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$ORACLE_VENV"
  "$ORACLE_VENV/bin/pip" install -q "safetensors==0.8.0"
fi
