// Small helpers the unit tests share: tensors from literals, the message
// of the mstep::Error a call throws, and run-time (mark_step) errors.
// Finite-difference gradient checks are in GradCheck.h.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mstep/mstep.h"

namespace mstep::testing {

inline Tensor f32(std::vector<float> v, Shape s) { return from_vector(v, s); }
inline Tensor i64(std::vector<int64_t> v, Shape s) { return from_vector(v, s); }
/// An i64 index tensor.
inline Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector(v, s); }

/// The elements of `t` as float.
inline std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

/// 0, 1, 2, ... laid out as `shape` (a pending arange + reshape).
inline Tensor iota(const Shape& shape, DType dtype = DType::f32) {
  return arange(shape.numel(), dtype).reshape(shape.dims());
}

/// Deterministic f32 values in [-1, 1), a different sequence per `seed`.
inline Tensor filled(Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return f32(v, s);
}

/// f32 values spread over a few binades (none exact in few bits), scaled by
/// `scale`, a different sequence per `seed`, on device `d`.
inline Tensor spread(Device d, Shape s, int seed, double scale = 1.0) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(scale * std::sin(0.731 * i + 1.37 * seed) *
                              (1 + 0.5 * std::cos(0.17 * i)));
  return from_vector(v, s, DType::f32, d);
}

/// The message of the mstep::Error `fn` throws ("" and a failure if none).
template <typename F> std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an mstep::Error";
  return "";
}

/// Records `make()`, expects mark_step() to fail with a message containing
/// every string of `parts`, then checks that a following step succeeds.
template <typename F> void expect_step_error(F&& make, std::vector<std::string> parts) {
  {
    Tensor bad = make();
    EXPECT_TRUE(bad.is_pending());  // nothing was checked at call time
    std::string msg = error_of([] { mark_step(); });
    for (const std::string& p : parts) EXPECT_THAT(msg, ::testing::HasSubstr(p));
  }  // the failed value dies here, so the next step does not retry it
  Tensor ok = iota({3}) * 2.0;
  mark_step();
  EXPECT_THAT(ok.to_vector<float>(), ::testing::ElementsAre(0, 2, 4));
}

}  // namespace mstep::testing
