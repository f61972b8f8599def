// mstep.sdpa / mstep.sdpa_backward in the cuda compile half: the plan holds
// a cuDNN SDPA step (the node's shapes and options, which values are q, k,
// v, out, stats, ...) instead of a kernel; the stored plan keeps it; the
// executable makes a runner per step at load time (here a fake in place
// of cuDNN, which needs a GPU) and runs it with base + offset pointers on
// the backend's stream; an option cuDNN cannot express is a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "mstep/core/ByteStream.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::plan_of;

#define BF16 "tensor<2x4x16x64xbf16>"

/// A training step's attention: the causal forward (its out unused but by
/// the backward's cuDNN form) and the backward, returning the gradients.
constexpr const char* kForwardBackwardStep = R"(
func.func @step(%q: )" BF16 R"(, %k: )" BF16 R"(, %v: )" BF16 R"(, %g: )" BF16 R"()
    -> ()" BF16 ", " BF16 ", " BF16 R"() {
  %o = mstep.sdpa %q, %k, %v {is_causal = true, scale = 1.250000e-01 : f64}
      : )" BF16 ", " BF16 ", " BF16 " -> " BF16 R"(
  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v {is_causal = true, scale = 1.250000e-01 : f64}
      : )" BF16 ", " BF16 ", " BF16 ", " BF16 R"(
  return %dq, %dk, %dv : )" BF16 ", " BF16 ", " BF16 R"(
}
)";

/// A backward alone (its forward in another step), with an additive mask
/// shared over the batch and right padding.
constexpr const char* kBackwardOnlyStep = R"(
func.func @step(%g: )" BF16 R"(, %q: )" BF16 R"(, %k: )" BF16 R"(, %v: )" BF16 R"(,
                %m: tensor<1x4x16x16xbf16>, %l: tensor<2xi32>)
    -> ()" BF16 ", " BF16 ", " BF16 R"() {
  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v mask(%m : tensor<1x4x16x16xbf16>)
      valid_seq_len(%l : tensor<2xi32>) {scale = 5.000000e-01 : f64}
      : )" BF16 ", " BF16 ", " BF16 ", " BF16 R"(
  return %dq, %dk, %dv : )" BF16 ", " BF16 ", " BF16 R"(
}
)";

/// A forward step of `type` with `extra` operands/attributes.
std::string forward_step(const std::string& type, const std::string& extra_args,
                         const std::string& extra_ops, const std::string& attrs) {
  return "func.func @step(%q: " + type + ", %k: " + type + ", %v: " + type + extra_args + ") -> " +
         type + " {\n  %o = mstep.sdpa %q, %k, %v " + extra_ops + " {" + attrs +
         "}\n      : " + type + ", " + type + ", " + type + " -> " + type +
         "\n  return %o : " + type + "\n}\n";
}

TEST(CudaCudnnPlan, AttentionIsACudnnStepWithItsDescription) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->kernels.empty());
  ASSERT_EQ(plan->attentions.size(), 2u);
  ASSERT_EQ(plan->launches.size(), 2u);
  // %0..%3 q k v g; %4 out; %5 stats (added); %6..%8 dq dk dv.
  const CudaAttentionInfo& forward = plan->attentions[0];
  EXPECT_EQ(forward.origin, "mstep.sdpa #0");
  EXPECT_FALSE(forward.backward);
  CudnnSdpaConfig expected;
  expected.batch = 2;
  expected.heads = 4;
  expected.seq_q = expected.seq_kv = 16;
  expected.head_dim = 64;
  expected.dtype = DType::bf16;
  expected.scale = 0.125;
  expected.causal = true;
  EXPECT_EQ(forward.config, expected) << forward.config.to_string();
  EXPECT_EQ(plan->launches[0].attention, 0);
  EXPECT_THAT(plan->launches[0].args, ElementsAre(0, 1, 2));
  EXPECT_THAT(plan->launches[0].writes, ElementsAre(4, 5));
  EXPECT_EQ(plan->values[5], (TensorType{Shape({2, 4, 16, 1}), DType::f32}));
  // The backward reads the forward's out and stats, writes the gradients.
  const CudaAttentionInfo& backward = plan->attentions[1];
  EXPECT_EQ(backward.origin, "mstep.sdpa_backward #1");
  EXPECT_TRUE(backward.backward);
  EXPECT_EQ(backward.config, expected);
  EXPECT_EQ(plan->launches[1].attention, 1);
  EXPECT_THAT(plan->launches[1].args, ElementsAre(0, 1, 2, 4, 5, 3));
  EXPECT_THAT(plan->launches[1].writes, ElementsAre(6, 7, 8));
  EXPECT_THAT(describe_cuda_plan(*plan),
              HasSubstr("cudnn sdpa backward (mstep.sdpa_backward #1) [2, 4, 16, 64] x "
                        "[2, 4, 16, 64] bf16, scale 0.125, causal reads (q %0, k %1, v %2, "
                        "out %4, stats %5, grad_out %3) writes (grad_q %6, grad_k %7, "
                        "grad_v %8)"));
}

