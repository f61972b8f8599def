// Host numerics of the reductions built in CudaReductionLoops.h (var,
// logsumexp, argmax) and of the fusions CudaMathExpansion.h and the
// serial-run fix of CudaKernelGen's collapse_and_tile made compile (abs,
// isfinite, integer pow; layer_norm's and cross-entropy's backward
// fusions): each step compiled for cuda (kernels assembled by ptxas), its
// tiled loop nests run on this CPU, every output compared with the ref
// backend's on the same inputs.
//
// Bit for bit where the nest follows ref's order: argmax (exact
// statistics), and var / logsumexp with one lane per row. With a block per
// row, var's and logsumexp's f64 sums are a tree rather than ref's serial
// order; each f64 sum of n terms is then within n ulp(f64) of ref's, far
// below an f32 rounding step, so the f32 results are expected equal too
// (the check: within 1 ulp of f32, which such an f64 difference can only
// reach at an f32 rounding tie). (On a GPU, libdevice's exp/log may differ
// from libm in the last bit of a double: for the GPU run.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "mstep/core/HalfTypes.h"
#include "test/cuda/ConformanceSteps.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

/// A step's outputs from its cuda loop nests run on the host and from ref,
/// with their types.
struct Runs {
  std::vector<std::vector<char>> cuda, ref;
  std::vector<TensorType> types;
  CudaPlan plan;
};

/// Input i of type `type` as bytes: floats from a 89-value cycle in
/// [-0.5, 0.5) (repeats: ties), integers in [0, max_integer).
std::vector<char> cycle_input(const TensorType& type, size_t i, int64_t max_integer) {
  std::vector<char> bytes(type.bytes());
  for (int64_t k = 0; k < type.numel(); ++k) {
    const double unit = ((k * 13 + static_cast<int64_t>(i) * 7) % 89) / 89.0 - 0.5;
    const int64_t integer = (k * 5 + static_cast<int64_t>(i)) % max_integer;
    switch (type.dtype) {
      case DType::f32: reinterpret_cast<float*>(bytes.data())[k] = static_cast<float>(unit); break;
      case DType::f64: reinterpret_cast<double*>(bytes.data())[k] = unit; break;
      case DType::bf16: reinterpret_cast<BFloat16*>(bytes.data())[k] = BFloat16(float(unit)); break;
      case DType::i64: reinterpret_cast<int64_t*>(bytes.data())[k] = integer; break;
      case DType::i32:
        reinterpret_cast<int32_t*>(bytes.data())[k] = static_cast<int32_t>(integer);
        break;
      default: ADD_FAILURE() << "no input of " << type.to_string();
    }
  }
  return bytes;
}

/// `module` (in `step`) compiled with `options`, run on the host and on ref
/// with `inputs` (cycle_input's by default, then `edit`).
Runs run_both(testing::CudaStepContext& step, mlir::ModuleOp module,
              const CudaCompileOptions& options, int64_t max_integer,
              const std::function<void(std::vector<std::vector<char>>&)>& edit = nullptr) {
  Runs runs;
  auto compiled = compile_cuda_step(module, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return runs;
  const CudaPlan& plan = compiled->plan;
  std::vector<std::vector<char>> inputs;
  for (size_t i = 0; i < plan.num_inputs; ++i)
    inputs.push_back(cycle_input(plan.values[i], i, max_integer));
  if (edit) edit(inputs);
  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  testing::run_plan_on_host(step.context(), *compiled, values);
  for (int id : plan.outputs) {
    runs.cuda.push_back(values[id]);
    runs.types.push_back(plan.values[id]);
  }
  auto ref = testing::ref_outputs(module, inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) runs.ref = std::move(*ref);
  runs.plan = plan;
  return runs;
}

/// Output `o` equal to ref's: byte for byte, or for an f32 output within
/// `ulps` units in the last place of ref's value plus `slack` * (1 +
/// max |ref|) (NaNs where ref has them, infinities equal).
void expect_output_as_ref(const Runs& runs, size_t o, int ulps, double slack,
                          const std::string& what) {
  ASSERT_EQ(runs.cuda.size(), runs.ref.size()) << what;
  ASSERT_EQ(runs.cuda[o].size(), runs.ref[o].size()) << what << " output " << o;
  if (runs.types[o].dtype != DType::f32 || (ulps == 0 && slack == 0)) {
    EXPECT_TRUE(runs.cuda[o] == runs.ref[o])
        << what << " output " << o << " " << runs.types[o].to_string() << " differs from ref";
    return;
  }
  const auto* got = reinterpret_cast<const float*>(runs.cuda[o].data());
  const auto* want = reinterpret_cast<const float*>(runs.ref[o].data());
  const int64_t n = runs.types[o].numel();
  double scale = 1;
  for (int64_t k = 0; k < n; ++k)
    if (std::isfinite(want[k])) scale = std::max(scale, 1.0 + std::fabs(want[k]));
  int wrong = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double ulp = std::fabs(std::nextafter(want[k], INFINITY) - want[k]);
    const bool same = std::isnan(want[k]) ? std::isnan(got[k])
                      : got[k] == want[k] ||
                          std::fabs(double(got[k]) - want[k]) <= ulps * ulp + slack * scale;
    if (!same && wrong++ < 3)
      ADD_FAILURE() << what << " output " << o << " [" << k << "] = " << got[k] << ", ref "
                    << want[k];
  }
}

