// bf16 conv2d and its gradients in the xla step function (lib/backends/xla/
// XlaConvGemm.cpp): im2col / col2im over f32 staging around oneDNN's sgemm,
// one rounding to bf16 per result element. The step calls out for nothing
// (before: conv2d, conv2d_input_grad and conv2d_weight_grad were callouts)
// and plans its scratch after the arena. Oracles: the ref backend (f64
// sums, one rounding) and the cpu backend (oneDNN's bf16 convolution: f32
// sums, one rounding), on the same bf16 operands. Both sides round a sum
// that differs from the exact one by at most K u sum|x w| (K the products
// per sum, u = 2^-24; ref's f64 sum far less), so a result element differs
// by at most that twice plus one bf16 ulp (<= 2^-7 of its magnitude):
// |xla - want| <= 2 K u sum|x w| + 2^-7 |want| (x 1.01 for the ulp of the
// larger side), with sum|x w| the same computation on ref in f32 over the
// operands' absolute values.
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
};

/// Values in (-1, 1), rounded to bf16 (by the ref backend), as floats.
std::vector<float> bf16_wave(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, Shape{n}, DType::bf16, kRef).to(DType::f32).to_vector<float>();
}

/// y = conv2d(x, w, b), then the gradients of sum(y * g), one step: y, dx,
/// dw, db; in `dtype` (bf16, or f32 over the absolute values: the bound's
/// sums).
std::vector<Tensor> step(Device d, const ConvCase& c, DType dtype) {
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

std::vector<std::vector<float>> run(Device d, const ConvCase& c, DType dtype) {
  return floats(step(d, c, dtype));
}

class XlaConvBf16 : public ::testing::TestWithParam<ConvCase> {};

TEST_P(XlaConvBf16, NoCalloutAndWithinOneRoundingOfRefAndCpu) {
  const ConvCase& c = GetParam();
  std::vector<Tensor> xla_tensors;
  {
    RecordSteps record;
    xla_tensors = step(kXla, c, DType::bf16);
    // The conv step (the widening after it is a step of its own).
    EXPECT_THAT(callouts_of_last_step(), IsEmpty());
    const StepRecord& step = Tracer::get().last_step();
    ASSERT_TRUE(step.graph);
    auto compiled =
        compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto* exe = dynamic_cast<xla::XlaExecutable*>(compiled->executable.get());
    ASSERT_NE(exe, nullptr);
    EXPECT_GT(exe->arena_bytes(), compiled->arena_bytes) << "no scratch planned for the gemms";
  }
  const std::vector<std::vector<float>> xla = floats(xla_tensors);
  const std::vector<std::vector<float>> magnitude = run(kRef, c, DType::f32);
  const int64_t batch = c.input[0], taps = c.weight[2] * c.weight[3];
  const int64_t out_plane = magnitude[0].size() / (batch * c.weight[0]);
  // Products per sum: output (and its bias), input, weight and bias gradients.
  const int64_t terms[] = {c.weight[1] * taps + 1, c.weight[0] / c.groups * taps,
                           batch * out_plane, batch * out_plane};
  const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  for (Device other : {kRef, kCpu}) {
    SCOPED_TRACE(other.to_string());
    const std::vector<std::vector<float>> want = run(other, c, DType::bf16);
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

INSTANTIATE_TEST_SUITE_P(
    Shapes, XlaConvBf16,
    ::testing::Values(
        ConvCase{"odd_pad1", {3, 5, 11, 13}, {7, 5, 3, 3}, true, {1}, {1}, {1}, 1},
        ConvCase{"stride_pad_per_dim_groups2", {2, 6, 13, 9}, {4, 3, 3, 2}, true, {2, 3}, {1, 2},
                 {1}, 2},
        ConvCase{"dilation", {5, 4, 10, 12}, {6, 4, 3, 3}, false, {1}, {2}, {2, 3}, 1},
        ConvCase{"depthwise", {3, 6, 9, 9}, {6, 1, 5, 5}, false, {1}, {2}, {1}, 6},
        ConvCase{"pointwise_stride2", {4, 8, 7, 5}, {3, 8, 1, 1}, true, {2}, {0}, {1}, 1},
        // 11 samples of im2col (f32) plus staging: chunks of several samples.
        ConvCase{"uneven_chunks", {11, 16, 40, 40}, {16, 16, 3, 3}, true, {1}, {1}, {1}, 1}),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.label); });

} // namespace
} // namespace mstep