TEST(CudaCudnnPlan, OutAndStatsKeepArenaSlotsOfTheirOwnUntilTheBackward) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->arena_offsets.size(), 9u);
  const int64_t out = plan->arena_offsets[4], stats = plan->arena_offsets[5];
  ASSERT_GE(out, 0);
  ASSERT_GE(stats, 0);
  // Disjoint byte ranges (out: 2*4*16*64 bf16 = 16384 bytes; stats: 512).
  EXPECT_TRUE(out + 16384 <= stats || stats + 512 <= out) << out << " " << stats;
  EXPECT_GE(plan->arena_bytes, 16384 + 512);
  // The gradients are returned: fresh buffers each run.
  for (int v : {6, 7, 8}) EXPECT_EQ(plan->arena_offsets[v], -1) << v;
  EXPECT_TRUE(validate_cuda_plan(*plan).ok());
}

TEST(CudaCudnnPlan, ABackwardWithoutItsForwardRunsOneFirst) {
  auto plan = plan_of(kBackwardOnlyStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // %0..%5 g q k v m l; %6 out and %7 stats (added); %8..%10 dq dk dv.
  ASSERT_EQ(plan->launches.size(), 2u);
  ASSERT_EQ(plan->attentions.size(), 2u);
  EXPECT_EQ(plan->attentions[0].origin, "mstep.sdpa_backward #0 (its forward)");
  EXPECT_FALSE(plan->attentions[0].backward);
  const CudnnSdpaConfig& c = plan->attentions[1].config;
  EXPECT_EQ(c.mask, SdpaMaskKind::additive);
  EXPECT_FALSE(c.mask_per_batch);
  EXPECT_TRUE(c.mask_per_head);
  EXPECT_EQ(c.padding, SdpaPadding::right);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.scale, 0.5);
  EXPECT_THAT(plan->launches[0].args, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(plan->launches[0].writes, ElementsAre(6, 7));
  EXPECT_THAT(plan->launches[1].args, ElementsAre(1, 2, 3, 6, 7, 0, 4, 5));
  EXPECT_THAT(plan->launches[1].writes, ElementsAre(8, 9, 10));
  EXPECT_EQ(plan->values[6], (TensorType{Shape({2, 4, 16, 64}), DType::bf16}));
  EXPECT_GE(plan->arena_offsets[6], 0);
  EXPECT_GE(plan->arena_offsets[7], 0);
}

TEST(CudaCudnnPlan, WhatCudnnCannotExpressIsComposedInstead) {
  // Each forward becomes q·kᵀ, the probabilities kernel and P'·v
  // (CudaComposedAttention.h; its numerics: cuda_attention_host_test).
  const std::string bf16 = BF16;
  const std::vector<std::string> cases = {
      forward_step("tensor<2x4x16x64xf32>", "", "", "scale = 1.250000e-01 : f64"),
      forward_step(bf16, ", %m: tensor<16x16xi1>", "mask(%m : tensor<16x16xi1>)",
                   "scale = 1.250000e-01 : f64"),
      forward_step("tensor<2x4x16x12xbf16>", "", "", "scale = 1.250000e-01 : f64"),
      forward_step(bf16, ", %m: tensor<2x4x1x16xbf16>", "mask(%m : tensor<2x4x1x16xbf16>)",
                   "scale = 1.250000e-01 : f64"),
      // f16 as bf16: cuBLASLt's matmuls take it too.
      forward_step("tensor<2x4x16x64xf16>", ", %m: tensor<16x16xi1>",
                   "mask(%m : tensor<16x16xi1>)", "scale = 1.250000e-01 : f64"),
  };
  for (const std::string& text : cases) {
    auto plan = plan_of(text.c_str());
    ASSERT_TRUE(plan.ok()) << plan.status() << "\n" << text;
    EXPECT_TRUE(plan->attentions.empty()) << text;
    EXPECT_EQ(plan->matmuls.size(), 2u) << text;
    EXPECT_EQ(plan->kernels.size(), 1u) << text;
  }
}

/// A forward and its backward with right padding by i64 lengths.
constexpr const char* kI64LengthsStep = R"(
func.func @step(%q: )" BF16 R"(, %k: )" BF16 R"(, %v: )" BF16 R"(, %g: )" BF16 R"(,
                %l: tensor<2xi64>)
    -> ()" BF16 ", " BF16 ", " BF16 ", " BF16 R"() {
  %o = mstep.sdpa %q, %k, %v valid_seq_len(%l : tensor<2xi64>) {scale = 1.250000e-01 : f64}
      : )" BF16 ", " BF16 ", " BF16 " -> " BF16 R"(
  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v valid_seq_len(%l : tensor<2xi64>)
      {scale = 1.250000e-01 : f64} : )" BF16 ", " BF16 ", " BF16 ", " BF16 R"(
  return %o, %dq, %dk, %dv : )" BF16 ", " BF16 ", " BF16 ", " BF16 R"(
}
)";

