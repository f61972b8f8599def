// Matrix products, convolution and pooling: argument checks, shape
// inference and node recording. matmul, conv2d, max_pool2d and avg_pool2d
// are graph ops; bmm records a matmul node, linear is a composite.
//
// What a backend may assume about these graph ops:
// - matmul: both operands have rank >= 2 and one dtype (not bool), and
//   a[-1] == b[-2]. The batch dims (all but the last two) may differ in
//   rank and size-1 dims; they broadcast to the result's batch dims and the
//   kernel reads them through strides. Broadcasting in the op rather than
//   with expand() keeps a [B, n, k] @ [k, p] product from materializing B
//   copies of the weight.
// - conv2d, max_pool2d, avg_pool2d: a 4-D NCHW input. Unbatched [C, H, W]
//   inputs get a unit batch dim here and lose it afterwards (reshapes).
//   Spatial attributes are IntLists of 2 (height, width), already checked,
//   and the result type already holds the output size.
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/ShapeOps.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

std::string describe_pair(const Tensor& a, const Tensor& b) {
  return absl::StrCat(describe(a), " and ", describe(b));
}

void require_defined(absl::string_view op, absl::string_view what,
                     const Tensor& t) {
  if (!t.defined())
    throw_op_error(op, absl::StrCat("the ", what, " is undefined"), "",
                   "Pass a tensor.");
}

/// matmul-family dtype rule: one dtype (PyTorch does not promote here),
/// and not bool (PyTorch has no bool matmul kernel).
void check_product_dtypes(absl::string_view op, const Tensor& a,
                          const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw_op_error(op, "expects both operands to have the same dtype",
                   describe_pair(a, b),
                   "Convert one first, e.g. b.to(a.dtype()); like PyTorch, "
                   "mstep does not promote matmul operands.");
  if (a.dtype() == DType::boolean)
    throw_op_error(op, "is not defined for bool tensors", describe_pair(a, b),
                   "Convert both to a numeric dtype first, e.g. "
                   ".to(mstep::DType::f32).");
}

Shape sub_shape(const Shape& s, int64_t begin, int64_t end) {
  return Shape(s.dims().subspan(begin, end - begin));
}

/// A spatial parameter given as one value (both dims) or two (H, W);
/// every value must be >= `min_value`.
IntList spatial_pair(absl::string_view op, absl::string_view name,
                     absl::Span<const int64_t> values, int64_t min_value,
                     const Tensor& input) {
  const std::string got = absl::StrCat(name, "=[", absl::StrJoin(values, ", "),
                                       "] for input ", describe(input));
  if (values.size() != 1 && values.size() != 2)
    throw_op_error(op, absl::StrCat(name, " must have 1 or 2 values"), got,
                   "Pass one value for both spatial dims or {height, width}.");
  IntList out = {values[0], values.size() == 2 ? values[1] : values[0]};
  for (int64_t v : out)
    if (v < min_value)
      throw_op_error(op, absl::StrCat(name, " values must be >= ", min_value),
                     got, "");
  return out;
}

std::string list_str(const IntList& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

/// 4-D NCHW view of a 3-D or 4-D input's shape (without recording).
Shape batched_shape(const Tensor& input) {
  if (input.dim() == 4) return input.shape();
  return Shape{1, input.size(0), input.size(1), input.size(2)};
}

Tensor to_batched(const Tensor& input) {
  return input.dim() == 4 ? input : unsqueeze(input, 0);
}

Tensor from_batched(const Tensor& result, const Tensor& input) {
  return input.dim() == 4 ? result : squeeze(result, 0);
}

}  // namespace

// ---- Matrix products ------------------------------------------------

