// The harness the host-kernel tests share: one-op TraceGraphs built by
// hand, buffers of random or given data, and a comparison of the cpu host
// kernel with the ref kernel of the same op on the same inputs.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/HostKernels.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::cpu::host_test {

using BufferList = std::vector<std::unique_ptr<host::HostBuffer>>;

// ---- Graphs, buffers and the two kernels -----------------------------------

/// A graph of one parameter per input and then the op; the op is the last
/// node.
inline TraceGraph one_op_graph(OpKind op, const std::vector<TensorType>& inputs, ResultTypes results,
                        AttrList attrs) {
  TraceGraph g;
  GraphNode node;
  node.op = op;
  node.attrs = std::move(attrs);
  node.results = std::move(results);
  for (size_t i = 0; i < inputs.size(); ++i) {
    GraphNode p;
    p.op = OpKind::parameter;
    p.attrs.push_back({AttrName::index, static_cast<int64_t>(i)});
    p.results.push_back(inputs[i]);
    g.nodes.push_back(std::move(p));
    g.input_types.push_back(inputs[i]);
    node.operands.push_back({static_cast<uint32_t>(i), 0});
  }
  g.nodes.push_back(std::move(node));
  g.outputs.push_back({static_cast<uint32_t>(inputs.size()), 0});
  return g;
}

inline BufferList allocate(const ResultTypes& types) {
  BufferList out;
  for (const TensorType& t : types) out.push_back(std::make_unique<host::HostBuffer>(t));
  return out;
}

inline BufferList copies(const BufferList& from) {
  BufferList out;
  for (const auto& b : from) {
    out.push_back(std::make_unique<host::HostBuffer>(b->type()));
    std::memcpy(out.back()->bytes(), b->bytes(), b->type().bytes());
  }
  return out;
}

/// The ref kernel's results for `inputs`.
inline BufferList run_ref(const GraphNode& node, const BufferList& inputs) {
  BufferList outputs = allocate(node.results);
  std::vector<const host::HostBuffer*> in;
  std::vector<host::HostBuffer*> out;
  for (const auto& b : inputs) in.push_back(b.get());
  for (const auto& b : outputs) out.push_back(b.get());
  const ref::RefKernel kernel = ref::ref_kernel(node.op);
  EXPECT_NE(kernel, nullptr) << op_name(node.op);
  const absl::Status s = kernel(ref::KernelArgs{node, in, out});
  EXPECT_TRUE(s.ok()) << s;
  return outputs;
}

/// The host kernel of the graph's last node; fails the test if there is
/// none (or on a machine without AVX-512, skips).
inline std::unique_ptr<CpuKernel> host_kernel(const TraceGraph& g) {
  absl::StatusOr<std::unique_ptr<CpuKernel>> k =
      make_host_kernel(KernelRequest{g, static_cast<uint32_t>(g.nodes.size() - 1)});
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return nullptr;
  EXPECT_NE(*k, nullptr) << "no host kernel for " << g.to_text();
  return std::move(*k);
}

/// The host kernel's results for `inputs`, written to fresh buffers.
inline BufferList run_host(CpuKernel& kernel, const GraphNode& node, const BufferList& inputs) {
  BufferList outputs = allocate(node.results);
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const auto& b : inputs) in.push_back(b->bytes());
  for (const auto& b : outputs) out.push_back(b->bytes());
  kernel.run(in.data(), out.data());
  return outputs;
}

// ---- Data and comparison ----------------------------------------------------

inline std::unique_ptr<host::HostBuffer> random_f32(const Shape& shape, uint32_t seed,
                                                    float lo = -1, float hi = 1) {
  auto b = std::make_unique<host::HostBuffer>(TensorType{shape, DType::f32});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* x = b->data<float>();
  for (int64_t i = 0; i < b->numel(); ++i) x[i] = dist(rng);
  return b;
}

template <typename T>
std::unique_ptr<host::HostBuffer> filled(const Shape& shape, DType dtype, std::vector<T> values) {
  auto b = std::make_unique<host::HostBuffer>(TensorType{shape, dtype});
  EXPECT_EQ(static_cast<int64_t>(values.size()), b->numel());
  std::memcpy(b->bytes(), values.data(), values.size() * sizeof(T));
  return b;
}

