// f32 matmuls on the xla backend: the step function calls oneDNN's f32
// matmul primitive (mstep_xla_gemm_f32, XlaGemm.h) with the cpu
// backend's epilogue, so a matmul whose only reader adds a bias (then gelu
// or relu) or a residual is one call, with no pass of its own over the
// product, and gives the cpu backend's bits (which run the same primitive
// with the same post-ops, cpu::find_matmul_epilogue). The expected values
// are the cpu backend's (bit for bit) and ref's (within the error of an f32
// sum of k products: k * 2^-23 * sum |a b|, plus oneDNN's gelu, whose
// polynomial is within a few f32 ulps of erf/tanh's).
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneapi/dnnl/dnnl.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/GptTrainingLosses.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::callouts_of_last_step;
using testing::RecordSteps;

using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// Values spread over a few binades, none exact in few bits.
Tensor on(Device d, Shape s, int seed, double scale = 1.0) {
  return testing::spread(d, s, seed, scale);
}

/// Sets the OpenMP thread count for a scope.
struct Threads {
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
  int saved;
};

/// `make(device)`'s results on `device`, after one step; on xla the step
/// must call out for nothing.
template <typename F> std::vector<std::vector<float>> run_on(Device device, F make) {
  RecordSteps record;
  std::vector<Tensor> out = make(device);
  mark_step();
  if (device == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty());
  std::vector<std::vector<float>> values;
  for (const Tensor& t : out) values.push_back(t.to_vector<float>());
  return values;
}

/// Equal bit for bit (a NaN equal to a NaN, +0 and -0 told apart).
void expect_same_bits(const std::vector<std::vector<float>>& got,
                      const std::vector<std::vector<float>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << " result " << i;
    int shown = 0;
    for (size_t j = 0; j < got[i].size(); ++j) {
      const bool same =
          std::isnan(want[i][j])
              ? std::isnan(got[i][j])
              : std::signbit(got[i][j]) == std::signbit(want[i][j]) && got[i][j] == want[i][j];
      if (!same && shown++ < 4)
        ADD_FAILURE() << what << " result " << i << " element " << j << ": xla " << got[i][j]
                      << ", cpu " << want[i][j];
    }
  }
}

/// The epilogue cases the cpu backend folds (find_matmul_epilogue), over a
/// matrix lhs, a batched lhs (xla folds its batch into the rows) and a
/// weight read transposed in place (a linear layer's), and plain matmuls
/// (no epilogue) of the same shapes. k is 70: not a multiple of a vector.
/// The last operands are small, so gelu's argument lies where it bends.
std::vector<Tensor> epilogue_cases(Device d, int64_t rows) {
  struct Operands {
    Tensor x, w, wt, bias, residual;
  };
  std::vector<Operands> operands;
  const int64_t k = 70, p = 37;
  for (const Shape& x_shape : {Shape{rows, k}, Shape{3, rows, k}, Shape{rows + 1, k}}) {
    Shape out_shape = x_shape;
    out_shape[out_shape.rank() - 1] = p;
    const double scale = x_shape[0] == rows + 1 ? 0.2 : 1.5;
    operands.push_back({on(d, x_shape, 40, scale), on(d, {k, p}, 41, scale / 1.5),
                        on(d, {p, k}, 42, scale / 1.5), on(d, {p}, 43, 4.0 * scale / 1.5),
                        on(d, out_shape, 44, 3.0)});
  }
  mark_step(); // the operands are materialized: nothing else joins the fusions
  std::vector<Tensor> out;
  for (const auto& [x, w, wt, bias, residual] : operands) {
    const Tensor weight = transpose(wt, -1, -2);
    out.push_back(matmul(x, w) + bias);
    out.push_back(matmul(x, weight) + bias);
    out.push_back(relu(matmul(x, w) + bias));
    out.push_back(relu(matmul(x, weight) + bias));
    out.push_back(gelu(matmul(x, w) + bias));
    out.push_back(gelu(matmul(x, weight) + bias));
    out.push_back(gelu(matmul(x, w) + bias, "tanh"));
    out.push_back(gelu(matmul(x, weight) + bias, "tanh"));
    out.push_back(residual + (matmul(x, w) + bias));
    out.push_back(residual + gelu(matmul(x, weight) + bias));
    out.push_back(residual + matmul(x, w));
    out.push_back(matmul(x, w));
    out.push_back(matmul(x, weight));
  }
  return out;
}

TEST(XlaF32Epilogue, MatmulWithBiasReluGeluOrResidualEqualsTheCpuBackendBitForBit) {
  for (int threads : {1, 2}) {
    Threads scope(threads);
    // Rows differ per thread count: the cpu backend keeps a step compiled
    // under another count (and oneDNN's primitives their count).
    const int64_t rows = 9 + threads;
    auto make = [&](Device d) { return epilogue_cases(d, rows); };
    expect_same_bits(run_on(kXla, make), run_on(kCpu, make), absl::StrCat(threads, " thread(s)"));
  }
}

TEST(XlaF32Epilogue, MatmulWithEpilogueIsWithinAnF32SumOfRef) {
  // ref sums in f64 and rounds once; oneDNN sums 70 products in f32.
  auto make = [](Device d) { return epilogue_cases(d, 12); };
  const auto xla = run_on(kXla, make);
  const auto ref = run_on(kRef, make);
  ASSERT_EQ(xla.size(), ref.size());
  // |x| <= 2.25 * 1.5, |w| <= 1.5, k = 70: sum |a b| <= 70 * 5.07; the
  // bias and residual add one rounding each, gelu a few ulps.
  const double bound = 70 * 0x1p-23 * 70 * 5.07 + 8 * 0x1p-23 * 25;
  for (size_t i = 0; i < xla.size(); ++i)
    for (size_t j = 0; j < xla[i].size(); ++j)
      EXPECT_NEAR(xla[i][j], ref[i][j], bound) << "case " << i << " element " << j;
}