Tensor matmul(const Tensor& a, const Tensor& b) {
  constexpr absl::string_view op = "matmul";
  require_defined(op, "first operand", a);
  require_defined(op, "second operand", b);
  if (auto d = detail::autocast_target({&a, &b}))
    return matmul(detail::autocast_operand(a, *d), detail::autocast_operand(b, *d));
  if (a.dim() == 0 || b.dim() == 0)
    throw_op_error(op, "both operands need at least 1 dim", describe_pair(a, b),
                   "Use mul() to scale by a 0-d tensor.");
  check_product_dtypes(op, a, b);

  // 1. Promote 1-D operands to matrices: a vector on the left is a row
  //    [1, k], on the right a column [k, 1].
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  const Shape as = a_vec ? Shape{1, a.size(0)} : a.shape();
  const Shape bs = b_vec ? Shape{b.size(0), 1} : b.shape();
  const int64_t ar = as.rank(), br = bs.rank();
  const int64_t n = as[ar - 2], k = as[ar - 1], p = bs[br - 1];
  if (bs[br - 2] != k)
    throw_op_error(
        op,
        absl::StrCat("the contracted dims differ: ", k,
                     " (last dim of the first operand) vs ", bs[br - 2],
                     b_vec ? " (the second operand's only dim)"
                           : " (dim -2 of the second operand)"),
        describe_pair(a, b),
        "a.size(-1) must equal b.size(-2); transpose or reshape an operand.");

  // 2. Broadcast the batch dims (checked here, done by the kernel).
  auto batch = detail::broadcast_shapes(sub_shape(as, 0, ar - 2),
                                        sub_shape(bs, 0, br - 2));
  if (!batch.ok())
    throw_op_error(op,
                   absl::StrCat("the batch dims cannot be broadcast: ",
                                batch.status().message()),
                   describe_pair(a, b),
                   "Batch dims (all but the last two) must be equal or 1.");

  // 3. Record the rank >= 2 product.
  Shape out = *batch;
  out.push_back(n);
  out.push_back(p);
  const Tensor lhs = a_vec ? reshape(a, as.dims()) : a;
  const Tensor rhs = b_vec ? reshape(b, bs.dims()) : b;
  Tensor result =
      detail::record(op, OpKind::matmul, {lhs, rhs}, {}, {out, a.dtype()});

  // 4. Drop the dims that step 1 added.
  if (!a_vec && !b_vec) return result;
  Shape final_shape = *batch;
  if (!a_vec) final_shape.push_back(n);
  if (!b_vec) final_shape.push_back(p);
  return reshape(result, final_shape.dims());
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  constexpr absl::string_view op = "bmm";
  require_defined(op, "first operand", a);
  require_defined(op, "second operand", b);
  if (auto d = detail::autocast_target({&a, &b}))
    return bmm(detail::autocast_operand(a, *d), detail::autocast_operand(b, *d));
  if (a.dim() != 3 || b.dim() != 3)
    throw_op_error(op, "expects two 3-D tensors [B, n, m] and [B, m, p]",
                   describe_pair(a, b),
                   "Use matmul() for other ranks or broadcasting.");
  check_product_dtypes(op, a, b);
  if (a.size(0) != b.size(0))
    throw_op_error(
        op,
        absl::StrCat("the batch sizes differ: ", a.size(0), " vs ", b.size(0)),
        describe_pair(a, b),
        "bmm does not broadcast; use matmul() to broadcast.");
  if (a.size(2) != b.size(1))
    throw_op_error(op,
                   absl::StrCat("the contracted dims differ: ", a.size(2),
                                " (dim 2 of the first) vs ", b.size(1),
                                " (dim 1 of the second)"),
                   describe_pair(a, b), "a.size(2) must equal b.size(1).");
  return detail::record(op, OpKind::matmul, {a, b}, {},
                        {Shape{a.size(0), a.size(1), b.size(2)}, a.dtype()});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  constexpr absl::string_view op = "linear";
  require_defined(op, "input", x);
  require_defined(op, "weight", weight);
  if (auto d = detail::autocast_target({&x, &weight, &bias}))
    return linear(detail::autocast_operand(x, *d), detail::autocast_operand(weight, *d),
                  detail::autocast_operand(bias, *d));
  const std::string got =
      absl::StrCat("input ", describe(x), ", weight ", describe(weight),
                   ", bias ", bias.defined() ? describe(bias) : "none");
  if (weight.dim() != 2)
    throw_op_error(op, "expects a 2-D weight [out_features, in_features]", got,
                   "Reshape the weight to 2-D.");
  if (x.dim() == 0)
    throw_op_error(op, "expects an input with at least 1 dim", got,
                   "The last dim holds the in_features.");
  check_product_dtypes(op, x, weight);
  if (x.size(-1) != weight.size(1))
    throw_op_error(op,
                   absl::StrCat("the input's last dim (", x.size(-1),
                                ") does not match in_features (",
                                weight.size(1), ", dim 1 of the weight)"),
                   got, "The weight is [out_features, in_features].");
  if (bias.defined()) {
    if (bias.dtype() != x.dtype())
      throw_op_error(op, "expects the bias to have the input's dtype", got,
                     "Convert the bias with .to().");
    if (bias.dim() != 1 || bias.size(0) != weight.size(0))
      throw_op_error(op,
                     absl::StrCat("expects a 1-D bias of out_features = ",
                                  weight.size(0), " elements"),
                     got, "The bias is [out_features].");
  }
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? add(y, bias) : y;
}

