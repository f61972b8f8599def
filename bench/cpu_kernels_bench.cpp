// cpu_kernels_bench: the cpu backend's kernels against a peer measured in
// the same process on the same threads (Google Benchmark; bench/peers.sh
// runs it with OMP_NUM_THREADS, which sets the thread count of mstep's
// kernels, of oneDNN's OpenMP runtime and of the STREAM loop). Each mstep
// case runs one mstep step on cpu tensors (trace, cache hit, execute), so a
// figure includes the fixed per-step cost.
//   - elementwise: relu(a*b+c)*d over 16M f32 (one JIT fusion) against a
//     STREAM triad a = b + s*c over arrays of the same size. GB/s counts the
//     bytes each really moves: its reads, its write, and the write-allocate
//     read of the destination line (both store with ordinary stores): 6
//     arrays for the chain, 4 for the triad.
//   - matmul 1024^3 f32 against oneDNN's matmul primitive called directly.
//   - sdpa forward + backward (batch 4, 4 heads, S=1024, head dim 64,
//     causal; mstep's flash kernel), also as a fraction of the oneDNN
//     matmul's GFLOP/s: the machine's measured matmul throughput. The
//     attention's FLOPs are the useful ones of causal attention, 6*S*S*D per
//     batch-head (forward 2, backward 4), not counting recomputation.
// After the Google Benchmark table it prints one line per figure:
//   RESULT metric=<m> impl=<i> value=<v> threads=<n>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "mstep/mstep.h"

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
  // 4 reads + 1 write + the write-allocate read of the output.
  state.SetBytesProcessed(state.iterations() * kElems * 6 * sizeof(float));
}
BENCHMARK(BM_ElementwiseChain)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamTriad(benchmark::State& state) {
  std::vector<float> a(kElems), b(kElems, 1.f), c(kElems, 2.f);
  const float scalar = 3.f;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kElems; ++i) a[i] = b[i] + scalar * c[i];
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  // 2 reads + 1 write + the write-allocate read of a.
  state.SetBytesProcessed(state.iterations() * kElems * 4 * sizeof(float));
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- matmul --------------------------------------------------------------
constexpr int64_t kN = 1024;
constexpr double kMatmulFlops = 2.0 * kN * kN * kN;

void BM_Matmul(benchmark::State& state) {
  Tensor a = randn_cpu({kN, kN}, 1), b = randn_cpu({kN, kN}, 2);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    mark_step();
    benchmark::DoNotOptimize(c);
  }
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
}
BENCHMARK(BM_OneDnnMatmul)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- attention -----------------------------------------------------------
constexpr int64_t kBatch = 4, kHeads = 4, kSeq = 1024, kHeadDim = 64;
constexpr double kSdpaFlops = 6.0 * kSeq * kSeq * kHeadDim * kBatch * kHeads;

/// One forward + backward of causal attention through the `sdpa` op.
void BM_Sdpa(benchmark::State& state) {
  const Shape shape{kBatch, kHeads, kSeq, kHeadDim};
  Tensor q = randn_cpu(shape, 1).requires_grad_();
  Tensor k = randn_cpu(shape, 2).requires_grad_();
  Tensor v = randn_cpu(shape, 3).requires_grad_();
  for (auto _ : state) {
    sum(scaled_dot_product_attention(q, k, v, {.is_causal = true})).backward();
    Tensor dq = q.grad();
    mark_step();
    benchmark::DoNotOptimize(dq);
    q.set_grad({}), k.set_grad({}), v.set_grad({});
  }
}
BENCHMARK(BM_Sdpa)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Keeps each run's real time per iteration (ms) and GB/s for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string name = r.run_name.function_name;
      ms_[name] = r.GetAdjustedRealTime();
      auto bytes = r.counters.find("bytes_per_second");
      if (bytes != r.counters.end()) gbps_[name] = bytes->second.value * 1e-9;
    }
  }
  void summary() {
    std::printf("\n");  // the console reporter leaves a color reset on the line
    const int threads = omp_get_max_threads();
    auto line = [&](const char* metric, const char* impl, double value) {
      std::printf("RESULT metric=%s impl=%s value=%.4g threads=%d\n", metric, impl, value, threads);
    };
    auto gflops = [&](const char* name, double flops) { return flops / (ms_[name] * 1e6); };
    line("elementwise_gbps", "mstep", gbps_["BM_ElementwiseChain"]);
    line("elementwise_gbps", "stream-triad", gbps_["BM_StreamTriad"]);
    const std::string onednn = "onednn-" + onednn_version();
    line("matmul_ms", "mstep", ms_["BM_Matmul"]);
    line("matmul_ms", onednn.c_str(), ms_["BM_OneDnnMatmul"]);
    line("sdpa_fwd_bwd_ms", "mstep", ms_["BM_Sdpa"]);
    line("sdpa_gflops_vs_matmul", "mstep", gflops("BM_Sdpa", kSdpaFlops));
    line("sdpa_gflops_vs_matmul", (onednn + "-matmul").c_str(),
         gflops("BM_OneDnnMatmul", kMatmulFlops));
  }

 private:
  static std::string onednn_version() {
    const dnnl_version_t* v = dnnl_version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }
  std::map<std::string, double> ms_, gbps_;
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
