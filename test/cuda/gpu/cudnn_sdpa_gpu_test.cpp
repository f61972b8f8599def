// cuDNN SDPA on a real GPU (in cuda_driver_gpu_test's binary, label gpu):
// forward and backward of bf16 attention, B=2, H=4, S=128, D=64, plain,
// causal, right padding (valid_seq_len) and an additive mask, against a
// host reference in double from the same bf16 inputs; then the time of a
// larger forward and backward (printed, not asserted).
//
// Tolerances follow cuDNN's roundings: the scores and the softmax are
// fp32, the probabilities P (forward, before P V) and dS (backward, before
// dS K and dS^T Q) are rounded to bf16 (2^-8 relative) and the results are
// bf16 (2^-8 of their magnitude): an element is within 2^-6 * A + 2^-7 *
// |expected| + 1e-3, where A is the sum of the absolute products the
// element is made of (a bound of the accumulated rounding); the stats
// (fp32) within 1e-3 * (1 + |expected|).
//
// cuDNN is found as load_cudnn() finds it (the GPU machine's toolkit, or
// PyTorch's nvidia-cudnn wheel through python3); where is printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaEvent.h"
#include "lib/backends/cuda/CudnnSdpa.h"
#include "mstep/core/HalfTypes.h"
#include "test/cuda/gpu/GpuBackendTest.h"

namespace mstep::cuda {
namespace {

/// The host reference of one config, in double, from bf16-exact inputs.
struct Reference {
  std::vector<double> out, out_scale, stats; // [B, H, L, Dv], [B, H, L]
  std::vector<double> dq, dq_scale, dk, dk_scale, dv, dv_scale;
  std::vector<bool> valid_row; // [B, H, L]: not a padding row
  std::vector<bool> valid_key; // [B, H, S]: not a padding key
};

class CudnnSdpaGpuTest : public testing::GpuBackendTest {
protected:
  void SetUp() override {
    GpuBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The GPU machine has cuDNN (toolkit or PyTorch): not finding it fails.
    auto api = load_cudnn();
    ASSERT_TRUE(api.ok()) << api.status();
    static bool printed = false;
    if (!printed)
      std::printf("cuDNN %zu found at %s (%s)\n", (*api)->version, (*api)->path.c_str(),
                  (*api)->source.c_str());
    printed = true;
    ASSERT_TRUE(backend_->context().make_current().ok());
    auto handle = CudnnHandle::create(*api, backend_->context().stream());
    ASSERT_TRUE(handle.ok()) << handle.status();
    handle_ = std::move(*handle);
    static bool described = false;
    if (!described) {
      // The device as cuDNN describes it, to compare with (or replace)
      // test/cuda/data/h100_cudnn_device_properties.json, which the
      // deviceless test compiles for.
      auto properties = CudnnDeviceProperties::from_handle(*handle_);
      auto json = properties.ok() ? properties->to_json()
                                  : absl::StatusOr<std::string>(properties.status());
      std::printf("cuDNN device properties: %s\n",
                  json.ok() ? json->c_str() : json.status().ToString().c_str());
    }
    described = true;
  }
  void TearDown() override {
    handle_.reset();
    backend_.reset();
  }

