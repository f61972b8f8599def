// parse_mstep_module: MLIR text to a verified module, or an error with every
// located diagnostic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mlir/IR/MLIRContext.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

constexpr const char* kModule = R"mlir(
func.func @step(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = mstep.add %x, %x : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
)mlir";

class MlirParseTest : public ::testing::Test {
 protected:
  MlirParseTest() { register_mstep_dialects(context_); }
  mlir::MLIRContext context_{mlir::MLIRContext::Threading::DISABLED};
};

TEST_F(MlirParseTest, ParsesAViewIntoALargerBuffer) {
  // No NUL after the module: the bytes that follow must not be read.
  const std::string blob = std::string(kModule) + "garbage that is not MLIR";
  auto module = parse_mstep_module(absl::string_view(blob).substr(0, std::string(kModule).size()),
                                   context_, "the view");
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE((*module)->lookupSymbol("step"));
}

TEST_F(MlirParseTest, AnUnknownOpIsNamedWithItsLine) {
  const std::string broken = "func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                             "  %0 = mstep.frobnicate %x : tensor<2xf32> -> tensor<2xf32>\n"
                             "  return %0 : tensor<2xf32>\n}\n";
  auto module = parse_mstep_module(broken, context_, "the test module");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(module.status().message(), HasSubstr("the test module is not a valid mstep module"));
  EXPECT_THAT(module.status().message(), HasSubstr("\"the test module\":2:"));
  EXPECT_THAT(module.status().message(), HasSubstr("mstep.frobnicate"));
}

TEST_F(MlirParseTest, AVerifierErrorIsReported) {
  const std::string wrong = "func.func @f(%x: tensor<2xf32>) -> tensor<3xf32> {\n"
                            "  return %x : tensor<2xf32>\n}\n";
  auto module = parse_mstep_module(wrong, context_, "wrong.mlir");
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(module.status().message(), HasSubstr("\"wrong.mlir\":2:3"));
  EXPECT_THAT(module.status().message(), HasSubstr("doesn't match function result type"));
}

TEST_F(MlirParseTest, TheContextKeepsWorkingAfterAnError) {
  ASSERT_FALSE(parse_mstep_module("not mlir", context_, "m").ok());
  EXPECT_TRUE(parse_mstep_module(kModule, context_, "m").ok());
}

}  // namespace
}  // namespace mstep
