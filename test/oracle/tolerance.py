"""How far mstep may be from PyTorch: one rule per family of computation.

Neither side is exact, and PyTorch's own last bits move between CPUs (its
kernels dispatch per ISA: AVX2 on one host, AVX-512 on another, other
summation orders and exp/log polynomials). So a tolerance is a bound on the
rounding error both sides may make, from the op's error analysis:

    family          rtol                     atol
    exact           0                        0
    rounded(n)      n*eps                    n*eps*scale
    pointwise       eps + ULPS*eps_c         same * scale
    accumulation    eps                      LAMBDA*sqrt(k)*eps_a*M
    composite       eps + ULPS*eps_c         LAMBDA*((sqrt(k) + spread)*eps_a
                                                    + sqrt(stored)*eps)*M
    from_sigma      eps + ULPS*eps_c         LAMBDA*sqrt(2)*sigma   (attention modules)

eps is the output dtype's machine epsilon (one rounding of the result,
one ulp apart at most); eps_c that of the type the kernels compute in
(f32 for 16-bit and f32 outputs, f64 for f64); eps_a that of the type the
sums accumulate in (eps_c, or the 16-bit type where both sides round every
partial result to it: the bf16 optimizers). k is the length of the longest sum, M the sum of
|terms| (magnitudes(): the op on |inputs|, which for sums of products is
exactly the sum of |terms| that rounding errors scale with), spread the
range of the arguments of exp inside a softmax (its result moves by
p * delta, with delta ~ eps * spread). sigma: the standard deviation of
an output's rounding error, simulated through a chain's f64
intermediates (simulated_sigma), where the chain rule's worst cases
compound. stored: how many 16-bit intermediate results a term passes
through (mstep's bf16 losses are compositions of bf16 ops).

16-bit expectations: where mstep accumulates in float and rounds once
(sums, matmul, norms, softmax, losses), the case computes the op in f64
on the same 16-bit inputs and rounds once (oracle_lib.rounded_once):
PyTorch 1.13's bf16 CPU kernels round partial results to bf16, a few
ulps off, differently per ISA. Then the two sides are at most 1 ulp
apart (rtol = eps).

Why these hold: LAMBDA*sqrt(k)*u*M bounds a length-k sum's error with
probability >= 1 - 2*exp(-LAMBDA**2 / 2) (Higham and Mary, "A new approach
to probabilistic rounding error analysis", SIAM J. Sci. Comput. 2019),
whatever order the kernel sums in, so it holds for both vendors' PyTorch
and for mstep; the two sides' errors add (2u = eps). Transcendentals
(Sleef, glibc, mstep's own polynomials) are within ULPS/2 ulps each.

Why they still catch bugs: a wrong scale, a missing mask row, a dropped
bias or a wrong reduction moves an output by a fraction of M itself;
these bounds are LAMBDA*sqrt(k)*eps_a of M, 1e-5 of it for f32 and k <= 64.
"""
import contextlib
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

# Integer and bool results are exact whatever the op.
EXACT_DTYPES = ("i32", "i64", "bool")
EPS = {"f32": 2.0 ** -23, "f64": 2.0 ** -52, "bf16": 2.0 ** -7, "f16": 2.0 ** -10}
LAMBDA = 5.0  # failure probability 2*exp(-12.5) = 7e-6 per element
ULPS = 8  # both sides' transcendentals, 4 ulps each (Sleef's u35 is 3.5)


def _compute(dt):
    return "f64" if dt == "f64" else "f32"


def exact(dt):
    """Data movement, casts, neg/abs/relu, selections (max, where,
    pooling max), comparisons: no rounding, so nothing may differ."""
    return (0.0, 0.0)


def rounded(dt, ops=1, scale=1.0):
    """`ops` correctly rounded IEEE operations in a row (add, mul, div,
    sqrt): each side is within ops*u of the exact value. atol covers
    results that cancel to near zero from operands of size `scale`."""
    r = ops * EPS[dt]
    return (r, r * scale)


def pointwise(dt, scale=1.0):
    """One transcendental (exp, log, tanh, erf, gelu, pow...): one rounding
    of the output plus the few-ulp error of each side's polynomial."""
    r = EPS[dt] + ULPS * EPS[_compute(dt)]
    return (r, r * scale)


def accumulation(dt, k, magnitude, acc=None):
    """A sum of k terms whose |terms| sum to `magnitude` (sum, mean, matmul,
    linear, conv2d, avg_pool2d, scatter_add). `acc` is the dtype partial
    sums are rounded to, where wider than the compute type's."""
    eps_a = EPS[acc or _compute(dt)]
    return (EPS[dt], LAMBDA * math.sqrt(max(k, 1)) * eps_a * magnitude)