TEST(CudaCudnnPlan, I64LengthsAreConvertedToI32OnceForCudnn) {
  testing::CudaStepContext step(kI64LengthsStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  // One conversion kernel, then the two cuDNN steps reading its i32 copy.
  ASSERT_EQ(plan.attentions.size(), 2u) << describe_cuda_plan(plan);
  ASSERT_EQ(plan.launches.size(), 3u) << describe_cuda_plan(plan);
  const CudaLaunchStep& convert = plan.launches[0];
  ASSERT_GE(convert.kernel, 0);
  ASSERT_EQ(convert.args.size(), 2u);
  EXPECT_EQ(convert.args[0], 4);  // %l
  const int lengths = convert.args[1];
  EXPECT_EQ(plan.values[lengths], (TensorType{Shape({2}), DType::i32}));
  EXPECT_EQ(plan.attentions[0].config.padding, SdpaPadding::right);
  EXPECT_EQ(plan.launches[1].args.back(), lengths);
  EXPECT_EQ(plan.launches[2].args.back(), lengths);
  EXPECT_GE(plan.arena_offsets[lengths], 0);
  EXPECT_TRUE(validate_cuda_plan(plan).ok());

  // The kernel's loop nest on the host: clamped to [0, 2^31 - 1], as ref
  // clamps a length to [0, L] anyway; a plain truncation would wrap.
  ASSERT_EQ(compiled->tiled.size(), 1u);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> cases = {
      {{7, 16}, {7, 16}},
      {{-5, int64_t{1} << 40}, {0, INT32_MAX}},
      {{(int64_t{1} << 32) + 3, 0}, {INT32_MAX, 0}}};
  for (const auto& [in, expected] : cases) {
    std::vector<std::vector<char>> values;
    for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
    std::memcpy(values[4].data(), in.data(), 2 * sizeof(int64_t));
    ASSERT_NO_FATAL_FAILURE(
        testing::run_tiled_op_on_host(step.context(), compiled->tiled[0], values, &plan));
    std::vector<int32_t> got(2);
    std::memcpy(got.data(), values[lengths].data(), sizeof(int32_t) * 2);
    EXPECT_EQ(got, expected) << in[0] << ", " << in[1];
  }
}

TEST(CudaCudnnPlan, WhatNeitherCudnnNorTheComposedFormTakesIsNamedWithBothReasons) {
  struct Case {
    std::string text, why;
  };
  const std::vector<Case> cases = {
      {forward_step("tensor<2x4x16x64xf64>", ", %m: tensor<16x16xi1>",
                    "mask(%m : tensor<16x16xi1>)", "scale = 1.250000e-01 : f64"),
       "cuda: op 'mstep.sdpa' (mstep.sdpa #0, f64[2, 4, 16, 64]) is not yet lowered for cuda: "
       "cudnn sdpa [2, 4, 16, 64] x [2, 4, 16, 64] f64, scale 0.125, boolean mask: not "
       "expressible in cuDNN: dtype f64 (cuDNN's SDPA takes bf16 or f16); nor does the "
       "composed attention (cuBLASLt and "
       "kernels of its own) take dtype f64 (its matmuls are cuBLASLt's: f32, bf16 or f16)"},
  };
  for (const Case& c : cases) {
    auto plan = plan_of(c.text.c_str());
    ASSERT_FALSE(plan.ok()) << c.text;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented) << plan.status();
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.why)) << c.text;
  }
}

