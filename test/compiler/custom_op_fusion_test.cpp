// mstep.custom in the passes: a call of an op with a scalar form is fused
// by mstep-fuse-elementwise into one region with its elementwise
// neighbours (its kernel gone), a call of an op without one stays a
// boundary; and mstep-plan-memory gives an output the storage of the input
// it is declared to alias when that input dies at the call, and not
// otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mlir/IR/MLIRContext.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "mstep/mstep.h"
#include "mstep/passes/Passes.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CustomShapeRule same_type() { return same_type_as_input(); }

absl::Status unused_kernel(const HostKernelCall&) {
  return absl::InternalError("the passes never run kernels");
}

void register_ops() {
  auto& registry = CustomOpRegistry::global();
  if (registry.find("fusion_test.scaled_elu").ok()) return;
  // scale * (x > 0 ? x : alpha * (exp(x) - 1)).
  register_custom_op(
      {.name = "fusion_test.scaled_elu",
       .schema = {.inputs = {{"x", {DType::f32, DType::f64}}},
                  .attrs = {{"alpha", CustomAttrType::float64, 1.0},
                            {"scale", CustomAttrType::float64, 1.0}},
                  .scalar_form = make_scalar_form([](ScalarFormBuilder& f) {
                    ScalarValue x = f.input(0);
                    return std::vector{f.attr("scale") *
                                       f.where(x > 0.0, x, f.attr("alpha") * (f.exp(x) - 1.0))};
                  })},
       .shape_rule = same_type(),
       .kernels = {{"cpu", host_kernel(unused_kernel)}}});
  // The same form on a call that is not elementwise: its result is the
  // input as a square matrix (a 4-vector in, 2x2 out).
  register_custom_op(
      {.name = "fusion_test.elu_square",
       .schema = {.inputs = {{"x", {DType::f32}}},
                  .scalar_form = make_scalar_form([](ScalarFormBuilder& f) {
                    ScalarValue x = f.input(0);
                    return std::vector{f.where(x > 0.0, x, f.exp(x) - 1.0)};
                  })},
       .shape_rule = [](absl::Span<const TensorType> in,
                        const CustomAttrView&) -> absl::StatusOr<std::vector<TensorType>> {
         return std::vector{TensorType{Shape{2, 2}, in[0].dtype}};
       },
       .kernels = {{"cpu", host_kernel(unused_kernel)}}});
  // The same computation without a scalar form.
  register_custom_op({.name = "fusion_test.opaque",
                      .schema = {.inputs = {{"x", {DType::f32}}}},
                      .shape_rule = same_type(),
                      .kernels = {{"cpu", host_kernel(unused_kernel)}}});
  // Output 0 may alias input 0; output 0 of `inplace_other` may alias input 1.
  register_custom_op({.name = "fusion_test.inplace",
                      .schema = {.inputs = {{"x", {DType::f32}}, {"y", {DType::f32}}},
                                 .aliases = {{0, 0}}},
                      .shape_rule = same_type(),
                      .kernels = {{"cpu", host_kernel(unused_kernel)}}});
}

class CustomOpPassesTest : public ::testing::Test {
protected:
  CustomOpPassesTest() {
    register_mstep_dialects(ctx_);
    register_ops();
  }

  /// `text` after mstep-fuse-elementwise (with custom-scalar-forms =
  /// `forms`).
  std::string fuse(const std::string& text, bool forms = true) {
    passes::FuseElementwiseOptions options;
    options.customScalarForms = forms;
    return run(text, passes::createFuseElementwise(options));
  }
  /// `text` after mstep-plan-memory.
  std::string plan(const std::string& text) { return run(text, passes::createPlanMemory()); }

  std::string run(const std::string& text, std::unique_ptr<mlir::Pass> pass) {
    auto module = parse_mstep_module(text, ctx_, "test");
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return "";
    mlir::PassManager pm(&ctx_);
    pm.addNestedPass<mlir::func::FuncOp>(std::move(pass));
    EXPECT_TRUE(mlir::succeeded(pm.run(module->get())));
    std::string out;
    llvm::raw_string_ostream os(out);
    module->get().print(os);
    return out;
  }

  mlir::MLIRContext ctx_;
};

/// exp -> custom `callee` -> neg on a tensor<4xf32>.
std::string chain_through(const std::string& callee, const std::string& attrs = "") {
  return "func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
         "  %0 = mstep.exp %x : tensor<4xf32>\n"
         "  %1 = mstep.custom \"" + callee + "\"(%0) " + attrs +
         " : (tensor<4xf32>) -> tensor<4xf32>\n"
         "  %2 = mstep.neg %1 : tensor<4xf32>\n"
         "  return %2 : tensor<4xf32>\n}\n";
}

