// cuDNN attention's operands and results as strided views (CudaViews.h,
// SdpaLayout; issue 21): GPT-mini's heads ([B, S, H, D] <-> [B, H, S, D]
// permutes) and the q/k/v slices of its packed projection launch nothing;
// the cuDNN steps read and write the bytes at strides. The strides are the
// ones a [B, S, 3E] / [B, S, E] buffer has (worked out by hand below). The
// plan runs on the fake driver with a host attention in place of cuDNN
// that reads and writes at the step's strides, and its outputs match ref's
// (the oracle: the same step on the ref backend). What cuDNN does not run
// (f32: the composed attention) keeps its copies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "mstep/core/ElementConvert.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/RefOracle.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;

// B 2, S 16, H 2, D 64 (E = 128), causal: the forward returns out through
// the heads' permute and reshape; the backward's grad_out comes through
// the inverse permute, and each gradient leaves through one.
constexpr const char* kHeadsStep = R"(
func.func @step(%x: tensor<2x16x384xTY>, %g: tensor<2x16x128xTY>)
    -> (tensor<2x16x128xTY>, tensor<2x16x128xTY>, tensor<2x16x128xTY>, tensor<2x16x128xTY>) {
  %qs = mstep.slice %x {dim = 2 : i64, start = 0 : i64, end = 128 : i64, step = 1 : i64} : tensor<2x16x384xTY> -> tensor<2x16x128xTY>
  %qr = mstep.reshape %qs : tensor<2x16x128xTY> -> tensor<2x16x2x64xTY>
  %q = mstep.permute %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x64xTY> -> tensor<2x2x16x64xTY>
  %ks = mstep.slice %x {dim = 2 : i64, start = 128 : i64, end = 256 : i64, step = 1 : i64} : tensor<2x16x384xTY> -> tensor<2x16x128xTY>
  %kr = mstep.reshape %ks : tensor<2x16x128xTY> -> tensor<2x16x2x64xTY>
  %k = mstep.permute %kr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x64xTY> -> tensor<2x2x16x64xTY>
  %vs = mstep.slice %x {dim = 2 : i64, start = 256 : i64, end = 384 : i64, step = 1 : i64} : tensor<2x16x384xTY> -> tensor<2x16x128xTY>
  %vr = mstep.reshape %vs : tensor<2x16x128xTY> -> tensor<2x16x2x64xTY>
  %v = mstep.permute %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x64xTY> -> tensor<2x2x16x64xTY>
  %o = mstep.sdpa %q, %k, %v {is_causal = true, scale = 1.250000e-01 : f64}
      : tensor<2x2x16x64xTY>, tensor<2x2x16x64xTY>, tensor<2x2x16x64xTY> -> tensor<2x2x16x64xTY>
  %op = mstep.permute %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x16x64xTY> -> tensor<2x16x2x64xTY>
  %out = mstep.reshape %op : tensor<2x16x2x64xTY> -> tensor<2x16x128xTY>
  %gr = mstep.reshape %g : tensor<2x16x128xTY> -> tensor<2x16x2x64xTY>
  %gp = mstep.permute %gr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x64xTY> -> tensor<2x2x16x64xTY>
  %dq, %dk, %dv = mstep.sdpa_backward %gp, %q, %k, %v {is_causal = true, scale = 1.250000e-01 : f64}
      : tensor<2x2x16x64xTY>, tensor<2x2x16x64xTY>, tensor<2x2x16x64xTY>, tensor<2x2x16x64xTY>
  %dqp = mstep.permute %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x16x64xTY> -> tensor<2x16x2x64xTY>
  %dqo = mstep.reshape %dqp : tensor<2x16x2x64xTY> -> tensor<2x16x128xTY>
  %dkp = mstep.permute %dk {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x16x64xTY> -> tensor<2x16x2x64xTY>
  %dko = mstep.reshape %dkp : tensor<2x16x2x64xTY> -> tensor<2x16x128xTY>
  %dvp = mstep.permute %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x16x64xTY> -> tensor<2x16x2x64xTY>
  %dvo = mstep.reshape %dvp : tensor<2x16x2x64xTY> -> tensor<2x16x128xTY>
  return %out, %dqo, %dko, %dvo : tensor<2x16x128xTY>, tensor<2x16x128xTY>, tensor<2x16x128xTY>, tensor<2x16x128xTY>
}
)";

constexpr int64_t B = 2, S = 16, H = 2, D = 64, E = H * D;