TEST(CudaCudnnPlan, ReturnedProbabilitiesTakeTheComposedForm) {
  // cuDNN cannot return the probabilities; the composed form writes them
  // beside its scores: two cuBLASLt calls and its probs kernel, no cuDNN.
  auto plan = plan_of(R"(
func.func @step(%q: )" BF16 R"(, %k: )" BF16 R"(, %v: )" BF16 R"() -> ()" BF16 R"(, tensor<2x4x16x16xbf16>) {
  %o, %p = mstep.sdpa %q, %k, %v {return_attn_probs = true, scale = 1.250000e-01 : f64}
      : )" BF16 ", " BF16 ", " BF16 " -> " BF16 R"( probs tensor<2x4x16x16xbf16>
  return %o, %p : )" BF16 R"(, tensor<2x4x16x16xbf16>
})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->attentions.empty());
  EXPECT_EQ(plan->matmuls.size(), 2u);
}

TEST(CudaCudnnPlan, TheStoredPlanKeepsTheSteps) {
  for (const char* text : {kForwardBackwardStep, kBackwardOnlyStep}) {
    auto plan = plan_of(text);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const std::string blob = serialize_cuda_plan(*plan);
    auto back = deserialize_cuda_plan(blob);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == *plan) << describe_cuda_plan(*back);
    EXPECT_EQ(serialize_cuda_plan(*back), blob);
  }
}

TEST(CudaCudnnPlan, AVersion1PlanIsStillRead) {
  // Version 1's layout, written here field by field: one f32[4] input,
  // one computed value, kernel "k" (no cubins) writing it, no matmuls.
  ByteWriter w;
  w.u32(2);
  write_tensor_type(w, {Shape({4}), DType::f32});
  write_tensor_type(w, {Shape({4}), DType::f32});
  w.u64(1); // inputs
  w.u32(1); // outputs
  w.i64(1);
  w.u32(1); // kernels
  w.bytes("k");
  w.bytes("mstep.exp #0");
  for (int i = 0; i < 6; ++i) w.u32(1); // grid, block
  w.bytes(".version 8.0");
  w.u32(0); // cubins
  w.u32(0); // reports
  w.u32(0); // matmuls (no attention count in version 1)
  w.u32(1); // launches: kernel, matmul, args, writes
  w.i64(0);
  w.i64(-1);
  w.u32(1);
  w.i64(0);
  w.u32(1);
  w.i64(1);
  w.u32(0); // arena offsets
  w.i64(0);
  auto plan = deserialize_cuda_plan(seal("MSTEPCUD", 1, w.data()));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->launches.size(), 1u);
  EXPECT_EQ(plan->launches[0].attention, -1);
  EXPECT_EQ(plan->launches[0].kernel, 0);
  EXPECT_TRUE(plan->attentions.empty());
  EXPECT_EQ(plan->kernels[0].name, "k");
  // Version 0 was never written: named as a version this build does not read.
  auto old = deserialize_cuda_plan(seal("MSTEPCUD", 0, w.data()));
  EXPECT_EQ(old.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(old.status().message(), HasSubstr("format version 0"));
}

TEST(CudaCudnnPlan, ValidationNamesAStepThatDoesNotFitItsConfig) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CudaPlan wrong_count = *plan;
  wrong_count.launches[1].args.pop_back();
  EXPECT_THAT(validate_cuda_plan(wrong_count).message(),
              HasSubstr("cuda plan: launch 1 (cudnn sdpa backward mstep.sdpa_backward #1) has 5 "
                        "operands and 3 results; it needs 6 and 3"));
  CudaPlan wrong_type = *plan;
  wrong_type.launches[0].writes[1] = 4; // out as stats
  EXPECT_THAT(validate_cuda_plan(wrong_type).message(),
              HasSubstr("its stats %4 is bf16[2, 4, 16, 64]; [2, 4, 16, 64] x [2, 4, 16, 64] "
                        "bf16, scale 0.125, causal needs 128 elements of f32"));
  CudaPlan wrong_index = *plan;
  wrong_index.launches[0].attention = 7;
  EXPECT_THAT(validate_cuda_plan(wrong_index).message(),
              HasSubstr("launch 0 names attention step 7 of 2"));
}