inline std::unique_ptr<host::HostBuffer> scalar_f64(double v) {
  return filled<double>({}, DType::f64, {v});
}
inline std::unique_ptr<host::HostBuffer> scalar_i64(int64_t v) {
  return filled<int64_t>({}, DType::i64, {v});
}

/// `b` (f32) converted to `dtype` (f32, bf16 or f16), rounded as the ref
/// kernels store: for bf16 and f16 test inputs from random_f32 or filled.
inline std::unique_ptr<host::HostBuffer> converted(const host::HostBuffer& b, DType dtype) {
  auto out = std::make_unique<host::HostBuffer>(TensorType{b.type().shape, dtype});
  const float* x = b.data<float>();
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (dtype == DType::bf16)
      out->data<BFloat16>()[i] = BFloat16(x[i]);
    else if (dtype == DType::f16)
      out->data<Float16>()[i] = Float16(x[i]);
    else
      out->data<float>()[i] = x[i];
  }
  return out;
}

/// Element i of a floating buffer (f32, f64, bf16, f16) as a double.
inline double float_element(const host::HostBuffer& b, int64_t i) {
  switch (b.type().dtype) {
  case DType::f32:
    return b.data<float>()[i];
  case DType::bf16:
    return static_cast<float>(b.data<BFloat16>()[i]);
  case DType::f16:
    return static_cast<float>(b.data<Float16>()[i]);
  default:
    return b.data<double>()[i];
  }
}

/// Same type; floats (f32, f64, bf16, f16) within `rel` of each other
/// relative to the larger magnitude (NaN matching NaN, infinities equal;
/// rel 0: the same value); other dtypes bitwise.
inline void expect_close(const host::HostBuffer& expected, const host::HostBuffer& actual,
                         double rel, const std::string& what) {
  ASSERT_EQ(expected.type(), actual.type()) << what;
  const int64_t n = expected.numel();
  int failures = 0;
  auto report = [&](int64_t i, double e, double a) {
    ADD_FAILURE() << what << ": element " << i << " of " << expected.type().to_string()
                  << ": expected " << e << ", got " << a;
    return ++failures < 5;
  };
  const DType dtype = expected.type().dtype;
  if (dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16) {
    for (int64_t i = 0; i < n; ++i) {
      const double e = float_element(expected, i);
      const double a = float_element(actual, i);
      const bool same = (std::isnan(e) && std::isnan(a)) || e == a ||
                        std::fabs(e - a) <= rel * std::max(std::fabs(e), std::fabs(a));
      if (!same && !report(i, e, a)) return;
    }
  } else {
    EXPECT_EQ(std::memcmp(expected.bytes(), actual.bytes(), expected.type().bytes()), 0) << what;
    if (expected.type().dtype == DType::i64)
      for (int64_t i = 0; i < n; ++i)
        if (expected.data<int64_t>()[i] != actual.data<int64_t>()[i] &&
            !report(i, expected.data<int64_t>()[i], actual.data<int64_t>()[i]))
          return;
  }
}

inline void expect_all_close(const BufferList& expected, const BufferList& actual, double rel,
                      const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t j = 0; j < expected.size(); ++j)
    expect_close(*expected[j], *actual[j], rel, absl::StrCat(what, ", result ", j));
}

/// Builds the op, runs both kernels on `inputs` and compares.
inline void compare_with_ref(OpKind op, const BufferList& inputs, ResultTypes results, AttrList attrs,
                      double rel, const std::string& what) {
  std::vector<TensorType> types;
  for (const auto& b : inputs) types.push_back(b->type());
  const TraceGraph g = one_op_graph(op, types, std::move(results), std::move(attrs));
  const GraphNode& node = g.nodes.back();
  std::unique_ptr<CpuKernel> kernel = host_kernel(g);
  if (!kernel) return;
  expect_all_close(run_ref(node, inputs), run_host(*kernel, node, inputs), rel, what);
}

#define SKIP_WITHOUT_HOST_KERNELS()                                                                \
  if (!host_kernels_available())                                                                   \
    GTEST_SKIP() << "needs AVX-512 (F and DQ): libmstep was built with -march=native on a CPU "      \
                 "without them, so the cpu backend has no host kernels to test"

} // namespace mstep::cpu::host_test
