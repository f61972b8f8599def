// Host numerics of the conformance suite on cuda (issue 21 §3): each case
// (all_cases_with_f16: the f16 twins too) that compiles for cuda
// (cuda_conformance_compile_test.cpp) has its plan run on this CPU
// (run_plan_on_host: every kernel's tiled loop nest, taken before the GPU
// mapping, and the cuBLASLt steps as host GEMMs) on the inputs ref ran the
// case with, and every output is compared with ref's: integers and bools
// exactly, floats within the conformance suite's tolerance (f32: 1e-4
// relative + 1e-5, bf16 and f16: 2e-2 each, times the case's scale for
// long accumulations), NaN only with NaN. Plans with cuDNN steps (bf16 and
// f16 attention) run them as HostSdpa.h does (mstep's semantics around the
// plan's strides, not cuDNN's arithmetic) and are counted apart. The kernels are
// compiled to PTX only: the host runs their loop nests, and the compile
// test assembles the same kernels for sm_80 and sm_90 (ptxas is most of a
// compile's time). The cases are split into shards (ConformanceSteps.h) so
// that ctest runs them in parallel. Each plan runs a second time with
// its parallel loops backwards and must give the same bytes (a kernel
// whose results depend on the order of its threads races on the GPU), and
// a third time with every value that is no input starting as 0xff bytes
// (NaN) instead of 0x7f, which must not change an output. A
// quarter of the
// f16 cases run again as on a CPU without F16C (f16 conversions as libgcc
// calls).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/compiler/Compiler.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/core/HalfTypes.h"
#include "test/cuda/ConformanceSteps.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

/// Element `i` of `bytes` (of `dtype`) as a double.
double element(const std::vector<char>& bytes, DType dtype, size_t i) {
  auto read = [&]<typename T>() {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  };
  switch (dtype) {
  case DType::f32: return read.operator()<float>();
  case DType::f64: return read.operator()<double>();
  case DType::bf16: return float(read.operator()<BFloat16>());
  case DType::f16: return float(read.operator()<Float16>());
  case DType::i64: return static_cast<double>(read.operator()<int64_t>());
  case DType::i32: return read.operator()<int32_t>();
  case DType::boolean: return read.operator()<uint8_t>() != 0;
  default: ADD_FAILURE() << "no reader for " << dtype_name(dtype); return 0;
  }
}

/// Whether `got` is ref's `want` within the conformance tolerance; the
/// first mismatch in `why`.
bool within_tolerance(const TensorType& type, const std::vector<char>& want, const char* got,
                      double scale, std::string& why) {
  const bool exact = !is_floating(type.dtype);
  const bool half = type.dtype == DType::bf16 || type.dtype == DType::f16;
  const double rtol = exact ? 0 : (half ? 2e-2 : 1e-4) * scale;
  const double atol = exact ? 0 : (half ? 2e-2 : 1e-5) * scale;
  const std::vector<char> bytes(got, got + type.bytes());
  for (int64_t i = 0; i < type.numel(); ++i) {
    const double w = element(want, type.dtype, i), g = element(bytes, type.dtype, i);
    const bool ok = std::isnan(w) || std::isnan(g) ? std::isnan(w) && std::isnan(g)
                    : std::isinf(w) || std::isinf(g) ? w == g
                                                     : std::fabs(w - g) <= atol + rtol * std::fabs(w);
    if (ok) continue;
    why = absl::StrCat(type.to_string(), " element ", i, ": ref ", w, ", cuda (host) ", g);
    return false;
  }
  return true;
}

/// What check_case found, summed over cases.
struct Counts {
  int checked = 0, with_cudnn = 0, not_compiled = 0;
};

/// The compile half's defaults without cubins (see the top).
CudaCompileOptions ptx_only_options() {
  CudaCompileOptions options = default_cuda_compile_options();
  options.archs.clear();
  return options;
}

/// Compiles `c`'s step (traced on ref) for cuda, runs its plan on the
/// host on ref's inputs and compares its outputs with ref's.
void check_case(const conformance::ConformanceCase& c, Counts& counts) {
  std::optional<testing::RefStep> step = testing::run_case_on_ref(c);
  if (!step) return;
  absl::Status status = with_optimized_module(
      *step->graph, "cuda", CompileOptions{}, RuntimeOptions{}, [&](mlir::ModuleOp module) {
        absl::StatusOr<CompiledCudaStep> compiled = compile_cuda_step(module, ptx_only_options());
        if (!compiled.ok()) {
          ++counts.not_compiled;  // listed in cuda_conformance_compile_test.cpp
          return absl::OkStatus();
        }
        const CudaPlan& plan = compiled->plan;
        for (const CudaLaunchStep& launch : plan.launches)
          if (launch.attention >= 0) {
            ++counts.with_cudnn;
            break;
          }
        EXPECT_EQ(plan.num_inputs, step->inputs.size()) << c.name;
        EXPECT_EQ(plan.outputs.size(), step->results.size()) << c.name;
        if (plan.num_inputs != step->inputs.size() || plan.outputs.size() != step->results.size())
          return absl::OkStatus();
        // Also backwards and from NaN bytes (a race or a read of unwritten
        // bytes otherwise).
        std::vector<std::vector<char>> values = testing::run_plan_on_host_checked(
            *module.getContext(), *compiled, testing::host_values(plan, step->inputs), c.name);
        for (size_t k = 0; k < plan.outputs.size(); ++k) {
          const int v = plan.outputs[k];
          std::string why;
          EXPECT_TRUE(within_tolerance(plan.values[v], step->results[k],
                                       testing::host_bytes(&plan, values, v), c.tol_scale, why))
              << c.name << ": output " << k << " differs from ref: " << why;
        }
        ++counts.checked;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << c.name << ": " << status;
}

class CudaConformanceHost : public ::testing::TestWithParam<int> {};

TEST_P(CudaConformanceHost, EveryCompiledCaseMatchesRefOnTheHost) {
  Counts counts;
  for (const conformance::ConformanceCase* c : testing::conformance_shard(GetParam()))
    check_case(*c, counts);
  std::printf("shard %d: %d cases match ref on the host (%d of them with cuDNN steps run as "
              "HostSdpa.h does), %d do "
              "not compile yet\n",
              GetParam(), counts.checked, counts.with_cudnn, counts.not_compiled);
  EXPECT_GT(counts.checked, 0);
}

/// Whether `c` computes in f16 (an f16 input, or an f16 creation or cast).
bool is_f16_case(const conformance::ConformanceCase& c) {
  for (const conformance::InputSpec& s : c.inputs)
    if (s.dtype == DType::f16) return true;
  return c.name.find("_f16") != std::string::npos;
}

TEST(CudaConformanceHostWithoutF16C, F16CasesMatchRefWhenConversionsAreLibgccCalls) {
  // A CPU without F16C (the host runs above use this CPU's): every f16
  // conversion is a call of __extendhfsf2 / __truncsfhf2, which must
  // resolve in the process and round as the instructions do. A quarter of
  // the f16 cases (time).
  testing::ScopedHostFeature no_f16c("f16c", false);
  Counts counts;
  int index = -1;
  for (const conformance::ConformanceCase& c : conformance::all_cases_with_f16())
    if (is_f16_case(c) && ++index % 4 == 0) check_case(c, counts);
  std::printf("without F16C: %d f16 cases match ref on the host\n", counts.checked);
  EXPECT_GT(counts.checked, 20);
}

INSTANTIATE_TEST_SUITE_P(Shards, CudaConformanceHost,
                         ::testing::Range(0, testing::kConformanceShards));

} // namespace
} // namespace mstep::cuda
