"""Oracle cases for scaled dot-product attention (FusedSDPA options).

PyTorch 1.13 has no F.scaled_dot_product_attention, so the reference is
written out: matmul, scale, mask, softmax, (valid_seq_len), matmul.
Inputs are q, k, v, then the mask when attr has_mask, then valid_seq_len
when attr has_valid_len. 16-bit inputs are computed in f64 and rounded
once, as a fused kernel with float accumulation would. Rows that every
key is masked out of are avoided: PyTorch gives NaN there, mstep zeros.
"""
import math

import torch

from oracle_lib import case, randn, randint


def reference(q, k, v, mask=None, is_causal=False, scale=None, valid_len=None,
              left=False):
    """Returns (out, probs) of attention; probs before any dropout."""
    dtype = q.dtype
    if dtype in (torch.bfloat16, torch.float16):
        q, k, v = q.double(), k.double(), v.double()
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.double()
    L, S = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    excluded = torch.zeros(scores.shape, dtype=torch.bool)
    if is_causal:
        excluded |= ~torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        if mask.dtype == torch.bool:
            excluded |= ~mask
        else:
            scores = scores + mask
    row_valid = None
    if valid_len is not None:
        extra = [1] * (q.dim() - 3)  # heads between batch and L
        lens = valid_len.long().view(-1, *extra, 1)
        pos_s, pos_l = torch.arange(S), torch.arange(L)
        key_valid = pos_s >= S - lens if left else pos_s < lens  # [B, .., S]
        row_valid = pos_l >= L - lens if left else pos_l < lens  # [B, .., L]
        excluded |= ~key_valid.unsqueeze(-2)
    probs = torch.softmax(scores.masked_fill(excluded, -math.inf), dim=-1)
    if row_valid is not None:
        # Padded query rows may have no key left (NaN); they are zero.
        probs = torch.where(row_valid.unsqueeze(-1), probs, torch.zeros(()).to(probs))
    out = torch.matmul(probs, v)
    return out.to(dtype), probs.to(dtype)


def sdpa_case(name, q, k, v, mask=None, valid_len=None, is_causal=False,
              scale=None, left=False, probs=False):
    inputs = [q, k, v]
    attrs = {}
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
        out, p = reference(ins[0], ins[1], ins[2],
                           mask=ins[3] if mask is not None else None,
                           valid_len=ins[-1] if valid_len is not None else None,
                           is_causal=is_causal, scale=scale, left=left)
        return [out, p] if probs else out

    op = "fused_sdpa" if probs else "scaled_dot_product_attention"
    return case(name, op, inputs, fn, attrs=attrs)


