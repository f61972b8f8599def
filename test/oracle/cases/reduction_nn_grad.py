"""Gradient oracle cases (PyTorch autograd) for reductions, nn ops and losses.

Every case runs in f32 and f64. max/min follow torch.amax/amin (ties share
the gradient evenly). rms_norm is hand-written (torch 1.13 has none), and
dropout is checked only where it is deterministic (p = 0, eval).
"""
import torch
import torch.nn.functional as F

import oracle_lib
from oracle_lib import randn, rand, randint
from cases.nn import rms_norm_ref

F32, F64 = torch.float32, torch.float64
DTYPES = {"f32": F32, "f64": F64}
REDUCTIONS = ("none", "mean", "sum")


def case(*args, **kwargs):
    return oracle_lib.case(*args, grad=True, **kwargs)


def _reduce(fn, dims, keepdim, **kw):
    # torch's amax, var and logsumexp want the dims spelled out.
    def run(x):
        d = tuple(dims) if dims else tuple(range(x.dim()))
        return fn(x, d, keepdim=keepdim, **kw)
    return run


def _reduction_cases(n, dt):
    out = []
    shapes = [
        ("all", (3, 4), [], False),
        ("dim1_keepdim", (3, 4), [1], True),
        ("neg_dim", (2, 3, 5), [-1], False),
        ("dims02", (2, 3, 4), [0, 2], False),
        ("dims_neg_keepdim", (2, 3, 4), [-1, 0], True),
    ]
    ops = {"mean": torch.mean, "max": torch.amax, "min": torch.amin, "logsumexp": torch.logsumexp}
    for op, fn in ops.items():
        for tag, shape, dims, keepdim in shapes:
            out.append(case(f"grad_{op}_{tag}_{n}", op, [randn(*shape, dtype=dt)],
                            _reduce(fn, dims, keepdim), attrs={"dims": dims, "keepdim": int(keepdim)}))
    # Ties: the gradient is split evenly among the tied extrema.
    ties = torch.tensor([[1, 3, 3, 0], [2, 2, 2, 2], [5, -1, 4, 5]], dtype=dt)
    for op, fn in (("max", torch.amax), ("min", torch.amin)):
        out.append(case(f"grad_{op}_ties_dim1_{n}", op, [ties], _reduce(fn, [1], False),
                        attrs={"dims": [1], "keepdim": 0}))
        out.append(case(f"grad_{op}_ties_all_{n}", op, [ties], _reduce(fn, [], False),
                        attrs={"dims": [], "keepdim": 0}))
        out.append(case(f"grad_{op}_ties_dim0_keepdim_{n}", op, [ties], _reduce(fn, [0], True),
                        attrs={"dims": [0], "keepdim": 1}))
    for corr in (0, 1, 2):
        out.append(case(f"grad_var_dim1_c{corr}_{n}", "var", [randn(4, 6, dtype=dt)],
                        _reduce(torch.var, [1], False, correction=corr),
                        attrs={"dims": [1], "correction": corr, "keepdim": 0}))
    out.append(case(f"grad_var_all_{n}", "var", [randn(3, 5, dtype=dt)], _reduce(torch.var, [], False),
                    attrs={"dims": [], "correction": 1, "keepdim": 0}))
    out.append(case(f"grad_var_dims_neg_keepdim_{n}", "var", [randn(2, 3, 4, dtype=dt)],
                    _reduce(torch.var, [0, -1], True),
                    attrs={"dims": [0, -1], "correction": 1, "keepdim": 1}))
    out.append(case(f"grad_logsumexp_large_{n}", "logsumexp", [randn(3, 6, dtype=dt) * 50],
                    _reduce(torch.logsumexp, [1], False), attrs={"dims": [1], "keepdim": 0}))
    return out


