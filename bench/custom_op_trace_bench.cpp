// custom_op_trace_bench: host time to trace a custom op against a built-in
// op with the same number of inputs (issue 18: at most 1.20x).
//
// Each iteration traces a chain of 1,000 calls on an 8-element f32 tensor,
// y = add(y, b) for the built-in op, y = custom("bench.add2", {y, b})[0]
// for a 2-input custom op (no attributes, same_type_as_input, a host
// kernel that adds) and y = add2({y, b}) through the same op's
// TypedCustomOp<1> (the recommended API: a call site), then cuts it with mark_step(), which hashes the graph
// and looks it up (a cache hit, as in bench/trace_bench), runs it, and
// reads the result. Execution is not what is compared: the 1,000 adds fuse
// into one kernel while the custom op is a fusion boundary (1,000 kernel
// calls), so the runtime's own measurement of execution is subtracted, as
// trace_bench's host figure does.
//
// Prints, per op kind,
// `RESULT metric=<m> impl=<builtin_add|custom_op|typed_custom_op>
// value=<ns per call>` for
//   trace_record_ns_per_op  recording the calls only (the call path: checks,
//                           shape rule, attributes, the node);
//   trace_host_ns_per_op    recording + cut + hash + lookup + binding
//                           (wall time minus execution);
// and `RESULT metric=<m>_ratio impl=<custom|typed>_vs_builtin value=<x>`.
//
//   custom_op_trace_bench [benchmark flags] [--device cpu|ref]
//
// The default device is cpu; under valgrind (callgrind) use --device ref:
// the cpu backend's JIT code may use instructions valgrind lacks.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "examples/models/DeviceFlag.h"
#include "mstep/mstep.h"
#include "bench/CapturingReporter.h"

namespace {

constexpr int64_t kOps = 1000;
constexpr const char* kCustomAdd = "bench.add2";

mstep::CustomOpDef custom_add_def() {
  auto add = [](const mstep::HostKernelCall& call) {
    const auto* a = static_cast<const float*>(call.inputs[0]);
    const auto* b = static_cast<const float*>(call.inputs[1]);
    auto* out = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.output_types[0].shape.numel(); ++i) out[i] = a[i] + b[i];
    return absl::OkStatus();
  };
  return {.name = kCustomAdd,
       .schema = {.inputs = {{"a", {mstep::DType::f32}}, {"b", {mstep::DType::f32}}}},
       .shape_rule = mstep::same_type_as_input(0),
          .kernels = {{"ref", mstep::host_kernel(add)}, {"cpu", mstep::host_kernel(add)}}};
}

/// The op as a call site (registers it): the recommended API.
const mstep::TypedCustomOp<1>& typed_add() {
  static const mstep::TypedCustomOp<1> op(custom_add_def());
  return op;
}

mstep::Tensor builtin_chain(mstep::Tensor y, const mstep::Tensor& b) {
  for (int64_t i = 0; i < kOps; ++i) y = y + b;
  return y;
}

mstep::Tensor custom_chain(mstep::Tensor y, const mstep::Tensor& b) {
  for (int64_t i = 0; i < kOps; ++i) y = mstep::custom(kCustomAdd, {y, b})[0];
  return y;
}

mstep::Tensor typed_chain(mstep::Tensor y, const mstep::Tensor& b) {
  const mstep::TypedCustomOp<1>& add = typed_add();
  for (int64_t i = 0; i < kOps; ++i) y = add({y, b});
  return y;
}

using Clock = std::chrono::steady_clock;

template <mstep::Tensor (*Chain)(mstep::Tensor, const mstep::Tensor&)>
void BM_Chain(benchmark::State& state) {
  mstep::Tensor a = mstep::full({8}, 0.5);
  mstep::Tensor b = mstep::full({8}, 0.001);
  mstep::mark_step();
  {
    mstep::Tensor warm = Chain(a, b);
    mstep::mark_step();
  } // compile once
  const double exec0 = mstep::metrics().execute_seconds;
  const int64_t hits0 = mstep::metrics().cache_hits;
  double record_s = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    mstep::Tensor y = Chain(a, b);
    record_s += std::chrono::duration<double>(Clock::now() - start).count();
    mstep::mark_step();
    benchmark::DoNotOptimize(y.to_vector<float>()[0]);
  }
  if (mstep::metrics().cache_hits - hits0 != static_cast<int64_t>(state.iterations()))
    state.SkipWithError("expected a cache hit on every iteration");
  state.counters["excluded_exec_s"] = mstep::metrics().execute_seconds - exec0;
  state.counters["record_s"] = record_s;
}
BENCHMARK_TEMPLATE(BM_Chain, builtin_chain)
    ->Name("BM_BuiltinAdd")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
BENCHMARK_TEMPLATE(BM_Chain, custom_chain)
    ->Name("BM_CustomOp")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
BENCHMARK_TEMPLATE(BM_Chain, typed_chain)
    ->Name("BM_TypedCustomOp")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);

} // namespace

using mstep::bench::CapturingReporter;

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  mstep::Device device{mstep::DeviceType::cpu, 0};
  for (int i = 1; i < argc; ++i) {
    const std::optional<mstep::Device> d = i + 1 < argc && std::string(argv[i]) == "--device"
                                               ? mstep::examples::parse_device(argv[++i])
                                               : std::nullopt;
    if (!d) {
      std::fprintf(stderr, "usage: custom_op_trace_bench [benchmark flags] [--device %s]\n",
                   mstep::examples::device_choices().c_str());
      return 2;
    }
    device = *d;
  }
  mstep::set_default_device(device);
  typed_add(); // registers the op
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto builtin = reporter.captured.find("BM_BuiltinAdd");
  auto custom = reporter.captured.find("BM_CustomOp");
  auto typed = reporter.captured.find("BM_TypedCustomOp");
  if (builtin == reporter.captured.end() || custom == reporter.captured.end() ||
      typed == reporter.captured.end())
    return 1;
  auto per_op_ns = [](const benchmark::BenchmarkReporter::Run& r, double seconds) {
    return seconds * 1e9 / (static_cast<double>(r.iterations) * kOps);
  };
  auto record_ns = [&](const benchmark::BenchmarkReporter::Run& r) {
    return per_op_ns(r, r.counters.at("record_s"));
  };
  auto host_ns = [&](const benchmark::BenchmarkReporter::Run& r) {
    return per_op_ns(r, r.real_accumulated_time - r.counters.at("excluded_exec_s"));
  };
  std::printf("\n"); // the console reporter leaves a color reset on the line
  const struct {
    const char* metric;
    double builtin, custom, typed;
  } figures[] = {{"trace_record_ns_per_op", record_ns(builtin->second), record_ns(custom->second),
                  record_ns(typed->second)},
                 {"trace_host_ns_per_op", host_ns(builtin->second), host_ns(custom->second),
                  host_ns(typed->second)}};
  for (const auto& f : figures) {
    std::printf("RESULT metric=%s impl=builtin_add value=%.1f\n", f.metric, f.builtin);
    std::printf("RESULT metric=%s impl=custom_op value=%.1f\n", f.metric, f.custom);
    std::printf("RESULT metric=%s impl=typed_custom_op value=%.1f\n", f.metric, f.typed);
    std::printf("RESULT metric=%s_ratio impl=custom_vs_builtin value=%.3f\n", f.metric,
                f.custom / f.builtin);
    std::printf("RESULT metric=%s_ratio impl=typed_vs_builtin value=%.3f\n", f.metric,
                f.typed / f.builtin);
  }
  return 0;
}
