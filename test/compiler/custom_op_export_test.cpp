// mstep.custom -> trace graph: the exporter maps a call to its registered
// op and refuses one it cannot (the name is not registered, the attributes
// do not match the declaration), naming the op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

/// A module with one call of `callee` with `attrs` on a tensor<4xf32>.
std::string call_module(const std::string& callee, const std::string& attrs) {
  return "func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
         "  %0 = mstep.custom \"" +
         callee + "\"(%x) " + attrs +
         " : (tensor<4xf32>) -> tensor<4xf32>\n"
         "  return %0 : tensor<4xf32>\n}\n";
}

class CustomOpExportTest : public ::testing::Test {
protected:
  CustomOpExportTest() {
    register_mstep_dialects(ctx_);
    if (!CustomOpRegistry::global().find("export_test.scale").ok())
      register_custom_op({.name = "export_test.scale",
                          .schema = {.inputs = {{"x"}},
                                     .attrs = {{"factor", CustomAttrType::float64}}},
                          .shape_rule = same_type_as_input()});
  }

  absl::StatusOr<TraceGraph> export_text(const std::string& text) {
    auto module = parse_mstep_module(text, ctx_, "test");
    if (!module.ok()) return module.status();
    return export_trace_graph((*module)->lookupSymbol<mlir::func::FuncOp>("step"));
  }

  mlir::MLIRContext ctx_;
};

TEST_F(CustomOpExportTest, ARegisteredCallExportsToItsIdAndAttributes) {
  auto g = export_text(call_module("export_test.scale", "{user_attrs = {factor = 2.5 : f64}}"));
  ASSERT_TRUE(g.ok()) << g.status();
  const GraphNode& n = g->nodes.back();
  ASSERT_EQ(n.op, OpKind::custom);
  EXPECT_EQ(attr_int(n.attrs, AttrName::custom_op),
            static_cast<int64_t>(custom_op_id("export_test.scale")));
  ASSERT_EQ(custom_attr_values(n.attrs).size(), 1u);
  EXPECT_EQ(std::get<double>(custom_attr_values(n.attrs)[0].value), 2.5);
}

TEST_F(CustomOpExportTest, AnUnregisteredNameIsAVerifierErrorNamingIt) {
  // The verifier refuses the module before anything exports it.
  auto g = export_text(call_module("export_test.unknown", ""));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              HasSubstr("custom op 'export_test.unknown' version 1 is not registered in this "
                        "process; load the library that registers it"));
  // A version the process has not registered is as unknown as a name.
  auto v2 = export_text(
      call_module("export_test.scale", "{version = 2 : i64, user_attrs = {factor = 2.5 : f64}}"));
  ASSERT_FALSE(v2.ok());
  EXPECT_THAT(v2.status().message(),
              HasSubstr("'export_test.scale' version 2 is not registered in this process (it has "
                        "version 1)"));
}

TEST_F(CustomOpExportTest, AnOpUnregisteredAfterVerifyingIsAnExportError) {
  auto module = parse_mstep_module(
      call_module("export_test.scale", "{user_attrs = {factor = 2.5 : f64}}"), ctx_, "test");
  ASSERT_TRUE(module.ok()) << module.status();
  CustomOpRegistry::global().remove_for_testing("export_test.scale");
  auto g = export_trace_graph((*module)->lookupSymbol<mlir::func::FuncOp>("step"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(g.status().message(),
              HasSubstr("custom op 'export_test.scale' version 1 is not registered"));
  EXPECT_THAT(g.status().message(), HasSubstr("register custom ops before compiling"));
}

TEST_F(CustomOpExportTest, AttributesThatDoNotMatchTheDeclarationAreErrors) {
  auto missing = export_text(call_module("export_test.scale", ""));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("needs attribute 'factor'"));
  auto renamed = export_text(call_module("export_test.scale", "{user_attrs = {f = 2.5 : f64}}"));
  ASSERT_FALSE(renamed.ok());
  EXPECT_THAT(renamed.status().message(), HasSubstr("has no attribute 'f'"));
  // The schema types the attribute: a string is no float.
  auto mistyped =
      export_text(call_module("export_test.scale", "{user_attrs = {factor = \"big\"}}"));
  ASSERT_FALSE(mistyped.ok());
  EXPECT_THAT(mistyped.status().message(),
              HasSubstr("attribute 'factor' has type float; the value \"big\" has type string"));
}

} // namespace
} // namespace mstep