// ---- Convolution ----------------------------------------------------

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              absl::Span<const int64_t> stride,
              absl::Span<const int64_t> padding,
              absl::Span<const int64_t> dilation, int64_t groups) {
  constexpr absl::string_view op = "conv2d";
  require_defined(op, "input", input);
  require_defined(op, "weight", weight);
  const std::string got = absl::StrCat(
      "input ", describe(input), ", weight ", describe(weight), ", bias ",
      bias.defined() ? describe(bias) : "none", ", groups=", groups);
  if (input.dim() != 3 && input.dim() != 4)
    throw_op_error(op,
                   "expects a 4-D input [N, C, H, W] or an unbatched 3-D "
                   "input [C, H, W]",
                   got,
                   "Reshape the input; use unsqueeze() for a channel dim.");
  if (weight.dim() != 4)
    throw_op_error(op,
                   "expects a 4-D weight [out_channels, in_channels / groups, "
                   "kH, kW]",
                   got, "");
  if (!is_floating(input.dtype()))
    throw_op_error(op, "expects floating-point tensors", got,
                   "Convert with .to(mstep::DType::f32).");
  if (weight.dtype() != input.dtype() ||
      (bias.defined() && bias.dtype() != input.dtype()))
    throw_op_error(op, "expects input, weight and bias to share one dtype", got,
                   "Convert them with .to().");
  const IntList s = spatial_pair(op, "stride", stride, 1, input);
  const IntList pad = spatial_pair(op, "padding", padding, 0, input);
  const IntList dil = spatial_pair(op, "dilation", dilation, 1, input);
  if (groups < 1) throw_op_error(op, "groups must be >= 1", got, "");

  const Shape in4 = batched_shape(input);
  const int64_t channels = in4[1], out_channels = weight.size(0);
  if (channels % groups != 0)
    throw_op_error(
        op,
        absl::StrCat("the input's ", channels,
                     " channels are not divisible by groups=", groups),
        got, "in_channels must be a multiple of groups.");
  if (out_channels % groups != 0)
    throw_op_error(
        op,
        absl::StrCat("the weight's ", out_channels,
                     " out_channels are not divisible by groups=", groups),
        got,
        "out_channels (dim 0 of the weight) must be a multiple of groups.");
  if (weight.size(1) * groups != channels)
    throw_op_error(
        op,
        absl::StrCat("the weight expects ", weight.size(1) * groups,
                     " input channels (dim 1 = ", weight.size(1),
                     " per group x groups=", groups, "), the input has ",
                     channels),
        got, "The weight is [out_channels, in_channels / groups, kH, kW].");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != out_channels))
    throw_op_error(op,
                   absl::StrCat("expects a 1-D bias of out_channels = ",
                                out_channels, " elements"),
                   got, "");

  Shape out{in4[0], out_channels, 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t kernel = weight.size(2 + i);
    const int64_t padded = in4[2 + i] + 2 * pad[i];
    const int64_t span = dil[i] * (kernel - 1) + 1;
    if (kernel < 1)
      throw_op_error(op, "the weight's kernel dims must be >= 1", got, "");
    if (span > padded)
      throw_op_error(op,
                     absl::StrCat("the kernel (", weight.size(2), "x",
                                  weight.size(3), ", dilation ", list_str(dil),
                                  ") spans ", span, " ",
                                  i == 0 ? "rows" : "columns",
                                  ", more than the padded input's ", padded),
                     absl::StrCat(got, ", padding ", list_str(pad)),
                     "Use a smaller kernel or dilation, or more padding.");
    out[2 + i] = (padded - span) / s[i] + 1;
  }

  AttrList attrs = {{AttrName::stride, s},
                    {AttrName::padding, pad},
                    {AttrName::dilation, dil},
                    {AttrName::groups, groups},
                    {AttrName::has_bias, int64_t{bias.defined()}}};
  std::vector<Tensor> operands = {to_batched(input), weight};
  if (bias.defined()) operands.push_back(bias);
  Tensor result = detail::record(op, OpKind::conv2d, operands, std::move(attrs),
                                 {std::move(out), input.dtype()});
  return from_batched(result, input);
}

// ---- Pooling --------------------------------------------------------