def composite(dt, k, magnitude, spread=0.0, acc=None, stored=0):
    """A chain of the above (softmax, norms, attention, losses, nn
    modules, optimizer steps, every gradient): the stages' errors add and
    each is at most amplified by what follows, so the bound is that of
    the whole chain's sums (k: their total length) on the chain's
    magnitude, plus the softmax's amplification of its input's error.
    `stored`: how many intermediate results a term passes through that
    are rounded to the (16-bit) output dtype, where the chain is made of
    ops that each store their result (Higham and Mary's sqrt(n) again)."""
    eps_a = EPS[acc or _compute(dt)]
    rtol = EPS[dt] + ULPS * EPS[_compute(dt)]
    chain = (math.sqrt(max(k, 1)) + spread) * eps_a + math.sqrt(stored) * EPS[dt]
    return (rtol, LAMBDA * chain * magnitude)


def from_sigma(dt, sigma):
    """A chain whose error was simulated as a standard deviation (below):
    LAMBDA standard deviations of the two sides' difference (sqrt(2)
    sigma), and the composite rtol for the last roundings."""
    return (EPS[dt] + ULPS * EPS[_compute(dt)], LAMBDA * math.sqrt(2) * sigma)


# ---- Attention: the error simulated as a standard deviation ---------------
# Through attention, the chain bound above compounds worst cases: every
# stage's error times |W| of every later one, and score errors driving exp
# (scores reach ~40), and lands ~1000x above what either side's rounding
# does. simulated_sigma() takes the same model instead (every rounding an
# independent error of standard deviation u relative to its result, a
# length-n sum's of sqrt(n)*u*sum|terms|, Higham and Mary) and runs the op
# and its backward in f64 with those errors drawn at random (Monte Carlo
# arithmetic, Parker 1997), so each stage's error travels through the
# real intermediates. from_sigma bounds the spread it measures.

_U_SIM = {"f32": 2.0 ** -24, "f64": 2.0 ** -53}
_ATEN = torch.ops.aten
# Sums of products: the op on |operands| is their sum of |terms|.
_SUMS = {_ATEN.mm.default: lambda a: a[0].shape[-1], _ATEN.bmm.default: lambda a: a[0].shape[-1],
         _ATEN.addmm.default: lambda a: a[1].shape[-1] + 1,
         _ATEN.baddbmm.default: lambda a: a[1].shape[-1] + 1,
         _ATEN.sum.dim_IntList: lambda a: a[0].numel(), _ATEN.sum.default: lambda a: a[0].numel()}


# Ops whose results are values of their operands: nothing rounds.
_EXACT_ATEN = {"clone", "_to_copy", "copy_", "cat", "stack", "masked_fill", "masked_fill_",
               "where", "zeros_like", "ones_like", "new_zeros", "fill_", "index_select", "gather",
               "embedding", "constant_pad_nd", "neg", "abs", "relu", "threshold_backward",
               "_unsafe_view", "unsqueeze", "squeeze", "detach", "expand", "slice_backward",
               "select_backward", "zero_", "scalar_tensor", "zeros", "ones", "full", "empty"}


def _moves_data(func):
    """A view (the result aliases an operand) or an op in _EXACT_ATEN."""
    returns = func._schema.returns
    return func.overloadpacket.__name__ in _EXACT_ATEN or any(r.alias_info for r in returns)


class _RandomRounding(TorchDispatchMode):
    """Adds to every floating result its simulated rounding error."""

    def __init__(self, u, gen):
        super().__init__()
        self.u, self.gen = u, gen

    def _noisy(self, out, scale):
        if not (isinstance(out, torch.Tensor) and out.dtype.is_floating_point and out.numel()):
            return out
        scale = scale.nan_to_num(0, 0, 0)  # inf and NaN results stay as they are
        return out + torch.randn(out.shape, generator=self.gen, dtype=out.dtype) * scale

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _SUMS:
            absolute = [a.abs() if isinstance(a, torch.Tensor) else a for a in args]
            n = _SUMS[func](args) // (max(out.numel(), 1) if func in (_ATEN.sum.dim_IntList,
                                                                      _ATEN.sum.default) else 1)
            return self._noisy(out, math.sqrt(max(n, 1)) * self.u * func(*absolute, **kwargs))
        if func in (_ATEN._softmax.default, _ATEN._log_softmax.default):
            # exp (ULPS / 2 ulps), the row's sum and the division or log.
            n = args[0].shape[args[1]] if args[0].dim() else 1
            return self._noisy(out, (math.sqrt(n + 1) + ULPS) * self.u * out.abs())
        if func == _ATEN._softmax_backward_data.default:  # p * (g - sum(g * p))
            g, p, dim = args[0], args[1], args[2]
            terms = p.abs() * (g.abs() + (g * p).abs().sum(dim, keepdim=True))
            return self._noisy(out, math.sqrt(p.shape[dim] + 1) * self.u * terms)
        if _moves_data(func):
            return out
        return tree_map(lambda o: self._noisy(o, self.u * o.abs()) if isinstance(o, torch.Tensor)
                        and o.dtype.is_floating_point else o, out)


