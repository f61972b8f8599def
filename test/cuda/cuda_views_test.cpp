// Views on cuda (CudaViews.h, CudaPlan::aliases): reshapes, size-1
// permutes and aligned contiguous slices are aliases of their operand's
// bytes (no launch), transposes feeding or fed by a matmul are cuBLASLt's
// transpose flags, and an intermediate returned through a reshape is
// written straight into the output. The plan run on the host (aliases in
// their roots' bytes, matmuls as host GEMMs) matches ref; the executable
// hands a kernel its root's address plus the alias's offset (fake driver);
// a plan with a bad alias is an error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/match.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "lib/backends/cuda/CudaPlanSummary.h"
#include "lib/backends/cuda/CudaViews.h"
#include "mstep/ir/MlirParse.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// %r: a reshape of an input (an alias of it); %e = exp(%r); %s: rows 2..4 of
// %e, a contiguous run at 2 * 64 * 4 = 512 bytes (an alias); %t = tanh(%s);
// %u: a permute moving a size-1 dim (an alias); %g: grad-style product
// (%t^T · %y)^T, both transposes folded into the cuBLASLt step; %c: a
// column sum returned through a reshape (the sum writes the output).
constexpr const char* kViewsStep = R"(
func.func @step(%x: tensor<8x4x16xf32>, %y: tensor<3x24xf32>)
    -> (tensor<24x64xf32>, tensor<64xf32>, tensor<1x3x64xf32>) {
  %r = mstep.reshape %x : tensor<8x4x16xf32> -> tensor<8x64xf32>
  %e = mstep.exp %r : tensor<8x64xf32>
  %s = mstep.slice %e {dim = 0 : i64, start = 2 : i64, end = 5 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<3x64xf32>
  %t = mstep.tanh %s : tensor<3x64xf32>
  %u = mstep.permute %t {perm = array<i64: 1, 0>} : tensor<3x64xf32> -> tensor<64x3xf32>
  %p = mstep.matmul %u, %y : tensor<64x3xf32>, tensor<3x24xf32> -> tensor<64x24xf32>
  %g = mstep.permute %p {perm = array<i64: 1, 0>} : tensor<64x24xf32> -> tensor<24x64xf32>
  %c = mstep.sum %t {dims = array<i64: 0>, keepdim = true} : tensor<3x64xf32> -> tensor<1x64xf32>
  %o = mstep.reshape %c : tensor<1x64xf32> -> tensor<64xf32>
  %v = mstep.reshape %t : tensor<3x64xf32> -> tensor<3x1x64xf32>
  %w = mstep.permute %v {perm = array<i64: 1, 0, 2>} : tensor<3x1x64xf32> -> tensor<1x3x64xf32>
  %z = mstep.neg %w : tensor<1x3x64xf32>
  return %g, %o, %z : tensor<24x64xf32>, tensor<64xf32>, tensor<1x3x64xf32>
}
)";

/// A slice at 64 bytes: not aligned for cuBLASLt and cuDNN, so a copy.
constexpr const char* kUnalignedSliceStep = R"(
func.func @step(%x: tensor<8x16xf32>) -> tensor<3x16xf32> {
  %e = mstep.exp %x : tensor<8x16xf32>
  %s = mstep.slice %e {dim = 0 : i64, start = 1 : i64, end = 4 : i64, step = 1 : i64} : tensor<8x16xf32> -> tensor<3x16xf32>
  %t = mstep.tanh %s : tensor<3x16xf32>
  return %t : tensor<3x16xf32>
}
)";

/// A returned slice of the first rows of an intermediate: the slice is
/// a copy (the exp cannot write its 8 rows into the 2-row output).
constexpr const char* kReturnedSliceStep = R"(
func.func @step(%x: tensor<8x64xf32>) -> tensor<2x64xf32> {
  %e = mstep.exp %x : tensor<8x64xf32>
  %s = mstep.slice %e {dim = 0 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<2x64xf32>
  return %s : tensor<2x64xf32>
}
)";

