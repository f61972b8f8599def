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
// (ref's bits). bf16 convs (XlaConvBf16, below): no callout, within one
// bf16 rounding of ref and cpu.
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
constexpr Device kCpu{DeviceType::cpu, 0};
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

/// The last recorded step compiled for xla: its planned arena and the
/// executable's (with the loops' scratch after it); a test failure and
/// {-1, -1} when there is none.
std::pair<int64_t, int64_t> last_step_arena() {
  const StepRecord& step = Tracer::get().last_step();
  if (!step.graph) {
    ADD_FAILURE() << "no step recorded";
    return {-1, -1};
  }
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto* exe = compiled.ok() ? dynamic_cast<xla::XlaExecutable*>(compiled->executable.get())
                            : nullptr;
  if (!exe) {
    ADD_FAILURE() << "the step did not compile to an xla executable";
    return {-1, -1};
  }
  return {static_cast<int64_t>(compiled->arena_bytes), static_cast<int64_t>(exe->arena_bytes())};
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
    const auto [planned, arena] = last_step_arena();
    if (c.gemm)
      EXPECT_GT(arena, planned);
    else
      EXPECT_EQ(arena, planned);
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

/// The shapes both dtypes run on the gemm path.
std::vector<ConvCase> gemm_shapes() {
  return {
      ConvCase{"odd_pad1", {3, 5, 11, 13}, {7, 5, 3, 3}, true, {1}, {1}, {1}, 1},
      ConvCase{"stride_pad_per_dim_groups2", {2, 6, 13, 9}, {4, 3, 3, 2}, true, {2, 3}, {1, 2},
               {1}, 2},
      ConvCase{"dilation", {5, 4, 10, 12}, {6, 4, 3, 3}, false, {1}, {2}, {2, 3}, 1},
      ConvCase{"pad_wider_than_kernel", {2, 3, 4, 5}, {2, 3, 2, 2}, true, {2}, {3}, {1}, 1},
      ConvCase{"depthwise", {3, 6, 9, 9}, {6, 1, 5, 5}, false, {1}, {2}, {1}, 6},
      ConvCase{"groups3_two_per_group", {2, 6, 7, 8}, {9, 2, 3, 3}, true, {1}, {1}, {1}, 3},
      ConvCase{"pointwise_stride2", {4, 8, 7, 5}, {3, 8, 1, 1}, true, {2}, {0}, {1}, 1},
      // 11 samples of 0.9 MiB of im2col: chunks of 6 and 5 samples (bf16,
      // with its staging: smaller chunks).
      ConvCase{"uneven_chunks", {11, 16, 40, 40}, {16, 16, 3, 3}, true, {1}, {1}, {1}, 1}};
}

std::vector<ConvCase> f32_shapes() {
  std::vector<ConvCase> shapes = gemm_shapes();
  // 64 x 64 taps over 130 x 130 windows: 264 MiB of im2col per sample.
  shapes.push_back(ConvCase{"huge_sample_direct_loops", {1, 1, 193, 193}, {1, 1, 64, 64}, true,
                            {1}, {0}, {1}, 1, false});
  return shapes;
}

std::string label(const ::testing::TestParamInfo<ConvCase>& info) { return info.param.label; }

INSTANTIATE_TEST_SUITE_P(Shapes, XlaConvGemm, ::testing::ValuesIn(f32_shapes()), label);

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

// ---- bf16 ------------------------------------------------------------------
// bf16 convs run the same im2col / col2im with bf16 x bf16 -> f32 gemms
// (gemm_bf16_f32: oneDNN's matmul, or sgemm over widened operands where
// oneDNN has no bf16 matmul), keep col2im and the sum over samples in f32
// in the scratch and round each result element to bf16 once. The step calls out
// for nothing (before: conv2d, conv2d_input_grad and conv2d_weight_grad were
// callouts) and plans its scratch after the arena. Oracles: the ref backend
// (its bf16 kernels sum in f32 and round once) and the cpu backend (oneDNN's
// bf16 convolution: f32 sums, one rounding), on the same bf16 operands.
// Both sides round a sum that differs from the exact one by at most
// K u sum|x w|, so a result element differs by at most that twice plus one
// bf16 ulp (<= 2^-7 of its magnitude): |xla - want| <= 2 K u sum|x w| +
// 2^-7 |want| (x 1.01 for the ulp of the larger side), with sum|x w| the
// same computation on ref in f32 over the operands' absolute values.

/// wave's values rounded to bf16 (by the ref backend), as floats.
std::vector<float> bf16_wave(int64_t n, int seed) {
  return from_vector(wave(n, seed), Shape{n}, DType::bf16, kRef).to(DType::f32).to_vector<float>();
}

/// y = conv2d(x, w, b), then the gradients of sum(y * g), one step: y, dx,
/// dw, db; in `dtype` (bf16, or f32 over the absolute values: the bound's
/// sums).
std::vector<Tensor> bf16_step(Device d, const ConvCase& c, DType dtype) {
  const bool absolute = dtype == DType::f32;
  auto values = [&](int64_t n, int seed) {
    std::vector<float> v = bf16_wave(n, seed);
    if (absolute)
      for (float& x : v) x = std::abs(x);
    return v;
  };
  auto tensor = [&](Shape s, int seed) {
    return from_vector(values(s.numel(), seed), s, dtype, d).requires_grad_();
  };
  Tensor x = tensor(c.input, 1), w = tensor(c.weight, 2);
  Tensor b = c.bias ? tensor({c.weight[0]}, 3) : Tensor();
  Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  Tensor g = from_vector(values(y.numel(), 4), y.shape(), dtype, d);
  sum(y * g).backward();
  mark_step();
  std::vector<Tensor> out = {y, x.grad(), w.grad()};
  if (c.bias) out.push_back(b.grad());
  return out;
}

/// The step's results as floats (bf16 widens exactly; a step of its own).
std::vector<std::vector<float>> floats(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ts) out.push_back(t.to(DType::f32).to_vector<float>());
  return out;
}

