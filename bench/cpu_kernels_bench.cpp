// cpu_kernels_bench: the cpu backend's kernels against a peer measured in
// the same run (Google Benchmark). Each case runs one mstep step on cpu
// tensors (trace, cache hit, execute), so a figure includes the fixed
// per-step cost.
//   - elementwise: relu(a*b+c)*d over 16M f32 (one JIT fusion) against a
//     STREAM-style copy of the same arrays on the same threads (OpenMP);
//     GB/s counts every byte read and written.
//   - matmul 512^3 f32 against oneDNN called directly (same primitive).
//   - sdpa forward+backward, S=1024: fused (mstep.sdpa, flash kernel)
//     against the unfused graph (MSTEP_FUSE=0: matmul, softmax, matmul).
//   - sdpa with 50% right padding: valid_seq_len against computing the
//     padded keys with a boolean mask.
// After the Google Benchmark table it prints one line per benchmark:
//   elementwise_gbps <x> stream_copy_gbps <y> ratio <x/y>
//   matmul_gflops <x> onednn_gflops <y> ratio <x/y>
//   sdpa_fwd_bwd_ms <fused> <unfused> speedup <u/f>
//   sdpa_padded_ms <valid_seq_len> <masked> speedup <m/v>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace {

using namespace mstep;

constexpr Device kCpu{DeviceType::cpu, 0};

Tensor randn_cpu(Shape s, int seed) {
  std::vector<float> v(s.numel());
  uint32_t x = 2463534242u + seed;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    f = static_cast<float>(x % 2000) / 1000.f - 1.f;
  }
  return from_vector(v, s, DType::f32, kCpu);
}

// --- elementwise ---------------------------------------------------------
constexpr int64_t kElems = 16 << 20;

void BM_ElementwiseChain(benchmark::State& state) {
  Tensor a = randn_cpu({kElems}, 1), b = randn_cpu({kElems}, 2), c = randn_cpu({kElems}, 3),
         d = randn_cpu({kElems}, 4);
  for (auto _ : state) {
    Tensor out = relu(a * b + c) * d;
    mark_step();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * kElems * 5 * sizeof(float));
}
BENCHMARK(BM_ElementwiseChain)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamCopy(benchmark::State& state) {
  std::vector<float> src(kElems, 1.f), dst(kElems);
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kElems; ++i) dst[i] = src[i];
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * 2 * sizeof(float));
}
BENCHMARK(BM_StreamCopy)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- matmul --------------------------------------------------------------
constexpr int64_t kN = 512;

void BM_Matmul(benchmark::State& state) {
  Tensor a = randn_cpu({kN, kN}, 1), b = randn_cpu({kN, kN}, 2);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    mark_step();
    benchmark::DoNotOptimize(c);
  }
  state.counters["GFLOPs"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2 * kN * kN * kN * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Matmul)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OneDnnMatmul(benchmark::State& state) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::desc md({kN, kN}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN);
  dnnl::memory ma(md, eng, a.data()), mb(md, eng, b.data()), mc(md, eng, c.data());
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    strm.wait();
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2 * kN * kN * kN * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_OneDnnMatmul)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- attention -----------------------------------------------------------
// GPT-mini's head shape at the long sequence: batch 1, 4 heads,
// S=1024, head dim 64.
constexpr int64_t kHeads = 4, kSeq = 1024, kHeadDim = 64;

