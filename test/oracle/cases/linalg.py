"""Oracle cases for matmul, bmm, linear, conv2d and the 2-D pools."""
import torch
import torch.nn.functional as F

from oracle_lib import case, rounded_once

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16

# A generator of our own, so that these inputs (and how close the bf16
# cases come to their tolerance) do not change when another case file is
# added before this one.
_gen = torch.Generator().manual_seed(4321)


def randn(*shape, dtype=F32):
    return torch.randn(*shape, generator=_gen, dtype=F64).to(dtype)


def randint(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=_gen).to(dtype)

# bf16 matmul/bmm: mstep sums in float and rounds once (ref: a float
# accumulator; cpu: oneDNN), so the expectation is rounded_once's.


def _matmul_cases():
    out = []
    shapes = {
        "2d": ((3, 4), (4, 5)),
        "dot": ((4,), (4,)),
        "vec_mat": ((4,), (4, 3)),
        "mat_vec": ((3, 4), (4,)),
        "batched_bcast": ((2, 1, 3, 4), (5, 4, 2)),
        "mat_batched": ((3, 4), (2, 4, 5)),
        "batched_mat": ((2, 3, 4), (4, 5)),
        "batched_vec": ((2, 3, 4), (4,)),
        "vec_batched": ((4,), (2, 4, 3)),
        "size1": ((1, 1, 4), (3, 4, 1)),
        "rows0": ((0, 3), (3, 2)),
        "inner0": ((2, 0), (0, 3)),
        "batch0": ((0, 2, 3), (3, 2)),
        "long_k": ((3, 64), (64, 2)),
    }
    for name, (sa, sb) in shapes.items():
        out.append(case(f"matmul_{name}", "matmul", [randn(*sa), randn(*sb)], torch.matmul))
    for dt, n in ((F64, "f64"), (BF16, "bf16")):
        out.append(case(f"matmul_2d_{n}", "matmul", [randn(3, 16, dtype=dt), randn(16, 5, dtype=dt)],
                        rounded_once(torch.matmul)))
        out.append(case(f"matmul_batched_bcast_{n}", "matmul",
                        [randn(2, 1, 3, 8, dtype=dt), randn(4, 8, 2, dtype=dt)], rounded_once(torch.matmul)))
        out.append(case(f"matmul_dot_{n}", "matmul", [randn(8, dtype=dt), randn(8, dtype=dt)],
                        rounded_once(torch.matmul)))
    for dt, n in ((torch.int32, "i32"), (torch.int64, "i64")):
        out.append(case(f"matmul_{n}", "matmul",
                        [randint(-9, 9, 2, 3, 4, dtype=dt), randint(-9, 9, 4, 5, dtype=dt)], torch.matmul))

    for dt, n in ((F32, "f32"), (F64, "f64"), (BF16, "bf16")):
        out.append(case(f"bmm_{n}", "bmm", [randn(3, 2, 8, dtype=dt), randn(3, 8, 5, dtype=dt)],
                        rounded_once(torch.bmm)))
    out.append(case("bmm_batch0", "bmm", [randn(0, 2, 3), randn(0, 3, 4)], torch.bmm))
    out.append(case("bmm_i64", "bmm", [randint(-5, 5, 2, 3, 4), randint(-5, 5, 2, 4, 2)], torch.bmm))
    return out


def _linear_cases():
    out = []
    for dt, n in ((F32, "f32"), (F64, "f64"), (BF16, "bf16")):
        out.append(case(f"linear_{n}", "linear",
                        [randn(4, 8, dtype=dt), randn(5, 8, dtype=dt), randn(5, dtype=dt)],
                        rounded_once(F.linear)))
    out.append(case("linear_no_bias", "linear", [randn(4, 3), randn(5, 3)], F.linear))
    out.append(case("linear_vec_input", "linear", [randn(3), randn(5, 3), randn(5)], F.linear))
    out.append(case("linear_3d_input", "linear", [randn(2, 3, 4), randn(6, 4), randn(6)], F.linear))
    out.append(case("linear_batch0", "linear", [randn(0, 4), randn(2, 4), randn(2)], F.linear))
    return out


def _conv_cases():
    out = []
    variants = {
        # name: (input shape, weight shape, bias?, kwargs)
        "basic": ((2, 3, 7, 7), (4, 3, 3, 3), True, {}),
        "no_bias": ((1, 2, 5, 6), (3, 2, 3, 3), False, {}),
        "stride2": ((1, 3, 8, 8), (2, 3, 3, 3), True, {"stride": [2]}),
        "padding1": ((1, 2, 5, 5), (2, 2, 3, 3), True, {"padding": [1]}),
        "asym": ((1, 2, 7, 9), (3, 2, 2, 3), True, {"stride": [2, 1], "padding": [1, 2]}),
        "dilation2": ((1, 2, 9, 9), (2, 2, 3, 3), True, {"dilation": [2]}),
        "dilation_pad": ((1, 1, 6, 7), (2, 1, 3, 2), True,
                         {"dilation": [2, 3], "padding": [2, 1], "stride": [1, 2]}),
        "groups3": ((2, 6, 6, 6), (6, 2, 3, 3), True, {"groups": 3}),
        "depthwise": ((1, 4, 5, 5), (8, 1, 3, 3), True, {"groups": 4, "padding": [1]}),
        "kernel1x1": ((2, 5, 4, 4), (3, 5, 1, 1), True, {}),
        "kernel_eq_input": ((1, 2, 3, 3), (2, 2, 3, 3), True, {}),
        "unbatched": ((3, 6, 6), (2, 3, 3, 3), True, {"padding": [1]}),
        "batch0": ((0, 2, 5, 5), (3, 2, 3, 3), True, {}),
    }
    for name, (si, sw, has_bias, kw) in variants.items():
        inputs = [randn(*si), randn(*sw)] + ([randn(sw[0])] if has_bias else [])
        fn = lambda x, w, b=None, kw=kw: F.conv2d(x, w, b, **{k: tuple(v) if isinstance(v, list) else v
                                                              for k, v in kw.items()})
        out.append(case(f"conv2d_{name}", "conv2d", inputs, fn, attrs=kw))
    # bf16: the expectation is rounded_once's, as mstep computes. PyTorch's own bf16 CPU conv
    # accumulates in bf16 on CPUs without AVX512-BF16 (errors of ~0.1 here).
    for dt, n in ((F64, "f64"), (BF16, "bf16")):
        kw = {"stride": [2], "padding": [1], "groups": 2}
        fn = rounded_once(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2))
        out.append(case(f"conv2d_{n}", "conv2d",
                        [randn(2, 4, 7, 7, dtype=dt), randn(4, 2, 3, 3, dtype=dt), randn(4, dtype=dt)],
                        fn, attrs=kw))
    return out