TEST_F(CustomOpPassesTest, ACallWithAScalarFormFusesWithItsNeighbours) {
  const std::string out = fuse(chain_through("fusion_test.scaled_elu",
                                            "{user_attrs = {alpha = 1.5 : f64, scale = 2.0 : f64}}"));
  // One region: exp, the form (gt, exp, sub, mul, where, mul), neg; the
  // attributes became constants; no call is left.
  EXPECT_THAT(out, Not(HasSubstr("mstep.custom")));
  const size_t fusion = out.find("mstep.fusion");
  ASSERT_NE(fusion, std::string::npos) << out;
  EXPECT_EQ(out.find("mstep.fusion", fusion + 1), std::string::npos) << out;
  const std::string region = out.substr(fusion, out.find("mstep.yield") - fusion);
  for (const char* op : {"mstep.gt", "mstep.where", "mstep.sub", "mstep.mul", "mstep.neg",
                         "mstep.constant 1.500000e+00", "mstep.constant 2.000000e+00"})
    EXPECT_THAT(region, HasSubstr(op)) << out;
  // The form's exp and the exp before the call.
  EXPECT_NE(region.find("mstep.exp", region.find("mstep.exp") + 1), std::string::npos) << out;
}

TEST_F(CustomOpPassesTest, AttributesLeftOutTakeTheirDefaults) {
  const std::string out = fuse(chain_through("fusion_test.scaled_elu"));
  EXPECT_THAT(out, Not(HasSubstr("mstep.custom")));
  EXPECT_THAT(out, HasSubstr("mstep.constant 1.000000e+00 : tensor<f32>"));
}

TEST_F(CustomOpPassesTest, ACallWithoutAScalarFormStaysABoundary) {
  const std::string out = fuse(chain_through("fusion_test.opaque"));
  // fusion(exp), the call, fusion(neg).
  const size_t first = out.find("mstep.fusion");
  const size_t call = out.find("mstep.custom \"fusion_test.opaque\"");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(call, std::string::npos) << out;
  EXPECT_LT(first, call);
  EXPECT_NE(out.find("mstep.fusion", call), std::string::npos) << out;
}

TEST_F(CustomOpPassesTest, WithoutTheOptionACallWithAFormStaysABoundary) {
  // What the ref backend's pipeline does: its kernel runs.
  const std::string out = fuse(chain_through("fusion_test.scaled_elu"), /*forms=*/false);
  EXPECT_THAT(out, HasSubstr("mstep.custom \"fusion_test.scaled_elu\""));
}

TEST_F(CustomOpPassesTest, ACallThatIsNotElementwiseKeepsItsKernel) {
  // Not elementwise here (two shapes): the form does not apply.
  const std::string out = fuse(
      "func.func @step(%x: tensor<4xf32>) -> tensor<2x2xf32> {\n"
      "  %0 = mstep.custom \"fusion_test.elu_square\"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>\n"
      "  return %0 : tensor<2x2xf32>\n}\n");
  EXPECT_THAT(out, HasSubstr("mstep.custom \"fusion_test.elu_square\""));
}

// ---- aliases in the arena plan ----

/// neg x -> %a, neg x -> %b; inplace(%a, %b) -> %c; then `tail`.
std::string alias_module(const std::string& callee, const std::string& tail,
                         const std::string& ret) {
  return "func.func @step(%x: tensor<4xf32> {mstep.role = \"input\"}) -> tensor<4xf32> {\n"
         "  %a = mstep.neg %x : tensor<4xf32>\n"
         "  %b = mstep.exp %x : tensor<4xf32>\n"
         "  %c = mstep.custom \"" + callee +
         "\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n" + tail +
         "  return " + ret + " : tensor<4xf32>\n}\n";
}

/// The arena offsets of the first op `name` (e.g. "mstep.neg") in printed
/// `out` (the printer renames values, so ops are found by name).
std::string offsets_of(const std::string& out, const std::string& name) {
  const size_t def = out.find(name + " ");
  if (def == std::string::npos) return "?";
  const size_t at = out.find("mstep.arena_offsets = array<i64: ", def);
  return out.substr(at + 33, out.find('>', at) - at - 33);
}

