// An autocast linear's f32 bias and cuBLASLt epilogues (CudaAutocastBias.h):
// - forward: the fusion `cast(bias) + x·w` [then ReLU or tanh-GELU] is the
//   call's BIAS / RELU_BIAS / GELU_BIAS epilogue with a bf16 bias (the
//   cast a kernel of its own before the call); the erf GELU, which
//   cuBLASLt has not, keeps its fusion, cast inside;
// - backward: the bias gradient (dY summed over its rows, bf16) that a
//   cast to f32 reads before the weight gradient's matmul is that call's
//   BGRADB, the cast after it.
// Plans are checked for the steps they make and run on the host
// (host_matmul) against ref, with and without their epilogue fallbacks
// (an executable over a fake cuBLASLt without the epilogues loads both with
// their fallbacks: cuda_epilogue_fallback_test).
//
// Tolerances, from the ops' rounding (u = 2^-8, bf16's unit roundoff with
// round to nearest, 2^-11 for the f16 twins; the inputs in [-2, 2)): ref rounds the product P to
// bf16, adds the bf16 bias b and rounds again; the call adds b to P in f32
// and rounds once, so |call - ref| <= u |P| + 2u |P + b| (+ the f32 sums'
// order: k 2^-24 sum |x w|), times the activation's slope (<= 1.13 for
// GELU). A bias gradient sums in f32 in another order and rounds once, as
// ref does: within u |ref| + k 2^-24 sum |dY|, and so is the weight
// gradient.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "absl/strings/str_replace.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "test/cuda/AutocastBiasSteps.h"
#include "test/cuda/HostVsRef.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using testing::autocast_linear;
using testing::kAutocastBiasGrad;
using testing::kGeluErf;
using testing::kGeluTanh;
using testing::kRelu;
using testing::plan_of;

constexpr double kU = 0x1p-8;  // bf16's unit roundoff
constexpr int64_t kRows = 64, kIn = 96, kOut = 80;

float bf16_at(const std::vector<char>& bytes, int64_t i) {
  return float(reinterpret_cast<const BFloat16*>(bytes.data())[i]);
}
float f16_at(const std::vector<char>& bytes, int64_t i) {
  return float(reinterpret_cast<const Float16*>(bytes.data())[i]);
}

/// The step texts with f16 for bf16.
std::string as_f16(const std::string& text) {
  return absl::StrReplaceAll(text, {{"bf16", "f16"}});
}

/// The launch that writes plan value `id` (its index), or -1.
int writer_of(const CudaPlan& plan, int id) {
  for (size_t l = 0; l < plan.launches.size(); ++l)
    for (int written : plan.launches[l].writes)
      if (written == id) return static_cast<int>(l);
  return -1;
}

TEST(CudaAutocastBias, TheCastLeavesTheFusionAndTheCallAddsTheBf16Bias) {
  for (auto [activation, epilogue] :
       {std::pair<const char*, cublasLtEpilogue_t>{"", CUBLASLT_EPILOGUE_BIAS},
        {kRelu, CUBLASLT_EPILOGUE_RELU_BIAS},
        {kGeluTanh, CUBLASLT_EPILOGUE_GELU_BIAS}}) {
    SCOPED_TRACE(activation);
    auto plan = plan_of(autocast_linear(activation).c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->matmuls.size(), 1u);
    const MatmulShape& s = plan->matmuls[0].shape;
    EXPECT_TRUE(s.bias);
    EXPECT_EQ(cublaslt_epilogue(s), epilogue);
    // The cast's kernel, then the call, which writes the output: the
    // fusion launches nothing (its kernels are the epilogue's fallback).
    const int call = writer_of(*plan, plan->outputs[0]);
    ASSERT_GE(call, 1);
    ASSERT_EQ(plan->launches[call].matmul, 0);
    ASSERT_EQ(plan->launches[call].args.size(), 3u);
    const int bias = plan->launches[call].args[2];
    EXPECT_EQ(plan->values[bias].dtype, DType::bf16);
    EXPECT_EQ(plan->values[bias].shape, Shape({kOut}));
    const int cast = writer_of(*plan, bias);
    ASSERT_GE(cast, 0);
    EXPECT_LT(cast, call);
    EXPECT_EQ(plan->launches.size(), static_cast<size_t>(call) + 1);
    EXPECT_FALSE(plan->matmuls[0].fallback.empty());
  }
}

