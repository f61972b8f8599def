// The gradient primitives of conv2d and the 2-D pools, recorded by the
// autograd formulas in autograd/LinalgBackward.cpp. Library-internal: they
// take 4-D NCHW operands and attributes the forward op already checked, so
// they only guard against misuse (rank, dtype, batch/channel mismatch).
#pragma once

#include "mstep/api/Tensor.h"
#include "mstep/ir/Attr.h"

namespace mstep::detail {

/// The gradient of conv2d with respect to its input (a transposed
/// convolution of `grad_out` [N, OC, OH, OW] with `weight`), of shape
/// `input_shape` [N, C, H, W]. Input rows and columns that no window
/// touches (stride larger than the kernel span) get zero.
Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                         const IntList& stride, const IntList& padding, const IntList& dilation,
                         int64_t groups);

/// The gradient of conv2d with respect to its weight, of shape
/// `weight_shape` [OC, C / groups, kH, kW]: the correlation of `input`
/// with `grad_out`, summed over the batch.
Tensor conv2d_weight_grad(const Tensor& input, const Tensor& grad_out, const Shape& weight_shape,
                          const IntList& stride, const IntList& padding, const IntList& dilation,
                          int64_t groups);

/// The gradient of max_pool2d with respect to `input`: each window's
/// gradient goes to its first maximum (the last NaN when there is one, the
/// first tap inside the input when every tap is -inf), as PyTorch does;
/// overlapping windows add up.
Tensor max_pool2d_grad(const Tensor& grad_out, const Tensor& input, const IntList& kernel,
                       const IntList& stride, const IntList& padding, const IntList& dilation,
                       bool ceil_mode);

/// The gradient of avg_pool2d with respect to its input of shape
/// `input_shape`: each window spreads its gradient over the taps inside the
/// input, divided by the forward's divisor.
Tensor avg_pool2d_grad(const Tensor& grad_out, const Shape& input_shape, const IntList& kernel,
                       const IntList& stride, const IntList& padding, bool ceil_mode,
                       bool count_include_pad);

}  // namespace mstep::detail
