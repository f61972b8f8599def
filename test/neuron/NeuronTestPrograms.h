// Small tile programs the neuron tests share: a valid base program to break
// one rule at a time, and helpers to fill and read HBM contents.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/backends/neuron/Simulator.h"
#include "lib/backends/neuron/TileBuilder.h"
#include "lib/backends/neuron/Validator.h"
#include "mstep/core/HalfTypes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mstep::neuron::testing {

/// HBM "x" [128, 64] f32 -> SBUF -> exp on Scalar -> HBM "y": valid.
/// Instruction 0 is the load, 1 the activation, 2 the store; allocation 0
/// is the SBUF tile; semaphore 0 orders load -> exp, 1 exp -> store.
struct BaseProgram {
  TileBuilder b{"base"};
  int32_t x, y, tile;
  int64_t load, act, store;

  BaseProgram() {
    x = b.hbm_tensor("x", DType::f32, 128 * 64);
    y = b.hbm_tensor("y", DType::f32, 128 * 64);
    tile = b.allocate(BufferKind::sbuf, 64 * 4, "tile");
    const int32_t loaded = b.semaphore(), done = b.semaphore();
    load = b.dma_copy(sbuf(), hbm_rows(x, DType::f32, 64, 0, 128, 0, 64));
    act = b.activation(sbuf(), sbuf(), ActivationFunction::exp);
    store = b.dma_copy(hbm_rows(y, DType::f32, 64, 0, 128, 0, 64), sbuf());
    b.signal(load, loaded);
    b.wait(act, loaded, 1);
    b.signal(act, done);
    b.wait(store, done, 1);
  }
  AccessPattern sbuf() const {
    return tile_pattern(BufferKind::sbuf, tile, DType::f32, 0, 128, 0, {{64, 1}});
  }
  Instruction& inst(int64_t i) { return b.at(i); }
};

/// Asserts that validate() fails on `program` with `rule` at `where`
/// ("#1 Scalar activation") and that the message holds `value`.
inline void expect_breach(const TileProgram& program, const std::string& rule,
                          const std::string& where, const std::string& value) {
  const absl::Status s = validate(program);
  ASSERT_FALSE(s.ok()) << "expected rule " << rule;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("rule " + rule + ":")) << s.message();
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(where)) << s.message();
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(value)) << s.message();
}

template <typename T> std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <typename T> std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

/// Random values in [-1, 1], already rounded to `dtype` (so the host
/// reference sees exactly what the program sees); f32 or bf16 HBM bytes
/// of such values and back.
inline std::vector<float> random_rounded(int64_t n, DType dtype, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dtype == DType::bf16 ? float(BFloat16(u(rng))) : u(rng);
  return v;
}

inline std::vector<std::byte> encode(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::f32) return bytes_of(v);
  std::vector<BFloat16> h(v.begin(), v.end());
  return bytes_of(h);
}

inline std::vector<float> decode(const std::vector<std::byte>& bytes, DType dtype) {
  if (dtype == DType::f32) return values_of<float>(bytes);
  std::vector<BFloat16> h = values_of<BFloat16>(bytes);
  return std::vector<float>(h.begin(), h.end());
}

} // namespace mstep::neuron::testing