/// Cats (DDP's bucket flattening): %c of two 512-byte values at offsets 0
/// and 512 (exp and tanh write into it: no launch); %d along dim 1 of
/// [2, 64]s (each operand two runs of the result: a copy kernel each); %e
/// with an operand at byte 20 (not aligned: a copy kernel each).
constexpr const char* kCatStep = R"(
func.func @step(%x: tensor<2x64xf32>, %y: tensor<2x64xf32>, %z: tensor<5xf32>)
    -> (tensor<256xf32>, tensor<2x128xf32>, tensor<133xf32>) {
  %a = mstep.exp %x : tensor<2x64xf32>
  %b = mstep.tanh %y : tensor<2x64xf32>
  %ra = mstep.reshape %a : tensor<2x64xf32> -> tensor<128xf32>
  %rb = mstep.reshape %b : tensor<2x64xf32> -> tensor<128xf32>
  %c = mstep.cat %ra, %rb {dim = 0 : i64} : tensor<128xf32>, tensor<128xf32> -> tensor<256xf32>
  %d = mstep.cat %a, %b {dim = 1 : i64} : tensor<2x64xf32>, tensor<2x64xf32> -> tensor<2x128xf32>
  %n = mstep.neg %z : tensor<5xf32>
  %e = mstep.cat %n, %rb {dim = 0 : i64} : tensor<5xf32>, tensor<128xf32> -> tensor<133xf32>
  return %c, %d, %e : tensor<256xf32>, tensor<2x128xf32>, tensor<133xf32>
}
)";

/// The launches of `plan` whose kernels come from `op` ("mstep.slice").
int launches_of(const CudaPlan& plan, absl::string_view op) {
  int n = 0;
  for (const CudaLaunchStep& launch : plan.launches)
    if (launch.matmul < 0 && launch.attention < 0 &&
        absl::StartsWith(plan.kernels[launch.kernel].origin, absl::StrCat(op, " #")))
      ++n;
  return n;
}

TEST(CudaViews, ViewsAreAliasesAndTransposesAreCublasLtFlags) {
  auto plan = testing::plan_of(kViewsStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const char* op : {"mstep.reshape", "mstep.slice", "mstep.permute"})
    EXPECT_EQ(launches_of(*plan, op), 0) << op;
  // exp, tanh, the sum's launches, neg, and one cuBLASLt step.
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const CudaMatmulInfo& m = plan->matmuls[0];
  // (t^T y)^T = y^T t: [24, 3] x [3, 64], y stored [3, 24] (transposed), t
  // stored [3, 64] as is.
  EXPECT_EQ(m.shape.m, 24);
  EXPECT_EQ(m.shape.n, 64);
  EXPECT_EQ(m.shape.k, 3);
  EXPECT_TRUE(m.shape.transpose_a);
  EXPECT_FALSE(m.shape.transpose_b);
  // Aliases: %r of %x; %s of %e at 512 bytes; %u of %t (read transposed);
  // %v and %w of %t; %c of the output %o.
  auto alias = [&](int value) { return plan->alias_of(value); };
  const CudaAlias* r = alias(2);  // values: %x %y, then in program order
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->root, 0);
  EXPECT_EQ(r->byte_offset, 0);
  int slices = 0, into_output = 0;
  for (const CudaAlias& a : plan->aliases) {
    slices += a.byte_offset == 2 * 64 * 4;
    for (size_t k = 0; k < plan->outputs.size(); ++k)
      into_output += a.root == plan->outputs[k];
  }
  EXPECT_EQ(slices, 1);
  EXPECT_EQ(into_output, 1);  // the column sum writes output 1
  EXPECT_EQ(plan->aliases.size(), 6u);
  EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << validate_cuda_plan(*plan);
  const CudaPlanSummary summary = summarize_cuda_plan(*plan);
  EXPECT_EQ(summary.copies, 0);
  EXPECT_EQ(summary.transposed, 1);
  EXPECT_EQ(summary.aliases, 6);
  // The stored form keeps them.
  auto back = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->aliases, plan->aliases);
}

