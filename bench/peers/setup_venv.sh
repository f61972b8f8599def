#!/usr/bin/env bash
# Makes (once) the virtual environment of bench/peers.sh's PyPI peers:
# PyTorch 2.x (eager and torch.compile on CPU) and JAX (jax[cpu], with optax
# for the optimizers). Versions are pinned so that figures can be compared
# across runs. Prints what it did and exits non-zero, saying why, when the
# peers cannot run here.
#
# PyPI's Linux torch wheel is built with CUDA: libtorch_cuda.so is loaded at
# import and needs the CUDA libraries, which the wheel takes from
# nvidia-* packages (several GB). This machine kind has the CUDA 13 toolkit
# installed (/usr/local/cuda-13.0, found through ld.so.conf), so the wheel is
# installed without its dependencies, plus its pure-Python ones and the four
# CUDA libraries the toolkit lacks or has too old (cuFile, cuSPARSELt,
# NVSHMEM, NCCL). Where that import still fails, the wheel's full dependency
# set is installed instead. Nothing here uses a GPU.
#
# It leaves DIR/torch.ok and DIR/jax.ok for the peers that run, or
# DIR/torch.skip and DIR/jax.skip with the reason, and DIR/setup.done: a
# later run reuses the environment (delete DIR to make it again).
#
# Usage: bash bench/peers/setup_venv.sh DIR
set -uo pipefail
VENV=$1
TORCH=torch==2.15.0
# torch 2.15.0's own pins (its Requires-Dist) of the libraries installed here.
CUDA_LIBS=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2
           nvidia-nccl-cu13==2.30.7)
PURE_DEPS=(filelock "typing-extensions>=4.13.0" "setuptools>=77.0.3" "sympy>=1.13.3" "networkx>=2.5.1"
           jinja2 "fsspec>=0.8.5" numpy)
JAX=("jax[cpu]==0.10.2" optax==0.2.8)

if [ -f "$VENV/setup.done" ]; then
  exit 0
fi
echo "# making the peers' virtual environment in $VENV (once)" >&2
start=$(date +%s)
# The first python3 on PATH (pyenv's) has the venv module; Debian's needs python3-venv.
skip() {  # skip NAME REASON
  echo "$2" >"$VENV/$1.skip"
  echo "# $1 peers skipped: $2" >&2
}
if ! python3 -m venv "$VENV" >&2; then
  mkdir -p "$VENV"
  skip torch "'python3 -m venv $VENV' failed"
  skip jax "'python3 -m venv $VENV' failed"
  touch "$VENV/setup.done"
  exit 0
fi
# pip's output goes to DIR/pip.log (it warns there about the CUDA
# dependencies the lean install leaves out).
pip() { "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$VENV/pip.log" 2>&1; }
torch_imports() { "$VENV/bin/python" -c 'import torch; torch.ones(2).sum()' 2>"$VENV/torch-import.log"; }

if pip --no-deps "$TORCH" && pip "${PURE_DEPS[@]}" && pip --no-deps "${CUDA_LIBS[@]}" && torch_imports; then
  echo "# PyTorch: $TORCH without its CUDA dependencies (the machine's CUDA toolkit serves them)" >&2
  touch "$VENV/torch.ok"
else
  echo "# PyTorch: the lean install does not import ($(tail -n 1 "$VENV/torch-import.log"));" \
       "installing $TORCH with all its dependencies (several GB of CUDA libraries)" >&2
  if pip "$TORCH" && torch_imports; then
    touch "$VENV/torch.ok"
  else
    skip torch "$TORCH does not install or import here: $(tail -n 1 "$VENV/torch-import.log") (pip: $VENV/pip.log)"
  fi
fi
if pip "${JAX[@]}" && "$VENV/bin/python" -c 'import jax, optax; jax.numpy.ones(2).sum()' 2>"$VENV/jax-import.log"; then
  touch "$VENV/jax.ok"
else
  skip jax "${JAX[*]} does not install or import here: $(tail -n 1 "$VENV/jax-import.log") (pip: $VENV/pip.log)"
fi
touch "$VENV/setup.done"
echo "# peers' virtual environment made in $(($(date +%s) - start)) s" >&2
