"""Oracle cases for a custom op with a scalar form (test/custom_ops/ScaledElu.h):
scaled_elu(x; alpha, scale) = scale * elu(x, alpha), f32 and f64.

On ref (and with MSTEP_FUSE=0) mstep runs the op's kernel; on the cpu
backend (oracle_cpu) the call is fused and computes the scalar form
instead, so both are checked against PyTorch. Tolerance: each side's
rounding simulated through the formula (tolerance.simulated_sigma).
"""
import torch

from oracle_lib import case

# A generator of our own, so the other case files' inputs stay as they were.
_gen = torch.Generator().manual_seed(2718)


def cases():
    out = []
    for name, dt in (("f32", torch.float32), ("f64", torch.float64)):
        x = ((torch.rand(64, generator=_gen, dtype=torch.float64) - 0.5) * 8).to(dt)
        for label, alpha, scale in (("defaults", 1.0, 1.0), ("alpha1p5_scale2", 1.5, 2.0)):
            out.append(case(f"custom_scaled_elu_{label}_{name}", "custom_scaled_elu", [x],
                            lambda t, a=alpha, s=scale: s * torch.nn.functional.elu(t, a),
                            attrs={"alpha": alpha, "scale": scale}, tol={"simulate": True}))
    return out