std::vector<std::vector<float>> run_bf16(Device d, const ConvCase& c, DType dtype) {
  return floats(bf16_step(d, c, dtype));
}

class XlaConvBf16 : public ::testing::TestWithParam<ConvCase> {};

TEST_P(XlaConvBf16, NoCalloutAndWithinOneRoundingOfRefAndCpu) {
  const ConvCase& c = GetParam();
  std::vector<Tensor> xla_tensors;
  {
    RecordSteps record;
    xla_tensors = bf16_step(kXla, c, DType::bf16);
    // The conv step (the widening after it is a step of its own).
    EXPECT_THAT(callouts_of_last_step(), IsEmpty());
    const auto [planned, arena] = last_step_arena();
    EXPECT_GT(arena, planned) << "no scratch planned for the gemms";
  }
  const std::vector<std::vector<float>> xla = floats(xla_tensors);
  const std::vector<std::vector<float>> magnitude = run_bf16(kRef, c, DType::f32);
  const int64_t batch = c.input[0], taps = c.weight[2] * c.weight[3];
  const int64_t out_plane = magnitude[0].size() / (batch * c.weight[0]);
  // Products per sum: output (and its bias), input, weight and bias gradients.
  const int64_t terms[] = {c.weight[1] * taps + 1, c.weight[0] / c.groups * taps,
                           batch * out_plane, batch * out_plane};
  const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  for (Device other : {kRef, kCpu}) {
    SCOPED_TRACE(other.to_string());
    const std::vector<std::vector<float>> want = run_bf16(other, c, DType::bf16);
    ASSERT_EQ(xla.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      SCOPED_TRACE(names[k]);
      ASSERT_EQ(xla[k].size(), want[k].size());
      int64_t unequal = 0;
      for (size_t i = 0; i < want[k].size(); ++i) {
        const double bound =
            2 * terms[k] * 0x1p-24 * magnitude[k][i] + 1.01 * 0x1p-7 * std::abs(want[k][i]);
        ASSERT_LE(std::abs(double(xla[k][i]) - want[k][i]), bound)
            << "element " << i << ": xla " << xla[k][i] << ", want " << want[k][i];
        unequal += xla[k][i] != want[k][i];
      }
      // One rounding of nearly the same sum: most elements are equal (two
      // roundings, or a bf16 gemm per sample, would move far more).
      EXPECT_LE(unequal * 10, static_cast<int64_t>(want[k].size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, XlaConvBf16, ::testing::ValuesIn(gemm_shapes()), label);

/// Shapes whose gemms are large enough (2^16 multiply-adds each and up)
/// for oneDNN's bf16 matmul, where most of gemm_shapes' are sgemm over
/// widened operands: groups (a batch of gemms), stride and dilation.
std::vector<ConvCase> primitive_shapes() {
  return {ConvCase{"groups2", {3, 32, 20, 20}, {32, 16, 3, 3}, true, {1}, {1}, {1}, 2},
          ConvCase{"stride2_dilation2", {2, 24, 33, 31}, {40, 24, 3, 3}, false, {2}, {2}, {2}, 1}};
}

INSTANTIATE_TEST_SUITE_P(PrimitiveShapes, XlaConvBf16, ::testing::ValuesIn(primitive_shapes()),
                         label);

/// The threads take whole samples, each calling the bf16 gemm at once on
/// a primitive of its own (per thread index): at 1 and 3 threads every
/// result is within one rounding of ref's, and the split runs (11 samples
/// in chunks of several).
TEST(XlaConvBf16Threads, OneAndThreeThreadsAreBothWithinOneRoundingOfRef) {
  const ConvCase c{"uneven_chunks", {11, 16, 40, 40}, {16, 16, 3, 3}, true, {1}, {1}, {1}, 1};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<std::vector<float>> one = run_bf16(kXla, c, DType::bf16);
  omp_set_num_threads(3);
  const std::vector<std::vector<float>> three = run_bf16(kXla, c, DType::bf16);
  omp_set_num_threads(threads);
  const std::vector<std::vector<float>> ref = run_bf16(kRef, c, DType::bf16);
  const std::vector<std::vector<float>> magnitude = run_bf16(kRef, c, DType::f32);
  const int64_t terms[] = {16 * 9 + 1, 16 * 9, 11 * 1600, 11 * 1600};
  for (size_t k = 0; k < ref.size(); ++k)
    for (size_t i = 0; i < ref[k].size(); ++i) {
      const double bound =
          2 * terms[k] * 0x1p-24 * magnitude[k][i] + 1.01 * 0x1p-7 * std::abs(ref[k][i]);
      ASSERT_LE(std::abs(double(one[k][i]) - ref[k][i]), bound) << k << " " << i;
      ASSERT_LE(std::abs(double(three[k][i]) - ref[k][i]), bound) << k << " " << i;
    }
}

} // namespace
} // namespace mstep
