// The backend conformance suite (test/unit/ConformanceCases.h,
// all_cases_with_f16: the f16 twins of the bf16 cases too) compiled
// for cuda here, without a GPU (issue 21: "--device cuda compiles every
// conformance case"): each case's training step (forward, and backward
// where the case checks gradients) is traced on ref, run through cuda's
// pipeline and compile half (every kernel assembled by ptxas for sm_80 and
// sm_90), and what does not compile is listed with the compile half's
// error (the op and why). The cases are split into the host test's shards
// (ConformanceSteps.h), which ctest runs in parallel.
//
// not_yet_for_cuda() names the cases that do not compile yet, by reason: a
// case outside it that fails, or a case in it that now compiles, fails
// the shard that holds it (so the list only shrinks, and says what is
// left).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/compiler/Compiler.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/mstep.h"
#include "test/cuda/ConformanceSteps.h"

namespace mstep::cuda {
namespace {

using conformance::ConformanceCase;

/// The cases cuda's compile half refuses today (the first op it refuses).
const std::set<std::string>& not_yet_for_cuda() {
  static const std::set<std::string> cases = {
    // (none: every case with a step compiles for cuda)
  };
  return cases;
}

class CudaConformanceCompile : public ::testing::TestWithParam<int> {};

TEST_P(CudaConformanceCompile, EveryCaseButTheListedOnesCompilesForCuda) {
  std::map<std::string, std::string> failed;  // case -> error
  std::set<std::string> compiled_but_listed;
  int compiled = 0, empty = 0;
  size_t listed_here = 0;
  for (const ConformanceCase* shard_case : testing::conformance_shard(GetParam())) {
    const ConformanceCase& c = *shard_case;
    const bool listed = not_yet_for_cuda().count(c.name) > 0;
    listed_here += listed;
    std::optional<testing::RefStep> step = testing::run_case_on_ref(c);
    if (!step) {
      ++empty;
      continue;
    }
    absl::Status status = with_optimized_module(
        *step->graph, "cuda", CompileOptions{}, RuntimeOptions{}, [&](mlir::ModuleOp module) {
          return compile_cuda_step(module, default_cuda_compile_options()).status();
        });
    if (status.ok()) {
      ++compiled;
      if (listed) compiled_but_listed.insert(c.name);
    } else if (!listed) {
      failed[c.name] = std::string(status.message());
    }
  }
  std::printf("shard %d: %d cases compiled for cuda, %zu listed as not yet, %d had no step\n",
              GetParam(), compiled, listed_here - compiled_but_listed.size(), empty);
  for (const auto& [name, error] : failed)
    ADD_FAILURE() << name << " does not compile for cuda: " << error;
  for (const std::string& name : compiled_but_listed)
    ADD_FAILURE() << name << " compiles for cuda now: take it off not_yet_for_cuda()";
  EXPECT_GT(compiled, 0);
}

TEST(CudaConformanceCompileList, NamesOnlyConformanceCases) {
  // A name no shard holds would never be checked.
  std::set<std::string> names;
  for (const ConformanceCase& c : conformance::all_cases_with_f16()) names.insert(c.name);
  for (const std::string& name : not_yet_for_cuda())
    EXPECT_TRUE(names.count(name)) << name << " in not_yet_for_cuda() is no conformance case";
}

INSTANTIATE_TEST_SUITE_P(Shards, CudaConformanceCompile,
                         ::testing::Range(0, testing::kConformanceShards));

} // namespace
} // namespace mstep::cuda
