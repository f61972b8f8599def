// Host numerics of the cuda loop nests of the 2-D pools and convolutions
// (CudaPoolLoops.h, CudaConvLoops.h): each step is compiled for cuda (its
// kernels assembled for sm_80 and sm_90), its tiled loop nests run on this
// CPU, and every output is compared with the ref backend's on the same
// inputs. The nests add each element's terms in ref's order in ref's
// accumulator (f64 for f32, f32 for bf16), so the outputs are expected bit
// for bit, here and on a GPU (no transcendental functions; the products of
// widened f32 or bf16 elements are exact, so even a fused multiply-add
// rounds the same).
// Shapes: odd sizes, padding, stride, dilation, ceil mode, groups, ties
// and a NaN in the max windows. The convolutions here take their direct
// loops (MSTEP_CUDA_CONV=direct); cuda_conv_im2col_host_test.cpp checks
// the im2col form, the default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test/cuda/HostVsRef.h"

// (In mstep::cuda::testing: HostVsRef.h's helpers by their names.)
namespace mstep::cuda::testing {
namespace {

/// Random values on a grid of halves in [-2, 2]: nine levels, so the
/// windows of a max pool hold ties.
/// The compile options of the convolutions' direct loops.
CudaCompileOptions direct_convolutions() {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.conv = CudaConvForm::direct;
  return options;
}

std::vector<float> coarse(size_t n, uint32_t seed) {
  std::vector<float> v = testing::random_floats(n, seed);
  for (float& x : v) x = std::round(x * 2.f) / 2.f;
  return v;
}

TEST(CudaImageLoopsHost, MaxPoolForwardAndGradientWithTiesNaNCeilModeAndPadding) {
  // k3 s2 p1 in ceil mode on 8x8 (the last window sticks out), and k3 s1
  // p1 with dilation 2 on 9x9; the gradient routes each window to ref's
  // pick (the first strict maximum, the last NaN).
  std::vector<float> x = coarse(2 * 8 * 8, 1), y = coarse(2 * 9 * 9, 2);
  x[8 * 3 + 4] = std::numeric_limits<float>::quiet_NaN();
  y[81 + 9 * 4 + 4] = std::numeric_limits<float>::quiet_NaN();
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<1x2x8x8xf32>, %y: tensor<1x2x9x9xf32>, %gx: tensor<1x2x5x5xf32>, %gy: tensor<1x2x7x7xf32>) -> (tensor<1x2x5x5xf32>, tensor<1x2x7x7xf32>, tensor<1x2x8x8xf32>, tensor<1x2x9x9xf32>) {
  %px = mstep.max_pool2d %x {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x8x8xf32> -> tensor<1x2x5x5xf32>
  %py = mstep.max_pool2d %y {ceil_mode = false, dilation = array<i64: 2, 2>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x2x9x9xf32> -> tensor<1x2x7x7xf32>
  %dx = mstep.max_pool2d_grad %gx, %x {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x5x5xf32>, tensor<1x2x8x8xf32>
  %dy = mstep.max_pool2d_grad %gy, %y {ceil_mode = false, dilation = array<i64: 2, 2>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x2x7x7xf32>, tensor<1x2x9x9xf32>
  return %px, %py, %dx, %dy : tensor<1x2x5x5xf32>, tensor<1x2x7x7xf32>, tensor<1x2x8x8xf32>, tensor<1x2x9x9xf32>
})",
                               {bytes_of(x), bytes_of(y), random_bytes(50, 3), random_bytes(98, 4)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // Every window's gradient lands on one element: the totals agree.
  const std::vector<float> g = testing::random_floats(50, 3), dx = values_of<float>(out.cuda[2]);
  double sum_g = 0, sum_dx = 0;
  for (float v : g) sum_g += v;
  for (float v : dx) sum_dx += v;
  EXPECT_NEAR(sum_dx, sum_g, 1e-4);
}

TEST(CudaImageLoopsHost, MaxPoolOfBf16AndAStridePerDim) {
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<2x3x8x8xbf16>, %g: tensor<2x3x4x4xbf16>, %z: tensor<2x1x7x5xf32>) -> (tensor<2x3x4x4xbf16>, tensor<2x3x8x8xbf16>, tensor<2x1x4x3xf32>) {
  %p = mstep.max_pool2d %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x8x8xbf16> -> tensor<2x3x4x4xbf16>
  %d = mstep.max_pool2d_grad %g, %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x4x4xbf16>, tensor<2x3x8x8xbf16>
  %q = mstep.max_pool2d %z {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 3>, padding = array<i64: 1, 0>, stride = array<i64: 2, 1>} : tensor<2x1x7x5xf32> -> tensor<2x1x4x3xf32>
  return %p, %d, %q : tensor<2x3x4x4xbf16>, tensor<2x3x8x8xbf16>, tensor<2x1x4x3xf32>
})",
                               {bf16_bytes(2 * 3 * 64, 5), bf16_bytes(2 * 3 * 16, 6),
                                bytes_of(coarse(70, 7))});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaImageLoopsHost, MaxPoolOfIntegersStartsFromTheLowestInteger) {
  // Negative integers only, with padding: the padding taps are skipped,
  // not read as 0.
  std::vector<int64_t> x(2 * 5 * 7);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -1000 - static_cast<int64_t>((i * 37) % 11);
  std::vector<int32_t> y(2 * 5 * 7);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>((i * 53) % 17) - 8;
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<1x2x5x7xi64>, %y: tensor<2x1x5x7xi32>) -> (tensor<1x2x3x4xi64>, tensor<2x1x5x7xi32>) {
  %p = mstep.max_pool2d %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x5x7xi64> -> tensor<1x2x3x4xi64>
  %q = mstep.max_pool2d %y {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<2x1x5x7xi32> -> tensor<2x1x5x7xi32>
  return %p, %q : tensor<1x2x3x4xi64>, tensor<2x1x5x7xi32>
})",
                               {bytes_of(x), bytes_of(y)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  for (int64_t v : values_of<int64_t>(out.cuda[0])) EXPECT_LE(v, -1000);
}

TEST(CudaImageLoopsHost, AvgPoolForwardAndGradientWithAndWithoutPadCount) {
  // k3 s2 p1 in ceil mode without the padding in the count on 9x9, k2x3
  // s2x1 p1x0 with it on 7x5, and bf16.
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<1x3x9x9xf32>, %y: tensor<2x1x7x5xf32>, %gx: tensor<1x3x5x5xf32>, %gy: tensor<2x1x4x3xf32>, %b: tensor<2x3x8x8xbf16>, %gb: tensor<2x3x4x4xbf16>) -> (tensor<1x3x5x5xf32>, tensor<2x1x4x3xf32>, tensor<1x3x9x9xf32>, tensor<2x1x7x5xf32>, tensor<2x3x4x4xbf16>, tensor<2x3x8x8xbf16>) {
  %px = mstep.avg_pool2d %x {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x3x9x9xf32> -> tensor<1x3x5x5xf32>
  %py = mstep.avg_pool2d %y {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 3>, padding = array<i64: 1, 0>, stride = array<i64: 2, 1>} : tensor<2x1x7x5xf32> -> tensor<2x1x4x3xf32>
  %dx = mstep.avg_pool2d_grad %gx {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x3x5x5xf32> -> tensor<1x3x9x9xf32>
  %dy = mstep.avg_pool2d_grad %gy {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 3>, padding = array<i64: 1, 0>, stride = array<i64: 2, 1>} : tensor<2x1x4x3xf32> -> tensor<2x1x7x5xf32>
  %pb = mstep.avg_pool2d %b {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x8x8xbf16> -> tensor<2x3x4x4xbf16>
  %db = mstep.avg_pool2d_grad %gb {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x4x4xbf16> -> tensor<2x3x8x8xbf16>
  return %px, %py, %dx, %dy, %pb, %db : tensor<1x3x5x5xf32>, tensor<2x1x4x3xf32>, tensor<1x3x9x9xf32>, tensor<2x1x7x5xf32>, tensor<2x3x4x4xbf16>, tensor<2x3x8x8xbf16>
})",
                               {random_bytes(243, 8), random_bytes(70, 9), random_bytes(75, 10),
                                random_bytes(24, 11), bf16_bytes(384, 12), bf16_bytes(96, 13)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // The corner window of %px holds 2x2 input taps (the rest is padding,
  // not counted): their mean.
  const std::vector<float> x = testing::random_floats(243, 8), px = values_of<float>(out.cuda[0]);
  EXPECT_FLOAT_EQ(px[0], static_cast<float>((double(x[0]) + x[1] + x[9] + x[10]) / 4));
}

TEST(CudaImageLoopsHost, Conv2dWithGroupsStridePaddingDilationAndItsGradients) {
  // x [2, 4, 7, 9], w [6, 2, 3, 2] in 2 groups, bias; stride 2x1,
  // padding 1x2, dilation 1x2: y [2, 6, 4, 11].
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<2x4x7x9xf32>, %w: tensor<6x2x3x2xf32>, %b: tensor<6xf32>, %g: tensor<2x6x4x11xf32>) -> (tensor<2x6x4x11xf32>, tensor<2x4x7x9xf32>, tensor<6x2x3x2xf32>) {
  %y = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 2>, stride = array<i64: 2, 1>} : tensor<2x4x7x9xf32>, tensor<6x2x3x2xf32>, tensor<6xf32> -> tensor<2x6x4x11xf32>
  %dx = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 2>, stride = array<i64: 2, 1>} : tensor<2x6x4x11xf32>, tensor<6x2x3x2xf32> -> tensor<2x4x7x9xf32>
  %dw = mstep.conv2d_weight_grad %x, %g {dilation = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 2>, stride = array<i64: 2, 1>} : tensor<2x4x7x9xf32>, tensor<2x6x4x11xf32> -> tensor<6x2x3x2xf32>
  return %y, %dx, %dw : tensor<2x6x4x11xf32>, tensor<2x4x7x9xf32>, tensor<6x2x3x2xf32>
})",
                               {random_bytes(2 * 4 * 63, 14), random_bytes(72, 15), random_bytes(6, 16),
                                random_bytes(2 * 6 * 44, 17)},
                               direct_convolutions());
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // One output by hand (not ref's loops: a check of the indexing):
  // y[1, 4, 2, 3] = b[4] + sum over group 1's channels 2, 3 and the taps
  // ih = 2 * 2 - 1 + kh, iw = 3 - 2 + 2 * kw inside the input.
  const std::vector<float> x = testing::random_floats(2 * 4 * 63, 14),
                           w = testing::random_floats(72, 15), b = testing::random_floats(6, 16);
  double expected = b[4];
  for (int gc = 0; gc < 2; ++gc)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 2; ++kw) {
        const int ih = 3 + kh, iw = 1 + 2 * kw;
        if (ih < 7 && iw < 9)
          expected += double(w[((4 * 2 + gc) * 3 + kh) * 2 + kw]) *
                      x[((1 * 4 + 2 + gc) * 7 + ih) * 9 + iw];
      }
  EXPECT_NEAR(values_of<float>(out.cuda[0])[((1 * 6 + 4) * 4 + 2) * 11 + 3], expected, 1e-5);
}

