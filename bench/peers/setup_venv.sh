#!/usr/bin/env bash
# Makes (once) a virtual environment of PyPI packages, by group: torch
# (PyTorch 2.x, eager and torch.compile on CPU), jax (jax[cpu], with optax
# for the optimizers) and iree (iree-base-compiler and iree-base-runtime).
# bench/peers.sh uses torch and jax (the default); the interop tests
# (test/interop) jax and iree. Versions are pinned so that figures and test
# results can be compared across runs. Prints what it did.
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
# It leaves DIR/<group>.ok for each group that installs and imports, or
# DIR/<group>.skip with the reason: a later run skips a group that has
# either (delete the .skip to try again, DIR to start afresh).
#
# Usage: bash bench/peers/setup_venv.sh DIR [GROUP...]   (default: torch jax)
set -uo pipefail
VENV=$1
TORCH=torch==2.15.0
# torch 2.15.0's own pins (its Requires-Dist) of the libraries installed here.
CUDA_LIBS=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2
           nvidia-nccl-cu13==2.30.7)
PURE_DEPS=(filelock "typing-extensions>=4.13.0" "setuptools>=77.0.3" "sympy>=1.13.3" "networkx>=2.5.1"
           jinja2 "fsspec>=0.8.5" numpy)
JAX=("jax[cpu]==0.10.2" optax==0.2.8)
IREE=(iree-base-compiler==3.13.0 iree-base-runtime==3.13.0)
shift
GROUPS_WANTED=("$@")
[ ${#GROUPS_WANTED[@]} -gt 0 ] || GROUPS_WANTED=(torch jax)

todo=()
for g in "${GROUPS_WANTED[@]}"; do
  case $g in torch|jax|iree) ;; *) echo "setup_venv.sh: unknown group '$g' (torch, jax, iree)" >&2; exit 2;; esac
  [ -f "$VENV/$g.ok" ] || [ -f "$VENV/$g.skip" ] || todo+=("$g")
done
[ ${#todo[@]} -gt 0 ] || exit 0
echo "# installing ${todo[*]} into the virtual environment $VENV (once)" >&2
start=$(date +%s)
# The first python3 on PATH (pyenv's) has the venv module; Debian's needs python3-venv.
skip() {  # skip NAME REASON
  echo "$2" >"$VENV/$1.skip"
  echo "# $1 skipped: $2" >&2
}
if [ ! -x "$VENV/bin/python" ] && ! python3 -m venv "$VENV" >&2; then
  mkdir -p "$VENV"
  for g in "${todo[@]}"; do skip "$g" "'python3 -m venv $VENV' failed"; done
  exit 0
fi
# pip's output goes to DIR/pip.log (it warns there about the CUDA
# dependencies the lean install leaves out).
pip() { "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$VENV/pip.log" 2>&1; }
torch_imports() { "$VENV/bin/python" -c 'import torch; torch.ones(2).sum()' 2>"$VENV/torch-import.log"; }

wants() { [[ " ${todo[*]} " == *" $1 "* ]]; }
# Why GROUP failed: its import error, or pip's last line when pip failed first.
why() {
  if [ -s "$VENV/$1-import.log" ]; then tail -n 1 "$VENV/$1-import.log"; else echo "pip: $(tail -n 1 "$VENV/pip.log")"; fi
}
rm -f "$VENV"/{torch,jax,iree}-import.log

if ! wants torch; then
  :
elif pip --no-deps "$TORCH" && pip "${PURE_DEPS[@]}" && pip --no-deps "${CUDA_LIBS[@]}" && torch_imports; then
  echo "# PyTorch: $TORCH without its CUDA dependencies (the machine's CUDA toolkit serves them)" >&2
  touch "$VENV/torch.ok"
else
  echo "# PyTorch: the lean install does not import ($(why torch));" \
       "installing $TORCH with all its dependencies (several GB of CUDA libraries)" >&2
  if pip "$TORCH" && torch_imports; then
    touch "$VENV/torch.ok"
  else
    skip torch "$TORCH does not install or import here: $(why torch) (pip: $VENV/pip.log)"
  fi
fi
if ! wants jax; then
  :
elif pip "${JAX[@]}" && "$VENV/bin/python" -c 'import jax, optax; jax.numpy.ones(2).sum()' 2>"$VENV/jax-import.log"; then
  touch "$VENV/jax.ok"
else
  skip jax "${JAX[*]} does not install or import here: $(why jax) (pip: $VENV/pip.log)"
fi
if ! wants iree; then
  :
elif pip "${IREE[@]}" && "$VENV/bin/python" -c 'import iree.compiler, iree.runtime' 2>"$VENV/iree-import.log"; then
  touch "$VENV/iree.ok"
else
  skip iree "${IREE[*]} does not install or import here: $(why iree) (pip: $VENV/pip.log)"
fi
echo "# ${todo[*]} installed in $(($(date +%s) - start)) s" >&2
