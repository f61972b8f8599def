"""Oracle cases for the API forms the op cases leave out: every binary op
with a host scalar on either side (attr "scalar", its Python type in
"kind"), where with a scalar branch, the *_like creation ops, tensors from
host data (from_vector, from_buffer), the value-dependent ops (nonzero,
masked_select) and the gradients of sum.

Op names: "<op>_scalar" is op(x, scalar), "r<op>_scalar" op(scalar, x),
"where_scalar" where(cond, x, scalar), "rwhere_scalar" where(cond,
scalar, x).
"""
import torch

from oracle_lib import case

# A generator of our own, so the other case files' inputs stay as they were.
_gen = torch.Generator().manual_seed(2718)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=_gen, dtype=torch.float64).to(dtype)


def rand(*shape, lo=0.0, hi=1.0, dtype=torch.float32):
    return (lo + (hi - lo) * torch.rand(shape, generator=_gen, dtype=torch.float64)).to(dtype)


def randint(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=_gen).to(dtype)


def _name(dt):
    return str(dt).split(".")[1]


def _kind(v):
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"


# (tensor dtype, host scalar): PyTorch's promotion of each pairing (a float
# scalar lifts an integer tensor to f32, an int scalar keeps bf16, a bool
# scalar keeps everything).
PAIRS = [(torch.float32, 2.5), (torch.float64, -0.75), (torch.bfloat16, 3), (torch.float16, 1.5),
         (torch.int64, 3), (torch.int32, 1.5), (torch.int64, True)]


def _operand(dt, positive=False):
    if dt.is_floating_point:
        return rand(2, 3, lo=0.5, hi=2.0, dtype=dt) if positive else randn(2, 3, dtype=dt)
    return randint(1, 5, 2, 3, dtype=dt) if positive else randint(-4, 5, 2, 3, dtype=dt)


def scalar_cases():
    out = []
    right = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
             "pow": torch.pow, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
             "gt": torch.gt, "ge": torch.ge}
    left = {"sub": lambda s, x: s - x, "div": lambda s, x: s / x, "pow": lambda s, x: s ** x}
    for dt, s in PAIRS:
        n = f"{_name(dt)}_{_kind(s)}"
        attrs = {"scalar": int(s) if isinstance(s, bool) else s, "kind": _kind(s)}
        for op, fn in right.items():
            if op in ("sub", "pow") and isinstance(s, bool):
                continue  # PyTorch refuses bool subtraction; pow with a bool is no use
            x = _operand(dt, positive=op in ("div", "pow"))
            out.append(case(f"{op}_scalar_{n}", f"{op}_scalar", [x], lambda x, fn=fn, s=s: fn(x, s),
                            attrs=attrs))
        for op, fn in left.items():
            if isinstance(s, bool):
                continue
            x = _operand(dt, positive=True)
            if op == "pow" and not dt.is_floating_point:
                x = randint(0, 4, 2, 3, dtype=dt)  # int ** int: non-negative powers
            out.append(case(f"r{op}_scalar_{n}", f"r{op}_scalar", [x], lambda x, fn=fn, s=s: fn(s, x),
                            attrs=attrs))
    # Gradients of the float forms, scalar on either side.
    D = torch.float64
    for op, fn in {"add": lambda x: x + 1.5, "sub": lambda x: x - 1.5, "mul": lambda x: x * -2.0,
                   "div": lambda x: x / 4.0, "pow": lambda x: x ** 3.0}.items():
        out.append(case(f"grad_{op}_scalar_f64", f"{op}_scalar", [rand(3, 4, lo=0.5, hi=2.0, dtype=D)], fn,
                        attrs={"scalar": {"add": 1.5, "sub": 1.5, "mul": -2.0, "div": 4.0, "pow": 3.0}[op]},
                        grad=True, gen=_gen))
    for op, fn in {"sub": lambda x: 1.5 - x, "pow": lambda x: 2.0 ** x}.items():
        out.append(case(f"grad_r{op}_scalar_f64", f"r{op}_scalar", [rand(3, 4, lo=0.5, hi=2.0, dtype=D)], fn,
                        attrs={"scalar": {"sub": 1.5, "pow": 2.0}[op]}, grad=True, gen=_gen))
    return out