// ---- the executable, with a fake in place of cuDNN ---------------------------

/// Records what the executable asks of its attention runners; a runner's
/// execution is also a FakeCall in the fake driver's list (for order).
struct FakeAttention {
  struct Execution {
    bool backward = false;
    CudnnSdpaForwardArgs forward;
    CudnnSdpaBackwardArgs backward_args;
    CUdeviceptr workspace = 0;
  };
  std::vector<CudaAttentionInfo> prepared;
  std::vector<Execution> executions;
  size_t workspace = 1 << 20;
  bool fail_prepare = false, fail_run = false;
  testing::FakeCudaDriver* driver = nullptr;

  class Runner final : public CudaAttentionRunner {
  public:
    Runner(FakeAttention& fake, size_t workspace) : fake_(fake), workspace_(workspace) {}
    size_t workspace_size() const override { return workspace_; }
    absl::Status forward(const CudnnSdpaForwardArgs& args, CUdeviceptr workspace) override {
      return record({.backward = false, .forward = args, .workspace = workspace});
    }
    absl::Status backward(const CudnnSdpaBackwardArgs& args, CUdeviceptr workspace) override {
      return record({.backward = true, .backward_args = args, .workspace = workspace});
    }

  private:
    absl::Status record(Execution e) {
      if (fake_.fail_run) return absl::InternalError("cudnnBackendExecute: CUDNN_STATUS_FAKE");
      fake_.executions.push_back(e);
      fake_.driver->calls.push_back({.name = e.backward ? "sdpa backward" : "sdpa forward"});
      return absl::OkStatus();
    }
    FakeAttention& fake_;
    size_t workspace_;
  };

  CudaAttentionFactory factory() {
    return
        [this](
            const CudaAttentionInfo& info) -> absl::StatusOr<std::unique_ptr<CudaAttentionRunner>> {
          if (fail_prepare)
            return absl::UnimplementedError("no engine on this device runs the graph");
          prepared.push_back(info);
          // The backward's workspace is the larger (cuDNN's + D + the dQ accumulator).
          return std::unique_ptr<CudaAttentionRunner>(
              new Runner(*this, info.backward ? workspace : workspace / 2));
        };
  }
};

