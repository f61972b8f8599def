// Initial parameter values (torch.nn.init's defaults for each module),
// drawn from mstep's Philox stream outside autograd. Library-internal.
#pragma once

#include <cmath>

#include "mstep/api/Autograd.h"
#include "mstep/api/Creation.h"
#include "mstep/api/Tensor.h"

namespace mstep::nn::init {

/// U(-bound, bound). kaiming_uniform_(a=sqrt(5)) on a fan_in-wide weight,
/// PyTorch's Linear/Conv default, is this with bound = 1/sqrt(fan_in).
inline Tensor uniform(const Shape& shape, double bound) {
  NoGradGuard no_grad;
  return ((rand(shape) * 2.0 - 1.0) * bound).detach();
}

inline double kaiming_bound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

/// Overwrites `param` with `value` keeping the handle (and so any sharing
/// and requires_grad).
inline void assign(Tensor& param, const Tensor& value) {
  NoGradGuard no_grad;
  param.copy_(value);
}

}  // namespace mstep::nn::init
