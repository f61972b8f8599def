"""Gradient oracle cases (PyTorch autograd) for scaled dot-product attention.

PyTorch 1.13 has no F.scaled_dot_product_attention, so the reference is
written out with differentiable torch ops and autograd differentiates it.
Its softmax is the "safe" one mstep computes: a row with every key
excluded (fully masked, or outside valid_seq_len) has zero probabilities,
a zero output and zero gradients, where torch.softmax would give NaN.
Inputs are q, k, v, then the mask (attr has_mask), then valid_seq_len
(attr has_valid_len); every floating input, a float mask included, gets a
gradient. Dropout is left to the unit tests: its random stream is mstep's.
Cases with attr recompute=0 check the mode whose backward reads the
forward's saved probabilities instead of recomputing them.
"""
import math

import torch

import oracle_lib
from oracle_lib import case, randn, randint

F32, F64 = torch.float32, torch.float64


def reference(q, k, v, mask=None, valid_len=None, is_causal=False, scale=None, left=False):
    L, S = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    excluded = torch.zeros(scores.shape, dtype=torch.bool)
    if is_causal:
        excluded = excluded | ~torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        if mask.dtype == torch.bool:
            excluded = excluded | ~mask
        else:
            scores = scores + mask
    row_valid = None
    if valid_len is not None:
        extra = [1] * (q.dim() - 3)  # head dims between batch and L
        lens = valid_len.long().clamp(0).view(-1, *extra, 1)
        pos_s, pos_l = torch.arange(S), torch.arange(L)
        key_valid = pos_s >= S - lens if left else pos_s < lens
        row_valid = pos_l >= L - lens if left else pos_l < lens
        excluded = excluded | ~key_valid.unsqueeze(-2) | ~row_valid.unsqueeze(-1)
    # Safe softmax: the shift is a constant (detached; softmax does not
    # depend on it), and excluded or -inf keys weigh exactly 0.
    scores = scores.masked_fill(excluded, -math.inf)
    shift = scores.detach().amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    e = torch.exp(scores - shift)
    total = e.sum(dim=-1, keepdim=True)
    probs = e / torch.where(total == 0, torch.ones_like(total), total)
    return torch.matmul(probs, v)


def grad_case(name, q, k, v, mask=None, valid_len=None, is_causal=False, scale=None,
              left=False, recompute=True):
    inputs = [q, k, v]
    attrs = {} if recompute else {"recompute": 0}
    if is_causal:
        attrs["is_causal"] = 1
    if scale is not None:
        attrs["scale"] = scale
    if mask is not None:
        inputs.append(mask)
        attrs["has_mask"] = 1
    if valid_len is not None:
        inputs.append(valid_len)
        attrs["has_valid_len"] = 1
        attrs["padding_side"] = "left" if left else "right"

    def fn(*ins):
        return reference(ins[0], ins[1], ins[2],
                         mask=ins[3] if mask is not None else None,
                         valid_len=ins[-1] if valid_len is not None else None,
                         is_causal=is_causal, scale=scale, left=left)

    return case(name, "scaled_dot_product_attention", inputs, fn, attrs=attrs, grad=True)


def bool_mask(*shape):
    m = randint(0, 2, *shape, dtype=torch.bool)
    m[..., 0] = True
    return m


