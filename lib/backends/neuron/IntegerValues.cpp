// Bool and integer values on the engines (IntegerValues.h).
#include "lib/backends/neuron/IntegerValues.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"

namespace mstep::neuron {

std::optional<DType> value_tile_dtype(DType d) {
  if (tileable_dtype(d)) return d;
  if (d == DType::boolean) return DType::boolean;
  if (d == DType::i32 || d == DType::i64) return DType::i32;
  return std::nullopt;
}

std::optional<float> exact_int_constant(const GraphNode& n) {
  if (n.op != OpKind::constant || n.results[0].shape.rank() != 0) return std::nullopt;
  const DType d = n.results[0].dtype;
  if (d != DType::boolean && d != DType::i32 && d != DType::i64) return std::nullopt;
  const double v = attr_double(n.attrs, AttrName::value);
  if (d == DType::boolean) return v != 0 ? 1.0f : 0.0f;
  const double whole = std::trunc(v); // static_cast<int64_t>, as ref stores it
  if (!(std::fabs(whole) <= kExactInFp32)) return std::nullopt;
  return static_cast<float>(whole);
}

std::optional<float> fold_constant(const GraphNode& n,
                                   const std::vector<std::optional<float>>& constant) {
  if (n.results.size() != 1 || n.results[0].shape.rank() != 0 || n.operands.empty() ||
      n.operands.size() > 2 || !tileable_dtype(n.results[0].dtype))
    return std::nullopt;
  float v[2] = {0, 0};
  for (size_t k = 0; k < n.operands.size(); ++k) {
    const std::optional<float>& c = constant[n.operands[k].node];
    if (!c) return std::nullopt;
    v[k] = *c;
  }
  const bool binary = n.operands.size() == 2;
  float r;
  if (n.op == OpKind::neg && !binary) r = -v[0];
  else if (n.op == OpKind::cast && !binary) r = v[0];
  else if (n.op == OpKind::add && binary) r = v[0] + v[1];
  else if (n.op == OpKind::sub && binary) r = v[0] - v[1];
  else if (n.op == OpKind::mul && binary) r = v[0] * v[1];
  else if (n.op == OpKind::div && binary) r = v[0] / v[1];
  else return std::nullopt;
  return round_to_dtype(r, n.results[0].dtype);
}

absl::Status check_integer_range(OpKind op, absl::Span<const host::HostBuffer* const> inputs,
                                 const std::vector<int32_t>& int_inputs, double bound) {
  for (int32_t i : int_inputs) {
    const host::HostBuffer& b = *inputs[i];
    const bool wide = b.type().dtype == DType::i64;
    for (int64_t j = 0; j < b.numel(); ++j) {
      const int64_t v = wide ? b.data<int64_t>()[j] : b.data<int32_t>()[j];
      if (std::fabs(static_cast<double>(v)) > bound)
        return absl::InvalidArgumentError(absl::StrCat(
            "neuron: ", op_name(op), " operand ", i, " (", b.type().to_string(), ") holds ", v,
            " at element ", j, ": the NeuronCore's engines compute integers in fp32, exact up to ",
            bound, " in magnitude here. Run this step on cpu or ref."));
    }
  }
  return absl::OkStatus();
}

} // namespace mstep::neuron