TEST(CudaAutocastBias, AnErfGeluKeepsItsFusionWithTheCastInside) {
  // cuBLASLt has only the tanh form: moving the cast would only add a
  // launch.
  auto plan = plan_of(autocast_linear(kGeluErf).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->matmuls[0].shape.bias);
  for (const TensorType& type : plan->values)
    EXPECT_FALSE(type.dtype == DType::bf16 && type.shape == Shape({kOut})) << "a bf16 bias value";
}

/// `text`'s plan (its epilogue fallback taken when `take_fallback`) run on
/// the host on `inputs`, and ref's run of the step as written: `out`.
void run_on_host_and_ref(const char* text, const std::vector<std::vector<char>>& inputs,
                         bool take_fallback, testing::Outputs& out) {
  testing::CudaStepContext step(text);
  testing::CudaStepContext oracle(text);  // compile_cuda_step rewrites `step`
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  if (take_fallback) {
    apply_epilogue_fallbacks(compiled->plan, {0});
    ASSERT_FALSE(compiled->plan.matmuls[0].shape.bias);
    ASSERT_EQ(compiled->plan.matmuls[0].shape.bias_grad, MatmulBiasGrad::none);
  }
  const CudaPlan& plan = compiled->plan;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));
  auto ref = testing::ref_outputs(oracle.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (int id : plan.outputs) out.cuda.push_back(values[id]);
  out.ref = std::move(*ref);
  out.plan = plan;
}

/// `text` (an autocast linear, bf16 or f16 as `dtype`) run on the host as
/// planned, or with its epilogue fallback taken, against ref: each element
/// within the bound of the header comment (u the dtype's unit roundoff),
/// the product P and sum |x w| from the inputs.
void expect_linear_matches_ref(const std::string& text, bool take_fallbacks,
                               DType dtype = DType::bf16) {
  const bool f16 = dtype == DType::f16;
  auto half_bytes = f16 ? testing::f16_bytes : testing::bf16_bytes;
  auto at = f16 ? f16_at : bf16_at;
  const double u = f16 ? 0x1p-11 : kU;
  const std::vector<std::vector<char>> inputs = {half_bytes(kRows * kIn, 3),
                                                 half_bytes(kIn * kOut, 4),
                                                 testing::random_bytes(kOut, 5)};
  testing::Outputs out;
  ASSERT_NO_FATAL_FAILURE(run_on_host_and_ref(text.c_str(), inputs, take_fallbacks, out));
  const std::vector<char>& got = out.cuda[0];
  const float* bias = reinterpret_cast<const float*>(inputs[2].data());
  int wrong = 0;
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kOut; ++j) {
      double product = 0, magnitude = 0;
      for (int64_t l = 0; l < kIn; ++l) {
        const double term = double(at(inputs[0], i * kIn + l)) * at(inputs[1], l * kOut + j);
        product += term;
        magnitude += std::fabs(term);
      }
      const double sum = product + (f16 ? float(Float16(bias[j])) : float(BFloat16(bias[j])));
      const double tol =
          1.13 * (u * (std::fabs(product) + 2 * std::fabs(sum)) + kIn * 0x1p-24 * magnitude);
      const int64_t k = i * kOut + j;
      const float g = at(got, k), w = at(out.ref[0], k);
      if (!(std::fabs(g - w) <= tol) && wrong++ < 3)
        ADD_FAILURE() << "[" << i << ", " << j << "] = " << g << ", ref " << w << " (tolerance "
                      << tol << ")";
    }
}

TEST(CudaAutocastBias, TheLinearOnTheHostMatchesRefWithAndWithoutItsFallback) {
  for (const char* activation : {"", kRelu, kGeluTanh, kGeluErf})
    for (bool fallback : {false, true}) {
      if (fallback && activation == kGeluErf) continue;  // no epilogue
      SCOPED_TRACE(std::string(activation) + (fallback ? ", fallback taken" : ""));
      ASSERT_NO_FATAL_FAILURE(expect_linear_matches_ref(autocast_linear(activation), fallback));
    }
}

