"""Oracle cases for reductions: sum, mean, max, min, argmax, logsumexp, var.

Attrs: "dims" (empty = every dim), "keepdim", "dim" (argmax; absent =
flattened), "correction" (var).
"""
import torch

from oracle_lib import case, randn, randint, rounded_once

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16


def _name(dt):
    return {F32: "f32", F64: "f64", BF16: "bf16"}[dt]


def _dims_fn(fn, dims, keepdim):
    # torch's reductions take () as "all dims" for sum/mean, but amax, var
    # and logsumexp want the explicit list.
    def run(x):
        d = tuple(dims) if dims else tuple(range(x.dim()))
        return fn(x, d, keepdim)
    return run


def cases():
    out = []
    shapes = [
        ("all", (3, 4), [], False),
        ("dim1_keepdim", (3, 4), [1], True),
        ("neg_dim", (2, 3, 5), [-1], False),
        ("dims02", (2, 3, 4), [0, 2], False),
        ("dims_neg_keepdim", (2, 3, 4), [-1, 0], True),
        ("size1_dim", (3, 1, 4), [1], False),
        ("size1_shape", (1,), [], False),
    ]
    float_ops = {
        "sum": lambda x, d, k: torch.sum(x, d, keepdim=k),
        "mean": lambda x, d, k: torch.mean(x, d, keepdim=k),
        "max": lambda x, d, k: torch.amax(x, d, keepdim=k),
        "min": lambda x, d, k: torch.amin(x, d, keepdim=k),
        "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    }
    for op, fn in float_ops.items():
        for dt in (F32, F64, BF16):
            for tag, shape, dims, keepdim in shapes:
                run = _dims_fn(fn, dims, keepdim)
                if op in ("sum", "mean", "logsumexp"):
                    run = rounded_once(run)
                out.append(case(f"{op}_{tag}_{_name(dt)}", op, [randn(*shape, dtype=dt)], run,
                                attrs={"dims": dims, "keepdim": keepdim}))

    # Integer and bool inputs: sums go to i64, max/min keep the dtype.
    for dt in (torch.int32, torch.int64):
        n = str(dt).split(".")[1]
        x = randint(-50, 50, 3, 4, dtype=dt)
        out.append(case(f"sum_dim0_{n}", "sum", [x], lambda x: torch.sum(x, 0), attrs={"dims": [0], "keepdim": 0}))
        out.append(case(f"max_dim1_{n}", "max", [x], lambda x: torch.amax(x, 1), attrs={"dims": [1], "keepdim": 0}))
        out.append(case(f"min_all_{n}", "min", [x], torch.min, attrs={"dims": [], "keepdim": 0}))
    b = randint(0, 2, 4, 5, dtype=torch.bool)
    out.append(case("sum_bool", "sum", [b], torch.sum, attrs={"dims": [], "keepdim": 0}))
    out.append(case("sum_bool_dim", "sum", [b], lambda x: torch.sum(x, 1), attrs={"dims": [1], "keepdim": 0}))
    out.append(case("max_bool", "max", [b], lambda x: torch.amax(x, 0), attrs={"dims": [0], "keepdim": 0}))
    out.append(case("sum_size0", "sum", [randn(0, 3)], lambda x: torch.sum(x, 0), attrs={"dims": [0], "keepdim": 0}))
    out.append(case("mean_size0_nan", "mean", [randn(0, 3)], lambda x: torch.mean(x, 0),
                    attrs={"dims": [0], "keepdim": 0}))
    out.append(case("max_size0_kept", "max", [randn(0, 3)], lambda x: torch.amax(x, 1),
                    attrs={"dims": [1], "keepdim": 0}))
    out.append(case("logsumexp_large", "logsumexp", [randn(3, 6, dtype=F64) * 300], lambda x: torch.logsumexp(x, 1),
                    attrs={"dims": [1], "keepdim": 0}))
    out.append(case("sum_many_f32", "sum", [randn(1000)], torch.sum, attrs={"dims": [], "keepdim": 0}))
    out.append(case("sum_many_bf16", "sum", [randn(8, 256, dtype=BF16)], rounded_once(lambda x: torch.sum(x, 1)),
                    attrs={"dims": [1], "keepdim": 0}))

    # argmax: flattened, one dim, keepdim, ties (first index wins).
    x = randn(4, 5)
    out.append(case("argmax_flat", "argmax", [x], torch.argmax))
    out.append(case("argmax_flat_keepdim", "argmax", [x], lambda x: torch.argmax(x, keepdim=True),
                    attrs={"keepdim": 1}))
    out.append(case("argmax_dim1", "argmax", [x], lambda x: torch.argmax(x, 1), attrs={"dim": 1}))
    out.append(case("argmax_dim0_keepdim", "argmax", [x], lambda x: torch.argmax(x, 0, keepdim=True),
                    attrs={"dim": 0, "keepdim": 1}))
    out.append(case("argmax_neg_dim_3d", "argmax", [randn(2, 3, 4, dtype=F64)], lambda x: torch.argmax(x, -2),
                    attrs={"dim": -2}))
    out.append(case("argmax_bf16", "argmax", [randn(3, 7, dtype=BF16)], lambda x: torch.argmax(x, 1),
                    attrs={"dim": 1}))
    ties = torch.tensor([[1, 3, 3, 0], [2, 2, 2, 2], [0, 1, 5, 5]])
    out.append(case("argmax_ties_int", "argmax", [ties], lambda x: torch.argmax(x, 1), attrs={"dim": 1}))
    out.append(case("argmax_size1", "argmax", [randn(3, 1)], lambda x: torch.argmax(x, 1), attrs={"dim": 1}))

    # var with each correction.
    for dt in (F32, F64, BF16):
        for corr in (0, 1, 2):
            out.append(case(f"var_dim1_c{corr}_{_name(dt)}", "var", [randn(4, 6, dtype=dt)],
                            rounded_once(lambda x, c=corr: torch.var(x, (1,), correction=c)),
                            attrs={"dims": [1], "correction": corr, "keepdim": 0}))
        out.append(case(f"var_all_{_name(dt)}", "var", [randn(3, 5, dtype=dt)],
                        rounded_once(lambda x: torch.var(x, (0, 1))), attrs={"dims": [], "correction": 1, "keepdim": 0}))
        out.append(case(f"var_dims02_keepdim_{_name(dt)}", "var", [randn(2, 3, 4, dtype=dt)],
                        rounded_once(lambda x: torch.var(x, (0, -1), keepdim=True)),
                        attrs={"dims": [0, -1], "correction": 1, "keepdim": 1}))
    out.append(case("var_single_nan", "var", [randn(3, 1)], lambda x: torch.var(x, (1,)),
                    attrs={"dims": [1], "correction": 1, "keepdim": 0}))
    return out