TEST(XlaF32Epilogue, NaNsPassTheEpilogueAsOnCpu) {
  // A NaN the product makes stays NaN through the bias and gelu post-ops
  // and through relu (which runs after the primitive, as on cpu: oneDNN's
  // relu would turn it into 0).
  auto make = [](Device d) {
    Tensor x = from_vector(std::vector<float>{1, NAN, 2, 3}, {2, 2}, DType::f32, d);
    Tensor w = from_vector(std::vector<float>{1, -1, 0.5, 2}, {2, 2}, DType::f32, d);
    Tensor b = from_vector(std::vector<float>{0.25f, -8}, {2}, DType::f32, d);
    mark_step();
    return std::vector<Tensor>{gelu(matmul(x, w) + b), relu(matmul(x, w) + b)};
  };
  const auto xla = run_on(kXla, make);
  expect_same_bits(xla, run_on(kCpu, make), "NaN rows");
  EXPECT_TRUE(std::isnan(xla[0][0]) && std::isnan(xla[1][1]));
  EXPECT_EQ(xla[1][3], 0.0f); // relu of 2 * -1 + 3 * 2 - 8 = -4
}

TEST(XlaF32Epilogue, LoadingAStepMakesItsGemmPrimitives) {
  // One entry per distinct call: the epilogue gemm, and one for the two
  // plain products of one shape. create() makes their primitives, so the
  // first run makes and allocates nothing for them.
  RecordSteps record;
  Tensor x = on(kXla, {8, 24}, 1), y = on(kXla, {8, 24}, 2), z = on(kXla, {8, 24}, 3);
  Tensor w = on(kXla, {16, 24}, 4), b = on(kXla, {16}, 5), v = on(kXla, {24, 5}, 6);
  mark_step();
  std::vector<Tensor> out = {relu(linear(x, w, b)), matmul(y, v), matmul(z, v)};
  mark_step();
  const StepRecord& step = Tracer::get().last_step();
  ASSERT_NE(step.graph, nullptr);
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto* xla = dynamic_cast<xla::XlaExecutable*>(compiled->executable.get());
  ASSERT_NE(xla, nullptr);
  EXPECT_EQ(xla->prepared_gemms(), 2u);
}

/// `steps` SGD steps of a two-layer MLP (linear + bias + relu, linear +
/// bias, cross_entropy; nn::Linear's [out, in] weights, read transposed)
/// on `device`: the losses, then the trained weights.
std::vector<std::vector<float>> mlp_training(Device device, int steps) {
  const Device saved = default_device();
  set_default_device(device);
  Tensor w1 = (on(device, {37, 70}, 7) * 0.1).requires_grad_();
  Tensor b1 = (on(device, {37}, 8) * 0.01).requires_grad_();
  Tensor w2 = (on(device, {10, 37}, 9) * 0.1).requires_grad_();
  Tensor b2 = (on(device, {10}, 10) * 0.01).requires_grad_();
  mark_step();
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor x = on(device, {32, 70}, step);
    std::vector<int64_t> labels(32);
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<int64_t>((i * 3 + step) % 10);
    Tensor loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), from_vector(labels, {32}));
    loss.backward();
    {
      NoGradGuard no_grad;
      for (Tensor* p : {&w1, &b1, &w2, &b2}) {
        p->copy_(*p - p->grad() * 0.1);
        p->set_grad(Tensor());
      }
    }
    mark_step();
    losses.push_back(loss.item());
  }
  std::vector<std::vector<float>> out = {losses};
  for (Tensor* p : {&w1, &b1, &w2, &b2}) out.push_back(p->to_vector<float>());
  set_default_device(saved);
  return out;
}

TEST(XlaF32Epilogue, MlpTrainingEqualsTheCpuBackendBitForBit) {
  // Both backends run each layer as the same oneDNN matmul with the same
  // epilogue, and the loss and update as the same f32 arithmetic: the
  // losses and the trained weights are cpu's. Where oneDNN runs its
  // AVX-512 (brgemm) matmul, the two backends' descs (cpu's of the op's
  // rank, xla's with a batch dim) give one kernel; below avx512_core its
  // gemm may split a sum differently for the two (1-2 ulps, measured with
  // ONEDNN_MAX_CPU_ISA=AVX2), and the closeness is
  // GptMiniTrainingLossesAreTheCpuBackendsWithinItsNormRounding's.
  if ((dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core)
    GTEST_SKIP() << "oneDNN runs below avx512_core here: its gemm need not sum as for the "
                    "other backend's descs";
  expect_same_bits(mlp_training(kXla, 5), mlp_training(kCpu, 5), "mlp");
}

TEST(XlaF32Epilogue, GptMiniTrainingLossesAreTheCpuBackendsWithinItsNormRounding) {
  // The layer norms differ (xla: ref's f64 statistics; cpu: oneDNN's f32
  // ones), a few f32 ulps per step; everything else is the same math.
  const std::vector<float> xla = testing::gpt_training_losses(kXla, std::nullopt);
  const std::vector<float> cpu = testing::gpt_training_losses(kCpu, std::nullopt);
  ASSERT_EQ(xla.size(), cpu.size());
  for (size_t i = 0; i < xla.size(); ++i)
    EXPECT_NEAR(xla[i], cpu[i], 1e-5 * std::abs(cpu[i])) << "step " << i;
}

} // namespace
} // namespace mstep