/// kHeadsStep in element type `type` ("bf16", "f32").
std::string heads_step(const std::string& type) {
  std::string text = kHeadsStep;
  for (size_t at = text.find("TY"); at != std::string::npos; at = text.find("TY", at))
    text.replace(at, 2, type);
  return text;
}

absl::StatusOr<CudaPlan> plan_of(const std::string& text) {
  return testing::plan_of(text.c_str());
}

TEST(CudaAttentionViews, TheHeadsPermutesAndSlicesAreStridesOfCudnnSteps) {
  auto plan = plan_of(heads_step("bf16"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // No copy kernel: the two cuDNN steps are the whole plan.
  EXPECT_TRUE(plan->kernels.empty());
  ASSERT_EQ(plan->launches.size(), 2u);
  ASSERT_EQ(plan->attentions.size(), 2u);
  // q, k, v: element (b, h, s, d) of [B, H, S, D] is x[b, s, part * E + h * D + d].
  const SdpaStrides qkv = {S * 3 * E, D, 3 * E, 1};
  // out, grad_out, the gradients: element (b, h, s, d) is y[b, s, h * D + d].
  const SdpaStrides heads = {S * E, D, E, 1};
  const SdpaLayout& forward = plan->attentions[0].config.layout;
  EXPECT_EQ(forward.q, qkv);
  EXPECT_EQ(forward.k, qkv);
  EXPECT_EQ(forward.v, qkv);
  EXPECT_EQ(forward.out, heads);
  const SdpaLayout& backward = plan->attentions[1].config.layout;
  EXPECT_EQ(backward.q, qkv);
  EXPECT_EQ(backward.out, heads);
  EXPECT_EQ(backward.grad_out, heads);
  EXPECT_EQ(backward.grad_q, heads);
  EXPECT_EQ(backward.grad_k, heads);
  EXPECT_EQ(backward.grad_v, heads);
  // q, k, v in %x's bytes at 0, E and 2E elements (2 bytes each).
  std::vector<int64_t> offsets;
  for (int arg : plan->launches[0].args) {
    const CudaAlias* alias = plan->alias_of(arg);
    ASSERT_NE(alias, nullptr) << "%" << arg;
    EXPECT_EQ(alias->root, 0);
    offsets.push_back(alias->byte_offset);
  }
  EXPECT_THAT(offsets, ElementsAre(0, 2 * E, 4 * E));
  // out is written into the first output's bytes, each gradient into its own.
  for (size_t i = 0; i < 4; ++i) {
    const int written = i == 0 ? plan->launches[0].writes[0] : plan->launches[1].writes[i - 1];
    const CudaAlias* alias = plan->alias_of(written);
    ASSERT_NE(alias, nullptr) << "write " << i;
    EXPECT_EQ(alias->root, plan->outputs[i]);
    EXPECT_EQ(alias->byte_offset, 0);
  }
  // The stored plan keeps the strides.
  auto loaded = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->attentions, plan->attentions);
}

TEST(CudaAttentionViews, WhatCudnnDoesNotRunKeepsItsCopies) {
  // f32: the composed attention (cuBLASLt and kernels of its own) reads
  // packed operands, so the permutes and slices stay copy kernels.
  auto plan = plan_of(heads_step("f32"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->attentions.empty());
  size_t copies = 0;
  for (const CudaKernelInfo& kernel : plan->kernels)
    if (kernel.origin.rfind("mstep.permute", 0) == 0 || kernel.origin.rfind("mstep.slice", 0) == 0)
      ++copies;
  EXPECT_EQ(copies, 11u);  // 3 slices; permutes: q, k, v, grad_out in, out and 3 gradients out
}

TEST(CudaAttentionViews, StridesCudnnCannotLoadAreRefused) {
  CudnnSdpaConfig c;
  c.batch = B;
  c.heads = H;
  c.seq_q = c.seq_kv = S;
  c.head_dim = D;
  c.layout.k = {S * 3 * E, D, 3 * E, 2};  // the head dim not contiguous
  absl::Status status = cudnn_sdpa_expressible(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("strides [6144, 64, 384, 2]"));
}

double read_bf16(const char* p) {
  return load_element(reinterpret_cast<const std::byte*>(p), DType::bf16);
}
void write_bf16(char* p, double value) {
  store_element(value, DType::bf16, reinterpret_cast<std::byte*>(p));
}

/// One bf16 element of a [B, H, rows, cols] tensor at `strides`.
float at(CUdeviceptr base, const SdpaStrides& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  const char* p = reinterpret_cast<const char*>(static_cast<uintptr_t>(base)) +
                  2 * (b * s[0] + h * s[1] + i * s[2] + j * s[3]);
  return static_cast<float>(read_bf16(p));
}
void put(CUdeviceptr base, const SdpaStrides& s, int64_t b, int64_t h, int64_t i, int64_t j,
         double value) {
  char* p = reinterpret_cast<char*>(static_cast<uintptr_t>(base)) +
            2 * (b * s[0] + h * s[1] + i * s[2] + j * s[3]);
  write_bf16(p, value);
}

/// cuDNN's SDPA on the host (causal, no mask): reads and writes every
/// tensor at the config's strides (the fake driver's device pointers are
/// host pointers), in double, rounding results to bf16 as cuDNN does.
class HostSdpa final : public CudaAttentionRunner {
public:
  /// (Packed strides where the layout has none.)
  explicit HostSdpa(CudnnSdpaConfig c) : c_(std::move(c)) {
    SdpaLayout& l = c_.layout;
    const int64_t H = c_.heads, L = c_.seq_q, Sk = c_.seq_kv, D = c_.head_dim, Dv = c_.dv();
    l.q = sdpa_strides_or_packed(l.q, H, L, D);
    l.k = sdpa_strides_or_packed(l.k, H, Sk, D);
    l.v = sdpa_strides_or_packed(l.v, H, Sk, Dv);
    l.out = sdpa_strides_or_packed(l.out, H, L, Dv);
    l.grad_out = sdpa_strides_or_packed(l.grad_out, H, L, Dv);
    l.grad_q = sdpa_strides_or_packed(l.grad_q, H, L, D);
    l.grad_k = sdpa_strides_or_packed(l.grad_k, H, Sk, D);
    l.grad_v = sdpa_strides_or_packed(l.grad_v, H, Sk, Dv);
  }
  size_t workspace_size() const override { return 0; }
  absl::Status forward(const CudnnSdpaForwardArgs& a, CUdeviceptr) override {
    const SdpaLayout& l = c_.layout;
    for (int64_t b = 0; b < c_.batch; ++b)
      for (int64_t h = 0; h < c_.heads; ++h) {
        const auto p = probs(a.q, l.q, a.k, l.k, b, h);
        for (int64_t i = 0; i < c_.seq_q; ++i)
          for (int64_t d = 0; d < c_.dv(); ++d) {
            double o = 0;
            for (int64_t j = 0; j < c_.seq_kv; ++j) o += p[i][j] * at(a.v, l.v, b, h, j, d);
            put(a.out, l.out, b, h, i, d, o);
          }
      }
    return absl::OkStatus();
  }
  absl::Status backward(const CudnnSdpaBackwardArgs& a, CUdeviceptr) override {
    const SdpaLayout& l = c_.layout;
    const int64_t L = c_.seq_q, Sk = c_.seq_kv;
    for (int64_t b = 0; b < c_.batch; ++b)
      for (int64_t h = 0; h < c_.heads; ++h) {
        const auto p = probs(a.q, l.q, a.k, l.k, b, h);
        // dS = P * (dO V^T - rowsum(dO * O)) * scale, O the forward's.
        std::vector<std::vector<double>> ds(L, std::vector<double>(Sk));
        for (int64_t i = 0; i < L; ++i) {
          double dot = 0;
          for (int64_t d = 0; d < c_.dv(); ++d)
            dot += at(a.grad_out, l.grad_out, b, h, i, d) * at(a.out, l.out, b, h, i, d);
          for (int64_t j = 0; j < Sk; ++j) {
            double dp = 0;
            for (int64_t d = 0; d < c_.dv(); ++d)
              dp += at(a.grad_out, l.grad_out, b, h, i, d) * at(a.v, l.v, b, h, j, d);
            ds[i][j] = p[i][j] * (dp - dot) * c_.scale;
          }
        }
        for (int64_t i = 0; i < L; ++i)
          for (int64_t d = 0; d < c_.head_dim; ++d) {
            double dq = 0;
            for (int64_t j = 0; j < Sk; ++j) dq += ds[i][j] * at(a.k, l.k, b, h, j, d);
            put(a.grad_q, l.grad_q, b, h, i, d, dq);
          }
        for (int64_t j = 0; j < Sk; ++j) {
          for (int64_t d = 0; d < c_.head_dim; ++d) {
            double dk = 0;
            for (int64_t i = 0; i < L; ++i) dk += ds[i][j] * at(a.q, l.q, b, h, i, d);
            put(a.grad_k, l.grad_k, b, h, j, d, dk);
          }
          for (int64_t d = 0; d < c_.dv(); ++d) {
            double dv = 0;
            for (int64_t i = 0; i < L; ++i) dv += p[i][j] * at(a.grad_out, l.grad_out, b, h, i, d);
            put(a.grad_v, l.grad_v, b, h, j, d, dv);
          }
        }
      }
    return absl::OkStatus();
  }

private:
  /// softmax(q k^T * scale) of head (b, h), causal.
  std::vector<std::vector<double>> probs(CUdeviceptr q, const SdpaStrides& qs, CUdeviceptr k,
                                         const SdpaStrides& ks, int64_t b, int64_t h) const {
    std::vector<std::vector<double>> p(c_.seq_q, std::vector<double>(c_.seq_kv, 0.0));
    for (int64_t i = 0; i < c_.seq_q; ++i) {
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j <= i && j < c_.seq_kv; ++j) {
        double s = 0;
        for (int64_t d = 0; d < c_.head_dim; ++d) s += at(q, qs, b, h, i, d) * at(k, ks, b, h, j, d);
        p[i][j] = s * c_.scale;
        max = std::max(max, p[i][j]);
      }
      for (int64_t j = 0; j <= i && j < c_.seq_kv; ++j) sum += p[i][j] = std::exp(p[i][j] - max);
      for (int64_t j = 0; j <= i && j < c_.seq_kv; ++j) p[i][j] /= sum;
    }
    return p;
  }
  CudnnSdpaConfig c_;
};

class CudaAttentionViewsExecutableTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaAttentionViewsExecutableTest, TheStepReadAndWrittenAtStridesMatchesRef) {
  const std::string text = heads_step("bf16");
  testing::CudaStepContext step(text.c_str());
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_TRUE(plan.kernels.empty());
  for (const CudaAttentionInfo& info : plan.attentions) ASSERT_TRUE(info.config.causal);
  CudaAttentionFactory factory =
      [](const CudaAttentionInfo& info) -> absl::StatusOr<std::unique_ptr<CudaAttentionRunner>> {
    return std::unique_ptr<CudaAttentionRunner>(new HostSdpa(info.config));
  };
  auto exe = CudaExecutable::create(*backend_, plan, nullptr, factory);
  ASSERT_TRUE(exe.ok()) << exe.status();
  // Inputs: x in [-1, 1) (q, k, v), g in [-1, 1).
  std::vector<std::vector<char>> bytes;
  std::vector<BufferPtr> inputs;
  uint32_t seed = 12345;
  for (size_t i = 0; i < plan.num_inputs; ++i) {
    const TensorType& type = plan.values[i];
    std::vector<char> data(type.bytes());
    for (size_t e = 0; e < type.bytes() / 2; ++e) {
      seed = seed * 1664525u + 1013904223u;
      write_bf16(data.data() + 2 * e, (seed >> 8) / double(1 << 23) - 1.0);
    }
    inputs.push_back(input(type));
    ASSERT_TRUE(backend_->copy_in(*inputs.back(), data.data(), data.size()).ok());
    bytes.push_back(std::move(data));
  }
  auto outputs = (*exe)->run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  auto expected = testing::ref_outputs(step.module(), bytes);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(outputs->size(), expected->size());
  for (size_t o = 0; o < outputs->size(); ++o) {
    std::vector<char> got((*outputs)[o]->type().bytes());
    ASSERT_TRUE(backend_->copy_out(*(*outputs)[o], got.data(), got.size()).ok());
    const std::vector<char>& want = (*expected)[o];
    ASSERT_EQ(got.size(), want.size());
    double largest = 0, worst = 0;
    for (size_t e = 0; e < got.size() / 2; ++e)
      largest = std::max(largest, std::abs(read_bf16(want.data() + 2 * e)));
    for (size_t e = 0; e < got.size() / 2; ++e)
      worst = std::max(worst, std::abs(read_bf16(got.data() + 2 * e) -
                                       read_bf16(want.data() + 2 * e)));
    // bf16 results of the same sums in another order (and the backward
    // from the bf16-rounded out): a few bf16 roundings (2^-8) of the
    // largest value. A permute or slice read at wrong strides is O(1) off.
    EXPECT_LE(worst, 1e-2 * largest) << "output " << o << " (largest " << largest << ")";
    EXPECT_GT(largest, 0.0) << "output " << o;
  }
}

}  // namespace
}  // namespace mstep::cuda
