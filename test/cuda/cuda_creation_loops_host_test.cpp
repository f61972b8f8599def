// Host numerics of the cuda loop nests of the creation ops and the shape
// ops that write a literal (CudaCreationLoops.h: constant, rand, randn,
// triu, tril, pad): each step is compiled for cuda (its kernels assembled
// for sm_80 and sm_90), its loop nests run on this CPU, and every output
// is compared with the ref backend's on the same inputs, bit for bit.
// rand's draws and the copies are exact anywhere; randn's Box-Muller uses
// logf and cosf, here the host libm's as ref's, on a GPU libdevice's
// __nv_logf / __nv_cosf, which may differ from libm in the last bit or
// two (that is for the GPU run).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "mstep/core/HalfTypes.h"
#include "mstep/core/Philox.h"
#include "test/cuda/HostVsRef.h"

// (In mstep::cuda::testing: HostVsRef.h's helpers by their names.)
namespace mstep::cuda::testing {
namespace {

TEST(CudaCreationLoopsHost, TriuAndTrilWithDiagonalOffsetsOverABatch) {
  std::vector<int64_t> ints(49);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int64_t>(i) - 20;
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<3x7x5xf32>, %i: tensor<7x7xi64>, %b: tensor<17x33xbf16>) -> (tensor<3x7x5xf32>, tensor<3x7x5xf32>, tensor<7x7xi64>, tensor<17x33xbf16>) {
  %u = mstep.triu %x {diagonal = -2 : i64} : tensor<3x7x5xf32>
  %l = mstep.tril %x {diagonal = 1 : i64} : tensor<3x7x5xf32>
  %t = mstep.triu %i {diagonal = 0 : i64} : tensor<7x7xi64>
  %s = mstep.tril %b {diagonal = 2 : i64} : tensor<17x33xbf16>
  return %u, %l, %t, %s : tensor<3x7x5xf32>, tensor<3x7x5xf32>, tensor<7x7xi64>, tensor<17x33xbf16>
})",
                               {random_bytes(105, 1), bytes_of(ints), bf16_bytes(17 * 33, 2)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // Batch 2, row 6, column 3: below the -2 diagonal's upper part? 3 - 6 =
  // -3 < -2, so triu zeroes it, and tril (3 - 6 <= 1) keeps it.
  const std::vector<float> x = testing::random_floats(105, 1);
  const int at = (2 * 7 + 6) * 5 + 3;
  EXPECT_EQ(values_of<float>(out.cuda[0])[at], 0.f);
  EXPECT_EQ(values_of<float>(out.cuda[1])[at], x[at]);
}

TEST(CudaCreationLoopsHost, TrilOfBools) {
  const std::vector<uint8_t> x = {1, 1, 0, 1, 1, 1, 1};
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<1x7xi1>) -> tensor<1x7xi1> {
  %l = mstep.tril %x {diagonal = 0 : i64} : tensor<1x7xi1>
  return %l : tensor<1x7xi1>
})",
                               {bytes_of(x)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  EXPECT_THAT(values_of<uint8_t>(out.cuda[0]), ::testing::ElementsAre(1, 0, 0, 0, 0, 0, 0));
}

TEST(CudaCreationLoopsHost, RandAndRandnDrawRefsPhiloxNumbers) {
  const std::vector<int64_t> rng = {int64_t{0x5eed00c0ffee}, 123}; // seed, offset
  const Outputs out = run_both(R"(
func.func @step(%rng: tensor<2xi64>) -> (tensor<17x33xf32>, tensor<3x1x5xbf16>, tensor<64x257xf32>) {
  %u = mstep.rand %rng {offset = 5 : i64} : tensor<17x33xf32>
  %h = mstep.rand %rng {offset = 600 : i64} : tensor<3x1x5xbf16>
  %n = mstep.randn %rng {offset = 700 : i64} : tensor<64x257xf32>
  return %u, %h, %n : tensor<17x33xf32>, tensor<3x1x5xbf16>, tensor<64x257xf32>
})",
                               {bytes_of(rng)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // From mstep::Philox directly: element i at counter 123 + offset + i.
  const std::vector<float> u = values_of<float>(out.cuda[0]), n = values_of<float>(out.cuda[2]);
  for (size_t i = 0; i < u.size(); ++i)
    ASSERT_EQ(u[i], Philox::uniform(0x5eed00c0ffee, 128, i)) << i;
  double sum = 0, squares = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    ASSERT_EQ(n[i], Philox::normal(0x5eed00c0ffee, 823, i)) << i;
    sum += n[i], squares += double(n[i]) * n[i];
  }
  // A standard normal's moments, loosely (16448 draws).
  EXPECT_NEAR(sum / n.size(), 0.0, 0.05);
  EXPECT_NEAR(squares / n.size(), 1.0, 0.05);
  // bf16 draws keep 8 bits: multiples of 1/256 below 1.
  for (BFloat16 h : values_of<BFloat16>(out.cuda[1])) {
    const float v = static_cast<float>(h);
    EXPECT_EQ(v * 256.f, std::floor(v * 256.f));
    EXPECT_LT(v, 1.f);
  }
}

TEST(CudaCreationLoopsHost, PadWithAConstantValueCropsAndRoundsTheValueAsRef) {
  // pads (2, -1) on the last dim (one column cropped), (1, 1) on the
  // middle; the bf16 value 1 + 2^-8 + 2^-40 rounds through f32 to 1 (ref),
  // not straight to 1 + 2^-7.
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<3x1x5xf32>, %i: tensor<7xi64>, %b: tensor<4x3xbf16>) -> (tensor<3x3x6xf32>, tensor<10xi64>, tensor<6x3xbf16>) {
  %c = mstep.constant 1.500000e+00 : tensor<f32>
  %y = mstep.pad %x, %c {pads = array<i64: 2, -1, 1, 1>} : tensor<3x1x5xf32>, tensor<f32> -> tensor<3x3x6xf32>
  %ci = mstep.constant -7.000000e+00 : tensor<i64>
  %yi = mstep.pad %i, %ci {pads = array<i64: 0, 3>} : tensor<7xi64>, tensor<i64> -> tensor<10xi64>
  %cb = mstep.constant 1.0039062500009095 : tensor<bf16>
  %yb = mstep.pad %b, %cb {pads = array<i64: 0, 0, 2, 0>} : tensor<4x3xbf16>, tensor<bf16> -> tensor<6x3xbf16>
  return %y, %yi, %yb : tensor<3x3x6xf32>, tensor<10xi64>, tensor<6x3xbf16>
})",
                               {random_bytes(15, 3), bytes_of(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}),
                                bf16_bytes(12, 4)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  EXPECT_THAT(values_of<int64_t>(out.cuda[1]), ::testing::ElementsAre(1, 2, 3, 4, 5, 6, 7, -7, -7, -7));
  EXPECT_EQ(static_cast<float>(values_of<BFloat16>(out.cuda[2])[0]), 1.f);
  // Row 1 of batch 0 is the input's row: columns 2..5 hold x[0..3].
  const std::vector<float> x = testing::random_floats(15, 3), y = values_of<float>(out.cuda[0]);
  EXPECT_EQ(y[6 + 1], 1.5f);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(y[6 + 2 + c], x[c]) << c;
}

}  // namespace
}  // namespace mstep::cuda::testing