def _nn_cases(n, dt):
    out = []
    for op, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
        for tag, shape, dim in (("dim1", (4, 7), 1), ("dim0", (5, 3), 0), ("mid_dim", (2, 3, 5), -2),
                                ("vector", (6,), 0)):
            out.append(case(f"grad_{op}_{tag}_{n}", op, [randn(*shape, dtype=dt) * 2],
                            lambda x, fn=fn, d=dim: fn(x, d), attrs={"dim": dim}))

    ln = lambda has_w, has_b, shape, eps=1e-5: {  # noqa: E731
        "normalized_shape": list(shape), "has_weight": has_w, "has_bias": has_b, "eps": eps}
    x, w, b = randn(4, 8, dtype=dt), randn(8, dtype=dt), randn(8, dtype=dt)
    out.append(case(f"grad_layer_norm_affine_{n}", "layer_norm", [x, w, b],
                    lambda x, w, b: F.layer_norm(x, (8,), w, b), attrs=ln(1, 1, (8,))))
    out.append(case(f"grad_layer_norm_weight_only_{n}", "layer_norm", [x, w],
                    lambda x, w: F.layer_norm(x, (8,), w, None), attrs=ln(1, 0, (8,))))
    out.append(case(f"grad_layer_norm_bias_only_{n}", "layer_norm", [x, b],
                    lambda x, b: F.layer_norm(x, (8,), None, b), attrs=ln(0, 1, (8,))))
    out.append(case(f"grad_layer_norm_plain_{n}", "layer_norm", [randn(2, 3, 4, dtype=dt)],
                    lambda x: F.layer_norm(x, (3, 4), eps=1e-3), attrs=ln(0, 0, (3, 4), 1e-3)))
    x3, w3, b3 = randn(2, 3, 4, dtype=dt), randn(3, 4, dtype=dt), randn(3, 4, dtype=dt)
    out.append(case(f"grad_layer_norm_2dims_affine_{n}", "layer_norm", [x3, w3, b3],
                    lambda x, w, b: F.layer_norm(x, (3, 4), w, b), attrs=ln(1, 1, (3, 4))))
    out.append(case(f"grad_layer_norm_all_dims_{n}", "layer_norm", [x3, randn(2, 3, 4, dtype=dt)],
                    lambda x, w: F.layer_norm(x, (2, 3, 4), w), attrs=ln(1, 0, (2, 3, 4))))

    out.append(case(f"grad_rms_norm_weight_{n}", "rms_norm", [x, w], lambda x, w: rms_norm_ref(x, (8,), w),
                    attrs={"normalized_shape": [8], "has_weight": 1}))
    out.append(case(f"grad_rms_norm_eps_{n}", "rms_norm", [randn(3, 2, 5, dtype=dt)],
                    lambda x: rms_norm_ref(x, (2, 5), eps=1e-2),
                    attrs={"normalized_shape": [2, 5], "has_weight": 0, "eps": 1e-2}))
    out.append(case(f"grad_rms_norm_2dims_weight_{n}", "rms_norm", [x3, w3],
                    lambda x, w: rms_norm_ref(x, (3, 4), w),
                    attrs={"normalized_shape": [3, 4], "has_weight": 1}))

    out.append(case(f"grad_dropout_p0_{n}", "dropout", [randn(3, 4, dtype=dt)],
                    lambda x: F.dropout(x, 0.0, True), attrs={"p": 0.0, "train": 1}))
    out.append(case(f"grad_dropout_eval_{n}", "dropout", [randn(3, 4, dtype=dt)],
                    lambda x: F.dropout(x, 0.5, False), attrs={"p": 0.5, "train": 0}))
    return out


def _loss_cases(n, dt):
    out = []
    logits = randn(6, 5, dtype=dt) * 2
    log_probs = F.log_softmax(randn(6, 5, dtype=F64), 1).to(dt)
    target = randint(0, 5, 6)
    ignored = target.clone()
    ignored[1] = -100
    ignored[4] = -100
    for red in REDUCTIONS:
        out.append(case(f"grad_nll_loss_{red}_{n}", "nll_loss", [log_probs, target],
                        lambda x, t, r=red: F.nll_loss(x, t, reduction=r), attrs={"reduction": red}))
        out.append(case(f"grad_nll_loss_ignore_{red}_{n}", "nll_loss", [log_probs, ignored],
                        lambda x, t, r=red: F.nll_loss(x, t, reduction=r), attrs={"reduction": red}))
        out.append(case(f"grad_nll_loss_vector_{red}_{n}", "nll_loss", [log_probs[0], target[0]],
                        lambda x, t, r=red: F.nll_loss(x, t, reduction=r), attrs={"reduction": red}))
        out.append(case(f"grad_cross_entropy_{red}_{n}", "cross_entropy", [logits, target],
                        lambda x, t, r=red: F.cross_entropy(x, t, reduction=r), attrs={"reduction": red}))
        out.append(case(f"grad_cross_entropy_ignore_{red}_{n}", "cross_entropy", [logits, ignored],
                        lambda x, t, r=red: F.cross_entropy(x, t, reduction=r), attrs={"reduction": red}))
        out.append(case(f"grad_cross_entropy_smooth_{red}_{n}", "cross_entropy", [logits, target],
                        lambda x, t, r=red: F.cross_entropy(x, t, reduction=r, label_smoothing=0.2),
                        attrs={"reduction": red, "label_smoothing": 0.2}))
        out.append(case(f"grad_cross_entropy_smooth_ignore_{red}_{n}", "cross_entropy", [logits, ignored],
                        lambda x, t, r=red: F.cross_entropy(x, t, reduction=r, label_smoothing=0.1),
                        attrs={"reduction": red, "label_smoothing": 0.1}))
        out.append(case(f"grad_cross_entropy_custom_ignore_{red}_{n}", "cross_entropy", [logits, target],
                        lambda x, t, r=red: F.cross_entropy(x, t, reduction=r, ignore_index=2,
                                                            label_smoothing=0.1),
                        attrs={"reduction": red, "ignore_index": 2, "label_smoothing": 0.1}))
        x, y = randn(3, 4, dtype=dt), randn(3, 4, dtype=dt)
        out.append(case(f"grad_mse_loss_{red}_{n}", "mse_loss", [x, y],
                        lambda x, y, r=red: F.mse_loss(x, y, reduction=r), attrs={"reduction": red}))
        z, p = randn(4, 3, dtype=dt) * 4, rand(4, 3, dtype=dt)
        out.append(case(f"grad_bce_logits_{red}_{n}", "binary_cross_entropy_with_logits", [z, p],
                        lambda x, y, r=red: F.binary_cross_entropy_with_logits(x, y, reduction=r),
                        attrs={"reduction": red}))
    all_ignored = torch.full((3,), -100, dtype=torch.int64)
    out.append(case(f"grad_nll_loss_all_ignored_{n}", "nll_loss", [log_probs[:3], all_ignored],
                    lambda x, t: F.nll_loss(x, t), attrs={"reduction": "mean"}))
    return out


def cases():
    out = []
    for n, dt in DTYPES.items():
        out += _reduction_cases(n, dt) + _nn_cases(n, dt) + _loss_cases(n, dt)
    return out