TEST(CudaImageLoopsHost, Conv2dOfBf16WithoutBiasDepthwiseAndPointwise) {
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<1x3x6x5xbf16>, %w: tensor<4x3x3x3xbf16>, %g: tensor<1x4x6x5xbf16>, %d: tensor<2x3x5x5xf32>, %dw: tensor<3x1x3x3xf32>, %p: tensor<1x5x1x7xf32>, %pw: tensor<4x5x1x1xf32>) -> (tensor<1x4x6x5xbf16>, tensor<1x3x6x5xbf16>, tensor<4x3x3x3xbf16>, tensor<2x3x3x3xf32>, tensor<1x4x1x7xf32>) {
  %y = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x6x5xbf16>, tensor<4x3x3x3xbf16> -> tensor<1x4x6x5xbf16>
  %gx = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x4x6x5xbf16>, tensor<4x3x3x3xbf16> -> tensor<1x3x6x5xbf16>
  %gw = mstep.conv2d_weight_grad %x, %g {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x6x5xbf16>, tensor<1x4x6x5xbf16> -> tensor<4x3x3x3xbf16>
  %yd = mstep.conv2d %d, %dw {dilation = array<i64: 1, 1>, groups = 3 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<2x3x5x5xf32>, tensor<3x1x3x3xf32> -> tensor<2x3x3x3xf32>
  %yp = mstep.conv2d %p, %pw {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x5x1x7xf32>, tensor<4x5x1x1xf32> -> tensor<1x4x1x7xf32>
  return %y, %gx, %gw, %yd, %yp : tensor<1x4x6x5xbf16>, tensor<1x3x6x5xbf16>, tensor<4x3x3x3xbf16>, tensor<2x3x3x3xf32>, tensor<1x4x1x7xf32>
})",
                               {bf16_bytes(90, 18), bf16_bytes(108, 19), bf16_bytes(120, 20),
                                random_bytes(150, 21), random_bytes(27, 22), random_bytes(35, 23),
                                random_bytes(20, 24)},
                               direct_convolutions());
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

}  // namespace
}  // namespace mstep::cuda::testing
