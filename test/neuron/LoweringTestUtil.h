// What the lowering tests share: graph nodes built by hand, host buffers of
// f32/bf16 values, and running one node lowered on the simulator.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "lib/backends/neuron/Lowering.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/HalfTypes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mstep::neuron::testing {

inline GraphNode param(int64_t index, const TensorType& t) {
  GraphNode n{OpKind::parameter, {}, {}, {t}, nullptr};
  n.attrs.push_back({AttrName::index, AttrValue(index)});
  return n;
}

inline GraphNode op(OpKind k, std::initializer_list<uint32_t> operands, const TensorType& t) {
  GraphNode n{k, {}, {}, {t}, nullptr};
  for (uint32_t o : operands) n.operands.push_back(ValueRef{o, 0});
  return n;
}

inline GraphNode scalar_constant(double v, DType dt) {
  GraphNode c{OpKind::constant, {}, {}, {TensorType{Shape({}), dt}}, nullptr};
  c.attrs.push_back({AttrName::value, AttrValue(v)});
  return c;
}

inline std::shared_ptr<host::HostBuffer> buffer(const TensorType& t, const std::vector<float>& v) {
  auto b = std::make_shared<host::HostBuffer>(t);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::bf16)
      b->data<BFloat16>()[i] = BFloat16(v[i]);
    else
      b->data<float>()[i] = v[i];
  }
  return b;
}

inline float at(const host::HostBuffer& b, int64_t i) {
  return b.type().dtype == DType::bf16 ? float(b.data<BFloat16>()[i]) : b.data<float>()[i];
}

inline std::vector<float> random_values(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

/// Runs `node` lowered (it must lower, with a cost estimate); returns its
/// one result.
inline std::shared_ptr<host::HostBuffer>
run_node(const GraphNode& node, const std::vector<std::shared_ptr<host::HostBuffer>>& in) {
  std::vector<TensorType> types;
  std::vector<const host::HostBuffer*> ptrs;
  for (const auto& b : in) {
    types.push_back(b->type());
    ptrs.push_back(b.get());
  }
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  EXPECT_TRUE(low.ok()) << low.status();
  if (!low.ok()) return nullptr;
  EXPECT_GT(low->cost.total_ns, 0);
  auto out = std::make_shared<host::HostBuffer>(node.results[0]);
  host::HostBuffer* outs[] = {out.get()};
  Simulator sim;
  const absl::Status s = run_lowered(*low, sim, ptrs, outs);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

using Buffers = std::vector<std::shared_ptr<host::HostBuffer>>;

/// `node`'s results from `run` (ref's kernel or the lowered program),
/// fresh buffers of the result types.
template <typename Run>
absl::StatusOr<Buffers> run_all(const GraphNode& node, const Buffers& in, Run&& run) {
  Buffers out;
  std::vector<const host::HostBuffer*> in_ptrs;
  std::vector<host::HostBuffer*> out_ptrs;
  for (const auto& b : in) in_ptrs.push_back(b.get());
  for (const TensorType& t : node.results) {
    out.push_back(std::make_shared<host::HostBuffer>(t));
    out_ptrs.push_back(out.back().get());
  }
  absl::Status s = run(in_ptrs, out_ptrs);
  if (!s.ok()) return s;
  return out;
}

/// All results of ref's kernel of `node` on `in`.
inline absl::StatusOr<Buffers> run_ref(const GraphNode& node, const Buffers& in) {
  return run_all(node, in, [&](auto& i, auto& o) {
    return ref::ref_kernel(node.op)(ref::KernelArgs{node, i, o});
  });
}

/// All results of `node` lowered (it must lower) and run on a simulator.
inline absl::StatusOr<Buffers> run_lowered_all(const GraphNode& node, const Buffers& in) {
  std::vector<TensorType> types;
  for (const auto& b : in) types.push_back(b->type());
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  if (!low.ok()) return low.status();
  EXPECT_GT(low->cost.total_ns, 0);
  Simulator sim;
  return run_all(node, in, [&](auto& i, auto& o) { return run_lowered(*low, sim, i, o); });
}

/// A 0-d buffer holding `v`.
template <typename T> std::shared_ptr<host::HostBuffer> scalar_of(T v, DType dt) {
  auto b = std::make_shared<host::HostBuffer>(TensorType{Shape({}), dt});
  b->data<T>()[0] = v;
  return b;
}

/// The refusal message of lowering `node` over `types` ("" when it lowers).
inline std::string refusal(const GraphNode& node, const std::vector<TensorType>& types) {
  absl::StatusOr<LoweredOp> r = lower_node(node, types);
  return r.ok() ? std::string() : std::string(r.status().message());
}

} // namespace mstep::neuron::testing
