// trace_bench: cost of a chain of 1,000 elementwise ops on an 8-element
// tensor, mstep on a graph-cache hit against libtorch C++ eager, in the
// same process on the same threads.
//
// Host cost against host cost: both figures are end to end, the same work
// on each side. mstep traces the chain, cuts, hashes and looks it up (a
// hit), runs the compiled executable and reads the result; libtorch
// dispatches and runs the 1,000 ops and reads the result. The kernels on 8
// elements take a few ns each, so both figures are almost all host cost.
// mstep's share outside its executable (trace + hash + lookup + binding,
// the runtime's own measurement of execution subtracted) is printed as a
// separate figure without a peer: libtorch's eager dispatch cannot be
// separated from its kernels.
//
// Prints `RESULT metric=<m> impl=<i> value=<ns per op> threads=<n>` lines.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "bench/peers/TorchPeer.h"
#include "mstep/mstep.h"
#include "bench/CapturingReporter.h"

namespace {

constexpr int64_t kOps = 1000;

mstep::Tensor trace_chain(const mstep::Tensor& a, const mstep::Tensor& b) {
  mstep::Tensor y = mstep::ones({8});
  for (int64_t i = 0; i < kOps; i += 4) {
    y = y * a;
    y = y + b;
    y = mstep::tanh(y);
    y = y - b;
  }
  return y;
}

void BM_MstepTraceHit(benchmark::State& state) {
  mstep::Tensor a = mstep::full({8}, 0.999);
  mstep::Tensor b = mstep::full({8}, 0.001);
  mstep::mark_step();
  { mstep::Tensor warm = trace_chain(a, b); mstep::mark_step(); }  // compile once
  const double exec0 = mstep::metrics().execute_seconds;
  const int64_t hits0 = mstep::metrics().cache_hits;
  for (auto _ : state) {
    mstep::Tensor y = trace_chain(a, b);
    mstep::mark_step();
    benchmark::DoNotOptimize(y.to_vector<float>()[0]);  // reads the result, as libtorch's side does
  }
  // For the host-only figure: the runtime's own measurement of execution.
  const double excluded = mstep::metrics().execute_seconds - exec0;
  if (mstep::metrics().cache_hits - hits0 != static_cast<int64_t>(state.iterations()))
    state.SkipWithError("expected a cache hit on every iteration");
  state.counters["excluded_exec_s"] = excluded;
  state.counters["ops"] = kOps;
}
BENCHMARK(BM_MstepTraceHit)->Unit(benchmark::kMicrosecond)->MinTime(1.0);

void BM_LibtorchEager(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(mstep::bench::torch_elementwise_chain(kOps));
  state.counters["ops"] = kOps;
}
BENCHMARK(BM_LibtorchEager)->Unit(benchmark::kMicrosecond)->MinTime(1.0);

}  // namespace

using mstep::bench::CapturingReporter;

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto per_op_ns = [](const benchmark::BenchmarkReporter::Run& r, double excluded_s) {
    const double total_s = r.real_accumulated_time - excluded_s;
    return total_s * 1e9 / (static_cast<double>(r.iterations) * kOps);
  };
  auto m = reporter.captured.find("BM_MstepTraceHit");
  auto t = reporter.captured.find("BM_LibtorchEager");
  if (m == reporter.captured.end() || t == reporter.captured.end()) return 1;
  const std::string torch_impl = std::string("libtorch-") + mstep::bench::torch_version() + "-eager";
  const int threads = mstep::bench::torch_threads();
  std::printf("\n");  // the console reporter leaves a color reset on the line
  std::printf("RESULT metric=trace_ns_per_op impl=mstep value=%.1f threads=%d\n",
              per_op_ns(m->second, 0), threads);
  std::printf("RESULT metric=trace_ns_per_op impl=%s value=%.1f threads=%d\n", torch_impl.c_str(),
              per_op_ns(t->second, 0), threads);
  std::printf("RESULT metric=trace_host_ns_per_op impl=mstep value=%.1f threads=%d\n",
              per_op_ns(m->second, m->second.counters.at("excluded_exec_s")), threads);
  return 0;
}
