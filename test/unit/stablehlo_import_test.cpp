// mstep::import_stablehlo in process: a hand-written StableHLO module (the
// generic op form JAX prints) runs on ref and cpu with the values worked
// out here by loops, is captured and replayed like any traced step, exports
// back to StableHLO that imports again, and reports its signature; bad input (a missing file, an op mstep does not
// import, inputs of another shape or count) is an error naming it. The op
// mapping is test/ir (mstep-import-stablehlo*.mlir); JAX's own programs
// are test/interop (stablehlo_import_jax_*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "mstep/mstep.h"
#include "test/unit/TestFiles.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::error_of;

// y = relu(x @ w + b); total = sum of y over dim 0 (init 1, so + 1). w is
// donated to the result w - 0.5 * w.
constexpr const char* kModule = R"(module @jit_layer {
  "func.func"() <{arg_attrs = [{mstep.name = "x"}, {tf.aliasing_output = 2 : i32}, {}], function_type = (tensor<2x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2xf32>, tensor<3x2xf32>), res_attrs = [{jax.result_info = "y"}, {}, {}], sym_name = "main"}> ({
  ^bb0(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %b: tensor<2xf32>):
    %0 = "stablehlo.dot_general"(%x, %w) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    %1 = "stablehlo.broadcast_in_dim"(%b) <{broadcast_dimensions = array<i64: 1>}> : (tensor<2xf32>) -> tensor<2x2xf32>
    %2 = "stablehlo.add"(%0, %1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %zero = "stablehlo.constant"() <{value = dense<0.0> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
    %3 = "stablehlo.maximum"(%2, %zero) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %one = "stablehlo.constant"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
    %4 = "stablehlo.reduce"(%3, %one) <{dimensions = array<i64: 0>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = "stablehlo.add"(%l, %r) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) : (tensor<2x2xf32>, tensor<f32>) -> tensor<2xf32>
    %half = "stablehlo.constant"() <{value = dense<0.5> : tensor<3x2xf32>}> : () -> tensor<3x2xf32>
    %5 = "stablehlo.multiply"(%half, %w) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %6 = "stablehlo.subtract"(%w, %5) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    "func.return"(%3, %4, %6) : (tensor<2x2xf32>, tensor<2xf32>, tensor<3x2xf32>) -> ()
  }) : () -> ()
}
)";

class StableHloImport : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_shlo_in_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    set_default_device(Device{GetParam(), 0});
    path_ = dir_ + "/layer.mlir";
    testing::write_private_file(path_, kModule);
  }
  void TearDown() override {
    set_default_device(Device{DeviceType::ref, 0});
    fs::remove_all(dir_);
  }

  /// relu(x @ w + b) by loops.
  static std::vector<float> layer(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b) {
    std::vector<float> y(4);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        float acc = b[j];
        for (int k = 0; k < 3; ++k) acc += x[i * 3 + k] * w[k * 2 + j];
        y[i * 2 + j] = std::max(acc, 0.0f);
      }
    return y;
  }

  std::string dir_, path_;
  const std::vector<float> x_{1, -2, 3, 0.5f, 4, -1}, w_{1, 2, -1, 0.5f, 2, -3}, b_{0.25f, -1};
};

TEST_P(StableHloImport, RunsWithTheValuesTheOpsDefine) {
  StableHloFunction fn = import_stablehlo(path_);
  std::vector<Tensor> out = fn({testing::f32(x_, {2, 3}), testing::f32(w_, {3, 2}),
                                testing::f32(b_, {2})});
  ASSERT_EQ(out.size(), 3u);
  const std::vector<float> y = layer(x_, w_, b_);
  EXPECT_EQ(testing::values(out[0]), y);
  // Column sums, plus the reduce's init value 1.
  EXPECT_EQ(testing::values(out[1]), (std::vector<float>{y[0] + y[2] + 1, y[1] + y[3] + 1}));
  std::vector<float> w_next;
  for (float v : w_) w_next.push_back(v - 0.5f * v);
  EXPECT_EQ(testing::values(out[2]), w_next);
  EXPECT_EQ(out[0].device(), (Device{GetParam(), 0}));
}