  static std::vector<float> values(size_t n, int salt) { // bf16-exact, in [-1, 1]
    std::vector<float> v(n);
    uint32_t x = 2654435761u * (salt + 1);
    for (float& f : v) {
      x = x * 1664525u + 1013904223u;
      f = static_cast<float>(
          BFloat16(static_cast<float>(static_cast<int32_t>((x >> 8) % 8192) - 4096) / 4096.0f));
    }
    return v;
  }
  BufferPtr upload_bf16(const std::vector<float>& v) {
    TensorType type{Shape{static_cast<int64_t>(v.size())}, DType::bf16};
    BufferPtr b = *backend_->allocate(type);
    std::vector<BFloat16> bits(v.begin(), v.end());
    EXPECT_TRUE(backend_->copy_in(*b, bits.data(), type.bytes()).ok());
    return b;
  }
  BufferPtr upload_i32(const std::vector<int32_t>& v) {
    TensorType type{Shape{static_cast<int64_t>(v.size())}, DType::i32};
    BufferPtr b = *backend_->allocate(type);
    EXPECT_TRUE(backend_->copy_in(*b, v.data(), type.bytes()).ok());
    return b;
  }
  BufferPtr zeros(int64_t n, DType dtype) {
    return *backend_->allocate(TensorType{Shape{std::max<int64_t>(n, 1)}, dtype});
  }
  std::vector<float> download(const BufferPtr& b) {
    size_t n = b->type().numel();
    std::vector<float> out(n);
    if (b->type().dtype == DType::f32) {
      EXPECT_TRUE(backend_->copy_out(*b, out.data(), n * 4).ok());
    } else {
      std::vector<BFloat16> bits(n);
      EXPECT_TRUE(backend_->copy_out(*b, bits.data(), n * 2).ok());
      for (size_t i = 0; i < n; ++i) out[i] = bits[i];
    }
    return out;
  }
  absl::Status queue(const std::string& what, const std::function<absl::Status()>& f,
                     std::vector<const Buffer*> reads, std::vector<const Buffer*> writes) {
    return backend_->enqueue(what, f, reads, writes);
  }

  static Reference reference(const CudnnSdpaConfig& c, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& mask, const std::vector<int32_t>& lens,
                             const std::vector<float>& d_o) {
    const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, D = c.head_dim, Dv = c.dv();
    Reference r;
    r.out.assign(B * H * L * Dv, 0);
    r.out_scale.assign(B * H * L * Dv, 0);
    r.stats.assign(B * H * L, 0);
    r.dq.assign(B * H * L * D, 0);
    r.dq_scale.assign(B * H * L * D, 0);
    r.dk.assign(B * H * S * D, 0);
    r.dk_scale.assign(B * H * S * D, 0);
    r.dv.assign(B * H * S * Dv, 0);
    r.dv_scale.assign(B * H * S * Dv, 0);
    r.valid_row.assign(B * H * L, true);
    r.valid_key.assign(B * H * S, true);
    std::vector<double> p(L * S), ds(L * S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t bh = b * H + h;
        const int64_t rows = lens.empty() ? L : std::clamp<int64_t>(lens[b], 0, L);
        const int64_t keys = lens.empty() ? S : std::clamp<int64_t>(lens[b], 0, S);
        const float* Q = &q[bh * L * D];
        const float* K = &k[bh * S * D];
        const float* V = &v[bh * S * Dv];
        const float* dO = d_o.empty() ? nullptr : &d_o[bh * L * Dv];
        for (int64_t j = 0; j < S; ++j) r.valid_key[bh * S + j] = j < keys;
        for (int64_t i = 0; i < L; ++i) {
          r.valid_row[bh * L + i] = i < rows;
          if (i >= rows) continue;
          double max = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < S; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += double(Q[i * D + d]) * K[j * D + d];
            s *= c.scale;
            if (!mask.empty())
              s += mask[((c.mask_per_batch ? b : 0) * (c.mask_per_head ? H : 1) +
                         (c.mask_per_head ? h : 0)) *
                            L * S +
                        i * S + j];
            const bool keep = j < keys && (!c.causal || j <= i);
            p[i * S + j] = keep ? s : -std::numeric_limits<double>::infinity();
            max = std::max(max, p[i * S + j]);
          }
          double sum = 0;
          for (int64_t j = 0; j < S; ++j) sum += (p[i * S + j] = std::exp(p[i * S + j] - max));
          for (int64_t j = 0; j < S; ++j) p[i * S + j] /= sum;
          r.stats[bh * L + i] = max + std::log(sum);
          for (int64_t e = 0; e < Dv; ++e) {
            double o = 0, a = 0;
            for (int64_t j = 0; j < S; ++j) {
              o += p[i * S + j] * V[j * Dv + e];
              a += std::fabs(p[i * S + j] * V[j * Dv + e]);
            }
            r.out[(bh * L + i) * Dv + e] = o;
            r.out_scale[(bh * L + i) * Dv + e] = a;
          }
        }
        if (dO == nullptr) continue;
        // dS = P * (dO V^T - rowsum(dO * O)) * scale; padding rows have none.
        for (int64_t i = 0; i < L; ++i) {
          double dot = 0;
          for (int64_t e = 0; e < Dv; ++e)
            dot += double(dO[i * Dv + e]) * r.out[(bh * L + i) * Dv + e];
          for (int64_t j = 0; j < S; ++j) {
            if (i >= rows) {
              ds[i * S + j] = 0;
              continue;
            }
            double dp = 0;
            for (int64_t e = 0; e < Dv; ++e) dp += double(dO[i * Dv + e]) * V[j * Dv + e];
            ds[i * S + j] = p[i * S + j] * (dp - dot) * c.scale;
          }
        }
        for (int64_t j = 0; j < S; ++j) {
          for (int64_t e = 0; e < Dv; ++e)
            for (int64_t i = 0; i < rows; ++i) {
              r.dv[(bh * S + j) * Dv + e] += p[i * S + j] * dO[i * Dv + e];
              r.dv_scale[(bh * S + j) * Dv + e] += std::fabs(p[i * S + j] * dO[i * Dv + e]);
            }
          for (int64_t d = 0; d < D; ++d)
            for (int64_t i = 0; i < rows; ++i) {
              r.dk[(bh * S + j) * D + d] += ds[i * S + j] * Q[i * D + d];
              r.dk_scale[(bh * S + j) * D + d] += std::fabs(ds[i * S + j] * Q[i * D + d]);
            }
        }
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t d = 0; d < D; ++d)
            for (int64_t j = 0; j < S; ++j) {
              r.dq[(bh * L + i) * D + d] += ds[i * S + j] * K[j * D + d];
              r.dq_scale[(bh * L + i) * D + d] += std::fabs(ds[i * S + j] * K[j * D + d]);
            }
      }
    return r;
  }