/// One forward+backward of causal attention: fused, the `sdpa` op (the
/// flash kernel); unfused, attention written out (matmul, scale, additive
/// causal mask, softmax, matmul) and compiled with MSTEP_FUSE=0 so
/// fuse-attention does not turn it back into `sdpa`.
void sdpa_step(benchmark::State& state, bool fused) {
  Tracer::get().mutable_options().fuse = fused;
  Tensor q = randn_cpu({1, kHeads, kSeq, kHeadDim}, 1).requires_grad_();
  Tensor k = randn_cpu({1, kHeads, kSeq, kHeadDim}, 2).requires_grad_();
  Tensor v = randn_cpu({1, kHeads, kSeq, kHeadDim}, 3).requires_grad_();
  std::vector<float> causal(kSeq * kSeq, 0.f);
  for (int64_t i = 0; i < kSeq; ++i)
    for (int64_t j = i + 1; j < kSeq; ++j) causal[i * kSeq + j] = -1e30f;
  Tensor mask = from_vector(causal, {kSeq, kSeq}, DType::f32, kCpu);
  for (auto _ : state) {
    Tensor out;
    if (fused) {
      out = scaled_dot_product_attention(q, k, v, {.is_causal = true});
    } else {
      Tensor scores = matmul(q, transpose(k, 2, 3)) * (1.0 / 8.0) + mask;
      out = matmul(softmax(scores, 3), v);
    }
    sum(out).backward();
    Tensor dq = q.grad();
    mark_step();
    benchmark::DoNotOptimize(dq);
    q.set_grad({}), k.set_grad({}), v.set_grad({});
  }
  Tracer::get().mutable_options().fuse = true;
}
void BM_SdpaFused(benchmark::State& state) { sdpa_step(state, true); }
void BM_SdpaUnfused(benchmark::State& state) { sdpa_step(state, false); }
BENCHMARK(BM_SdpaFused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SdpaUnfused)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Batch 4, half of each row padded on the right.
constexpr int64_t kPadBatch = 4;

void sdpa_padded(benchmark::State& state, bool with_valid_len) {
  Tensor q = randn_cpu({kPadBatch, kHeads, kSeq, kHeadDim}, 1);
  Tensor k = randn_cpu({kPadBatch, kHeads, kSeq, kHeadDim}, 2);
  Tensor v = randn_cpu({kPadBatch, kHeads, kSeq, kHeadDim}, 3);
  SdpaOptions options;
  if (with_valid_len) {
    options.valid_seq_len =
        from_vector(std::vector<int64_t>(kPadBatch, kSeq / 2), {kPadBatch}, std::nullopt, kCpu);
  } else {
    std::vector<uint8_t> keep(kSeq * kSeq);
    for (int64_t i = 0; i < kSeq; ++i)
      for (int64_t j = 0; j < kSeq; ++j) keep[i * kSeq + j] = j < kSeq / 2;
    std::vector<float> keepf(keep.begin(), keep.end());
    options.attn_mask = from_vector(keepf, {kSeq, kSeq}, DType::boolean, kCpu);
  }
  for (auto _ : state) {
    Tensor out = scaled_dot_product_attention(q, k, v, options);
    mark_step();
    benchmark::DoNotOptimize(out);
  }
}
void BM_SdpaValidLen(benchmark::State& state) { sdpa_padded(state, true); }
void BM_SdpaMaskedPadding(benchmark::State& state) { sdpa_padded(state, false); }
BENCHMARK(BM_SdpaValidLen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SdpaMaskedPadding)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Keeps each run's real time per iteration (ms) and counters for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string name = r.benchmark_name();
      ms_[name] = r.GetAdjustedRealTime();
      auto bytes = r.counters.find("bytes_per_second");
      if (bytes != r.counters.end()) gbps_[name] = bytes->second.value * 1e-9;
      auto gf = r.counters.find("GFLOPs");
      if (gf != r.counters.end()) gflops_[name] = gf->second.value;
    }
  }
  void summary() {
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::printf("\n");  // the console reporter leaves a color reset on the line
    double e = gbps_["BM_ElementwiseChain/real_time"], s = gbps_["BM_StreamCopy/real_time"];
    std::printf("elementwise_gbps %.1f stream_copy_gbps %.1f ratio %.2f\n", e, s, ratio(e, s));
    double m = gflops_["BM_Matmul/real_time"], o = gflops_["BM_OneDnnMatmul/real_time"];
    std::printf("matmul_gflops %.1f onednn_gflops %.1f ratio %.2f\n", m, o, ratio(m, o));
    double f = ms_["BM_SdpaFused/real_time"], u = ms_["BM_SdpaUnfused/real_time"];
    std::printf("sdpa_fwd_bwd_ms %.2f %.2f speedup %.2f\n", f, u, ratio(u, f));
    double vl = ms_["BM_SdpaValidLen/real_time"], mk = ms_["BM_SdpaMaskedPadding/real_time"];
    std::printf("sdpa_padded_ms %.2f %.2f speedup %.2f\n", vl, mk, ratio(mk, vl));
  }

 private:
  std::map<std::string, double> ms_, gbps_, gflops_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.summary();
  benchmark::Shutdown();
  return 0;
}
