"""Gradient oracle cases (PyTorch autograd) for matmul, bmm, linear, conv2d
and the 2-D pools, in f32 and f64. The op names are those registered in
linalg_oracle.cpp; attrs follow linalg.py."""
import torch
import torch.nn.functional as F

from oracle_lib import case

F32, F64 = torch.float32, torch.float64
DTYPES = ((F32, "f32"), (F64, "f64"))

# Our own generator: these inputs do not change when another case file
# draws from oracle_lib's.
_gen = torch.Generator().manual_seed(8765)



def randn(*shape, dtype=F32):
    return torch.randn(*shape, generator=_gen, dtype=F64).to(dtype)


def _tol(dt):
    return {}


def _matmul_cases():
    out = []
    # No 1-D @ 1-D case: its output is 0-d, and oracle_lib cannot draw the
    # loss weight for a 0-d output (torch.randn(*())); the unit test's
    # gradcheck covers the dot product.
    shapes = {
        "2d": ((3, 4), (4, 5)),
        "vec_mat": ((4,), (4, 3)),
        "mat_vec": ((3, 4), (4,)),
        "batched": ((2, 3, 4), (2, 4, 5)),
        "batched_bcast": ((2, 1, 3, 4), (5, 4, 2)),
        "batched_mat": ((2, 3, 4), (4, 5)),
        "mat_batched": ((3, 4), (2, 1, 4, 5)),
        "vec_batched": ((4,), (2, 4, 3)),
        "batched_vec": ((2, 3, 4), (4,)),
    }
    for dt, n in DTYPES:
        for name, (sa, sb) in shapes.items():
            out.append(case(f"grad_matmul_{name}_{n}", "matmul", [randn(*sa, dtype=dt), randn(*sb, dtype=dt)],
                            torch.matmul, grad=True, **_tol(dt)))
        out.append(case(f"grad_bmm_{n}", "bmm", [randn(3, 2, 4, dtype=dt), randn(3, 4, 5, dtype=dt)],
                        torch.bmm, grad=True, **_tol(dt)))
        out.append(case(f"grad_linear_{n}", "linear",
                        [randn(4, 6, dtype=dt), randn(5, 6, dtype=dt), randn(5, dtype=dt)],
                        F.linear, grad=True, **_tol(dt)))
        out.append(case(f"grad_linear_no_bias_{n}", "linear", [randn(4, 3, dtype=dt), randn(5, 3, dtype=dt)],
                        F.linear, grad=True, **_tol(dt)))
        out.append(case(f"grad_linear_3d_{n}", "linear",
                        [randn(2, 3, 4, dtype=dt), randn(6, 4, dtype=dt), randn(6, dtype=dt)],
                        F.linear, grad=True, **_tol(dt)))
    return out


