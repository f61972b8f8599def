"""Oracle cases for softmax, log_softmax, layer_norm, rms_norm and dropout.

layer_norm / rms_norm inputs are x, then weight and bias when the attrs
has_weight / has_bias say so. PyTorch 1.13 has no rms_norm: it is computed
by hand in f64 and rounded once, which is what mstep's kernel does.
Dropout cases are the deterministic ones only (p = 0, train = False): the
random stream differs from PyTorch's; the unit tests check the rest.
"""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, rounded_once

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16
DTYPES = {"f32": F32, "f64": F64, "bf16": BF16}


def rms_norm_ref(x, shape, weight=None, eps=None):
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.double()
    return y.to(x.dtype)


def cases():
    out = []
    for n, dt in DTYPES.items():
        for op, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
            out.append(case(f"{op}_dim1_{n}", op, [randn(4, 7, dtype=dt)],
                            rounded_once(lambda x, fn=fn: fn(x, 1)), attrs={"dim": 1}))
            out.append(case(f"{op}_dim0_{n}", op, [randn(5, 3, dtype=dt)],
                            rounded_once(lambda x, fn=fn: fn(x, 0)), attrs={"dim": 0}))
            out.append(case(f"{op}_mid_dim_{n}", op, [randn(2, 3, 5, dtype=dt)],
                            rounded_once(lambda x, fn=fn: fn(x, -2)), attrs={"dim": -2}))
            out.append(case(f"{op}_size1_{n}", op, [randn(3, 1, dtype=dt)],
                            rounded_once(lambda x, fn=fn: fn(x, -1)), attrs={"dim": -1}))
        out.append(case(f"softmax_large_{n}", "softmax", [randn(3, 6, dtype=dt) * 80],
                        rounded_once(lambda x: F.softmax(x, 1)), attrs={"dim": 1}))
        out.append(case(f"log_softmax_large_{n}", "log_softmax", [randn(3, 6, dtype=dt) * 80],
                        rounded_once(lambda x: F.log_softmax(x, 1)), attrs={"dim": 1}))

        # layer_norm: with weight and bias, weight only, neither, two dims.
        x = randn(4, 8, dtype=dt)
        w, b = randn(8, dtype=dt), randn(8, dtype=dt)
        out.append(case(f"layer_norm_affine_{n}", "layer_norm", [x, w, b],
                        rounded_once(lambda x, w, b: F.layer_norm(x, (8,), w, b)),
                        attrs={"normalized_shape": [8], "has_weight": 1, "has_bias": 1, "eps": 1e-5}))
        out.append(case(f"layer_norm_weight_only_{n}", "layer_norm", [x, w],
                        rounded_once(lambda x, w: F.layer_norm(x, (8,), w, None)),
                        attrs={"normalized_shape": [8], "has_weight": 1, "has_bias": 0, "eps": 1e-5}))
        out.append(case(f"layer_norm_plain_{n}", "layer_norm", [randn(2, 3, 4, dtype=dt)],
                        rounded_once(lambda x: F.layer_norm(x, (3, 4), eps=1e-3)),
                        attrs={"normalized_shape": [3, 4], "has_weight": 0, "has_bias": 0, "eps": 1e-3}))
        x3, w3, b3 = randn(2, 3, 4, dtype=dt), randn(3, 4, dtype=dt), randn(3, 4, dtype=dt)
        out.append(case(f"layer_norm_2dims_affine_{n}", "layer_norm", [x3, w3, b3],
                        rounded_once(lambda x, w, b: F.layer_norm(x, (3, 4), w, b)),
                        attrs={"normalized_shape": [3, 4], "has_weight": 1, "has_bias": 1, "eps": 1e-5}))

        # rms_norm: default eps (the dtype's), explicit eps, no weight.
        out.append(case(f"rms_norm_weight_{n}", "rms_norm", [x, w], lambda x, w: rms_norm_ref(x, (8,), w),
                        attrs={"normalized_shape": [8], "has_weight": 1}))
        out.append(case(f"rms_norm_eps_{n}", "rms_norm", [randn(3, 2, 5, dtype=dt)],
                        lambda x: rms_norm_ref(x, (2, 5), eps=1e-2),
                        attrs={"normalized_shape": [2, 5], "has_weight": 0, "eps": 1e-2}))

    out.append(case("layer_norm_bias_only", "layer_norm", [randn(3, 5), randn(5)],
                    lambda x, b: F.layer_norm(x, (5,), None, b),
                    attrs={"normalized_shape": [5], "has_weight": 0, "has_bias": 1, "eps": 1e-5}))
    out.append(case("layer_norm_size1_rows", "layer_norm", [randn(1, 6)], lambda x: F.layer_norm(x, (6,)),
                    attrs={"normalized_shape": [6], "has_weight": 0, "has_bias": 0, "eps": 1e-5}))
    out.append(case("rms_norm_tiny_f32", "rms_norm", [randn(2, 4) * 1e-4], lambda x: rms_norm_ref(x, (4,)),
                    attrs={"normalized_shape": [4], "has_weight": 0}))

    x = randn(3, 4)
    out.append(case("dropout_p0", "dropout", [x], lambda x: F.dropout(x, 0.0, True), attrs={"p": 0.0, "train": 1}))
    out.append(case("dropout_eval", "dropout", [x], lambda x: F.dropout(x, 0.5, False),
                    attrs={"p": 0.5, "train": 0}))
    out.append(case("dropout_eval_bf16", "dropout", [randn(5, dtype=BF16)], lambda x: F.dropout(x, 0.3, False),
                    attrs={"p": 0.3, "train": 0}))
    return out