TEST_P(StableHloImport, IsCapturedAndReplayedLikeAnyStep) {
  StableHloFunction fn = import_stablehlo(path_);
  Tensor x = testing::f32(x_, {2, 3}), w = testing::f32(w_, {3, 2}), b = testing::f32(b_, {2});
  fn({x, w, b});  // warm-up (lazy)
  Graph graph;
  Tensor y;
  {
    CaptureGuard capture(graph);
    y = fn({x, w, b})[0];
  }
  const std::vector<float> x2{2, 1, 0, -1, 3, 0.5f};
  x.copy_(testing::f32(x2, {2, 3}));
  graph.replay();
  EXPECT_EQ(testing::values(y), layer(x2, w_, b_));
}

TEST_P(StableHloImport, ItsCaptureExportsAsStableHloThatImportsBack) {
  // JAX's module -> mstep (captured) -> Graph::export_stablehlo -> mstep
  // again: the round trip computes the same layer.
  StableHloFunction fn = import_stablehlo(path_);
  Tensor x = testing::f32(x_, {2, 3}), w = testing::f32(w_, {3, 2}), b = testing::f32(b_, {2});
  Graph graph;
  Tensor y;
  {
    CaptureGuard capture(graph);
    y = fn({x, w, b})[0];
  }
  const std::string exported = dir_ + "/exported.mlir";
  graph.export_stablehlo(exported, {{"x", x}, {"w", w}, {"b", b}, {"y", y}});
  StableHloFunction again = import_stablehlo(exported);
  std::vector<Tensor> inputs;
  for (const std::string& name : again.input_names())
    inputs.push_back(name == "x" ? x : name == "w" ? w : b);
  const std::vector<std::string>& names = again.output_names();
  const size_t at = std::find(names.begin(), names.end(), "y") - names.begin();
  ASSERT_LT(at, names.size());
  EXPECT_EQ(testing::values(again(inputs)[at]), layer(x_, w_, b_));
}

TEST_P(StableHloImport, ReportsItsSignature) {
  StableHloFunction fn = import_stablehlo(path_);
  EXPECT_EQ(fn.input_types(), (std::vector<TensorType>{{Shape{2, 3}, DType::f32},
                                                       {Shape{3, 2}, DType::f32},
                                                       {Shape{2}, DType::f32}}));
  EXPECT_EQ(fn.output_types()[1], (TensorType{Shape{2}, DType::f32}));
  // mstep.name / jax.result_info when given, else positional.
  EXPECT_EQ(fn.input_names(), (std::vector<std::string>{"x", "arg1", "arg2"}));
  EXPECT_EQ(fn.output_names(), (std::vector<std::string>{"y", "result1", "result2"}));
  // tf.aliasing_output: w (input 1) is donated to result 2.
  EXPECT_EQ(fn.donated_to(), (std::vector<int32_t>{-1, 2, -1}));
}

