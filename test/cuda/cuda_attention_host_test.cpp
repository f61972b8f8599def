// Host numerics of the composed attention (CudaComposedAttention.h): steps
// with mstep.sdpa and mstep.sdpa_backward in forms cuDNN cannot express
// (f32, causal, valid_seq_len right and left, boolean and broadcast
// additive masks, dropout) are compiled for cuda (kernels assembled for
// sm_80 and sm_90), and their plans run on this CPU in order: the loop
// nests through the host JIT, each cuBLASLt step as a host GEMM. The
// out and the three gradients are compared with the ref backend's.
//
// Not bit for bit: ref keeps q·k, g·v and whole rows in f64 where the
// plan rounds the scores, P' and scale·dS to f32 before its matmuls (as
// on the GPU), each a relative 2^-24. The bound is 4 f32 epsilons of the
// output's largest magnitude (a few roundings of terms no larger than
// it); the errors seen are within one ulp of it. An element ref gives as
// exactly 0 (a padded or fully masked row) must be exactly 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "lib/backends/cuda/CudaExecutable.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

/// tensor<AxBx...xf32>.
std::string tensor(const std::vector<int64_t>& dims, const char* element = "f32") {
  std::string text = "tensor<";
  for (int64_t d : dims) text += std::to_string(d) + "x";
  return text + element + ">";
}

/// One attention node's shapes and options, as step text.
struct Attention {
  std::vector<int64_t> lead = {2, 3}; ///< the leading dims
  int64_t L = 8, S = 8, E = 16, Ev = 16;
  std::string attrs = "scale = 2.500000e-01 : f64";
  /// Extra step arguments (", %m: tensor<...>") and the operands they
  /// are in the ops (" mask(%m : ...)").
  std::string args, operands;
  const char* element = "f32";

  std::vector<int64_t> dims(int64_t rows, int64_t cols) const {
    std::vector<int64_t> d = lead;
    d.push_back(rows);
    d.push_back(cols);
    return d;
  }
  std::string q() const { return tensor(dims(L, E), element); }
  std::string k() const { return tensor(dims(S, E), element); }
  std::string v() const { return tensor(dims(S, Ev), element); }
  std::string o() const { return tensor(dims(L, Ev), element); }

  /// The forward and the backward: returns out, grad_q, grad_k, grad_v.
  std::string step() const {
    return "func.func @step(%q: " + q() + ", %k: " + k() + ", %v: " + v() + ", %g: " + o() + args +
           ")\n    -> (" + o() + ", " + q() + ", " + k() + ", " + v() + ") {\n" +
           "  %o = mstep.sdpa %q, %k, %v" + operands + " {" + attrs + "}\n      : " + q() + ", " +
           k() + ", " + v() + " -> " + o() + "\n" +
           "  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v" + operands + " {" + attrs +
           "}\n      : " + o() + ", " + q() + ", " + k() + ", " + v() + "\n" +
           "  return %o, %dq, %dk, %dv : " + o() + ", " + q() + ", " + k() + ", " + v() + "\n}\n";
  }
};

template <typename T> std::vector<char> bytes_of(const std::vector<T>& values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The step's q, k, v, g: random in [-2, 2).
std::vector<std::vector<char>> qkvg(const CudaPlan& plan) {
  std::vector<std::vector<char>> inputs;
  for (int i = 0; i < 4; ++i)
    inputs.push_back(bytes_of(testing::random_floats(plan.values[i].numel(), 10 + i)));
  return inputs;
}

struct HostRun {
  CudaPlan plan;
  std::vector<std::vector<char>> cuda, ref;
};

/// Compiles `text`, runs its plan on the host and the step on ref.
HostRun run_both(const std::string& text, std::vector<std::vector<char>> extra_inputs) {
  HostRun run;
  testing::CudaStepContext step(text.c_str());
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return run;
  std::vector<std::vector<char>> inputs = qkvg(compiled->plan);
  for (std::vector<char>& extra : extra_inputs) inputs.push_back(std::move(extra));
  std::vector<std::vector<char>> values = testing::host_values<char>(compiled->plan, inputs);
  testing::run_plan_on_host(step.context(), *compiled, values);
  for (int id : compiled->plan.outputs) run.cuda.push_back(values[id]);
  auto ref = testing::ref_outputs(step.module(), inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) run.ref = std::move(*ref);
  run.plan = std::move(compiled->plan);
  return run;
}

/// Every output within 4 f32 epsilons of its largest magnitude of ref's
/// (see the top), and exactly 0 where ref's is.
void expect_close_to_ref(const HostRun& run) {
  const char* names[] = {"out", "grad_q", "grad_k", "grad_v"};
  ASSERT_EQ(run.cuda.size(), 4u);
  ASSERT_EQ(run.ref.size(), 4u);
  for (size_t o = 0; o < 4; ++o) {
    ASSERT_EQ(run.cuda[o].size(), run.ref[o].size()) << names[o];
    const float* got = testing::as<float>(run.cuda[o]);
    const float* want = testing::as<float>(run.ref[o]);
    const size_t n = run.cuda[o].size() / 4;
    float largest = 0;
    for (size_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(want[i]));
    const float bound = 4 * FLT_EPSILON * largest;
    int wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool ok = want[i] == 0 ? got[i] == 0 : std::fabs(got[i] - want[i]) <= bound;
      if (!ok && wrong++ < 3)
        ADD_FAILURE() << names[o] << "[" << i << "] = " << got[i] << ", ref " << want[i];
    }
  }
}