TEST(CudaViews, ThePlanOnTheHostWithAliasesInTheirRootsBytesMatchesRef) {
  testing::CudaStepContext step(kViewsStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  std::vector<std::vector<float>> inputs = {testing::random_floats(8 * 4 * 16, 1),
                                            testing::random_floats(3 * 24, 2)};
  std::vector<std::vector<char>> values = testing::host_values(plan, inputs);
  ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));
  std::vector<std::vector<char>> input_bytes(values.begin(), values.begin() + 2);
  auto ref = testing::ref_outputs(step.module(), input_bytes);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->size(), 3u);
  for (size_t o = 0; o < 3; ++o) {
    const float* got = testing::as<float>(values[plan.outputs[o]]);
    const float* want = testing::as<float>((*ref)[o]);
    const int64_t n = plan.values[plan.outputs[o]].numel();
    for (int64_t k = 0; k < n; ++k) {
      // The product: 3-term dot products of values under 2 (rounded once
      // here, by ref's own order there); the 3-row sum: a rounding or two;
      // neg of a view: exact.
      const float tolerance = o == 0   ? 2e-6f * (1 + std::fabs(want[k]))
                              : o == 1 ? 1e-6f * (1 + std::fabs(want[k]))
                                       : 0.f;
      ASSERT_LE(std::fabs(got[k] - want[k]), tolerance) << "output " << o << " [" << k << "]";
    }
  }
}

TEST(CudaViews, AnUnalignedSliceStaysACopy) {
  auto plan = testing::plan_of(kUnalignedSliceStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(launches_of(*plan, "mstep.slice"), 1);
  EXPECT_TRUE(plan->aliases.empty());
}

TEST(CudaViews, AReturnedSliceOfPartOfAValueIsACopy) {
  auto plan = testing::plan_of(kReturnedSliceStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(launches_of(*plan, "mstep.slice"), 1);
  EXPECT_TRUE(plan->aliases.empty());
}

TEST(CudaViews, ACatOfAlignedWholeValuesIsWrittenInPlaceOthersAreCopies) {
  testing::CudaStepContext step(kCatStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  // %d's two (along dim 1: no operand is one run of the result) and %e's
  // one: %rb at byte 20 is copied, %n (at 0) is written in place by neg.
  EXPECT_EQ(launches_of(plan, "mstep.cat"), 3);
  size_t into_e = 0;
  for (const CudaAlias& alias : plan.aliases)
    into_e += alias.root == plan.outputs[2] && alias.byte_offset == 0;
  EXPECT_EQ(into_e, 1u);
  // exp and tanh write output 0 at bytes 0 and 512.
  std::vector<int64_t> offsets;
  for (const CudaAlias& alias : plan.aliases)
    if (alias.root == plan.outputs[0] && plan.values[alias.value].shape.rank() == 2)
      offsets.push_back(alias.byte_offset);
  EXPECT_THAT(offsets, ElementsAre(0, 512));
  std::vector<std::vector<float>> inputs = {testing::random_floats(128, 3),
                                            testing::random_floats(128, 4),
                                            testing::random_floats(5, 5)};
  std::vector<std::vector<char>> values = testing::host_values(plan, inputs);
  ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));
  std::vector<std::vector<char>> input_bytes(values.begin(), values.begin() + 3);
  auto ref = testing::ref_outputs(step.module(), input_bytes);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->size(), 3u);
  for (size_t o = 0; o < 3; ++o) {
    // exp and tanh as the kernels compute them (libm on the host, as ref):
    // the cats only move the bytes.
    const float* got = testing::as<float>(values[plan.outputs[o]]);
    const float* want = testing::as<float>((*ref)[o]);
    for (int64_t k = 0; k < plan.values[plan.outputs[o]].numel(); ++k)
      ASSERT_NEAR(got[k], want[k], 1e-6f * (1 + std::fabs(want[k])))
          << "output " << o << " [" << k << "]";
  }
}