def where_cases():
    out = []
    # A float scalar lifts an integer tensor to f32, a bool one keeps it.
    for dt, s in [(torch.float32, 2.5), (torch.float64, -1.0), (torch.bfloat16, 0.5), (torch.int64, 7),
                  (torch.bool, True), (torch.int32, 2.75), (torch.int64, True)]:
        n = f"{_name(dt)}_{_kind(s)}"
        cond = randint(0, 2, 3, 4, dtype=torch.bool)
        x = _sample(dt, 4)  # broadcast against cond
        attrs = {"scalar": int(s) if isinstance(s, bool) else s, "kind": _kind(s)}
        out.append(case(f"where_scalar_{n}", "where_scalar", [cond, x],
                        lambda c, x, s=s: torch.where(c, x, s), attrs=attrs))
        out.append(case(f"rwhere_scalar_{n}", "rwhere_scalar", [cond, x],
                        lambda c, x, s=s: torch.where(c, s, x), attrs=attrs))
    cond = randint(0, 2, 3, 4, dtype=torch.bool)
    out.append(case("grad_where_scalar", "where_scalar", [cond, randn(3, 4, dtype=torch.float64)],
                    lambda c, x: torch.where(c, x, 0.5), attrs={"scalar": 0.5}, grad=True, gen=_gen))
    out.append(case("grad_rwhere_scalar", "rwhere_scalar", [cond, randn(4, dtype=torch.float64)],
                    lambda c, x: torch.where(c, -2.0, x), attrs={"scalar": -2.0}, grad=True, gen=_gen))
    return out


DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]


def _sample(dt, *shape):
    if dt == torch.bool:
        return randint(0, 2, *shape, dtype=torch.bool)
    if dt.is_floating_point:
        return randn(*shape, dtype=dt)
    return randint(-50, 50, *shape, dtype=dt)


def creation_cases():
    out = []
    for dt in DTYPES:
        n = _name(dt)
        x = _sample(dt, 2, 3)
        out.append(case(f"zeros_like_{n}", "zeros_like", [x], torch.zeros_like))
        out.append(case(f"ones_like_{n}", "ones_like", [x], torch.ones_like))
        s = True if dt == torch.bool else (-3 if not dt.is_floating_point else 1.25)
        out.append(case(f"full_like_{n}", "full_like", [x], lambda x, s=s: torch.full_like(x, s),
                        attrs={"scalar": int(s) if isinstance(s, bool) else s, "kind": _kind(s)}))
        # Host data in every dtype, bit for bit: mstep reads PyTorch's values.
        y = _sample(dt, 3, 4)
        out.append(case(f"from_vector_{n}", "from_vector", [y], lambda t: t.clone()))
        out.append(case(f"from_buffer_{n}", "from_buffer", [y], lambda t: t.clone()))
    out.append(case("full_like_int_tensor_float_value", "full_like", [randint(0, 9, 4)],
                    lambda x: torch.full_like(x, 2.75), attrs={"scalar": 2.75}))
    out.append(case("from_buffer_0d", "from_buffer", [randn()], lambda t: t.clone()))
    out.append(case("from_buffer_empty", "from_buffer", [randn(0, 3)], lambda t: t.clone()))
    return out


def dynamic_cases():
    out = []
    for dt in (torch.float32, torch.int64, torch.bool):
        x = _sample(dt, 3, 4)
        if dt != torch.bool:
            x[x.abs() < 0.5] = 0
        out.append(case(f"nonzero_{_name(dt)}", "nonzero", [x], torch.nonzero))
        mask = randint(0, 2, 3, 4, dtype=torch.bool)
        out.append(case(f"masked_select_{_name(dt)}", "masked_select", [x, mask], torch.masked_select))
    out.append(case("masked_select_bcast", "masked_select", [randn(2, 3), randint(0, 2, 3, dtype=torch.bool)],
                    torch.masked_select))
    return out


def sum_grad_cases():
    out = []
    shapes = [("all", (3, 4), [], False), ("dim1_keepdim", (3, 4), [1], True),
              ("neg_dim", (2, 3, 5), [-1], False), ("dims02", (2, 3, 4), [0, 2], False),
              ("dims_neg_keepdim", (2, 3, 4), [-1, 0], True), ("size1_dim", (3, 1, 4), [1], False)]
    for dt in (torch.float32, torch.float64):
        for tag, shape, dims, keepdim in shapes:
            fn = lambda x, d=dims, k=keepdim: torch.sum(x, tuple(d) if d else tuple(range(x.dim())), keepdim=k)
            out.append(case(f"grad_sum_{tag}_{_name(dt)}", "sum", [randn(*shape, dtype=dt)], fn,
                            attrs={"dims": dims, "keepdim": int(keepdim)}, grad=True, gen=_gen))
    return out


def cases():
    return scalar_cases() + where_cases() + creation_cases() + dynamic_cases() + sum_grad_cases()
