#!/usr/bin/env python3
"""Compares a step's outputs on the GPU with ref's (mstep-run --outputs
files, safetensors), tensor by tensor: integers exactly, floats within
max(REL * the tensor's largest |ref| value, ABS) (a norm-wise bound: the
steps sum long dot products in another order, so an element's error scales
with the magnitudes that fed it, not with its own value). Standard library
only (the GPU machine installs nothing).

  compare_step_outputs.py EXPECTED GOT TOLERANCES
TOLERANCES is a file of lines "PATTERN REL ABS" (a regular expression
matched against the whole tensor name, or * for any; the first match
wins; # starts a comment). Prints one line per tensor and exits 0 when
every tensor is within bounds, 1 otherwise (or when a tensor is missing or
has another shape or dtype, or no line matches it). "* 0 0" asks for
equal values.
"""
import json
import math
import re
import struct
import sys

FORMATS = {"F32": "f", "F64": "d", "I64": "q", "I32": "i", "U8": "B", "BOOL": "?"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        dtype = info["dtype"]
        if dtype == "BF16":  # the high half of an f32
            values = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        else:
            fmt = FORMATS[dtype]
            values = list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))
        tensors[name] = (dtype, info["shape"], values)
    return tensors


def read_tolerances(path):
    rules = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                pattern, rel, abs_ = line
                rules.append((None if pattern == "*" else re.compile(pattern), float(rel),
                              float(abs_)))
    return rules


def main():
    expected, got = read(sys.argv[1]), read(sys.argv[2])
    rules = read_tolerances(sys.argv[3])
    ok = True
    for name, (dtype, shape, ref) in sorted(expected.items()):
        if name not in got:
            print("FAIL %s: missing" % name)
            ok = False
            continue
        gdtype, gshape, values = got[name]
        if (gdtype, gshape) != (dtype, shape):
            print("FAIL %s: %s%s, expected %s%s" % (name, gdtype, gshape, dtype, shape))
            ok = False
            continue
        if dtype in ("F32", "F64", "BF16"):
            rule = next((r for r in rules if r[0] is None or r[0].fullmatch(name)), None)
            if rule is None:
                print("FAIL %s: no tolerance line matches it" % name)
                ok = False
                continue
            scale = max((abs(v) for v in ref), default=0.0)
            bound = max(rule[1] * scale, rule[2]) or rule[1]
            worst, at = 0.0, -1
            for i, (r, v) in enumerate(zip(ref, values)):
                err = abs(r - v) if math.isfinite(v) else math.inf
                if err > worst:
                    worst, at = err, i
            good = worst <= bound
            print("%s %s %s%s: max error %.3g at %d (ref %.6g, got %.6g), bound %.3g (%.3f of it)"
                  % ("PASS" if good else "FAIL", name, dtype, shape, worst, at,
                     ref[at] if at >= 0 else 0.0, values[at] if at >= 0 else 0.0, bound,
                     worst / bound if bound > 0 else (0.0 if worst == 0 else math.inf)))
        else:
            wrong = sum(1 for r, v in zip(ref, values) if r != v)
            good = wrong == 0
            print("%s %s %s%s: %d element(s) differ" % ("PASS" if good else "FAIL", name, dtype,
                                                        shape, wrong))
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
