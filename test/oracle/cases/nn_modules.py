"""Oracle cases for the nn modules: torch.nn.Linear, Conv2d, LayerNorm and
MultiheadAttention (batch_first and not, batched and not) with fixed weights.

Inputs: the module's parameters in state_dict order (the C++ side assigns
them to the mstep module's parameter tensors), then the forward inputs
(query alone when attr qkv = "self", query and key-value when "kv", else
query, key, value), then attn_mask (attr has_attn_mask) and
key_padding_mask (attr has_kpm). Outputs: the module output, then the
averaged or per-head attention weights when attr need_weights.
Attrs carry the constructor and forward arguments.

PyTorch 1.13's MultiheadAttention has no is_causal: those cases pass the
equivalent bool attn_mask (True = masked) to PyTorch and only attr
is_causal to mstep. Masks never hide every key of a row (PyTorch gives
NaN there, mstep zeros). Tolerances are tolerance.py's rules; a
MultiheadAttention case asks for its outputs' simulated error sigmas.
"""

import torch
from torch.nn.utils.stateless import functional_call

from oracle_lib import case, randn


def randomized(module):
    """The module with every parameter redrawn from oracle_lib's stream, so
    biases are non-zero (MultiheadAttention's default biases are zero)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(randn(*p.shape))
    return module.train()


def module_case(name, op, module, inputs, forward, attrs, grad=False, tol=None):
    """forward(module_call, *forward_inputs) runs the module; module_call
    is the module with the case's parameter inputs swapped in. `tol`, when
    a function, gets the randomized module and returns the hints."""
    module = randomized(module)
    if callable(tol):
        tol = tol(module)
    names = list(module.state_dict().keys())
    params = [module.state_dict()[n].detach().clone() for n in names]
    n = len(params)

    def fn(*ins):
        params = dict(zip(names, ins[:n]))
        call = lambda *args, **kwargs: functional_call(module, params, args, kwargs)
        return forward(call, *ins[n:])

    return case(name, op, params + inputs, fn, attrs=attrs, tol=tol, grad=grad)


def linear_cases():
    out = []
    for bias in (True, False):
        m = torch.nn.Linear(5, 3, bias=bias)
        attrs = {"in_features": 5, "out_features": 3, "bias": int(bias)}
        out.append(module_case(f"module_linear_bias{int(bias)}", "module_linear", m,
                               [randn(2, 4, 5)], lambda call, x: call(x), attrs))
    out.append(module_case("module_linear_grad", "module_linear", torch.nn.Linear(5, 3),
                           [randn(4, 5)], lambda call, x: call(x),
                           {"in_features": 5, "out_features": 3, "bias": 1}, grad=True))
    return out


def conv_cases():
    out = []
    configs = [
        # name, in, out, kernel, stride, padding, dilation, groups, bias, input shape
        ("basic", 3, 4, (3, 3), (1, 1), (0, 0), (1, 1), 1, True, (2, 3, 6, 6)),
        ("strided_grouped", 4, 6, (3, 2), (2, 1), (1, 1), (1, 2), 2, True, (2, 4, 7, 8)),
        ("nobias_unbatched", 2, 3, (2, 2), (1, 1), (1, 0), (1, 1), 1, False, (2, 5, 4)),
    ]
    for name, cin, cout, k, s, p, d, g, bias, shape in configs:
        m = torch.nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=bias)
        attrs = {"in_channels": cin, "out_channels": cout, "kernel": list(k), "stride": list(s),
                 "padding": list(p), "dilation": list(d), "groups": g, "bias": int(bias)}
        out.append(module_case(f"module_conv2d_{name}", "module_conv2d", m, [randn(*shape)],
                               lambda call, x: call(x), attrs))
    m = torch.nn.Conv2d(2, 4, 3, padding=1, groups=2)
    attrs = {"in_channels": 2, "out_channels": 4, "kernel": [3, 3], "stride": [1, 1],
             "padding": [1, 1], "dilation": [1, 1], "groups": 2, "bias": 1}
    out.append(module_case("module_conv2d_grad", "module_conv2d", m, [randn(1, 2, 4, 4)],
                           lambda call, x: call(x), attrs, grad=True))
    return out


def layer_norm_cases():
    out = []
    for name, shape, affine, x_shape in (("last", [6], True, (2, 3, 6)),
                                         ("two_dims", [3, 4], True, (2, 3, 4)),
                                         ("no_affine", [5], False, (4, 5))):
        m = torch.nn.LayerNorm(shape, eps=1e-5, elementwise_affine=affine)
        attrs = {"normalized_shape": shape, "eps": 1e-5, "affine": int(affine)}
        out.append(module_case(f"module_layer_norm_{name}", "module_layer_norm", m,
                               [randn(*x_shape)], lambda call, x: call(x), attrs))
    m = torch.nn.LayerNorm([6])
    out.append(module_case("module_layer_norm_grad", "module_layer_norm", m, [randn(3, 6)],
                           lambda call, x: call(x),
                           {"normalized_shape": [6], "eps": 1e-5, "affine": 1}, grad=True))
    return out


def mha_case(name, E, H, B, L, S, qkv="self", bias=True, batch_first=True, batched=True,
             attn_mask=None, kpm=None, is_causal=False, need_weights=True, average=True,
             grad=False):
    m = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first)

    def shape(n):
        if not batched:
            return (n, E)
        return (B, n, E) if batch_first else (n, B, E)

    if qkv == "self":
        assert L == S
        inputs = [randn(*shape(L))]
    elif qkv == "kv":
        inputs = [randn(*shape(L)), randn(*shape(S))]
    else:
        inputs = [randn(*shape(L)), randn(*shape(S)), randn(*shape(S))]
    n_qkv = len(inputs)
    attrs = {"embed_dim": E, "num_heads": H, "bias": int(bias), "batch_first": int(batch_first),
             "qkv": qkv, "need_weights": int(need_weights), "average": int(average),
             "is_causal": int(is_causal)}
    if attn_mask is not None:
        inputs.append(attn_mask)
        attrs["has_attn_mask"] = 1
    if kpm is not None:
        inputs.append(kpm)
        attrs["has_kpm"] = 1
    causal = torch.ones(L, S, dtype=torch.bool).triu(1) if is_causal else None

    def forward(call, *ins):
        q = ins[0]
        k = v = q if qkv == "self" else ins[1]
        if qkv == "separate":
            v = ins[2]
        rest = list(ins[n_qkv:])
        mask = rest.pop(0) if attn_mask is not None else None
        pad = rest.pop(0) if kpm is not None else None
        if causal is not None:
            # The causal pattern joins any given mask (as mstep's is_causal).
            if mask is None:
                mask = causal
            elif mask.dtype == torch.bool:
                mask = mask | causal
            else:
                mask = mask.masked_fill(causal, float("-inf"))
        out, weights = call(q, k, v, key_padding_mask=pad, need_weights=need_weights,
                            attn_mask=mask, average_attn_weights=average)
        return [out, weights] if need_weights else out

    return module_case(f"module_mha_{name}", "module_mha", m, inputs, forward, attrs, grad=grad,
                       tol={"simulate": True})


def mha_cases():
    B, L, S, E, H = 2, 4, 5, 8, 2
    # Bool masks keep key 0 (and, for causal, the diagonal) visible.
    bool_mask = torch.rand(L, S, generator=torch.Generator().manual_seed(7)) < 0.4
    bool_mask[:, 0] = False
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[0, 3:] = True
    kpm[1, 4:] = True
    float_mask = randn(B * H, L, S)
    return [
        mha_case("self", E, H, B, L, L),
        mha_case("self_no_weights", E, H, B, L, L, need_weights=False),
        mha_case("cross_kv_bool_mask", E, H, B, L, S, qkv="kv", attn_mask=bool_mask),
        mha_case("separate_kpm_per_head", E, H, B, L, S, qkv="separate", kpm=kpm,
                 average=False),
        mha_case("causal", E, H, B, L, L, is_causal=True),
        mha_case("causal_kpm", E, H, B, L, S, qkv="separate", is_causal=True, kpm=kpm),
        mha_case("float_mask_3d_kpm", E, H, B, L, S, qkv="kv", attn_mask=float_mask, kpm=kpm),
        mha_case("no_bias_seq_first", E, H, B, L, S, qkv="separate", bias=False,
                 batch_first=False, attn_mask=bool_mask),
        mha_case("unbatched", E, 4, B, L, S, qkv="kv", batched=False, attn_mask=bool_mask),
        # One query per row, an all-false padding mask (nothing hidden).
        mha_case("four_heads_single_query", 8, 4, 3, 1, 3, qkv="kv",
                 kpm=torch.zeros(3, 3, dtype=torch.bool)),
        mha_case("grad_self", E, H, B, L, L, need_weights=False, grad=True),
        mha_case("grad_cross_causal_kpm", E, H, B, L, S, qkv="separate", is_causal=True, kpm=kpm,
                 need_weights=False, grad=True),
    ]


def cases():
    return linear_cases() + conv_cases() + layer_norm_cases() + mha_cases()