/// Composed, not cuDNN: per direction, matmuls and the row kernels.
void expect_composed(const CudaPlan& plan) {
  EXPECT_TRUE(plan.attentions.empty());
  EXPECT_EQ(plan.matmuls.size(), 2u + 5u); // q·kᵀ, P'·v; q·kᵀ, g·vᵀ, dv, dq, dk
  EXPECT_EQ(plan.kernels.size(), 3u);      // probs; probs again, probs_grad
  EXPECT_TRUE(validate_cuda_plan(plan).ok()) << validate_cuda_plan(plan);
}

TEST(CudaAttentionHost, CausalF32) {
  Attention a;
  a.attrs = "is_causal = true, scale = 2.500000e-01 : f64";
  const HostRun run = run_both(a.step(), {});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
  // Row 0 attends to key 0 alone: out[0] = v[0] (not ref's arithmetic).
  const std::vector<float> v = testing::random_floats(2 * 3 * 8 * 16, 12);
  const float* out = testing::as<float>(run.cuda[0]);
  for (int e = 0; e < 16; ++e) EXPECT_FLOAT_EQ(out[e], v[e]) << e;
}

TEST(CudaAttentionHost, RightPaddingWithMoreKeysThanQueriesAndAnotherValueDim) {
  // L 6, S 9, Ev 12; i32 lengths 5 and 9 (all valid).
  Attention a;
  a.lead = {2, 2};
  a.L = 6, a.S = 9, a.E = 8, a.Ev = 12;
  a.args = ", %l: tensor<2xi32>";
  a.operands = " valid_seq_len(%l : tensor<2xi32>)";
  const HostRun run = run_both(a.step(), {bytes_of(std::vector<int32_t>{5, 9})});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
  // Batch 0's query row 5 is padding: zeros in out and grad_q.
  const float* out = testing::as<float>(run.cuda[0]);
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 12; ++e) EXPECT_EQ(out[(h * 6 + 5) * 12 + e], 0.f);
}

TEST(CudaAttentionHost, LeftPaddingCausalWithI64LengthsAndAnEmptyBatchRow) {
  // Lengths 0 (batch 0 all padding: every result zero) and 5 of 7, the
  // first 2 positions padding.
  Attention a;
  a.L = a.S = 7;
  a.E = a.Ev = 8;
  a.args = ", %l: tensor<2xi64>";
  a.operands = " valid_seq_len(%l : tensor<2xi64>)";
  a.attrs = "is_causal = true, padding_side = #mstep.padding_side<left>, scale = 0.5 : f64";
  const HostRun run = run_both(a.step(), {bytes_of(std::vector<int64_t>{0, 5})});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
  for (size_t o = 0; o < 4; ++o) {
    const float* x = testing::as<float>(run.cuda[o]);
    for (int i = 0; i < 3 * 7 * 8; ++i) ASSERT_EQ(x[i], 0.f) << "output " << o << " [" << i << "]";
  }
}

TEST(CudaAttentionHost, BooleanMaskPerHeadBroadcastOverTheBatchWithAnEmptyRow) {
  // mask [3, 6, 9] over [2, 3, 6, 9]; head 1's row 2 attends to nothing.
  Attention a;
  a.L = 6, a.S = 9, a.E = 8, a.Ev = 8;
  a.args = ", %m: tensor<3x6x9xi1>";
  a.operands = " mask(%m : tensor<3x6x9xi1>)";
  std::vector<char> mask(3 * 6 * 9);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + i / 9) % 3 != 0;
  for (int j = 0; j < 9; ++j) mask[(1 * 6 + 2) * 9 + j] = 0;
  const HostRun run = run_both(a.step(), {mask});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
  const float* out = testing::as<float>(run.cuda[0]);
  for (int b = 0; b < 2; ++b)
    for (int e = 0; e < 8; ++e) EXPECT_EQ(out[((b * 3 + 1) * 6 + 2) * 8 + e], 0.f);
}

TEST(CudaAttentionHost, AdditiveMaskBroadcastOverHeadsAndQueryRows) {
  // [2, 1, 1, 8]: one bias per (batch, key), which cuDNN's mask cannot be.
  Attention a;
  a.args = ", %m: tensor<2x1x1x8xf32>";
  a.operands = " mask(%m : tensor<2x1x1x8xf32>)";
  std::vector<float> mask = testing::random_floats(16, 3);
  mask[3] = -INFINITY;
  const HostRun run = run_both(a.step(), {bytes_of(mask)});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
}

TEST(CudaAttentionHost, DropoutWithRefsPhiloxDrawsForwardAndBackward) {
  // p = 0.3 from state (seed 1234, offset 77) + rng_offset 5: the backward
  // replays the forward's draws.
  Attention a;
  a.args = ", %rng: tensor<2xi64>";
  a.operands = " rng(%rng)";
  a.attrs = "dropout_p = 3.000000e-01 : f64, is_causal = true, rng_offset = 5 : i64, "
            "scale = 2.500000e-01 : f64";
  const HostRun run = run_both(a.step(), {bytes_of(std::vector<int64_t>{1234, 77})});
  ASSERT_NO_FATAL_FAILURE(expect_composed(run.plan));
  ASSERT_NO_FATAL_FAILURE(expect_close_to_ref(run));
}

} // namespace
} // namespace mstep::cuda