TEST_F(CustomOpPassesTest, AnAliasedOutputTakesTheDyingInputsSlot) {
  // a: p0..p2, b: p1..p2, c: p2..p3 (returned). c reuses a's 64-byte slot.
  const std::string out =
      plan(alias_module("fusion_test.inplace", "", "%c"));
  EXPECT_THAT(out, HasSubstr("mstep.arena_size = 128"));
  EXPECT_EQ(offsets_of(out, "mstep.custom"), offsets_of(out, "mstep.neg")) << out;
  EXPECT_THAT(out, HasSubstr("mstep.in_place = array<i64: 0>")) << out;
}

TEST_F(CustomOpPassesTest, AnAliasedOutputGetsItsOwnSlotWhenTheInputIsReadLater) {
  // a is read after the call: c must not overwrite it.
  const std::string out = plan(alias_module("fusion_test.inplace",
                                           "  %d = mstep.add %c, %a : tensor<4xf32>, "
                                           "tensor<4xf32> -> tensor<4xf32>\n",
                                           "%d"));
  EXPECT_NE(offsets_of(out, "mstep.custom"), offsets_of(out, "mstep.neg")) << out;
  EXPECT_THAT(out, HasSubstr("mstep.arena_size = 192"));
}

TEST_F(CustomOpPassesTest, AnOpWithoutAnAliasNeverReusesItsInput) {
  // The same graph through an op that declares no alias: c gets a slot of
  // its own although a dies at the call (the lit test's unregistered op
  // shows the same).
  if (!CustomOpRegistry::global().find("fusion_test.no_alias").ok())
    register_custom_op({.name = "fusion_test.no_alias",
                      .schema = {.inputs = {{"x", {DType::f32}}, {"y", {DType::f32}}}},
                      .shape_rule = same_type(),
                      .kernels = {{"cpu", host_kernel(unused_kernel)}}});
  const std::string out = plan(alias_module("fusion_test.no_alias", "", "%c"));
  EXPECT_NE(offsets_of(out, "mstep.custom"), offsets_of(out, "mstep.neg")) << out;
  EXPECT_THAT(out, HasSubstr("mstep.arena_size = 192"));
  EXPECT_THAT(out, Not(HasSubstr("mstep.in_place")));
}

TEST_F(CustomOpPassesTest, TheAliasIsOnlyForTheDeclaredInput) {
  // inplace(%b, %a): a (dying) is now input 1, which output 0 may not alias;
  // b is input 0 but dies too, so c takes b's slot instead.
  const std::string text =
      "func.func @step(%x: tensor<4xf32> {mstep.role = \"input\"}) -> tensor<4xf32> {\n"
      "  %a = mstep.neg %x : tensor<4xf32>\n"
      "  %b = mstep.exp %x : tensor<4xf32>\n"
      "  %c = mstep.custom \"fusion_test.inplace\"(%b, %a) : (tensor<4xf32>, tensor<4xf32>) -> "
      "tensor<4xf32>\n"
      "  %d = mstep.add %c, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>\n"
      "  return %d : tensor<4xf32>\n}\n";
  const std::string out = plan(text);
  EXPECT_EQ(offsets_of(out, "mstep.custom"), offsets_of(out, "mstep.exp")) << out;
  EXPECT_NE(offsets_of(out, "mstep.custom"), offsets_of(out, "mstep.neg")) << out;
}

TEST_F(CustomOpPassesTest, AGraphInputIsNeverOverwrittenUnlessDonated) {
  // inplace(%x, %b): x is an argument (not in the arena), so c gets a slot.
  const std::string text =
      "func.func @step(%x: tensor<4xf32> {mstep.role = \"input\"}) -> tensor<4xf32> {\n"
      "  %b = mstep.exp %x : tensor<4xf32>\n"
      "  %c = mstep.custom \"fusion_test.inplace\"(%x, %b) : (tensor<4xf32>, tensor<4xf32>) -> "
      "tensor<4xf32>\n"
      "  return %c : tensor<4xf32>\n}\n";
  const std::string out = plan(text);
  EXPECT_THAT(out, Not(HasSubstr("mstep.aliases_arg")));
  // Donated to result 0: the call writes into x's own buffer.
  std::string donated = text;
  donated.replace(donated.find("{mstep.role = \"input\"}"), 22,
                  "{mstep.role = \"input\", mstep.aliased_result = 0 : i64}");
  const std::string out2 = plan(donated);
  EXPECT_THAT(out2, HasSubstr("mstep.aliases_arg = array<i64: 0>")) << out2;
}

}  // namespace
}  // namespace mstep