def simulated_sigma(dt, fn, inputs, w=None, runs=40):
    """Per output of fn (then, with the weight w, the gradients of
    sum(fn(...)[0] * w) by each floating input), the largest standard
    deviation over its elements of the error simulated by _RandomRounding."""
    gen = torch.Generator().manual_seed(0)
    ins = [t.detach().double() if t.dtype.is_floating_point else t for t in inputs]

    def once(rounding):
        leaves = [t.clone().requires_grad_(w is not None and t.dtype.is_floating_point) for t in ins]
        with rounding or contextlib.nullcontext():
            out = fn(*leaves)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            if w is not None:
                (outs[0] * w.double()).sum().backward()
                outs += [t.grad for t in leaves if t.dtype.is_floating_point]
        return [o.detach() for o in outs]

    exact = once(None)
    samples = [once(_RandomRounding(_U_SIM[_compute(dt)], gen)) for _ in range(runs)]
    return [float(torch.stack([s[i] - e for s in samples]).nan_to_num(0, 0, 0).std(0).max())
            if e.numel() else 0.0 for i, e in enumerate(exact)]


# ---- Which family each op is in -------------------------------------------

EXACT_OPS = {
    "neg", "abs", "relu", "to", "isnan", "isfinite", "logical_not", "logical_and", "logical_or",
    "eq", "ne", "lt", "le", "gt", "ge", "eq_scalar", "ne_scalar", "lt_scalar", "le_scalar",
    "gt_scalar", "ge_scalar", "where", "where_scalar", "rwhere_scalar", "maximum", "minimum",
    "max", "min", "argmax", "max_pool2d", "dropout", "zeros", "ones", "full", "zeros_like",
    "ones_like", "full_like", "from_buffer", "from_vector", "nonzero", "masked_select",
    "reshape", "view", "flatten", "permute", "transpose", "expand", "squeeze", "unsqueeze",
    "slice", "cat", "stack", "chunk", "gather", "index_select", "embedding", "pad", "triu",
    "tril", "slice_scatter", "detach",
}
# Correctly rounded arithmetic; a host scalar may be rounded to the
# tensor's dtype first on one side and not the other (one more rounding).
ROUNDED_OPS = {"add": 1, "sub": 1, "mul": 1, "div": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 2,
               "add_scalar": 2, "sub_scalar": 2, "rsub_scalar": 2, "mul_scalar": 2,
               "div_scalar": 2, "rdiv_scalar": 2, "arange": 2}
POINTWISE_OPS = {"exp", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "silu", "erf", "gelu",
                 "pow", "pow_scalar", "rpow_scalar"}
ACCUMULATION_OPS = {"sum", "mean", "matmul", "bmm", "linear", "conv2d", "avg_pool2d",
                    "scatter_add", "index_add", "module_linear", "module_conv2d"}


# Ops whose output is a softmax's probabilities or their logs: the error is
# the spread's, not scaled by any further magnitude.
SOFTMAX_OPS = {"softmax", "log_softmax", "logsumexp", "cross_entropy"}


def _numel(shape):
    return math.prod(shape) if len(shape) else 1


def reduction_length(c):
    """k: the longest sum the op computes (its forward)."""
    op, x = c.op, c.inputs[0] if c.inputs else None
    a = c.attrs
    if op in ("sum", "mean", "logsumexp", "var"):
        return _numel(x.shape) // max(_numel(c.expect[0].shape), 1)
    if op in ("matmul", "bmm", "linear"):
        return x.shape[-1] + 1
    if op in ("conv2d", "module_conv2d"):
        w = c.inputs[1] if op == "conv2d" else c.inputs[0]
        return _numel(w.shape[1:]) + 1
    if op == "avg_pool2d":
        k = a["kernel"]
        return k[0] * k[-1]
    if op in ("scatter_add", "index_add"):
        return _numel(c.inputs[2].shape) + 1
    if op in ("softmax", "log_softmax"):
        return x.shape[a["dim"]] if x.dim() else 1
    if op in ("scaled_dot_product_attention", "fused_sdpa"):
        return x.shape[-1] + c.inputs[1].shape[-2]  # q.k over E, then p.v over S
    if op in ("layer_norm", "rms_norm", "module_layer_norm"):
        return _numel(a["normalized_shape"])
    if op == "module_linear":
        return a["in_features"] + 1
    if op == "module_mha":
        e = a["embed_dim"]
        return 2 * (e + 1) + e // a["num_heads"] + c.inputs[-1].shape[-1]
    if op.startswith("optim_"):
        return a["steps"] * 4  # each step: a few rounded ops per moment
    if a.get("reduction") == "none":  # a loss per row: only cross_entropy sums (its classes)
        return x.shape[-1] if op == "cross_entropy" and x.dim() else 1
    # Losses, clip_grad_norm_: sums over every element.
    return sum(_numel(t.shape) for t in c.inputs if t.dtype.is_floating_point)


