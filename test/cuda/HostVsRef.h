// A step compiled for cuda with its tiled loop nests run on the host
// (TiledHost.h) next to the ref backend's outputs for the same inputs
// (RefOracle.h), and the byte helpers the host-numerics tests share.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "mstep/core/HalfTypes.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda::testing {

template <typename T> std::vector<char> bytes_of(const std::vector<T>& values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T> std::vector<T> values_of(const std::vector<char>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

/// A step's outputs from its cuda loop nests run on the host, and from ref.
struct Outputs {
  std::vector<std::vector<char>> cuda, ref;
  CudaPlan plan;
};

inline Outputs run_both(const char* text, const std::vector<std::vector<char>>& inputs,
                        const CudaCompileOptions& options = default_cuda_compile_options()) {
  Outputs out;
  CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return out;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values)
    values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(values[i].size(), inputs[i].size()) << "input " << i;
    values[i] = inputs[i];
  }
  run_tiled_on_host(step.context(), *compiled, values);
  for (int id : compiled->plan.outputs) out.cuda.push_back(values[id]);
  auto ref = ref_outputs(step.module(), inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) out.ref = std::move(*ref);
  out.plan = std::move(compiled->plan);
  return out;
}

/// Every output equal to ref's, byte for byte (NaNs included).
inline void expect_same_as_ref(const Outputs& out) {
  ASSERT_EQ(out.cuda.size(), out.ref.size());
  for (size_t o = 0; o < out.cuda.size(); ++o) {
    ASSERT_EQ(out.cuda[o].size(), out.ref[o].size()) << "output " << o;
    EXPECT_TRUE(out.cuda[o] == out.ref[o]) << "output " << o << " differs from ref";
  }
}

inline std::vector<char> random_bytes(size_t n, uint32_t seed) {
  return bytes_of(random_floats(n, seed));
}

inline std::vector<char> bf16_bytes(size_t n, uint32_t seed) {
  std::vector<BFloat16> values;
  for (float v : random_floats(n, seed)) values.push_back(BFloat16(v));
  return bytes_of(values);
}

inline std::vector<char> f16_bytes(size_t n, uint32_t seed) {
  std::vector<Float16> values;
  for (float v : random_floats(n, seed)) values.push_back(Float16(v));
  return bytes_of(values);
}

} // namespace mstep::cuda::testing
