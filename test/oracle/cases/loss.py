"""Oracle cases for nll_loss, cross_entropy, mse_loss and
binary_cross_entropy_with_logits. Attr "reduction" is none/mean/sum."""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, rand, randint, rounded_once

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16
DTYPES = {"f32": F32, "f64": F64, "bf16": BF16}
REDUCTIONS = ("none", "mean", "sum")
# bf16: mstep composes these losses from ops that each round their result
# to bf16 (lib/api/LossOps.cpp): a term passes through this many of them
# before the final one. PyTorch's bf16 chains do the same in another
# order, so the expectation is rounded_once's (f64, one rounding).
STORED = {"cross_entropy": 1, "cross_entropy_smooth": 5, "mse_loss": 2,
          "binary_cross_entropy_with_logits": 5}


def _bf16(n, op, fn):
    if n != "bf16":
        return {"fn": fn}
    return {"fn": rounded_once(fn), "tol": {"stored": STORED[op]}}


def cases():
    out = []
    for n, dt in DTYPES.items():
        logits = randn(6, 5, dtype=dt)
        log_probs = F.log_softmax(logits.double(), 1).to(dt)
        target = randint(0, 5, 6)
        ignored = target.clone()
        ignored[1] = -100
        ignored[4] = -100
        for red in REDUCTIONS:
            out.append(case(f"nll_loss_{red}_{n}", "nll_loss", [log_probs, target],
                            rounded_once(lambda x, t, r=red: F.nll_loss(x, t, reduction=r)),
                            attrs={"reduction": red}))
            out.append(case(f"nll_loss_ignore_{red}_{n}", "nll_loss", [log_probs, ignored],
                            rounded_once(lambda x, t, r=red: F.nll_loss(x, t, reduction=r)),
                            attrs={"reduction": red}))
            out.append(case(f"cross_entropy_{red}_{n}", "cross_entropy", [logits, target],
                            attrs={"reduction": red},
                            **_bf16(n, "cross_entropy",
                                    lambda x, t, r=red: F.cross_entropy(x, t, reduction=r))))
            out.append(case(f"cross_entropy_smooth_ignore_{red}_{n}", "cross_entropy", [logits, ignored],
                            attrs={"reduction": red, "label_smoothing": 0.1},
                            **_bf16(n, "cross_entropy_smooth",
                                    lambda x, t, r=red: F.cross_entropy(x, t, reduction=r,
                                                                        label_smoothing=0.1))))
            x, y = randn(3, 4, dtype=dt), randn(3, 4, dtype=dt)
            out.append(case(f"mse_loss_{red}_{n}", "mse_loss", [x, y], attrs={"reduction": red},
                            **_bf16(n, "mse_loss", lambda x, y, r=red: F.mse_loss(x, y, reduction=r))))
            z, p = randn(4, 3, dtype=dt) * 4, rand(4, 3, dtype=dt)
            out.append(case(f"bce_logits_{red}_{n}", "binary_cross_entropy_with_logits", [z, p],
                            attrs={"reduction": red},
                            **_bf16(n, "binary_cross_entropy_with_logits",
                                    lambda x, y, r=red: F.binary_cross_entropy_with_logits(
                                        x, y, reduction=r))))

    lp = F.log_softmax(randn(4, 3), 1)
    t = torch.tensor([0, 2, 2, 1])
    out.append(case("nll_loss_custom_ignore", "nll_loss", [lp, t], lambda x, t: F.nll_loss(x, t, ignore_index=2),
                    attrs={"reduction": "mean", "ignore_index": 2}))
    all_ignored = torch.full((4,), -100, dtype=torch.int64)
    out.append(case("nll_loss_all_ignored_nan", "nll_loss", [lp, all_ignored], F.nll_loss,
                    attrs={"reduction": "mean"}))
    out.append(case("nll_loss_1d", "nll_loss", [lp[0], torch.tensor(2)], F.nll_loss,
                    attrs={"reduction": "mean"}))
    out.append(case("nll_loss_1d_none", "nll_loss", [lp[1], torch.tensor(0)],
                    lambda x, t: F.nll_loss(x, t, reduction="none"), attrs={"reduction": "none"}))
    out.append(case("cross_entropy_1d", "cross_entropy", [randn(7), torch.tensor(3)], F.cross_entropy,
                    attrs={"reduction": "mean"}))
    out.append(case("cross_entropy_1d_smooth", "cross_entropy", [randn(7), torch.tensor(5)],
                    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.25),
                    attrs={"reduction": "mean", "label_smoothing": 0.25}))
    out.append(case("cross_entropy_n1", "cross_entropy", [randn(1, 4), torch.tensor([1])], F.cross_entropy,
                    attrs={"reduction": "mean"}))
    out.append(case("cross_entropy_large_logits", "cross_entropy", [randn(3, 6) * 100, randint(0, 6, 3)],
                    F.cross_entropy, attrs={"reduction": "mean"}))
    out.append(case("cross_entropy_smooth_all_ignored", "cross_entropy",
                    [randn(3, 4), torch.full((3,), 1, dtype=torch.int64)],
                    lambda x, t: F.cross_entropy(x, t, ignore_index=1, label_smoothing=0.2),
                    attrs={"reduction": "mean", "ignore_index": 1, "label_smoothing": 0.2}))
    out.append(case("cross_entropy_smooth_one", "cross_entropy", [randn(5, 3), randint(0, 3, 5)],
                    lambda x, t: F.cross_entropy(x, t, label_smoothing=1.0),
                    attrs={"reduction": "mean", "label_smoothing": 1.0}))
    out.append(case("mse_loss_size1", "mse_loss", [randn(1), randn(1)], F.mse_loss, attrs={"reduction": "mean"}))
    out.append(case("bce_logits_extreme", "binary_cross_entropy_with_logits",
                    [torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0]), torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])],
                    lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
                    attrs={"reduction": "none"}))
    return out
