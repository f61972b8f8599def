// conv2d and its gradients in the xla step function as im2col / col2im
// loops around oneDNN's sgemm (lib/backends/xla/XlaConvGemm.cpp): odd
// sizes, stride, padding wider than the kernel, dilation, groups, depthwise,
// pointwise, and a batch split into uneven chunks of samples; every output,
// input, weight and bias gradient is within the f32 sum's bound of ref's
// (f64, rounded once): |xla - ref| <= K u sum|x w| + u |ref|, with K the
// number of products in the sum, u = 2^-24 and sum|x w| the same
// computation on ref over the operands' absolute values. The step calls
// out for nothing, and has the conv scratch after its planned arena. A
// sample whose im2col matrix is above the cap keeps the direct loops
// (ref's bits).
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::RecordSteps;
using testing::callouts_of_last_step;
using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

struct ConvCase {
  const char* label;
  Shape input, weight;
  bool bias;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  /// false: one sample's im2col matrix is above the gemm path's cap
  /// (256 MiB), so the direct loops (XlaConvLoops.cpp) compute it, with
  /// ref's sums bit for bit for the output and the input gradient.
  bool gemm = true;
};

std::vector<float> wave(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return v;
}

/// y = conv2d(x, w, b), then the gradients of sum(y * g): y, dx, dw, db;
/// with `absolute`, over |x|, |w|, |b|, |g| (the bound's sums).
std::vector<std::vector<float>> run(Device d, const ConvCase& c, bool absolute) {
  auto tensor = [&](Shape s, int seed) {
    std::vector<float> v = wave(s.numel(), seed);
    if (absolute)
      for (float& x : v) x = std::abs(x);
    return from_vector(v, s, DType::f32, d).requires_grad_();
  };
  Tensor x = tensor(c.input, 1), w = tensor(c.weight, 2);
  Tensor b = c.bias ? tensor({c.weight[0]}, 3) : Tensor();
  Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  std::vector<float> g = wave(y.numel(), 4);
  if (absolute)
    for (float& v : g) v = std::abs(v);
  sum(y * from_vector(g, y.shape(), DType::f32, d)).backward();
  mark_step();
  std::vector<std::vector<float>> out = {y.to_vector<float>(), x.grad().to_vector<float>(),
                                         w.grad().to_vector<float>()};
  if (c.bias) out.push_back(b.grad().to_vector<float>());
  return out;
}

class XlaConvGemm : public ::testing::TestWithParam<ConvCase> {};

TEST_P(XlaConvGemm, WithinTheF32SumBoundOfRef) {
  const ConvCase& c = GetParam();
  std::vector<std::vector<float>> xla;
  {
    RecordSteps record;
    xla = run(kXla, c, false);
    EXPECT_THAT(callouts_of_last_step(), IsEmpty());
    // The im2col + gemm path planned its scratch after the arena; the
    // direct loops need none.
    const StepRecord& step = Tracer::get().last_step();
    ASSERT_TRUE(step.graph);
    auto compiled =
        compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto* exe = dynamic_cast<xla::XlaExecutable*>(compiled->executable.get());
    ASSERT_NE(exe, nullptr);
    if (c.gemm)
      EXPECT_GT(exe->arena_bytes(), compiled->arena_bytes);
    else
      EXPECT_EQ(exe->arena_bytes(), compiled->arena_bytes);
  }
  const std::vector<std::vector<float>> ref = run(kRef, c, false);
  const std::vector<std::vector<float>> magnitude = run(kRef, c, true);
  const int64_t batch = c.input[0], taps = c.weight[2] * c.weight[3];
  const int64_t out_plane = ref[0].size() / (batch * c.weight[0]);
  // Products per sum: output, input gradient, weight and bias gradients.
  const int64_t terms[] = {c.weight[1] * taps + 1, c.weight[0] / c.groups * taps,
                           batch * out_plane, batch * out_plane};
  const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  constexpr double u = 0x1p-24;
  ASSERT_EQ(xla.size(), ref.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    SCOPED_TRACE(names[k]);
    ASSERT_EQ(xla[k].size(), ref[k].size());
    for (size_t i = 0; i < ref[k].size(); ++i) {
      const double bound = terms[k] * u * magnitude[k][i] + u * std::abs(ref[k][i]);
      ASSERT_LE(std::abs(double(xla[k][i]) - ref[k][i]), bound)
          << "element " << i << ": xla " << xla[k][i] << ", ref " << ref[k][i];
    }
  }
  if (!c.gemm) {
    EXPECT_EQ(xla[0], ref[0]) << "the direct loops' output";
    EXPECT_EQ(xla[1], ref[1]) << "the direct loops' input gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, XlaConvGemm,
    ::testing::Values(
        ConvCase{"odd_pad1", {3, 5, 11, 13}, {7, 5, 3, 3}, true, {1}, {1}, {1}, 1},
        ConvCase{"stride_pad_per_dim_groups2", {2, 6, 13, 9}, {4, 3, 3, 2}, true, {2, 3}, {1, 2},
                 {1}, 2},
        ConvCase{"dilation", {5, 4, 10, 12}, {6, 4, 3, 3}, false, {1}, {2}, {2, 3}, 1},
        ConvCase{"pad_wider_than_kernel", {2, 3, 4, 5}, {2, 3, 2, 2}, true, {2}, {3}, {1}, 1},
        ConvCase{"depthwise", {3, 6, 9, 9}, {6, 1, 5, 5}, false, {1}, {2}, {1}, 6},
        ConvCase{"groups3_two_per_group", {2, 6, 7, 8}, {9, 2, 3, 3}, true, {1}, {1}, {1}, 3},
        ConvCase{"pointwise_stride2", {4, 8, 7, 5}, {3, 8, 1, 1}, true, {2}, {0}, {1}, 1},
        // 11 samples of 0.9 MiB of im2col: chunks of 6 and 5 samples.
        ConvCase{"uneven_chunks", {11, 16, 40, 40}, {16, 16, 3, 3}, true, {1}, {1}, {1}, 1},
        // 64 x 64 taps over 130 x 130 windows: 264 MiB of im2col per sample.
        ConvCase{"huge_sample_direct_loops", {1, 1, 193, 193}, {1, 1, 64, 64}, true, {1}, {0},
                 {1}, 1, false}),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.label); });

/// The threads take whole samples: 1 and 3 threads agree with ref alike.
TEST(XlaConvGemmThreads, OneAndThreeThreadsAreBothWithinTheBound) {
  const ConvCase c{"threads", {6, 8, 20, 20}, {12, 8, 3, 3}, true, {1}, {1}, {1}, 1};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<std::vector<float>> one = run(kXla, c, false);
  omp_set_num_threads(3);
  const std::vector<std::vector<float>> three = run(kXla, c, false);
  omp_set_num_threads(threads);
  const std::vector<std::vector<float>> ref = run(kRef, c, false);
  const std::vector<std::vector<float>> magnitude = run(kRef, c, true);
  const int64_t terms[] = {8 * 9 + 1, 12 * 9, 6 * 400, 6 * 400};
  for (size_t k = 0; k < ref.size(); ++k)
    for (size_t i = 0; i < ref[k].size(); ++i) {
      const double bound = terms[k] * 0x1p-24 * magnitude[k][i] + 0x1p-24 * std::abs(ref[k][i]);
      ASSERT_LE(std::abs(double(one[k][i]) - ref[k][i]), bound) << k << " " << i;
      ASSERT_LE(std::abs(double(three[k][i]) - ref[k][i]), bound) << k << " " << i;
    }
}

} // namespace
} // namespace mstep