namespace {

/// Validated pooling parameters and the 4-D output shape.
struct PoolGeometry {
  IntList kernel, stride, padding, dilation;
  Shape out;
};

int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/// PyTorch's pooling_output_shape: floor (or ceil) of the window count,
/// where in ceil mode the last window must start inside the input or its
/// left padding (a window starting in the right padding is dropped).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad,
                         int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 +
                              (ceil_mode ? stride - 1 : 0),
                          stride) +
                1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

PoolGeometry pool_geometry(absl::string_view op, const Tensor& input,
                           absl::Span<const int64_t> kernel,
                           absl::Span<const int64_t> stride,
                           absl::Span<const int64_t> padding,
                           absl::Span<const int64_t> dilation, bool ceil_mode) {
  require_defined(op, "input", input);
  if (input.dim() != 3 && input.dim() != 4)
    throw_op_error(op,
                   "expects a 4-D input [N, C, H, W] or an unbatched 3-D "
                   "input [C, H, W]",
                   describe(input), "");
  const Shape in4 = batched_shape(input);
  if (in4[1] == 0 || in4[2] == 0 || in4[3] == 0)
    throw_op_error(op, "expects non-empty C, H and W dims (only N may be 0)",
                   describe(input), "");
  PoolGeometry g;
  g.kernel = spatial_pair(op, "kernel", kernel, 1, input);
  g.stride =
      stride.empty() ? g.kernel : spatial_pair(op, "stride", stride, 1, input);
  g.padding = spatial_pair(op, "padding", padding, 0, input);
  g.dilation = spatial_pair(op, "dilation", dilation, 1, input);
  const std::string params = absl::StrCat(
      describe(input), " with kernel ", list_str(g.kernel), ", stride ",
      list_str(g.stride), ", padding ", list_str(g.padding), ", dilation ",
      list_str(g.dilation), ceil_mode ? ", ceil_mode" : "");
  g.out = Shape{in4[0], in4[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    // PyTorch's rule: a window must never lie wholly in the padding.
    if (g.padding[i] > g.kernel[i] / 2)
      throw_op_error(op,
                     absl::StrCat("padding ", g.padding[i],
                                  " is more than half the kernel size ",
                                  g.kernel[i]),
                     params, "Use padding <= kernel / 2.");
    g.out[2 + i] = pool_output_size(in4[2 + i], g.kernel[i], g.padding[i],
                                    g.stride[i], g.dilation[i], ceil_mode);
    if (g.out[2 + i] < 1)
      throw_op_error(
          op,
          absl::StrCat("the output would be empty (", g.out[2 + i], " ",
                       i == 0 ? "rows" : "columns",
                       "): the window is larger than the padded input"),
          params, "Use a smaller kernel or dilation, or more padding.");
  }
  return g;
}

}  // namespace

Tensor max_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride,
                  absl::Span<const int64_t> padding,
                  absl::Span<const int64_t> dilation, bool ceil_mode) {
  constexpr absl::string_view op = "max_pool2d";
  PoolGeometry g =
      pool_geometry(op, input, kernel, stride, padding, dilation, ceil_mode);
  if (input.dtype() == DType::boolean)
    throw_op_error(op, "is not defined for bool tensors", describe(input),
                   "Convert to a numeric dtype first.");
  AttrList attrs = {{AttrName::kernel, g.kernel},
                    {AttrName::stride, g.stride},
                    {AttrName::padding, g.padding},
                    {AttrName::dilation, g.dilation},
                    {AttrName::ceil_mode, int64_t{ceil_mode}}};
  Tensor result = detail::record(op, OpKind::max_pool2d, {to_batched(input)},
                                 std::move(attrs), {g.out, input.dtype()});
  return from_batched(result, input);
}

Tensor avg_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride,
                  absl::Span<const int64_t> padding, bool ceil_mode,
                  bool count_include_pad) {
  constexpr absl::string_view op = "avg_pool2d";
  const int64_t no_dilation[] = {1};
  PoolGeometry g =
      pool_geometry(op, input, kernel, stride, padding, no_dilation, ceil_mode);
  detail::require_floating(op, input);
  AttrList attrs = {{AttrName::kernel, g.kernel},
                    {AttrName::stride, g.stride},
                    {AttrName::padding, g.padding},
                    {AttrName::ceil_mode, int64_t{ceil_mode}},
                    {AttrName::count_include_pad, int64_t{count_include_pad}}};
  Tensor result = detail::record(op, OpKind::avg_pool2d, {to_batched(input)},
                                 std::move(attrs), {g.out, input.dtype()});
  return from_batched(result, input);
}

}  // namespace mstep
