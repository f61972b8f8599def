"""Oracle cases for creation and elementwise ops."""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, rand, randint

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def cases():
    out = []
    # Unary math on every floating dtype.
    unary = {
        "neg": torch.neg, "abs": torch.abs, "exp": torch.exp,
        "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
        "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu,
        "erf": torch.erf, "gelu": F.gelu,
    }
    positive = {"log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt,
                "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}
    for dt in FLOATS:
        n = str(dt).split(".")[1]
        for name, fn in unary.items():
            out.append(case(f"{name}_{n}", name, [randn(3, 5, dtype=dt)], fn))
        for name, fn in positive.items():
            out.append(case(f"{name}_{n}", name, [rand(4, 3, dtype=dt, lo=0.1, hi=3.0)], fn))
    out.append(case("gelu_tanh", "gelu", [randn(7)], lambda x: F.gelu(x, approximate="tanh"),
                    attrs={"approximate": "tanh"}))
    # Integer inputs to float math promote to f32.
    out.append(case("exp_int", "exp", [randint(-3, 3, 6)], torch.exp))
    out.append(case("abs_int", "abs", [randint(-9, 9, 6, dtype=torch.int32)], torch.abs))
    out.append(case("neg_int", "neg", [randint(-9, 9, 6)], torch.neg))
    out.append(case("relu_int", "relu", [randint(-9, 9, 6)], torch.relu))
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.5])
    out.append(case("isnan", "isnan", [special], torch.isnan))
    out.append(case("isfinite", "isfinite", [special], torch.isfinite))
    out.append(case("isfinite_int", "isfinite", [randint(0, 5, 3)], torch.isfinite))
    out.append(case("logical_not", "logical_not", [randint(0, 3, 5)], torch.logical_not))

    # Binary with broadcasting, non-contiguous input (a transpose) and
    # mixed dtypes (type promotion).
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul,
              "div": torch.div, "maximum": torch.maximum, "minimum": torch.minimum}
    for name, fn in binary.items():
        out.append(case(f"{name}_bcast", name, [randn(2, 3, 4), randn(3, 1)], fn))
        out.append(case(f"{name}_f64", name, [randn(5, dtype=torch.float64), randn(5, dtype=torch.float64)], fn))
        out.append(case(f"{name}_bf16", name, [randn(4, 4, dtype=torch.bfloat16), randn(4, dtype=torch.bfloat16)], fn))
        out.append(case(f"{name}_promote_int_float", name, [randint(1, 9, 3, 2), randn(2)], fn))
    out.append(case("add_int32_int64", "add", [randint(0, 9, 4, dtype=torch.int32), randint(0, 9, 4)], torch.add))
    out.append(case("mul_bool_int", "mul", [randint(0, 2, 4, dtype=torch.bool), randint(0, 9, 4)], torch.mul))
    out.append(case("add_f16_0d_f32", "add", [randn(3, dtype=torch.float16), torch.tensor(0.5)], torch.add))
    out.append(case("add_int_0d_float", "add", [randint(0, 9, 3), torch.tensor(0.25, dtype=torch.float64)], torch.add))
    out.append(case("div_int", "div", [randint(1, 9, 4), randint(1, 9, 4)], torch.div))
    out.append(case("pow", "pow", [rand(3, 4, lo=0.5, hi=2.0), randn(4)], torch.pow))
    out.append(case("pow_int", "pow", [randint(-3, 4, 6), randint(0, 4, 6)], torch.pow))
    out.append(case("add_size0", "add", [randn(0, 3), randn(3)], torch.add))
    out.append(case("mul_scalar_tensor_0d", "mul", [randn(2, 2), torch.tensor(3.0)], torch.mul))
    # Scalar operands (attr "scalar" holds the host value, "kind" its type).
    out.append(case("add_scalar", "add_scalar", [randn(3, 2)], lambda x: x + 2.5, attrs={"scalar": 2.5}))
    out.append(case("mul_scalar_int_tensor_float", "mul_scalar", [randint(0, 9, 4)], lambda x: x * 0.5,
                    attrs={"scalar": 0.5}))
    out.append(case("mul_scalar_int", "mul_scalar", [randint(0, 9, 4)], lambda x: x * 3,
                    attrs={"scalar": 3, "kind": "int"}))
    out.append(case("sub_scalar", "sub_scalar", [randn(3, 2)], lambda x: x - 0.75, attrs={"scalar": 0.75}))
    out.append(case("div_scalar_int_int", "div_scalar", [randint(-9, 9, 5)], lambda x: x / 4,
                    attrs={"scalar": 4, "kind": "int"}))
    out.append(case("sub_scalar_first", "rsub_scalar", [randn(4)], lambda x: 1.0 - x, attrs={"scalar": 1.0}))
    out.append(case("div_scalar_first", "rdiv_scalar", [rand(4, lo=0.5)], lambda x: 2.0 / x, attrs={"scalar": 2.0}))
    out.append(case("pow_scalar", "pow_scalar", [rand(4, lo=0.5)], lambda x: x ** 2.0, attrs={"scalar": 2.0}))
    out.append(case("add_scalar_bf16", "add_scalar", [randn(5, dtype=torch.bfloat16)], lambda x: x + 1.25,
                    attrs={"scalar": 1.25}))

    for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
        fn = getattr(torch, name)
        a = randint(0, 3, 3, 4)
        out.append(case(f"{name}_bcast", name, [a, randint(0, 3, 4)], fn))
        out.append(case(f"{name}_float", name, [randn(6), randn(6)], fn))
        out.append(case(f"{name}_scalar", f"{name}_scalar", [randint(0, 3, 5)], lambda x, fn=fn: fn(x, 1),
                        attrs={"scalar": 1, "kind": "int"}))
    out.append(case("logical_and", "logical_and", [randint(0, 2, 6), randint(0, 3, 6)], torch.logical_and))
    out.append(case("logical_or", "logical_or", [randint(0, 2, 2, 3), randint(0, 2, 3, dtype=torch.bool)],
                    torch.logical_or))
    out.append(case("where", "where", [randint(0, 2, 3, 4, dtype=torch.bool), randn(3, 4), randn(4)], torch.where))
    out.append(case("where_promote", "where", [randint(0, 2, 4, dtype=torch.bool), randint(0, 5, 4), randn(4)],
                    torch.where))

    casts = [(torch.float32, torch.int32), (torch.float32, torch.bfloat16), (torch.float32, torch.float16),
             (torch.float64, torch.float32), (torch.int64, torch.float32), (torch.float32, torch.bool),
             (torch.bool, torch.float32), (torch.int32, torch.int64)]
    for src, dst in casts:
        x = randn(7, dtype=torch.float64).mul(3).to(src) if src.is_floating_point else randint(-2, 3, 7).to(src)
        n = f"{str(src).split('.')[1]}_{str(dst).split('.')[1]}"
        out.append(case(f"to_{n}", "to", [x], lambda t, dst=dst: t.to(dst), attrs={"dtype": str(dst).split(".")[1]}))

    # Creation ops with deterministic values.
    out.append(case("arange", "arange", [], lambda: torch.arange(2, 11, 3), attrs={"start": 2, "end": 11, "step": 3}))
    out.append(case("arange_float", "arange", [], lambda: torch.arange(0.0, 1.0, 0.25),
                    attrs={"start": 0.0, "end": 1.0, "step": 0.25}))
    out.append(case("arange_negative_step", "arange", [], lambda: torch.arange(5, 0, -2),
                    attrs={"start": 5, "end": 0, "step": -2}))
    out.append(case("full", "full", [], lambda: torch.full((2, 3), 1.5), attrs={"shape": [2, 3], "value": 1.5}))
    out.append(case("zeros", "zeros", [], lambda: torch.zeros(3, 2), attrs={"shape": [3, 2]}))
    out.append(case("ones_int", "ones", [], lambda: torch.ones(4, dtype=torch.int64),
                    attrs={"shape": [4], "dtype": "int64"}))
    return out