TEST(CudaViews, ABadAliasIsAnErrorNamingIt) {
  auto plan = testing::plan_of(kViewsStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto error = [](CudaPlan changed) { return std::string(validate_cuda_plan(changed).message()); };
  CudaPlan output = *plan;
  output.aliases.push_back({plan->outputs[2], 0, 0});
  EXPECT_THAT(error(output), HasSubstr("is an alias (an output needs a buffer of its own)"));
  CudaPlan too_far = *plan;
  too_far.aliases[0].byte_offset = 1 << 20;
  EXPECT_THAT(error(too_far), HasSubstr("does not fit in its root"));
  CudaPlan chained = *plan;
  chained.aliases[1].root = chained.aliases[0].value;
  EXPECT_THAT(error(chained), HasSubstr("is an alias itself"));
  CudaPlan twice = *plan;
  twice.aliases.push_back(twice.aliases[0]);
  EXPECT_THAT(error(twice), HasSubstr("is aliased twice"));
  // A launch writing an alias of a step input would write the input.
  CudaPlan writes_input = *plan;
  writes_input.launches[0].writes.push_back(plan->aliases[0].value);
  EXPECT_THAT(error(writes_input), HasSubstr("writes alias %2 of step input %0"));
}

TEST(CudaViews, TheMemoryPlanKeepsARootLiveWhileAViewOfItIsRead) {
  testing::CudaStepContext step(kViewsStep);
  auto func = step.module().lookupSymbol<mlir::func::FuncOp>("step");
  const CudaViews views(func);
  passes::MemoryPlanOptions options{.alignment = kCudaArenaAlignment,
                                    .in_place = false,
                                    .returned_in_arena = false,
                                    .views = [&](mlir::OpResult result) {
                                      return views.view_of(result);
                                    }};
  mlir::FailureOr<passes::MemoryPlan> memory = passes::plan_memory(func, options);
  ASSERT_TRUE(mlir::succeeded(memory));
  EXPECT_TRUE(mlir::succeeded(passes::verify_memory_plan(*memory, func)));
  // %e (point 1) is read through the slice %s by tanh (point 3): live to 3
  // at least; %s has no slot of its own, it is %e's bytes + 512.
  const passes::PlannedValue *e = nullptr, *s = nullptr;
  for (const passes::PlannedValue& planned : memory->values) {
    if (planned.def_point == 1) e = &planned;
    if (planned.def_point == 2) s = &planned;
  }
  ASSERT_TRUE(e != nullptr && s != nullptr);
  EXPECT_GE(e->last_use_point, 3);
  EXPECT_EQ(s->view_of, mlir::Value(e->value));
  EXPECT_EQ(s->arena_offset, e->arena_offset + 512);
  // Views need in_place off (a root written over would change its views).
  DiagnosticCollector diagnostics(step.context());
  options.in_place = true;
  EXPECT_TRUE(mlir::failed(passes::plan_memory(func, options)));
  EXPECT_THAT(diagnostics.text(), HasSubstr("views need in_place off"));
}

class CudaViewsExecutableTest : public testing::FakeCudaBackendTest {};

/// The bytes a launch argument holds for device address `pointer`.
std::string address_bytes(CUdeviceptr pointer) {
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

TEST_F(CudaViewsExecutableTest, AKernelReadingAnAliasGetsItsRootsAddressPlusTheOffset) {
  auto plan = testing::plan_of(R"(
func.func @step(%x: tensor<8x4x16xf32>) -> tensor<3x64xf32> {
  %r = mstep.reshape %x : tensor<8x4x16xf32> -> tensor<8x64xf32>
  %e = mstep.exp %r : tensor<8x64xf32>
  %s = mstep.slice %e {dim = 0 : i64, start = 2 : i64, end = 5 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<3x64xf32>
  %t = mstep.tanh %s : tensor<3x64xf32>
  return %t : tensor<3x64xf32>
}
)");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->launches.size(), 2u);  // exp, tanh
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({8, 4, 16}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> launches;
  for (size_t i = before; i < fake_.calls.size(); ++i)
    if (fake_.calls[i].name == "cuLaunchKernel") launches.push_back(fake_.calls[i]);
  ASSERT_EQ(launches.size(), 2u);
  // exp reads x itself (the reshape is x's bytes) and writes %e in the
  // arena; tanh reads %e's rows 2.. (512 bytes on).
  const int e = plan->launches[0].writes[0];
  const CUdeviceptr e_at = (*exe)->arena_pointer() + plan->arena_offsets[e];
  EXPECT_THAT(launches[0].args, ElementsAre(address_bytes(CudaBackend::device_pointer(*x)),
                                            address_bytes(e_at)));
  EXPECT_EQ(launches[1].args[0], address_bytes(e_at + 512));
}

}  // namespace
}  // namespace mstep::cuda