class CudaCudnnExecutableTest : public ::testing::Test {
protected:
  void SetUp() override {
    attention_.driver = &fake_;
    auto backend = CudaBackend::create(fake_.driver());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  BufferPtr input(const TensorType& type) {
    auto buffer = backend_->allocate(type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *buffer : nullptr;
  }
  std::vector<BufferPtr> inputs(const CudaPlan& plan) {
    std::vector<BufferPtr> in;
    for (size_t i = 0; i < plan.num_inputs; ++i) in.push_back(input(plan.values[i]));
    return in;
  }
  testing::FakeCudaDriver fake_;
  FakeAttention attention_;
  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaCudnnExecutableTest, TheStepsRunWithBasePlusOffsetPointers) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, nullptr, attention_.factory());
  ASSERT_TRUE(exe.ok()) << exe.status();
  // Made at load time, one runner per step, in order.
  ASSERT_EQ(attention_.prepared.size(), 2u);
  EXPECT_EQ(attention_.prepared[0], plan->attentions[0]);
  EXPECT_EQ(attention_.prepared[1], plan->attentions[1]);
  EXPECT_NE((*exe)->attention_workspace(), 0u);
  std::vector<BufferPtr> in = inputs(*plan);
  auto outputs = (*exe)->run(in);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 3u);
  ASSERT_EQ(attention_.executions.size(), 2u);
  const CUdeviceptr arena = (*exe)->arena_pointer();
  auto at = [&](int value) { return arena + static_cast<CUdeviceptr>(plan->arena_offsets[value]); };
  auto ptr = [](const BufferPtr& b) { return CudaBackend::device_pointer(*b); };
  const FakeAttention::Execution& f = attention_.executions[0];
  EXPECT_FALSE(f.backward);
  EXPECT_EQ(f.forward.q, ptr(in[0]));
  EXPECT_EQ(f.forward.k, ptr(in[1]));
  EXPECT_EQ(f.forward.v, ptr(in[2]));
  EXPECT_EQ(f.forward.out, at(4));
  EXPECT_EQ(f.forward.stats, at(5));
  EXPECT_EQ(f.forward.mask, 0u);
  EXPECT_EQ(f.forward.valid_seq_len, 0u);
  EXPECT_EQ(f.workspace, (*exe)->attention_workspace());
  const FakeAttention::Execution& b = attention_.executions[1];
  EXPECT_TRUE(b.backward);
  EXPECT_EQ(b.backward_args.q, ptr(in[0]));
  EXPECT_EQ(b.backward_args.grad_out, ptr(in[3]));
  EXPECT_EQ(b.backward_args.out, at(4));
  EXPECT_EQ(b.backward_args.stats, at(5));
  EXPECT_EQ(b.backward_args.grad_q, ptr((*outputs)[0]));
  EXPECT_EQ(b.backward_args.grad_k, ptr((*outputs)[1]));
  EXPECT_EQ(b.backward_args.grad_v, ptr((*outputs)[2]));
  EXPECT_EQ(b.workspace, (*exe)->attention_workspace());
  // Forward, then backward.
  std::vector<std::string> order;
  for (const testing::FakeCall& call : fake_.calls)
    if (call.name.rfind("sdpa", 0) == 0) order.push_back(call.name);
  EXPECT_THAT(order, ElementsAre("sdpa forward", "sdpa backward"));
}

TEST_F(CudaCudnnExecutableTest, TheLoadedPlanRunsTheSameSteps) {
  auto plan = plan_of(kBackwardOnlyStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe =
      load_cuda_executable(*backend_, serialize_cuda_plan(*plan), nullptr, attention_.factory());
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<BufferPtr> in = inputs(*plan);
  ASSERT_TRUE((*exe)->run(in).ok());
  ASSERT_EQ(attention_.executions.size(), 2u);
  const FakeAttention::Execution& b = attention_.executions[1];
  EXPECT_EQ(b.backward_args.mask, CudaBackend::device_pointer(*in[4]));
  EXPECT_EQ(b.backward_args.valid_seq_len, CudaBackend::device_pointer(*in[5]));
  // The recomputed forward's out and stats are what the backward reads.
  EXPECT_EQ(b.backward_args.out, attention_.executions[0].forward.out);
  EXPECT_EQ(b.backward_args.stats, attention_.executions[0].forward.stats);
  EXPECT_NE(b.backward_args.out, 0u);
}

TEST_F(CudaCudnnExecutableTest, AStepThatCannotBePreparedFailsCreateNamingTheOp) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  attention_.fail_prepare = true;
  auto exe = CudaExecutable::create(*backend_, *plan, nullptr, attention_.factory());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(exe.status().message(),
              HasSubstr("cuda: preparing the cuDNN SDPA forward of mstep.sdpa #0: no engine"));
}

TEST_F(CudaCudnnExecutableTest, AFailedExecutionFailsRunNamingTheOpAndTheNextRunWorks) {
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, nullptr, attention_.factory());
  ASSERT_TRUE(exe.ok()) << exe.status();
  attention_.fail_run = true;
  auto failed = (*exe)->run(inputs(*plan));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("cudnn sdpa step (mstep.sdpa #0)"));
  EXPECT_THAT(failed.status().message(), HasSubstr("CUDNN_STATUS_FAKE"));
  attention_.fail_run = false;
  EXPECT_TRUE((*exe)->run(inputs(*plan)).ok());
}

TEST_F(CudaCudnnExecutableTest, WithoutAFactoryTheStepsNeedCudnnOnADevice) {
  // The default runners are cuDNN's: here (no GPU) its handle cannot be
  // made, or the library is not found; either is a clear error at create.
  auto plan = plan_of(kForwardBackwardStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(),
              ::testing::AnyOf(HasSubstr("cudnn: unavailable: "),     // no library, or no GPU
                               HasSubstr("found no cudnn_graph.h"))); // built without cuDNN
}

} // namespace
} // namespace mstep::cuda