  /// Every element of a valid row within the tolerance (see the top).
  /// Element i is in row i / width; rows where `valid` is false (padding
  /// rows or keys) are not compared: what cuDNN leaves there (the buffers
  /// start as NaN) is printed, for the caller's contract.
  static void expect_close(const char* name, const std::vector<float>& got,
                           const std::vector<double>& want, const std::vector<double>& scale,
                           int64_t width, const std::vector<bool>& valid) {
    int wrong = 0;
    double worst = 0, padded_max = 0;
    int64_t padded = 0, padded_nan = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!valid[i / width]) {
        ++padded;
        if (std::isnan(got[i]))
          ++padded_nan;
        else
          padded_max = std::max(padded_max, std::fabs(double(got[i])));
        continue;
      }
      const double tol = std::ldexp(scale[i], -6) + std::ldexp(std::fabs(want[i]), -7) + 1e-3;
      const double err = std::fabs(got[i] - want[i]);
      worst = std::max(worst, err / tol);
      if (!(err <= tol) && ++wrong <= 5)
        ADD_FAILURE() << name << "[" << i << "] = " << got[i] << ", expected " << want[i]
                      << " within " << tol;
    }
    EXPECT_EQ(wrong, 0) << name;
    std::printf("    %s: max error / tolerance %.3f", name, worst);
    if (padded > 0)
      std::printf(" (padding: %ld elements, %ld left unwritten, max |written| %g; not compared)",
                  static_cast<long>(padded), static_cast<long>(padded_nan), padded_max);
    std::printf("\n");
  }

  void check(const CudnnSdpaConfig& c) {
    SCOPED_TRACE(c.to_string());
    std::printf("  %s\n", c.to_string().c_str());
    const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, D = c.head_dim, Dv = c.dv();
    auto fwd = CudnnSdpa::create(*handle_, c, CudnnSdpa::Direction::forward);
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    auto bwd = CudnnSdpa::create(*handle_, c, CudnnSdpa::Direction::backward);
    ASSERT_TRUE(bwd.ok()) << bwd.status();
    std::printf("    engines: forward %ld (workspace %zu B), backward %ld (workspace %zu B)\n",
                static_cast<long>((*fwd)->plan().engine_index()), (*fwd)->workspace_size(),
                static_cast<long>((*bwd)->plan().engine_index()), (*bwd)->workspace_size());
    const std::vector<float> q = values(B * H * L * D, 1), k = values(B * H * S * D, 2),
                             v = values(B * H * S * Dv, 3), d_o = values(B * H * L * Dv, 4);
    std::vector<float> mask;
    if (c.mask == SdpaMaskKind::additive)
      mask = values((c.mask_per_batch ? B : 1) * (c.mask_per_head ? H : 1) * L * S, 5);
    std::vector<int32_t> lens;
    if (c.padding == SdpaPadding::right)
      for (int64_t b = 0; b < B; ++b) lens.push_back(static_cast<int32_t>(L - 27 * (b + 1) % L));
    BufferPtr dq_ = upload_bf16(q), dk_ = upload_bf16(k), dv_ = upload_bf16(v),
              ddo = upload_bf16(d_o);
    BufferPtr dmask = mask.empty() ? nullptr : upload_bf16(mask);
    BufferPtr dlens = lens.empty() ? nullptr : upload_i32(lens);
    // Results start as NaN, so an element cuDNN does not write shows.
    auto nans = [&](int64_t n) { return upload_bf16(std::vector<float>(n, std::nanf(""))); };
    BufferPtr out = nans(B * H * L * Dv), gq = nans(B * H * L * D), gk = nans(B * H * S * D),
              gv = nans(B * H * S * Dv);
    BufferPtr stats = zeros(B * H * L, DType::f32);
    BufferPtr ws = zeros(
        static_cast<int64_t>(std::max((*fwd)->workspace_size(), (*bwd)->workspace_size()) / 4 + 1),
        DType::f32);
    auto P = [](const BufferPtr& b) {
      return b ? CudaBackend::device_pointer(*b) : CUdeviceptr{0};
    };
    std::vector<const Buffer*> inputs = {dq_.get(), dk_.get(), dv_.get()};
    if (dmask) inputs.push_back(dmask.get());
    if (dlens) inputs.push_back(dlens.get());
    absl::Status ran = queue(
        "cudnn sdpa forward",
        [&] {
          return (*fwd)->forward(
              *handle_, {P(dq_), P(dk_), P(dv_), P(out), P(stats), P(dmask), P(dlens)}, P(ws));
        },
        inputs, {out.get(), stats.get(), ws.get()});
    ASSERT_TRUE(ran.ok()) << ran;
    inputs.push_back(out.get());
    inputs.push_back(stats.get());
    inputs.push_back(ddo.get());
    ran = queue("cudnn sdpa backward",
                [&] {
                  return (*bwd)->backward(*handle_,
                                          {P(dq_), P(dk_), P(dv_), P(out), P(stats), P(ddo), P(gq),
                                           P(gk), P(gv), P(dmask), P(dlens)},
                                          P(ws));
                },
                inputs, {gq.get(), gk.get(), gv.get(), ws.get()});
    ASSERT_TRUE(ran.ok()) << ran;
    ASSERT_TRUE(backend_->synchronize().ok());

    Reference r = reference(c, q, k, v, mask, lens, d_o);
    expect_close("out", download(out), r.out, r.out_scale, Dv, r.valid_row);
    std::vector<float> got_stats = download(stats);
    for (size_t i = 0; i < got_stats.size(); ++i)
      if (r.valid_row[i])
        EXPECT_NEAR(got_stats[i], r.stats[i], 1e-3 * (1 + std::fabs(r.stats[i])))
            << "stats[" << i << "]";
    expect_close("grad_q", download(gq), r.dq, r.dq_scale, D, r.valid_row);
    expect_close("grad_k", download(gk), r.dk, r.dk_scale, D, r.valid_key);
    expect_close("grad_v", download(gv), r.dv, r.dv_scale, Dv, r.valid_key);
  }

  std::unique_ptr<CudnnHandle> handle_;
};

