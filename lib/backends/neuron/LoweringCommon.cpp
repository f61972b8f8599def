// The pieces every lowering shares (LoweringCommon.h).
#include "lib/backends/neuron/LoweringCommon.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::neuron {

namespace {

std::optional<AluOp> binary_alu(OpKind op) {
  switch (op) {
  case OpKind::add:
    return AluOp::add;
  case OpKind::sub:
    return AluOp::subtract;
  case OpKind::mul:
    return AluOp::multiply;
  case OpKind::div:
    return AluOp::divide;
  case OpKind::maximum:
    return AluOp::max;
  case OpKind::minimum:
    return AluOp::min;
  default:
    return std::nullopt;
  }
}

std::optional<ActivationFunction> unary_activation(OpKind op) {
  switch (op) {
  case OpKind::exp:
    return ActivationFunction::exp;
  case OpKind::tanh:
    return ActivationFunction::tanh;
  case OpKind::sigmoid:
    return ActivationFunction::sigmoid;
  case OpKind::relu:
    return ActivationFunction::relu;
  case OpKind::rsqrt:
    return ActivationFunction::rsqrt;
  case OpKind::sqrt: // fp32 sqrt is correctly rounded: ref's bits
    return ActivationFunction::sqrt;
  case OpKind::erf:
    return ActivationFunction::erf;
  case OpKind::gelu: // the erf form; ew_op_of picks the tanh form by the attribute
    return ActivationFunction::gelu;
  default:
    return std::nullopt;
  }
}

} // namespace

absl::Status refuse(OpKind op, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("neuron lowering: ", op_name(op), " not tiled: ", why));
}

/// The EwOp of `op` over values `a` (and `b`, or the scalar `scalar` when
/// b is -1 and the op is binary), or nullopt when it has no engine op.
std::optional<EwOp> ew_op(OpKind op, int32_t a, int32_t b, std::optional<float> scalar) {
  EwOp e;
  e.a = a;
  e.b = b;
  if (op == OpKind::neg) {
    e.opcode = Opcode::tensor_scalar;
    e.alu = AluOp::multiply;
    e.scalar = -1.0f;
    return e;
  }
  if (auto f = unary_activation(op)) {
    e.opcode = Opcode::activation;
    e.function = *f;
    return e;
  }
  if (auto alu = binary_alu(op)) {
    e.alu = *alu;
    if (scalar) {
      e.opcode = Opcode::tensor_scalar;
      e.scalar = *scalar;
    }
    return e;
  }
  return std::nullopt;
}

std::optional<EwOp> ew_op_of(const GraphNode& n, int32_t a, int32_t b,
                             std::optional<float> scalar) {
  std::optional<EwOp> e = ew_op(n.op, a, b, scalar);
  if (e && n.op == OpKind::gelu && attr_int(n.attrs, AttrName::approximate) == 1)
    e->function = ActivationFunction::gelu_tanh;
  return e;
}

bool tileable_dtype(DType d) { return d == DType::f32 || d == DType::bf16; }

float round_to_dtype(double v, DType d) {
  const float f = static_cast<float>(v);
  return d == DType::bf16 ? static_cast<float>(BFloat16(f)) : f;
}

std::vector<FlatPiece> flat_pieces(int64_t n, int64_t chunk) {
  const int64_t f = n / kPartitions, r = n - f * kPartitions;
  std::vector<FlatPiece> pieces;
  for (int64_t c0 = 0; c0 < f; c0 += chunk)
    pieces.push_back({0, kPartitions, f, c0, std::min(chunk, f - c0)});
  for (int64_t c0 = 0; c0 < r; c0 += chunk)
    pieces.push_back({f * kPartitions, 1, r, c0, std::min(chunk, r - c0)});
  return pieces;
}

AccessPattern flat_hbm(int32_t tensor, DType dt, const FlatPiece& piece) {
  AccessPattern ap = hbm_rows(tensor, dt, piece.row, 0, piece.parts, piece.c0, piece.w);
  ap.offset += piece.base;
  return ap;
}

std::optional<float> scalar_constant(const GraphNode& n) {
  if (n.op != OpKind::constant || n.results[0].shape.rank() != 0 ||
      !tileable_dtype(n.results[0].dtype))
    return std::nullopt;
  const float v = static_cast<float>(attr_double(n.attrs, AttrName::value));
  return round_to_dtype(v, n.results[0].dtype);
}

} // namespace mstep::neuron