def _conv_cases():
    out = []
    variants = {
        # name: (input shape, weight shape, bias?, kwargs)
        "basic": ((2, 3, 6, 6), (4, 3, 3, 3), True, {}),
        "no_bias": ((1, 2, 5, 6), (3, 2, 3, 3), False, {}),
        "asym": ((1, 2, 7, 9), (3, 2, 2, 3), True, {"stride": [2, 1], "padding": [1, 2]}),
        # Stride 3 with a 2x2 kernel: rows and columns 2, 5, 6 feed no output.
        "stride_gaps": ((1, 2, 7, 7), (2, 2, 2, 2), True, {"stride": [3]}),
        "dilation_pad": ((1, 1, 6, 7), (2, 1, 3, 2), True,
                         {"dilation": [2, 3], "padding": [2, 1], "stride": [1, 2]}),
        "groups2": ((2, 4, 5, 5), (6, 2, 3, 3), True, {"groups": 2, "stride": [2], "padding": [1]}),
        "depthwise": ((1, 3, 5, 5), (6, 1, 3, 3), True, {"groups": 3, "padding": [1]}),
        "unbatched": ((3, 5, 5), (2, 3, 3, 3), True, {"padding": [1]}),
    }
    for dt, n in DTYPES:
        for name, (si, sw, has_bias, kw) in variants.items():
            inputs = [randn(*si, dtype=dt), randn(*sw, dtype=dt)]
            if has_bias:
                inputs.append(randn(sw[0], dtype=dt))
            fn = lambda x, w, b=None, kw=kw: F.conv2d(
                x, w, b, **{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
            out.append(case(f"grad_conv2d_{name}_{n}", "conv2d", inputs, fn, attrs=kw, grad=True, **_tol(dt)))
    return out


def _pool_fn(pool, attrs):
    """F.max_pool2d / F.avg_pool2d called with the case's attrs."""
    names = {"kernel": "kernel_size", "stride": "stride", "padding": "padding",
             "dilation": "dilation", "ceil_mode": "ceil_mode", "count_include_pad": "count_include_pad"}
    kw = {names[k]: tuple(v) if isinstance(v, list) else bool(v) for k, v in attrs.items()}
    return lambda x: pool(x, **kw)


def _pool_cases():
    out = []
    max_variants = {
        "k2": ((2, 2, 4, 4), {"kernel": [2]}),
        "overlap": ((1, 2, 5, 5), {"kernel": [3], "stride": [1]}),
        "k3s2p1": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1]}),
        "asym": ((1, 2, 7, 9), {"kernel": [2, 3], "stride": [1, 2], "padding": [1, 1]}),
        "dilation2": ((1, 2, 8, 8), {"kernel": [3], "stride": [1], "dilation": [2]}),
        "ceil": ((1, 2, 5, 5), {"kernel": [2], "stride": [2], "ceil_mode": 1}),
        "ceil_drop": ((1, 1, 5, 5), {"kernel": [2], "stride": [2], "padding": [1], "ceil_mode": 1}),
        "ceil_dilation": ((1, 1, 7, 8), {"kernel": [2], "stride": [3], "dilation": [2], "ceil_mode": 1}),
        "unbatched": ((3, 6, 5), {"kernel": [2], "stride": [1]}),
    }
    avg_variants = {
        "k2": ((2, 2, 4, 4), {"kernel": [2]}),
        "overlap": ((1, 2, 5, 5), {"kernel": [3], "stride": [1]}),
        "k3s2p1": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1]}),
        "k3s2p1_excl": ((1, 2, 7, 7), {"kernel": [3], "stride": [2], "padding": [1], "count_include_pad": 0}),
        "asym_excl": ((1, 2, 7, 9), {"kernel": [2, 3], "stride": [1, 2], "padding": [1, 1],
                                     "count_include_pad": 0}),
        "ceil": ((1, 2, 5, 5), {"kernel": [2], "stride": [2], "ceil_mode": 1}),
        "ceil_pad": ((1, 1, 6, 6), {"kernel": [3], "stride": [2], "padding": [1], "ceil_mode": 1}),
        "ceil_pad_excl": ((1, 1, 6, 7), {"kernel": [3], "stride": [2], "padding": [1], "ceil_mode": 1,
                                         "count_include_pad": 0}),
        "ceil_overhang": ((1, 1, 5, 5), {"kernel": [3], "stride": [3], "padding": [1], "ceil_mode": 1}),
        "unbatched": ((3, 6, 5), {"kernel": [2], "stride": [1]}),
    }
    for dt, n in DTYPES:
        for name, (shape, attrs) in max_variants.items():
            out.append(case(f"grad_max_pool2d_{name}_{n}", "max_pool2d", [randn(*shape, dtype=dt)],
                            _pool_fn(F.max_pool2d, attrs), attrs=attrs, grad=True, **_tol(dt)))
        # Ties: every window of the overlapping pool holds equal maxima, and
        # PyTorch routes each window's gradient to the first one.
        ties = torch.tensor([[1., 3., 3., 0.], [3., 3., 1., 3.], [2., 3., 3., 3.], [3., 0., 3., 1.]],
                            dtype=dt).reshape(1, 1, 4, 4)
        attrs = {"kernel": [2], "stride": [1]}
        out.append(case(f"grad_max_pool2d_ties_{n}", "max_pool2d", [ties], _pool_fn(F.max_pool2d, attrs),
                        attrs=attrs, grad=True, **_tol(dt)))
        for name, (shape, attrs) in avg_variants.items():
            out.append(case(f"grad_avg_pool2d_{name}_{n}", "avg_pool2d", [randn(*shape, dtype=dt)],
                            _pool_fn(F.avg_pool2d, attrs), attrs=attrs, grad=True, **_tol(dt)))
    return out


def cases():
    return _matmul_cases() + _conv_cases() + _pool_cases()
