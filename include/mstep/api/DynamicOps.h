// Ops whose output shape depends on the input's values. Such a shape
// cannot be part of a compiled graph, so these ops run eagerly: they
// materialize their inputs (a sync point), compute on the host and return
// a new materialized tensor on the input's device. Each call counts as a
// host fallback (metrics().fallbacks, MSTEP_LOG_FALLBACK=1).
#pragma once

#include "mstep/api/Tensor.h"

namespace mstep {

/// Indices of the nonzero elements of `x`, as torch.nonzero: an i64 tensor
/// of shape [n, x.dim()], one row per nonzero element in row-major order.
/// NaN counts as nonzero, -0.0 as zero. A 0-d `x` gives [1, 0] or [0, 0].
/// Not differentiable (the result never requires grad).
Tensor nonzero(const Tensor& x);

/// The elements of `x` where `mask` is true, as torch.masked_select: `x`
/// and the bool `mask` are broadcast against each other and the selected
/// elements are returned as a 1-D tensor of x's dtype, in row-major order
/// of the broadcast shape.
/// Not differentiable yet: the result never requires grad, even when `x`
/// does (use where(mask, x, 0) for a differentiable, fixed-shape form).
Tensor masked_select(const Tensor& x, const Tensor& mask);

} // namespace mstep
