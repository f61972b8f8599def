"""Gradient oracle cases (PyTorch autograd) for elementwise ops."""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, rand, randint

D = torch.float64


def cases():
    out = []
    unary = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "sin": torch.sin,
             "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
             "silu": F.silu, "erf": torch.erf, "gelu": F.gelu}
    for name, fn in unary.items():
        out.append(case(f"grad_{name}", name, [randn(3, 4, dtype=D)], fn, grad=True))
    for name, fn in {"log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt,
                     "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}.items():
        out.append(case(f"grad_{name}", name, [rand(5, dtype=D, lo=0.2, hi=2.0)], fn, grad=True))
    out.append(case("grad_gelu_tanh", "gelu", [randn(6, dtype=D)],
                    lambda x: F.gelu(x, approximate="tanh"), attrs={"approximate": "tanh"}, grad=True))
    out.append(case("grad_relu_f32", "relu", [randn(7)], torch.relu, grad=True))
    for name in ["add", "sub", "mul", "div", "maximum", "minimum"]:
        fn = getattr(torch, name)
        out.append(case(f"grad_{name}_bcast", name, [randn(2, 3, 4, dtype=D), randn(3, 1, dtype=D)],
                        fn, grad=True))
    ties = torch.tensor([1.0, 2.0, 3.0], dtype=D)
    out.append(case("grad_maximum_ties", "maximum", [ties, torch.tensor([1.0, 5.0, 0.0], dtype=D)],
                    torch.maximum, grad=True))
    out.append(case("grad_pow", "pow", [rand(3, 4, dtype=D, lo=0.5, hi=2.0), randn(4, dtype=D)],
                    torch.pow, grad=True))
    out.append(case("grad_mul_scalar", "mul_scalar", [randn(4, dtype=D)], lambda x: x * 2.5,
                    attrs={"scalar": 2.5}, grad=True))
    out.append(case("grad_rdiv_scalar", "rdiv_scalar", [rand(4, dtype=D, lo=0.5)], lambda x: 3.0 / x,
                    attrs={"scalar": 3.0}, grad=True))
    out.append(case("grad_where", "where", [randint(0, 2, 3, 4, dtype=torch.bool), randn(3, 4, dtype=D),
                                            randn(4, dtype=D)], torch.where, grad=True))
    out.append(case("grad_to_f32", "to", [randn(5, dtype=D)], lambda x: x.to(torch.float32),
                    attrs={"dtype": "float32"}, grad=True))
    return out
