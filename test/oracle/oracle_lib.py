"""Helpers for writing oracle cases: PyTorch computes the expected outputs.

A case file is plain text, one token stream per case:
    case <name> <op>
    attr <key> <token> ...
    input <dtype> <rank> <dims...> <values...>
    expect <rtol> <atol> <dtype> <rank> <dims...> <values...>
    end
The C++ side (oracle_test.cpp) parses it, runs the mstep op named <op>
with the inputs and attrs, and compares every output within its own
tolerance: |mstep - PyTorch| <= atol + rtol * |PyTorch|. The tolerances
come from tolerance.py's family rules (one per kind of computation).
"""
import math

import torch

import tolerance

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
    torch.float16: "f16", torch.int32: "i32", torch.int64: "i64",
    torch.bool: "bool",
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
    """One oracle case. `tol` gives each expected output its (rtol, atol):
    a list with one pair per output, or a function of the output's dtype
    name (a tolerance.py family rule); None or a dict of hints (spread,
    acc) asks tolerance.for_case, which applies the op's family rule.
    Integer and bool outputs are always exact."""

    def __init__(self, name, op, inputs, expect, attrs=None, tol=None, magnitudes=None, n_forward=None):
        self.name, self.op = name, op
        self.inputs = inputs
        self.expect = list(expect) if isinstance(expect, (list, tuple)) else [expect]
        self.attrs = attrs or {}
        self.n_forward = len(self.expect) if n_forward is None else n_forward
        self.magnitudes = magnitudes or [None] * len(self.expect)
        if tol is None or isinstance(tol, dict):
            tol = tolerance.for_case(self, **(tol or {}))
        if callable(tol):
            self.tols = [tol(DTYPES[t.dtype]) for t in self.expect]
        else:
            self.tols = list(tol)
        assert len(self.tols) == len(self.expect), name
        self.tols = [(0.0, 0.0) if DTYPES[t.dtype] in tolerance.EXACT_DTYPES else tuple(map(float, tl))
                     for t, tl in zip(self.expect, self.tols)]

    def lines(self):
        out = [f"case {self.name} {self.op}"]
        for k, v in self.attrs.items():
            vals = v if isinstance(v, (list, tuple)) else [v]
            out.append(" ".join(["attr", k] + [str(int(x)) if isinstance(x, bool) else str(x) for x in vals]))
        out += [tensor_line("input", t) for t in self.inputs]
        out += [tensor_line(f"expect {rtol!r} {atol!r}", t) for t, (rtol, atol) in zip(self.expect, self.tols)]
        out.append("end")
        return out


def case(name, op, inputs, fn, attrs=None, tol=None, grad=False, gen=None):
    """Builds a Case whose expected outputs are fn(*inputs).

    With grad=True the case also checks gradients: every floating input
    requires grad, a random weight w (appended as the last input) shapes
    the loss sum(fn(...)[0] * w), and the expected outputs are the forward
    outputs followed by the gradient of each floating input, in order.
    Each output's magnitude (tolerance.magnitudes: fn on |inputs|, the
    sum of |terms| its rounding errors scale with) goes to the family rule.
    `gen` draws w (default: the shared stream below; a case file with a
    generator of its own passes it, so other files' inputs stay put).
    """
    if grad:
        return _grad_case(name, op, inputs, fn, attrs, tol, gen or _gen)
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
    expect = list(expect) if isinstance(expect, (list, tuple)) else [expect]
    return Case(name, op, list(inputs), expect, attrs, _simulated(tol, fn, inputs, expect),
                tolerance.magnitudes(fn, inputs, expect))


def _simulated(tol, fn, inputs, expect, w=None):
    """The hints with "simulate" replaced by each output's simulated error
    sigma (tolerance.simulated_sigma)."""
    if not (isinstance(tol, dict) and tol.get("simulate")):
        return tol
    hints = {k: v for k, v in tol.items() if k != "simulate"}
    hints["sigma"] = tolerance.simulated_sigma(DTYPES[expect[0].dtype], fn, inputs, w)
    return hints


def rounded_once(fn):
    """fn on f64 copies of its 16-bit float inputs, each floating result
    rounded once to that 16-bit dtype: what a kernel that accumulates in
    float and rounds its result once computes (mstep's do). PyTorch 1.13's
    bf16 CPU sum, matmul and layer_norm round partial results to bf16, a
    few bf16 ulps off, in an order that depends on the CPU."""
    def run(*ins):
        low = next((t.dtype for t in ins if t.dtype in (torch.bfloat16, torch.float16)), None)
        if low is None:
            return fn(*ins)
        out = fn(*[t.double() if t.dtype == low else t for t in ins])
        back = lambda t: t.to(low) if t.dtype.is_floating_point else t
        return [back(t) for t in out] if isinstance(out, (list, tuple)) else back(out)
    return run


_gen = torch.Generator().manual_seed(1234)


def randn(*shape, dtype=torch.float32):
    # The shape as one tuple, so randn() with no dims gives a 0-d tensor.
    return torch.randn(shape, generator=_gen, dtype=torch.float64).to(dtype)


def rand(*shape, dtype=torch.float32, lo=0.0, hi=1.0):
    return (lo + (hi - lo) * torch.rand(shape, generator=_gen, dtype=torch.float64)).to(dtype)


def randint(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=_gen).to(dtype)


def _grad_case(name, op, inputs, fn, attrs, tol, gen):
    leaves = [t.detach().clone().requires_grad_(t.dtype.is_floating_point) for t in inputs]
    out = fn(*leaves)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    w = torch.randn(outs[0].shape, generator=gen, dtype=torch.float64).to(outs[0].dtype)
    (outs[0] * w).sum().backward()
    grads = [t.grad if t.grad is not None else torch.zeros_like(t)
             for t in leaves if t.dtype.is_floating_point]
    attrs = dict(attrs or {})
    attrs["backward"] = 1
    expect = [o.detach() for o in outs] + grads
    mags = tolerance.magnitudes(fn, inputs, expect, w=w, n_forward=len(outs))
    tol = _simulated(tol, fn, inputs, expect, w)
    return Case(name, op, [t.detach() for t in inputs] + [w], expect, attrs, tol, mags, n_forward=len(outs))
