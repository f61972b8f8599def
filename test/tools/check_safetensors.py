#!/usr/bin/python3
"""Reads a safetensors file that mstep wrote as a PyTorch user would, with
PyPI's safetensors package (safetensors.torch.load_file), and compares it
with tensors PyTorch builds itself: the same names, dtypes, shapes and
values, bit for bit. mstep's own reader plays no part.

    check_safetensors.py dtypes FILE   the one-tensor-per-dtype fixture of
                                       write_safetensors.fixture_tensors()
    check_safetensors.py linear FILE   a torch.nn.Linear(3, 2) state_dict
                                       (write_safetensors.fixture_linear()),
                                       loaded with load_state_dict(strict=True)
    check_safetensors.py unicode FILE  write_safetensors.fixture_unicode(): names
                                       and metadata that need JSON escapes; the
                                       metadata must be exactly the fixture's

Exit status 0 when everything matches, 1 with one line per difference, 3
when the safetensors package is missing. test/unit/checkpoint_test.cpp runs
it with the virtual environment scripts/setup.sh makes.
"""
import sys

import torch

from write_safetensors import fixture_linear, fixture_tensors, fixture_unicode

try:
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as e:
    print(f"{sys.executable} cannot import safetensors ({e}); run scripts/setup.sh, which "
          "creates a virtual environment with PyTorch and PyPI's safetensors")
    sys.exit(3)


def differences(got, want):
    """One line per name, dtype, shape or value that differs."""
    problems = []
    for name in sorted(set(want) - set(got)):
        problems.append(f"missing tensor '{name}'")
    for name in sorted(set(got) - set(want)):
        problems.append(f"unexpected tensor '{name}'")
    for name in sorted(set(got) & set(want)):
        g, w = got[name], want[name]
        if g.dtype != w.dtype:
            problems.append(f"'{name}': dtype {g.dtype}, want {w.dtype}")
        elif tuple(g.shape) != tuple(w.shape):
            problems.append(f"'{name}': shape {list(g.shape)}, want {list(w.shape)}")
        elif not torch.equal(g, w):
            problems.append(f"'{name}': values {g.flatten().tolist()}, want {w.flatten().tolist()}")
    return problems


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("dtypes", "linear", "unicode"):
        sys.exit("usage: check_safetensors.py dtypes|linear|unicode FILE")
    kind, path = sys.argv[1], sys.argv[2]
    got = load_file(path)
    want_metadata = None
    if kind == "dtypes":
        problems = differences(got, fixture_tensors())
    elif kind == "unicode":
        want, want_metadata = fixture_unicode()
        problems = differences(got, want)
    else:
        want = fixture_linear()
        problems = differences(got, want.state_dict())
        if not problems:
            lin = torch.nn.Linear(3, 2)
            lin.load_state_dict(got, strict=True)
            x = torch.tensor([[1.0, -2.0, 0.5]])
            if not torch.equal(lin(x), want(x)):
                problems.append("the loaded nn.Linear computes something else")
    with safe_open(path, framework="pt") as f:
        if f.metadata() is None or f.metadata().get("format") != "pt":
            problems.append(f"metadata {f.metadata()}, want format=pt (PyTorch loaders check it)")
        elif want_metadata is not None and f.metadata() != want_metadata:
            problems.append(f"metadata {f.metadata()!r}, want {want_metadata!r}")
    for p in problems:
        print(f"{path}: {p}")
    if problems:
        sys.exit(1)
    print(f"{path}: {len(got)} tensors match PyTorch's (names, dtypes, shapes, values)")


if __name__ == "__main__":
    main()
