// Shared by the attention tile-program tests against ref
// (attention_valid_len_test.cpp, attention_mask_test.cpp): the host
// fallbacks of a one-node neuron executable, and the comparison with ref at
// the conformance suite's sdpa tolerances (f32 rtol 1e-4, atol 1e-5; bf16
// 4e-2 both), values ref gives as exactly 0 required exactly 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "LoweringTestUtil.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron::testing {

/// The host fallbacks of a neuron executable of `node` alone (its
/// operands the graph's inputs, its results the outputs).
inline size_t host_fallbacks(const GraphNode& node, const std::vector<TensorType>& types) {
  TraceGraph g;
  g.input_types = types;
  for (size_t i = 0; i < types.size(); ++i)
    g.nodes.push_back(param(static_cast<int64_t>(i), types[i]));
  g.nodes.push_back(node);
  const uint32_t sdpa_at = static_cast<uint32_t>(types.size());
  for (uint32_t r = 0; r < node.results.size(); ++r) g.outputs.push_back(ValueRef{sdpa_at, r});
  absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(std::move(g));
  EXPECT_TRUE(exe.ok()) << exe.status();
  return exe.ok() ? (*exe)->host_fallbacks().size() : SIZE_MAX;
}

/// The attrs ref reads of an sdpa / sdpa_grad node without dropout.
inline AttrList sdpa_attrs(bool causal, double scale, bool has_mask, bool has_len, bool left) {
  return {{AttrName::is_causal, AttrValue(int64_t{causal})},
          {AttrName::scale, AttrValue(scale)},
          {AttrName::dropout_p, AttrValue(0.0)},
          {AttrName::offset, AttrValue(int64_t{-1})},
          {AttrName::has_mask, AttrValue(int64_t{has_mask})},
          {AttrName::has_valid_len, AttrValue(int64_t{has_len})},
          {AttrName::padding_side, AttrValue(int64_t{left})},
          {AttrName::return_probs, AttrValue(int64_t{0})},
          {AttrName::return_mask, AttrValue(int64_t{0})},
          {AttrName::recompute, AttrValue(int64_t{1})}};
}

inline std::vector<TensorType> types_of(const Buffers& in) {
  std::vector<TensorType> types;
  for (const auto& b : in) types.push_back(b->type());
  return types;
}

inline void expect_attention_matches(const host::HostBuffer& want, const host::HostBuffer& got,
                                     DType dt, const char* what) {
  const double rtol = dt == DType::bf16 ? 4e-2 : 1e-4, atol = dt == DType::bf16 ? 4e-2 : 1e-5;
  for (int64_t i = 0; i < want.type().numel(); ++i) {
    const double w = at(want, i), g = at(got, i);
    ASSERT_TRUE(std::isfinite(w)) << what << " element " << i << ": ref gives " << w;
    ASSERT_TRUE(std::isfinite(g)) << what << " element " << i << ": neuron gives " << g;
    if (w == 0.0)
      ASSERT_EQ(g, 0.0) << what << " element " << i << ": ref gives exactly 0";
    else
      ASSERT_LE(std::abs(g - w), atol + rtol * std::abs(w))
          << what << " element " << i << ": ref " << w << ", neuron " << g;
  }
}

/// `node` lowered (validator OK, no host fallback) and simulated on `in`
/// against ref's kernel, result by result; with `not_all_zero`, each result
/// must also hold a value ref gives as nonzero.
inline void expect_lowered_matches_ref(const GraphNode& node, const Buffers& in, DType dt,
                                       bool not_all_zero = false) {
  const std::vector<TensorType> types = types_of(in);
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_TRUE(validate(low->program).ok()) << validate(low->program);
  EXPECT_EQ(host_fallbacks(node, types), 0u);
  absl::StatusOr<Buffers> want = run_ref(node, in);
  absl::StatusOr<Buffers> got = run_lowered_all(node, in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  const bool backward = node.op == OpKind::sdpa_grad;
  const char* names[] = {backward ? "dq" : "out", "dk", "dv"};
  for (size_t r = 0; r < want->size(); ++r) {
    expect_attention_matches(*(*want)[r], *(*got)[r], dt, names[r]);
    int64_t zeros = 0;
    for (int64_t i = 0; i < (*want)[r]->type().numel(); ++i) zeros += at(*(*want)[r], i) == 0;
    if (not_all_zero)
      EXPECT_LT(zeros, (*want)[r]->type().numel()) << names[r] << ": ref gives only zeros";
  }
}

} // namespace mstep::neuron::testing