TEST(CudaAutocastBias, TheBiasGradientIsTheWeightGradientCallsAndItsCastFollows) {
  auto plan = plan_of(kAutocastBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  // (x^T dY)^T = dY^T x: dY is the transposed lhs, summed over k.
  EXPECT_EQ(plan->matmuls[0].shape.bias_grad, MatmulBiasGrad::lhs);
  EXPECT_EQ(plan->matmuls[0].shape.dtype, DType::bf16);
  const int call = writer_of(*plan, plan->outputs[1]);
  ASSERT_GE(call, 0);
  ASSERT_EQ(plan->launches[call].writes.size(), 2u);
  const int grad = plan->launches[call].writes[1];
  EXPECT_EQ(plan->values[grad].dtype, DType::bf16);
  // The call comes first; the cast's kernel, reading what it wrote, last.
  EXPECT_EQ(call, 0);
  const int cast = writer_of(*plan, plan->outputs[0]);
  EXPECT_GT(cast, call);
  EXPECT_EQ(plan->launches.size(), 2u) << describe_cuda_plan(*plan);
  EXPECT_THAT(describe_cuda_plan(*plan), HasSubstr("bf16, A transposed, bias grad"));
}

TEST(CudaAutocastBias, TheBiasGradientOnTheHostMatchesRefWithAndWithoutItsFallback) {
  for (bool fallback : {false, true}) {
    SCOPED_TRACE(fallback ? "fallback taken" : "the call's BGRAD");
    const std::vector<std::vector<char>> inputs = {testing::bf16_bytes(kRows * kIn, 6),
                                                   testing::bf16_bytes(kRows * kOut, 7)};
    testing::Outputs out;
    ASSERT_NO_FATAL_FAILURE(run_on_host_and_ref(kAutocastBiasGrad, inputs, fallback, out));
    // db (f32 of a bf16 sum of 64 rows of |dY| < 2).
    const float* db = reinterpret_cast<const float*>(out.cuda[0].data());
    const float* want_db = reinterpret_cast<const float*>(out.ref[0].data());
    for (int64_t j = 0; j < kOut; ++j)
      EXPECT_NEAR(db[j], want_db[j], kU * std::fabs(want_db[j]) + kRows * 0x1p-24 * 2 * kRows)
          << "db[" << j << "]";
    // dW [out, in]: 64-term dot products of values under 2.
    int wrong = 0;
    for (int64_t k = 0; k < kOut * kIn; ++k) {
      const float g = bf16_at(out.cuda[1], k), w = bf16_at(out.ref[1], k);
      if (!(std::fabs(g - w) <= kU * std::fabs(w) + kRows * 0x1p-24 * 4 * kRows) && wrong++ < 3)
        ADD_FAILURE() << "dW[" << k << "] = " << g << ", ref " << w;
    }
  }
}

TEST(CudaAutocastBias, F16AutocastGetsTheSameEpiloguesAsBf16) {
  // The same steps with f16 for bf16: the rewrites are dtype-generic and
  // cuBLASLt takes f16 (CUDA_R_16F) as it takes bf16.
  for (auto [activation, epilogue] :
       {std::pair<const char*, cublasLtEpilogue_t>{"", CUBLASLT_EPILOGUE_BIAS},
        {kRelu, CUBLASLT_EPILOGUE_RELU_BIAS},
        {kGeluTanh, CUBLASLT_EPILOGUE_GELU_BIAS}}) {
    SCOPED_TRACE(activation);
    auto plan = plan_of(as_f16(autocast_linear(activation)).c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->matmuls.size(), 1u);
    EXPECT_EQ(plan->matmuls[0].shape.dtype, DType::f16);
    EXPECT_EQ(cublaslt_epilogue(plan->matmuls[0].shape), epilogue);
    const int call = writer_of(*plan, plan->outputs[0]);
    ASSERT_GE(call, 1);
    EXPECT_EQ(plan->values[plan->launches[call].args[2]].dtype, DType::f16);
  }
  auto plan = plan_of(as_f16(kAutocastBiasGrad).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  EXPECT_EQ(plan->matmuls[0].shape.bias_grad, MatmulBiasGrad::lhs);
  EXPECT_EQ(plan->launches.size(), 2u) << describe_cuda_plan(*plan);
}

TEST(CudaAutocastBias, TheF16LinearOnTheHostMatchesRefWithAndWithoutItsFallback) {
  for (const char* activation : {"", kRelu, kGeluTanh})
    for (bool fallback : {false, true}) {
      SCOPED_TRACE(std::string(activation) + (fallback ? ", fallback taken" : ""));
      ASSERT_NO_FATAL_FAILURE(
          expect_linear_matches_ref(as_f16(autocast_linear(activation)), fallback, DType::f16));
    }
}

}  // namespace
}  // namespace mstep::cuda