def _pool_cases():
    out = []
    max_variants = {
        # name: (input shape, attrs); attrs map to F.max_pool2d keywords.
        "k2": ((2, 3, 6, 6), {"kernel": [2]}),
        "k3s2p1": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1]}),
        "asym": ((1, 2, 7, 9), {"kernel": [2, 3], "stride": [1, 2], "padding": [1, 1]}),
        "dilation2": ((1, 2, 8, 8), {"kernel": [3], "stride": [1], "dilation": [2]}),
        "ceil": ((1, 2, 5, 5), {"kernel": [2], "stride": [2], "ceil_mode": 1}),
        # ceil mode where the last window would start in the right padding
        # and is dropped: 5 rows, kernel 2, stride 2, padding 1 gives 3
        # windows, not ceil(5 / 2) + 1 = 4.
        "ceil_drop": ((1, 1, 5, 5), {"kernel": [2], "stride": [2], "padding": [1], "ceil_mode": 1}),
        "ceil_dilation": ((1, 1, 7, 8), {"kernel": [2], "stride": [3], "dilation": [2], "ceil_mode": 1}),
        "unbatched": ((3, 6, 5), {"kernel": [2], "stride": [1]}),
        "batch0": ((0, 2, 4, 4), {"kernel": [2]}),
    }
    for name, (shape, attrs) in max_variants.items():
        out.append(case(f"max_pool2d_{name}", "max_pool2d", [randn(*shape)], _pool_fn(F.max_pool2d, attrs),
                        attrs=attrs))
    for dt, n in ((F64, "f64"), (BF16, "bf16")):
        attrs = {"kernel": [3], "stride": [2], "padding": [1]}
        out.append(case(f"max_pool2d_{n}", "max_pool2d", [randn(2, 2, 6, 6, dtype=dt)],
                        _pool_fn(F.max_pool2d, attrs), attrs=attrs))
    x = randn(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    out.append(case("max_pool2d_nan", "max_pool2d", [x], _pool_fn(F.max_pool2d, {"kernel": [2]}),
                    attrs={"kernel": [2]}))

    avg_variants = {
        "k2": ((2, 3, 6, 6), {"kernel": [2]}),
        "k3s2p1": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1]}),
        "k3s2p1_excl": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1], "count_include_pad": 0}),
        "asym": ((1, 2, 7, 9), {"kernel": [2, 3], "stride": [1, 2], "padding": [1, 1]}),
        "ceil": ((1, 2, 5, 5), {"kernel": [2], "stride": [2], "ceil_mode": 1}),
        # Windows that stick out past the right padding in ceil mode: the
        # divisor counts only the part inside input + padding.
        "ceil_pad": ((1, 1, 6, 6), {"kernel": [3], "stride": [2], "padding": [1], "ceil_mode": 1}),
        "ceil_pad_excl": ((1, 1, 6, 7), {"kernel": [3], "stride": [2], "padding": [1], "ceil_mode": 1,
                                         "count_include_pad": 0}),
        "ceil_overhang": ((1, 1, 5, 5), {"kernel": [3], "stride": [3], "padding": [1], "ceil_mode": 1}),
        "unbatched": ((3, 6, 5), {"kernel": [2], "stride": [1]}),
    }
    for name, (shape, attrs) in avg_variants.items():
        out.append(case(f"avg_pool2d_{name}", "avg_pool2d", [randn(*shape)], _pool_fn(F.avg_pool2d, attrs),
                        attrs=attrs))
    for dt, n in ((F64, "f64"), (BF16, "bf16")):
        attrs = {"kernel": [3], "stride": [2], "padding": [1], "count_include_pad": 0}
        out.append(case(f"avg_pool2d_{n}", "avg_pool2d", [randn(2, 2, 6, 6, dtype=dt)],
                        rounded_once(_pool_fn(F.avg_pool2d, attrs)), attrs=attrs))
    return out


def _pool_fn(pool, attrs):
    """F.max_pool2d / F.avg_pool2d called with the case's attrs."""
    names = {"kernel": "kernel_size", "stride": "stride", "padding": "padding",
             "dilation": "dilation", "ceil_mode": "ceil_mode", "count_include_pad": "count_include_pad"}
    kw = {}
    for k, v in attrs.items():
        kw[names[k]] = tuple(v) if isinstance(v, list) else bool(v)
    return lambda x: pool(x, **kw)


def cases():
    return _matmul_cases() + _linear_cases() + _conv_cases() + _pool_cases()