/// Every output as ref's (expect_output_as_ref with `ulps`, no slack).
void expect_as_ref(const Runs& runs, int ulps, const std::string& what) {
  for (size_t o = 0; o < runs.cuda.size(); ++o)
    ASSERT_NO_FATAL_FAILURE(expect_output_as_ref(runs, o, ulps, 0, what));
}

CudaCompileOptions with_rows(CudaRowReduction form) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = form;
  return options;
}

/// The conformance cases this work made compile for cuda, forward and
/// backward, on the host against ref: with a block per row (the default)
/// and one thread per row.
TEST(CudaReductionLoopsHost, ConformanceCasesRunAsRef) {
  int checked = 0;
  for (const conformance::ConformanceCase& c : conformance::all_cases()) {
    const std::string& name = c.name;
    auto starts = [&name](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (!starts("var_") && !starts("logsumexp_") && !starts("argmax_") && !starts("abs_") &&
        !starts("isfinite_") && !starts("pow_int_exponent") && !starts("layer_norm_eps") &&
        !starts("cross_entropy_label_smoothing") && !starts("cross_entropy_smoothing_ignore"))
      continue;
    std::optional<testing::RefStep> ref_step = testing::run_case_on_ref(c);
    ASSERT_TRUE(ref_step.has_value()) << name;
    const TraceGraph& graph = *ref_step->graph;
    // Classes of the cross-entropy cases: [0, 5).
    const int64_t max_integer = 5;
    const bool sums = starts("var_") || starts("logsumexp_") || starts("layer_norm") ||
                      starts("cross_entropy");
    for (CudaRowReduction form : {CudaRowReduction::block, CudaRowReduction::thread}) {
      testing::CudaStepContext step(nullptr);
      mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(graph, step);
      ASSERT_TRUE(module) << name;
      const Runs runs = run_both(step, *module, with_rows(form), max_integer);
      // The case's result: a block's tree sums within an f32 ulp (see the
      // top), else ref's bytes.
      const int ulps = sums && form == CudaRowReduction::block ? 1 : 0;
      ASSERT_NO_FATAL_FAILURE(expect_output_as_ref(runs, 0, ulps, 0, name));
      // The gradients go through sums the linalg lowering accumulates in
      // f32 (a mean of fewer than block_row_min elements, a column sum):
      // a serial f32 sum of n terms is within (n - 1) 2^-24 sum |x| of the
      // exact one; sum |x| taken as the output's scale (1 + max |ref|),
      // n as the largest input's size (no more terms than that).
      double n = 0;
      for (size_t i = 0; i < runs.plan.num_inputs; ++i)
        n = std::max(n, double(runs.plan.values[i].numel()));
      const double slack = n * std::ldexp(1.0, -24);
      for (size_t o = 1; o < runs.cuda.size(); ++o)
        ASSERT_NO_FATAL_FAILURE(expect_output_as_ref(runs, o, ulps, slack, name));
    }
    ++checked;
  }
  // The 52 cases this made compile (18 argmax, 17 var, 8 logsumexp, 6
  // abs / isfinite / pow, 3 fusions), and the 7 f32 abs / isfinite ones
  // that compiled before.
  EXPECT_EQ(checked, 52 + 7);
}

/// A step of one reduction of a [4, 5, 70] f32 input (`op` the reduction's
/// text, its result type `result`).
std::string reduction_step(const std::string& op, const std::string& attrs,
                           const std::string& result) {
  return "func.func @step(%x: tensor<4x5x70xf32>) -> " + result + " {\n  %r = mstep." + op +
         " %x {" + attrs + "} : tensor<4x5x70xf32> -> " + result + "\n  return %r : " + result +
         "\n}\n";
}

/// `text`'s step on the host, both row forms, with `edit` of its input.
void expect_text_as_ref(const std::string& text, int block_ulps,
                        const std::function<void(float*)>& edit) {
  for (CudaRowReduction form : {CudaRowReduction::block, CudaRowReduction::thread}) {
    testing::CudaStepContext step(text.c_str());
    const Runs runs = run_both(step, step.module(), with_rows(form), 5,
                               [&](std::vector<std::vector<char>>& in) {
                                 edit(reinterpret_cast<float*>(in[0].data()));
                               });
    ASSERT_NO_FATAL_FAILURE(
        expect_as_ref(runs, form == CudaRowReduction::block ? block_ulps : 0, text));
  }
}

TEST(CudaReductionLoopsHost, ArgmaxFirstMaximumAndFirstNaNOverEachDimAndFlat) {
  // Rows with a NaN (two, the first wins), ties (the cycle repeats), a
  // row of -inf and a -0 / +0 tie.
  auto edit = [](float* x) {
    x[3] = NAN;
    x[40] = NAN;
    x[70 * 2 + 5] = NAN;
    for (int j = 0; j < 70; ++j) x[70 * 6 + j] = -INFINITY;
    for (int j = 0; j < 70; ++j) x[70 * 7 + j] = j % 2 ? 0.f : -0.f;
  };
  for (const char* dims : {"0", "1", "2"}) {
    const std::string attrs = std::string("dims = array<i64: ") + dims + ">, keepdim = false";
    const std::string result = dims[0] == '0'   ? "tensor<5x70xi64>"
                               : dims[0] == '1' ? "tensor<4x70xi64>"
                                                : "tensor<4x5xi64>";
    ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(reduction_step("argmax", attrs, result), 0, edit));
  }
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("argmax", "dims = array<i64: 0, 1, 2>, keepdim = false", "tensor<i64>"), 0,
      edit));
  // Flat, no NaN: the first of the maximum's many repeats.
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("argmax", "dims = array<i64: 0, 1, 2>, keepdim = true", "tensor<1x1x1xi64>"),
      0, [](float*) {}));
}