def cases():
    out = []
    for dt, n in [(F32, "f32"), (F64, "f64")]:
        out.append(grad_case(f"grad_sdpa_rank3_{n}", randn(2, 3, 4, dtype=dt),
                             randn(2, 5, 4, dtype=dt), randn(2, 5, 6, dtype=dt)))
        out.append(grad_case(f"grad_sdpa_rank4_{n}", randn(2, 3, 4, 8, dtype=dt),
                             randn(2, 3, 6, 8, dtype=dt), randn(2, 3, 6, 5, dtype=dt)))
        out.append(grad_case(f"grad_sdpa_scale_{n}", randn(2, 4, 8, dtype=dt),
                             randn(2, 4, 8, dtype=dt), randn(2, 4, 8, dtype=dt), scale=0.3))
        # Causal: L == S, L < S and L > S (tril of an L x S ones matrix).
        out.append(grad_case(f"grad_sdpa_causal_{n}", randn(2, 2, 5, 4, dtype=dt),
                             randn(2, 2, 5, 4, dtype=dt), randn(2, 2, 5, 4, dtype=dt),
                             is_causal=True))
        out.append(grad_case(f"grad_sdpa_causal_l_lt_s_{n}", randn(2, 3, 4, dtype=dt),
                             randn(2, 5, 4, dtype=dt), randn(2, 5, 3, dtype=dt), is_causal=True))
        out.append(grad_case(f"grad_sdpa_causal_l_gt_s_{n}", randn(2, 5, 4, dtype=dt),
                             randn(2, 3, 4, dtype=dt), randn(2, 3, 3, dtype=dt), is_causal=True))
        # Bool masks, one with a fully masked row (zeros, zero gradients).
        out.append(grad_case(f"grad_sdpa_bool_mask_{n}", randn(2, 3, 4, 8, dtype=dt),
                             randn(2, 3, 5, 8, dtype=dt), randn(2, 3, 5, 8, dtype=dt),
                             mask=bool_mask(2, 1, 1, 5)))
        holes = bool_mask(4, 5)
        holes[2] = False
        out.append(grad_case(f"grad_sdpa_bool_mask_empty_row_{n}", randn(2, 4, 8, dtype=dt),
                             randn(2, 5, 8, dtype=dt), randn(2, 5, 8, dtype=dt), mask=holes))
        # Float masks get gradients too, summed over their broadcast dims.
        out.append(grad_case(f"grad_sdpa_float_mask_{n}", randn(2, 3, 4, 8, dtype=dt),
                             randn(2, 3, 5, 8, dtype=dt), randn(2, 3, 5, 8, dtype=dt),
                             mask=randn(3, 4, 5, dtype=dt)))
        out.append(grad_case(f"grad_sdpa_float_mask_bcast_{n}", randn(2, 3, 4, 8, dtype=dt),
                             randn(2, 3, 5, 8, dtype=dt), randn(2, 3, 5, 8, dtype=dt),
                             mask=randn(2, 1, 1, 5, dtype=dt)))
        neg = randn(4, 5, dtype=dt)
        neg[:, 1::2] = -math.inf  # some keys off, column 0 always on
        out.append(grad_case(f"grad_sdpa_float_mask_neg_inf_{n}", randn(2, 4, 8, dtype=dt),
                             randn(2, 5, 8, dtype=dt), randn(2, 5, 8, dtype=dt), mask=neg))
        # valid_seq_len, right and left, rank 3 and 4, a zero length included.
        lens = torch.tensor([3, 6, 0], dtype=torch.int64)
        for left in (False, True):
            side = "left" if left else "right"
            out.append(grad_case(f"grad_sdpa_valid_len_{side}_{n}", randn(3, 6, 4, dtype=dt),
                                 randn(3, 6, 4, dtype=dt), randn(3, 6, 4, dtype=dt),
                                 valid_len=lens, left=left))
            out.append(grad_case(f"grad_sdpa_valid_len_{side}_rank4_{n}",
                                 randn(3, 2, 6, 4, dtype=dt), randn(3, 2, 6, 4, dtype=dt),
                                 randn(3, 2, 6, 5, dtype=dt), valid_len=lens.int(), left=left,
                                 mask=randn(6, 6, dtype=dt)))
            out.append(grad_case(f"grad_sdpa_valid_len_{side}_causal_{n}",
                                 randn(3, 2, 6, 4, dtype=dt), randn(3, 2, 6, 4, dtype=dt),
                                 randn(3, 2, 6, 4, dtype=dt), valid_len=lens, left=left,
                                 is_causal=True))
    return out + saved_probs_cases()


def saved_probs_cases():
    """recompute=0 cases. The shared generator's state is restored after, so
    the inputs of every case in later modules stay as they were."""
    state = oracle_lib._gen.get_state()
    out = []
    for dt, n in [(F32, "f32"), (F64, "f64")]:
        out.append(grad_case(f"grad_sdpa_saved_probs_causal_{n}", randn(2, 2, 5, 4, dtype=dt),
                             randn(2, 2, 5, 4, dtype=dt), randn(2, 2, 5, 4, dtype=dt),
                             is_causal=True, recompute=False))
        holes = bool_mask(4, 5)
        holes[2] = False
        out.append(grad_case(f"grad_sdpa_saved_probs_bool_mask_{n}", randn(2, 4, 8, dtype=dt),
                             randn(2, 5, 8, dtype=dt), randn(2, 5, 8, dtype=dt), mask=holes,
                             recompute=False))
        out.append(grad_case(f"grad_sdpa_saved_probs_float_mask_{n}",
                             randn(2, 3, 4, 8, dtype=dt), randn(2, 3, 5, 8, dtype=dt),
                             randn(2, 3, 5, 8, dtype=dt), mask=randn(2, 1, 1, 5, dtype=dt),
                             recompute=False))
        lens = torch.tensor([3, 6, 0], dtype=torch.int64)
        for left in (False, True):
            side = "left" if left else "right"
            out.append(grad_case(f"grad_sdpa_saved_probs_valid_len_{side}_{n}",
                                 randn(3, 2, 6, 4, dtype=dt), randn(3, 2, 6, 4, dtype=dt),
                                 randn(3, 2, 6, 5, dtype=dt), valid_len=lens, left=left,
                                 mask=randn(6, 6, dtype=dt), recompute=False))
    oracle_lib._gen.set_state(state)
    return out