TEST_P(StableHloImport, LargeConstantsAreUploadedWithEachCall) {
  // 80 floats and 70 ints (more than the 64 built from scalars), as JAX
  // writes arrays a function closes over: f = x + c, g = y + k.
  std::vector<float> c(80);
  std::vector<int32_t> k(70);
  std::string c_text, k_text;
  for (int i = 0; i < 80; ++i) {
    c[i] = 0.5f * static_cast<float>(i) - 7;
    c_text += (i ? ", " : "") + std::to_string(c[i]);
  }
  for (int i = 0; i < 70; ++i) {
    k[i] = i % 2 ? -1000 * i : i;
    k_text += (i ? ", " : "") + std::to_string(k[i]);
  }
  const std::string path = dir_ + "/constants.mlir";
  testing::write_private_file(path, R"("func.func"() <{function_type = (tensor<80xf32>, tensor<70xi32>) -> (tensor<80xf32>, tensor<70xi32>), sym_name = "main"}> ({
^bb0(%x: tensor<80xf32>, %y: tensor<70xi32>):
  %c = "stablehlo.constant"() <{value = dense<[)" + c_text + R"(]> : tensor<80xf32>}> : () -> tensor<80xf32>
  %k = "stablehlo.constant"() <{value = dense<[)" + k_text + R"(]> : tensor<70xi32>}> : () -> tensor<70xi32>
  %f = "stablehlo.add"(%x, %c) : (tensor<80xf32>, tensor<80xf32>) -> tensor<80xf32>
  %g = "stablehlo.add"(%y, %k) : (tensor<70xi32>, tensor<70xi32>) -> tensor<70xi32>
  "func.return"(%f, %g) : (tensor<80xf32>, tensor<70xi32>) -> ()
}) : () -> ()
)");
  StableHloFunction fn = import_stablehlo(path);
  EXPECT_EQ(fn.input_types().size(), 2u);  // the constants are no arguments
  std::vector<float> x(80);
  std::vector<int32_t> y(70);
  for (int i = 0; i < 80; ++i) x[i] = static_cast<float>(i % 7);
  for (int i = 0; i < 70; ++i) y[i] = 3 * i;
  std::vector<Tensor> out = fn({from_buffer(x.data(), {Shape{80}, DType::f32}),
                                from_buffer(y.data(), {Shape{70}, DType::i32})});
  std::vector<float> f(80);
  std::vector<int32_t> g(70);
  for (int i = 0; i < 80; ++i) f[i] = x[i] + c[i];
  for (int i = 0; i < 70; ++i) g[i] = y[i] + k[i];
  EXPECT_EQ(out[0].to_vector<float>(), f);
  EXPECT_EQ(out[1].to_vector<int32_t>(), g);
}

TEST_P(StableHloImport, InputsOfAnotherShapeOrCountAreAnErrorNamingThem) {
  StableHloFunction fn = import_stablehlo(path_);
  EXPECT_THAT(error_of([&] { fn({testing::f32(x_, {2, 3})}); }),
              HasSubstr("the function takes 3 inputs, got 1"));
  EXPECT_THAT(error_of([&] {
                fn({testing::f32(x_, {3, 2}), testing::f32(w_, {3, 2}), testing::f32(b_, {2})});
              }),
              HasSubstr("input 0 (x) is f32[3, 2] but the module declares f32[2, 3]"));
}

TEST_P(StableHloImport, AMissingFileIsNotFound) {
  try {
    import_stablehlo(dir_ + "/absent.mlir");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("absent.mlir"));
  }
}

TEST_P(StableHloImport, AnUnsupportedOpIsAnErrorAtItsLineAndTheProcessGoesOn) {
  const std::string bad = dir_ + "/gather.mlir";
  testing::write_private_file(bad, R"("func.func"() <{function_type = (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<3x4xf32>, %i: tensor<2x1xi32>):
  %0 = "stablehlo.gather"(%x, %i) <{slice_sizes = array<i64: 1, 4>}> : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>
  "func.return"(%0) : (tensor<2x4xf32>) -> ()
}) : () -> ()
)");
  EXPECT_THAT(error_of([&] { import_stablehlo(bad); }),
              StartsWith("mstep::import_stablehlo: " + bad +
                         ":3:8: error: StableHLO import: 'stablehlo.gather'"));
  // Nothing was left behind: a good module imports and runs after it.
  StableHloFunction fn = import_stablehlo(path_);
  EXPECT_EQ(testing::values(fn({testing::f32(x_, {2, 3}), testing::f32(w_, {3, 2}),
                                testing::f32(b_, {2})})[0]),
            layer(x_, w_, b_));
}

INSTANTIATE_TEST_SUITE_P(Devices, StableHloImport,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) {
                           return info.param == DeviceType::ref ? "ref" : "cpu";
                         });

}  // namespace
}  // namespace mstep