def cases():
    out = []
    f32, f64, bf16 = torch.float32, torch.float64, torch.bfloat16
    # Plain attention, rank 3 and 4, L != S, Ev != E, each dtype.
    for dt, n in [(f32, "f32"), (f64, "f64"), (bf16, "bf16")]:
        out.append(sdpa_case(f"sdpa_rank3_{n}", randn(2, 3, 4, dtype=dt),
                             randn(2, 5, 4, dtype=dt), randn(2, 5, 6, dtype=dt)))
        out.append(sdpa_case(f"sdpa_rank4_{n}", randn(2, 3, 4, 8, dtype=dt),
                             randn(2, 3, 6, 8, dtype=dt), randn(2, 3, 6, 5, dtype=dt),
                             probs=True))
    out.append(sdpa_case("sdpa_rank2", randn(3, 4), randn(5, 4), randn(5, 2)))
    out.append(sdpa_case("sdpa_scale", randn(2, 4, 8), randn(2, 4, 8), randn(2, 4, 8),
                         scale=0.3))
    # Causal: square, L < S and L > S (tril of an L x S ones matrix).
    out.append(sdpa_case("sdpa_causal", randn(2, 2, 5, 4), randn(2, 2, 5, 4),
                         randn(2, 2, 5, 4), is_causal=True, probs=True))
    out.append(sdpa_case("sdpa_causal_l_lt_s", randn(2, 3, 4), randn(2, 5, 4),
                         randn(2, 5, 3), is_causal=True))
    out.append(sdpa_case("sdpa_causal_l_gt_s", randn(2, 5, 4), randn(2, 3, 4),
                         randn(2, 3, 3), is_causal=True))
    out.append(sdpa_case("sdpa_causal_bf16", randn(1, 2, 6, 8, dtype=bf16),
                         randn(1, 2, 6, 8, dtype=bf16), randn(1, 2, 6, 8, dtype=bf16),
                         is_causal=True))
    # Masks. Bool masks keep column 0 so no row is fully masked.
    def bool_mask(*shape):
        m = randint(0, 2, *shape, dtype=torch.bool)
        m[..., 0] = True
        return m
    out.append(sdpa_case("sdpa_bool_mask", randn(2, 4, 8), randn(2, 5, 8), randn(2, 5, 8),
                         mask=bool_mask(2, 4, 5), probs=True))
    out.append(sdpa_case("sdpa_bool_mask_bcast", randn(2, 3, 4, 8), randn(2, 3, 5, 8),
                         randn(2, 3, 5, 8), mask=bool_mask(2, 1, 1, 5)))
    out.append(sdpa_case("sdpa_float_mask", randn(2, 3, 4, 8), randn(2, 3, 5, 8),
                         randn(2, 3, 5, 8), mask=randn(3, 4, 5)))
    neg = randn(4, 5)
    neg[:, 1::2] = -math.inf  # some keys off, column 0 always on
    out.append(sdpa_case("sdpa_float_mask_neg_inf", randn(2, 4, 8), randn(2, 5, 8),
                         randn(2, 5, 8), mask=neg, probs=True))
    out.append(sdpa_case("sdpa_float_mask_f64", randn(2, 4, 8, dtype=f64),
                         randn(2, 5, 8, dtype=f64), randn(2, 5, 8, dtype=f64),
                         mask=randn(4, 5, dtype=f64)))
    out.append(sdpa_case("sdpa_float_mask_bf16", randn(2, 4, 8, dtype=bf16),
                         randn(2, 5, 8, dtype=bf16), randn(2, 5, 8, dtype=bf16),
                         mask=randn(1, 5, dtype=bf16)))
    # valid_seq_len, right and left padding, rank 3 and 4, i32 and i64.
    lens = torch.tensor([3, 6, 1], dtype=torch.int64)
    for left in (False, True):
        side = "left" if left else "right"
        out.append(sdpa_case(f"sdpa_valid_len_{side}", randn(3, 6, 4), randn(3, 6, 4),
                             randn(3, 6, 4), valid_len=lens, left=left, probs=True))
        out.append(sdpa_case(f"sdpa_valid_len_{side}_rank4", randn(3, 2, 6, 4),
                             randn(3, 2, 6, 4), randn(3, 2, 6, 5),
                             valid_len=lens.int(), left=left))
        out.append(sdpa_case(f"sdpa_valid_len_{side}_bf16", randn(3, 6, 8, dtype=bf16),
                             randn(3, 6, 8, dtype=bf16), randn(3, 6, 8, dtype=bf16),
                             valid_len=lens, left=left))
        out.append(sdpa_case(f"sdpa_valid_len_{side}_mask", randn(3, 2, 6, 4),
                             randn(3, 2, 6, 4), randn(3, 2, 6, 4), valid_len=lens,
                             left=left, mask=randn(6, 6)))
    # Causal with padding (L == S): every valid row keeps its own key.
    for left in (False, True):
        side = "left" if left else "right"
        out.append(sdpa_case(f"sdpa_valid_len_{side}_causal", randn(3, 2, 6, 4),
                             randn(3, 2, 6, 4), randn(3, 2, 6, 4), valid_len=lens,
                             left=left, is_causal=True, probs=True))
    return out