CudnnSdpaConfig small() {
  CudnnSdpaConfig c;
  c.batch = 2;
  c.heads = 4;
  c.seq_q = c.seq_kv = 128;
  c.head_dim = 64;
  c.scale = 0.125;
  return c;
}

TEST_F(CudnnSdpaGpuTest, ForwardAndBackwardMatchTheHost) {
  check(small());
  CudnnSdpaConfig c = small();
  c.causal = true;
  check(c);
}

TEST_F(CudnnSdpaGpuTest, RightPaddingAndAnAdditiveMaskMatchTheHost) {
  CudnnSdpaConfig c = small();
  c.padding = SdpaPadding::right;
  c.causal = true;
  check(c);
  c = small();
  c.mask = SdpaMaskKind::additive;
  c.mask_per_batch = false;
  check(c);
}

TEST_F(CudnnSdpaGpuTest, AMissingPointerOrTheWrongDirectionIsAnError) {
  auto fwd = CudnnSdpa::create(*handle_, small(), CudnnSdpa::Direction::forward);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  absl::Status s = (*fwd)->forward(*handle_, {}, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("cudnn sdpa forward [2, 4, 128, 64]"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("no device pointer for q"));
  s = (*fwd)->backward(*handle_, {}, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("backward() on a forward plan"));
}

TEST_F(CudnnSdpaGpuTest, PrintsForwardAndBackwardTimes) {
  CudnnSdpaConfig c;
  c.batch = 4;
  c.heads = 16;
  c.seq_q = c.seq_kv = 1024;
  c.head_dim = 64;
  c.scale = 0.125;
  c.causal = true;
  auto fwd = CudnnSdpa::create(*handle_, c, CudnnSdpa::Direction::forward);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  auto bwd = CudnnSdpa::create(*handle_, c, CudnnSdpa::Direction::backward);
  ASSERT_TRUE(bwd.ok()) << bwd.status();
  const int64_t n = c.batch * c.heads * c.seq_q * c.head_dim;
  BufferPtr q = upload_bf16(values(n, 1)), k = upload_bf16(values(n, 2)),
            v = upload_bf16(values(n, 3)), d_o = upload_bf16(values(n, 4));
  BufferPtr o = zeros(n, DType::bf16), gq = zeros(n, DType::bf16), gk = zeros(n, DType::bf16),
            gv = zeros(n, DType::bf16), stats = zeros(c.batch * c.heads * c.seq_q, DType::f32);
  BufferPtr ws = zeros(
      static_cast<int64_t>(std::max((*fwd)->workspace_size(), (*bwd)->workspace_size()) / 4 + 1),
      DType::f32);
  auto P = [](const BufferPtr& b) { return CudaBackend::device_pointer(*b); };
  auto time = [&](const std::function<absl::Status()>& run) {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(run().ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    auto start = CudaEvent::create(backend_->context(), true);
    auto stop = CudaEvent::create(backend_->context(), true);
    EXPECT_TRUE(start.ok() && stop.ok());
    constexpr int kRuns = 20;
    EXPECT_TRUE(start->record().ok());
    for (int i = 0; i < kRuns; ++i) EXPECT_TRUE(run().ok());
    EXPECT_TRUE(stop->record().ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    return *CudaEvent::elapsed_ms(*start, *stop) / kRuns;
  };
  const double f = time([&] {
    return (*fwd)->forward(*handle_, {P(q), P(k), P(v), P(o), P(stats)}, P(ws));
  });
  const double b = time([&] {
    return (*bwd)->backward(*handle_,
                            {P(q), P(k), P(v), P(o), P(stats), P(d_o), P(gq), P(gk), P(gv)}, P(ws));
  });
  // Causal: half the 4 * B * H * L * S * D forward flops (2 matmuls), 2.5x for the backward.
  const double flops = 4.0 * c.batch * c.heads * c.seq_q * c.seq_kv * c.head_dim / 2;
  std::printf(
      "cuDNN SDPA %s on %s: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f TFLOP/s)\n",
      c.to_string().c_str(), backend_->context().device().name.c_str(), f, flops / f / 1e9, b,
      2.5 * flops / b / 1e9);
}

} // namespace
} // namespace mstep::cuda
