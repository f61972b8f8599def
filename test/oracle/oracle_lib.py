"""Helpers for writing oracle cases: PyTorch computes the expected outputs.

A case file is plain text, one token stream per case:
    case <name> <op> <rtol> <atol>
    attr <key> <token> ...
    input <dtype> <rank> <dims...> <values...>
    expect <dtype> <rank> <dims...> <values...>
    end
The C++ side (oracle_test.cpp) parses it, runs the mstep op named <op>
with the inputs and attrs, and compares every output.
"""
import math

import torch

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
    torch.float16: "f16", torch.int32: "i32", torch.int64: "i64",
    torch.bool: "bool",
}

# Default tolerances per dtype: (rtol, atol).
TOLERANCE = {
    "f32": (1e-5, 1e-6), "f64": (1e-12, 1e-12), "bf16": (1.6e-2, 1e-2),
    "f16": (2e-3, 1e-3), "i32": (0, 0), "i64": (0, 0), "bool": (0, 0),
}


def _fmt(v, dtype):
    if dtype in ("i32", "i64"):
        return str(int(v))
    if dtype == "bool":
        return "1" if v else "0"
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def tensor_line(kind, t):
    t = t.detach().contiguous()
    dtype = DTYPES[t.dtype]
    flat = t.reshape(-1)
    if dtype in ("bf16", "f16"):
        flat = flat.float()
    values = [_fmt(v, dtype) for v in flat.tolist()]
    dims = [str(d) for d in t.shape]
    return " ".join([kind, dtype, str(t.dim())] + dims + values)


class Case:
    def __init__(self, name, op, inputs, expect, attrs=None, rtol=None, atol=None):
        self.name, self.op = name, op
        self.inputs = inputs
        self.expect = expect if isinstance(expect, (list, tuple)) else [expect]
        self.attrs = attrs or {}
        out_dtype = DTYPES[self.expect[0].dtype]
        d_rtol, d_atol = TOLERANCE[out_dtype]
        self.rtol = d_rtol if rtol is None else rtol
        self.atol = d_atol if atol is None else atol

    def lines(self):
        out = [f"case {self.name} {self.op} {self.rtol!r} {self.atol!r}"]
        for k, v in self.attrs.items():
            vals = v if isinstance(v, (list, tuple)) else [v]
            out.append(" ".join(["attr", k] + [str(int(x)) if isinstance(x, bool) else str(x) for x in vals]))
        out += [tensor_line("input", t) for t in self.inputs]
        out += [tensor_line("expect", t) for t in self.expect]
        out.append("end")
        return out


def case(name, op, inputs, fn, attrs=None, rtol=None, atol=None, grad=False):
    """Builds a Case whose expected outputs are fn(*inputs).

    With grad=True the case also checks gradients: every floating input
    requires grad, a random weight w (appended as the last input) shapes
    the loss sum(fn(...)[0] * w), and the expected outputs are the forward
    outputs followed by the gradient of each floating input, in order.
    """
    if grad:
        return _grad_case(name, op, inputs, fn, attrs, rtol, atol)
    with torch.no_grad():
        try:
            expect = fn(*inputs)
        except RuntimeError as e:
            # PyTorch 1.13's CPU kernels lack many f16 ops: compute in f32
            # and round the floating results back to f16, as a GPU would.
            if "Half" not in str(e):
                raise
            up = [t.float() if t.dtype == torch.float16 else t for t in inputs]
            expect = fn(*up)
            back = lambda t: t.half() if t.dtype == torch.float32 else t
            expect = [back(t) for t in expect] if isinstance(expect, (list, tuple)) else back(expect)
    return Case(name, op, list(inputs), expect, attrs, rtol, atol)


_gen = torch.Generator().manual_seed(1234)


def randn(*shape, dtype=torch.float32):
    # The shape as one tuple, so randn() with no dims gives a 0-d tensor.
    return torch.randn(shape, generator=_gen, dtype=torch.float64).to(dtype)


def rand(*shape, dtype=torch.float32, lo=0.0, hi=1.0):
    return (lo + (hi - lo) * torch.rand(shape, generator=_gen, dtype=torch.float64)).to(dtype)


def randint(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=_gen).to(dtype)


def _grad_case(name, op, inputs, fn, attrs, rtol, atol):
    leaves = [t.detach().clone().requires_grad_(t.dtype.is_floating_point) for t in inputs]
    out = fn(*leaves)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    w = randn(*outs[0].shape, dtype=outs[0].dtype)
    (outs[0] * w).sum().backward()
    grads = [t.grad if t.grad is not None else torch.zeros_like(t)
             for t in leaves if t.dtype.is_floating_point]
    attrs = dict(attrs or {})
    attrs["backward"] = 1
    expect = [o.detach() for o in outs] + grads
    return Case(name, op, [t.detach() for t in inputs] + [w], expect, attrs, rtol, atol)