TEST(CudaReductionLoopsHost, VarOverSeparateDimsAndMoreCorrectionThanElements) {
  auto none = [](float*) {};
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("var", "correction = 1 : i64, dims = array<i64: 0, 2>, keepdim = true",
                     "tensor<1x5x1xf32>"),
      1, none));
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("var", "correction = 0 : i64, dims = array<i64: 1, 2>, keepdim = false",
                     "tensor<4xf32>"),
      1, none));
  // n = 4 <= correction 4 and 9: divisor 0 gives inf (or NaN), as ref.
  for (const char* correction : {"4", "9"})
    ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
        reduction_step("var",
                       std::string("correction = ") + correction +
                           " : i64, dims = array<i64: 0>, keepdim = false",
                       "tensor<5x70xf32>"),
        1, [](float* x) { x[1] = x[351] = x[701] = x[1051] = 0.25f; }));
}

TEST(CudaReductionLoopsHost, LogsumexpOfInfiniteAndNaNRows) {
  // Row 0: all -inf (stays -inf); row 1: a +inf (+inf); row 2: a NaN
  // (NaN); the rest finite, one large (no overflow: the max is shifted).
  auto edit = [](float* x) {
    for (int j = 0; j < 70; ++j) x[j] = -INFINITY;
    x[70 + 9] = INFINITY;
    x[140 + 2] = NAN;
    x[210 + 4] = 500.f;
  };
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("logsumexp", "dims = array<i64: 2>, keepdim = true", "tensor<4x5x1xf32>"), 1,
      edit));
  ASSERT_NO_FATAL_FAILURE(expect_text_as_ref(
      reduction_step("logsumexp", "dims = array<i64: 1>, keepdim = false", "tensor<4x70xf32>"), 1,
      edit));
}

TEST(CudaReductionLoopsHost, LongTrailingRowsTakeABlockEachOtherRowsALane) {
  // Rows of 70 trailing elements: a block each (block_threads 128); a
  // reduction over dim 0 (strided rows): one lane per output.
  testing::CudaStepContext trailing(
      reduction_step("var", "correction = 1 : i64, dims = array<i64: 2>, keepdim = false",
                     "tensor<4x5xf32>")
          .c_str());
  auto compiled = compile_cuda_step(trailing.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->plan.kernels.size(), 1u);
  EXPECT_THAT(compiled->plan.kernels[0].grid, ::testing::ElementsAre(20u, 1u, 1u));
  EXPECT_THAT(compiled->plan.kernels[0].block, ::testing::ElementsAre(128u, 1u, 1u));
  testing::CudaStepContext strided(
      reduction_step("argmax", "dims = array<i64: 0>, keepdim = false", "tensor<5x70xi64>")
          .c_str());
  compiled = compile_cuda_step(strided.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->plan.kernels.size(), 1u);
  EXPECT_THAT(compiled->plan.kernels[0].grid, ::testing::ElementsAre(2u, 1u, 1u));
}

} // namespace
} // namespace mstep::cuda