def softmax_spread(c):
    """Range of the exp arguments of a softmax inside the op (0 if none)."""
    if c.op in ("softmax", "log_softmax", "logsumexp", "cross_entropy"):
        return 2 * _finite_max(c.inputs[0])
    if c.op in ("scaled_dot_product_attention", "fused_sdpa"):
        q, k = c.inputs[0].double().abs(), c.inputs[1].double().abs()
        scale = c.attrs.get("scale", 1 / math.sqrt(q.shape[-1]))
        mask = _finite_max(c.inputs[3]) if c.attrs.get("has_mask") and c.inputs[3].dtype.is_floating_point else 0
        return 2 * (float((q @ k.transpose(-2, -1)).max()) * scale + mask) if q.numel() and k.numel() else 0
    return 0.0


def _finite_max(t):
    t = t.detach().double().abs()
    t = t[torch.isfinite(t)]
    return float(t.max()) if t.numel() else 0.0


def magnitudes(fn, inputs, expect, w=None, n_forward=None):
    """Per output, the sum of |terms| its rounding errors scale with: fn run
    in f64 on |inputs| (non-finite values as 0), and for the gradient
    outputs the gradient of sum(|fn(|x|)| * |w|). Never below the
    output's own largest |value|."""
    n_forward = len(expect) if n_forward is None else n_forward
    mags = [_finite_max(t) for t in expect]
    leaves = []
    for t in inputs:
        if t.dtype.is_floating_point:
            a = t.detach().double().abs()
            a[~torch.isfinite(a)] = 0
            leaves.append(a.requires_grad_(w is not None))
        else:
            leaves.append(t)
    try:
        with torch.set_grad_enabled(w is not None):
            out = fn(*leaves)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            abs_mags = [_finite_max(o) for o in outs]
            if w is not None:
                (outs[0].abs() * w.double().abs()).sum().backward()
                abs_mags += [_finite_max(t.grad) if t.grad is not None else 0.0
                             for t in leaves if t.dtype.is_floating_point]
    except Exception:  # an op without an f64 kernel: the outputs' own size
        return mags
    return [max(m, a) for m, a in zip(mags, abs_mags)]


def for_case(c, **hints):
    """(rtol, atol) for each of the case's expected outputs: its op's family
    rule at the output's own dtype. Gradient outputs (after n_forward) are
    composites: w pushed back through the op, summing at most
    numel(output 0) terms per element on top of the forward's."""
    k = reduction_length(c)
    spread = hints.get("spread", softmax_spread(c))
    acc = hints.get("acc")
    stored = hints.get("stored", 0)
    sigma = hints.get("sigma", [])  # each output's simulated error sigma, where asked for
    tols = []
    for i, t in enumerate(c.expect):
        dt = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
              torch.float16: "f16"}.get(t.dtype)
        if dt is None:
            tols.append(exact(dt))
            continue
        m = c.magnitudes[i] or 1.0
        if c.op in SOFTMAX_OPS and i < c.n_forward:
            m = 1.0  # probabilities, or logs whose error is eps * spread itself
        if i < len(sigma):
            tols.append(from_sigma(dt, sigma[i]))
        elif i >= c.n_forward:
            tols.append(composite(dt, k + _numel(c.expect[0].shape), m, spread, acc))
        elif c.op in EXACT_OPS:
            tols.append(exact(dt))
        elif c.op in ROUNDED_OPS:
            tols.append(rounded(dt, ROUNDED_OPS[c.op], m))
        elif c.op in POINTWISE_OPS:
            tols.append(pointwise(dt, m))
        elif c.op in ACCUMULATION_OPS:
            tols.append(accumulation(dt, k, m, acc))
        else:
            tols.append(composite(dt, k, m, spread, acc, stored))
    return tols
