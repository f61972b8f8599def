// Recording of the conv2d and pooling gradient primitives (see
// LinalgGrad.h). Their callers are the backward formulas, which pass
// shapes and attributes the forward op validated; the checks here catch
// internal misuse that the kernels' bounds checks would silently accept.
#include "lib/api/LinalgGrad.h"

#include "lib/api/OpBuilder.h"

namespace mstep::detail {

namespace {

IntList to_int_list(const Shape& s) { return IntList(s.begin(), s.end()); }

void check_4d(absl::string_view op, absl::string_view what, const Tensor& t) {
  if (!t.defined() || t.dim() != 4 || !is_floating(t.dtype()))
    throw_op_error(op, absl::StrCat("expects a floating 4-D ", what),
                   t.defined() ? describe(t) : "undefined", "");
}

/// Both operands floating 4-D tensors, of one dtype.
void check_4d_pair(absl::string_view op, absl::string_view a_name, const Tensor& a,
                   absl::string_view b_name, const Tensor& b) {
  check_4d(op, a_name, a);
  check_4d(op, b_name, b);
  if (a.dtype() != b.dtype())
    throw_op_error(op, "expects operands of one dtype",
                   absl::StrCat(describe(a), " and ", describe(b)), "");
}

/// grad_out [N, OC, OH, OW] against input [N, C, H, W] and the weight
/// [OC, C / groups, kH, kW]: the batch, channel and output sizes must be
/// those the forward conv2d had.
void check_conv(absl::string_view op, const Shape& in, const Shape& w, const Tensor& grad_out,
                const IntList& stride, const IntList& padding, const IntList& dilation,
                int64_t groups) {
  const Shape& g = grad_out.shape();
  bool ok = in.rank() == 4 && w.rank() == 4 && groups >= 1 && in[0] == g[0] && w[0] == g[1] &&
            w[1] * groups == in[1] && w[0] % groups == 0;
  for (int i = 0; ok && i < 2; ++i) {
    const int64_t span = dilation[i] * (w[2 + i] - 1) + 1;
    ok = (in[2 + i] + 2 * padding[i] - span) / stride[i] + 1 == g[2 + i];
  }
  if (!ok)
    throw_op_error(op, "got shapes that no conv2d forward could have had",
                   absl::StrCat("input ", in.to_string(), ", weight ", w.to_string(), ", grad_out ",
                                describe(grad_out), ", groups=", groups),
                   "");
}

/// The attrs of both conv2d gradients: the shape of the result, then the
/// forward's stride, padding, dilation and groups.
AttrList conv_grad_attrs(const Shape& result_shape, const IntList& stride, const IntList& padding,
                         const IntList& dilation, int64_t groups) {
  return {{AttrName::shape, to_int_list(result_shape)},
          {AttrName::stride, stride},
          {AttrName::padding, padding},
          {AttrName::dilation, dilation},
          {AttrName::groups, groups}};
}

/// grad_out [N, C, OH, OW] against the input [N, C, H, W].
void check_pool(absl::string_view op, const Tensor& grad_out, const Shape& in) {
  const Shape& g = grad_out.shape();
  if (in.rank() != 4 || in[0] != g[0] || in[1] != g[1])
    throw_op_error(op, "expects grad_out and input to share the N and C dims",
                   absl::StrCat("grad_out ", describe(grad_out), ", input ", in.to_string()), "");
}

}  // namespace

Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                         const IntList& stride, const IntList& padding, const IntList& dilation,
                         int64_t groups) {
  constexpr absl::string_view op = "conv2d_input_grad";
  check_4d_pair(op, "grad_out", grad_out, "weight", weight);
  check_conv(op, input_shape, weight.shape(), grad_out, stride, padding, dilation, groups);
  AttrList attrs = conv_grad_attrs(input_shape, stride, padding, dilation, groups);
  return record(op, OpKind::conv2d_input_grad, {grad_out, weight}, std::move(attrs),
                {input_shape, grad_out.dtype()});
}

Tensor conv2d_weight_grad(const Tensor& input, const Tensor& grad_out, const Shape& weight_shape,
                          const IntList& stride, const IntList& padding, const IntList& dilation,
                          int64_t groups) {
  constexpr absl::string_view op = "conv2d_weight_grad";
  check_4d_pair(op, "input", input, "grad_out", grad_out);
  check_conv(op, input.shape(), weight_shape, grad_out, stride, padding, dilation, groups);
  AttrList attrs = conv_grad_attrs(weight_shape, stride, padding, dilation, groups);
  return record(op, OpKind::conv2d_weight_grad, {input, grad_out}, std::move(attrs),
                {weight_shape, grad_out.dtype()});
}

Tensor max_pool2d_grad(const Tensor& grad_out, const Tensor& input, const IntList& kernel,
                       const IntList& stride, const IntList& padding, const IntList& dilation,
                       bool ceil_mode) {
  constexpr absl::string_view op = "max_pool2d_grad";
  check_4d_pair(op, "grad_out", grad_out, "input", input);
  check_pool(op, grad_out, input.shape());
  AttrList attrs = {{AttrName::kernel, kernel},
                    {AttrName::stride, stride},
                    {AttrName::padding, padding},
                    {AttrName::dilation, dilation},
                    {AttrName::ceil_mode, int64_t{ceil_mode}}};
  return record(op, OpKind::max_pool2d_grad, {grad_out, input}, std::move(attrs), input.type());
}

Tensor avg_pool2d_grad(const Tensor& grad_out, const Shape& input_shape, const IntList& kernel,
                       const IntList& stride, const IntList& padding, bool ceil_mode,
                       bool count_include_pad) {
  constexpr absl::string_view op = "avg_pool2d_grad";
  check_4d(op, "grad_out", grad_out);
  check_pool(op, grad_out, input_shape);
  AttrList attrs = {{AttrName::shape, to_int_list(input_shape)},
                    {AttrName::kernel, kernel},
                    {AttrName::stride, stride},
                    {AttrName::padding, padding},
                    {AttrName::ceil_mode, int64_t{ceil_mode}},
                    {AttrName::count_include_pad, int64_t{count_include_pad}}};
  return record(op, OpKind::avg_pool2d_grad, {grad_out}, std::move(attrs),
                {input_shape, grad_out.dtype()});
}

}  // namespace mstep::detail
