"""Oracle cases for the optimizers and clip_grad_norm_: PyTorch 1.13's
torch.optim runs a few steps on small parameters with given gradients.

An optimizer case's inputs are the n_params parameters, then, step by
step, each parameter's gradient (zeros where attr "skip" lists the flat
index step * n_params + i: that gradient is None, the parameter is
skipped). Attr "lrs" is the learning rate set before each step (the
optimizer's param_groups[0]["lr"]). The expected outputs are every
parameter after every step, in the same order.
"""
import torch

from oracle_lib import Case

# A generator of our own: drawing from oracle_lib's shared one would shift
# the inputs of every case file sorted after this one.
_gen = torch.Generator().manual_seed(4321)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=_gen, dtype=torch.float64).to(dtype)


def rand(*shape, lo=0.0, hi=1.0, dtype=torch.float32):
    return (lo + (hi - lo) * torch.rand(*shape, generator=_gen, dtype=torch.float64)).to(dtype)

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16


def _optim_case(name, op, cls, kwargs, attrs, params, grads, lrs, skip=()):
    n = len(params)
    ps = [p.clone().requires_grad_() for p in params]
    opt = cls(ps, lr=lrs[0], **kwargs)
    expect = []
    for k, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        for i, p in enumerate(ps):
            p.grad = None if k * n + i in skip else grads[k][i].clone()
        opt.step()
        expect += [p.detach().clone() for p in ps]
    inputs = list(params) + [g for step in grads for g in step]
    attrs = dict(attrs, n_params=n, steps=len(lrs), lrs=list(lrs))
    if skip:
        attrs["skip"] = list(skip)
    # PyTorch's bf16 optimizer steps round to bf16 after every op.
    acc = "bf16" if params[0].dtype == BF16 else None
    return Case(name, op, inputs, expect, attrs, tol={"acc": acc},
                magnitudes=[max(1.0, float(t.abs().max())) for t in expect])


def _problem(dtype, steps, shapes=((2, 3), (3,))):
    params = [randn(*s, dtype=dtype) for s in shapes]
    grads = [[randn(*s, dtype=dtype) for s in shapes] for _ in range(steps)]
    return params, grads


def cases():
    out = []
    lrs3 = [0.1, 0.05, 0.02]
    for dname, dt in (("f32", F32), ("f64", F64)):
        p, g = _problem(dt, 3)
        sgd = [
            ("plain", {}),
            ("momentum", {"momentum": 0.9}),
            ("dampening_wd", {"momentum": 0.9, "dampening": 0.5, "weight_decay": 0.01}),
            ("nesterov_wd", {"momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
        ]
        for tag, kw in sgd:
            out.append(_optim_case(f"optim_sgd_{tag}_{dname}", "optim_sgd", torch.optim.SGD, kw, kw,
                                   p, g, lrs3))
        adam_lrs = [1e-2, 5e-3, 2e-3]
        adam = [
            ("default", {}),
            ("betas_wd", {"betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}),
            ("amsgrad", {"amsgrad": True, "weight_decay": 0.05}),
        ]
        for tag, kw in adam:
            attrs = {k: v for k, v in kw.items() if k != "betas"}
            if "betas" in kw:
                attrs["beta1"], attrs["beta2"] = kw["betas"]
            out.append(_optim_case(f"optim_adam_{tag}_{dname}", "optim_adam", torch.optim.Adam,
                                   kw, attrs, p, g, adam_lrs))
            out.append(_optim_case(f"optim_adamw_{tag}_{dname}", "optim_adamw", torch.optim.AdamW,
                                   kw, attrs, p, g, adam_lrs))
        for tag, kw in (("default", {}), ("rho_wd", {"rho": 0.8, "eps": 1e-4, "weight_decay": 0.1})):
            out.append(_optim_case(f"optim_adadelta_{tag}_{dname}", "optim_adadelta",
                                   torch.optim.Adadelta, kw, kw, p, g, [1.0, 0.5, 2.0]))

    # A parameter without a gradient is skipped: its step count (and so
    # Adam's bias correction) falls behind the other's.
    p, g = _problem(F32, 4)
    skip = (1, 5)  # parameter 1 at steps 0 and 2
    out.append(_optim_case("optim_adam_skip", "optim_adam", torch.optim.Adam, {}, {}, p, g,
                           [1e-2] * 4, skip=skip))
    out.append(_optim_case("optim_sgd_dampening_skip", "optim_sgd", torch.optim.SGD,
                           {"momentum": 0.9, "dampening": 0.3}, {"momentum": 0.9, "dampening": 0.3},
                           p, g, [0.1] * 4, skip=skip))
    out.append(_optim_case("optim_adadelta_skip", "optim_adadelta", torch.optim.Adadelta, {}, {},
                           p, g, [1.0] * 4, skip=skip))
    # bf16 parameters: updated in bf16, loosely.
    p, g = _problem(BF16, 3)
    out.append(_optim_case("optim_sgd_momentum_bf16", "optim_sgd", torch.optim.SGD,
                           {"momentum": 0.9}, {"momentum": 0.9}, p, g, lrs3))

    # clip_grad_norm_: inputs are the gradients; outputs the total norm and
    # the clipped gradients.
    for tag, grads, max_norm, norm_type in (
        ("l2_clipped", [randn(2, 3), randn(4)], 1.0, 2.0),
        ("l2_unclipped", [rand(2, 3, lo=-0.1, hi=0.1), rand(4, lo=-0.1, hi=0.1)], 5.0, 2.0),
        ("l1", [randn(2, 3), randn(4)], 0.5, 1.0),
        ("p3", [randn(2, 3), randn(4)], 0.5, 3.0),
        ("inf", [randn(2, 3), randn(4)], 0.5, float("inf")),
        ("f64", [randn(5, dtype=F64), randn(2, 2, dtype=F64)], 1.5, 2.0),
    ):
        ps = [torch.zeros_like(t, requires_grad=True) for t in grads]
        for p_, g_ in zip(ps, grads):
            p_.grad = g_.clone()
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
        out.append(Case(f"clip_grad_norm_{tag}", "clip_grad_norm_", grads,
                        [total] + [p_.grad for p_ in ps],
                        {"max_norm": max_norm, "norm_type": norm_type}))
    return out
