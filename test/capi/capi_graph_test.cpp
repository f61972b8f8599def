// C API: graph builders, MLIR modules, compiled graphs through the module
// cache, and capture/replay (of compiled graphs and of whole training steps).
#include <algorithm>
#include <cstring>

#include "mstep/mstep.h"
#include "test/capi/CapiTestUtil.h"

namespace mstep::capi_test {
namespace {

class CapiGraphTest : public CapiTest {
 protected:
  /// relu(x @ w + b) with w, b captured constants; x: f32[2, 3].
  mstep_compiled_graph* build_mlp() {
    mstep_graph_builder* builder = nullptr;
    EXPECT_EQ(outcome(mstep_graph_builder_create(ctx, cpu, &builder)).code, MSTEP_OK);
    const int64_t xs[] = {2, 3};
    mstep_tensor* x = nullptr;
    EXPECT_EQ(outcome(mstep_graph_builder_add_input(builder, MSTEP_F32, xs, 2, &x)).code,
              MSTEP_OK);
    w = f32({1, -1, 0.5f, 2, -2, 1}, {3, 2});
    b = f32({0.25f, -0.5f}, {2});
    mstep_tensor* mm = builder_op(builder, "matmul", {x, w});
    mstep_tensor* sum = builder_op(builder, "add", {mm, b});
    mstep_tensor* out = builder_op(builder, "relu", {sum});
    mstep_compiled_graph* graph = nullptr;
    Outcome o = outcome(mstep_graph_builder_compile(builder, &out, 1, &graph));
    EXPECT_EQ(o.code, MSTEP_OK) << o.message;
    for (mstep_tensor* t : {x, mm, sum, out}) MSTEP_EXPECT_OK(mstep_tensor_release(t));
    MSTEP_EXPECT_OK(mstep_graph_builder_release(builder));
    return graph;
  }
  mstep_tensor* builder_op(mstep_graph_builder* builder, const char* name,
                           std::vector<mstep_tensor*> inputs) {
    mstep_tensor* out = nullptr;
    size_t n = 0;
    Outcome o = outcome(mstep_graph_builder_op(builder, name, inputs.data(), inputs.size(),
                                               nullptr, 0, &out, 1, &n));
    EXPECT_EQ(o.code, MSTEP_OK) << o.message;
    return out;
  }
  std::vector<float> expected_mlp(const std::vector<float>& x) {
    Device d{DeviceType::cpu, 0};
    Tensor tw = from_vector(std::vector<float>{1, -1, 0.5f, 2, -2, 1}, {3, 2}, std::nullopt, d);
    Tensor tb = from_vector(std::vector<float>{0.25f, -0.5f}, {2}, std::nullopt, d);
    return relu(matmul(from_vector(x, {2, 3}, std::nullopt, d), tw) + tb).to_vector<float>();
  }

  mstep_tensor* w = nullptr;
  mstep_tensor* b = nullptr;
};

TEST_F(CapiGraphTest, BuilderGraphRunsThroughTheModuleCache) {
  mstep_compiled_graph* graph = build_mlp();
  ASSERT_NE(graph, nullptr);
  size_t n_in = 0, n_out = 0;
  MSTEP_ASSERT_OK(mstep_compiled_graph_num_inputs(graph, &n_in));
  MSTEP_ASSERT_OK(mstep_compiled_graph_num_outputs(graph, &n_out));
  EXPECT_EQ(n_in, 1u);
  EXPECT_EQ(n_out, 1u);
  mstep_dtype dtype;
  int64_t dims[MSTEP_MAX_RANK];
  size_t rank = 0;
  MSTEP_ASSERT_OK(mstep_compiled_graph_output_type(graph, 0, &dtype, dims, MSTEP_MAX_RANK, &rank));
  EXPECT_EQ(dtype, MSTEP_F32);
  EXPECT_EQ(std::vector<int64_t>(dims, dims + rank), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(outcome(mstep_compiled_graph_input_type(graph, 1, &dtype, dims, 8, &rank)).code,
            MSTEP_OUT_OF_RANGE);

  const std::vector<std::vector<float>> xs = {{1, 2, 3, 4, 5, 6}, {-1, 0, 1, 0.5f, -3, 2}};
  std::vector<std::vector<float>> want;
  for (const auto& xv : xs) want.push_back(expected_mlp(xv));
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  for (size_t i = 0; i < xs.size(); ++i) {
    mstep_tensor* x = f32(xs[i], {2, 3});
    mstep_tensor* out = nullptr;
    MSTEP_ASSERT_OK(mstep_compiled_graph_run(graph, &x, 1, &out, 1));
    keep(out);
    EXPECT_EQ(values(out), want[i]);
  }
  EXPECT_EQ(metric("compiles"), 0) << "compiled at mstep_graph_builder_compile";
  EXPECT_EQ(metric("cache_hits"), 2);
  MSTEP_ASSERT_OK(mstep_compiled_graph_release(graph));
}

TEST_F(CapiGraphTest, RunWithAWrongSignatureRunsNothing) {
  mstep_compiled_graph* graph = build_mlp();
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  mstep_tensor* out = nullptr;
  mstep_tensor* wrong_shape = f32({1, 2, 3}, {1, 3});
  Outcome shape = outcome(mstep_compiled_graph_run(graph, &wrong_shape, 1, &out, 1));
  EXPECT_EQ(shape.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(shape.message.find("inputs[0] is f32[1, 3]"), std::string::npos) << shape.message;
  EXPECT_NE(shape.message.find("f32[2, 3]"), std::string::npos) << shape.message;
  mstep_tensor* wrong_dtype = i64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(outcome(mstep_compiled_graph_run(graph, &wrong_dtype, 1, &out, 1)).code,
            MSTEP_INVALID_ARGUMENT);
  mstep_tensor* two[] = {wrong_shape, wrong_shape};
  EXPECT_EQ(outcome(mstep_compiled_graph_run(graph, two, 2, &out, 1)).code,
            MSTEP_INVALID_ARGUMENT);
  mstep_tensor* x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(outcome(mstep_compiled_graph_run(graph, &x, 1, &out, 2)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_compiled_graph_run(graph, &x, 1, nullptr, 1)).code,
            MSTEP_INVALID_ARGUMENT);
  mstep_device* ref = nullptr;
  MSTEP_ASSERT_OK(mstep_context_device(ctx, "ref", &ref));
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  const int64_t xs[] = {2, 3};
  mstep_tensor* on_ref = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_from_host(ctx, ref, MSTEP_F32, xs, 2, xv.data(), 24, &on_ref));
  keep(on_ref);
  Outcome device = outcome(mstep_compiled_graph_run(graph, &on_ref, 1, &out, 1));
  EXPECT_EQ(device.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(device.message.find("ref:0"), std::string::npos) << device.message;
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(metric("graphs_executed"), 0) << "a rejected run executes nothing";
  MSTEP_ASSERT_OK(mstep_compiled_graph_release(graph));
  EXPECT_EQ(outcome(mstep_compiled_graph_run(graph, &x, 1, &out, 1)).code,
            MSTEP_FAILED_PRECONDITION);
}

TEST_F(CapiGraphTest, BuilderErrorsPointAtTheOpAndRecordNothing) {
  mstep_graph_builder* builder = nullptr;
  MSTEP_ASSERT_OK(mstep_graph_builder_create(ctx, cpu, &builder));
  const int64_t xs[] = {2, 3};
  mstep_tensor* x = nullptr;
  MSTEP_ASSERT_OK(mstep_graph_builder_add_input(builder, MSTEP_F32, xs, 2, &x));
  keep(x);
  mstep_tensor* pair[] = {x, x};
  mstep_tensor* out = nullptr;
  size_t n = 0;
  Outcome bad = outcome(mstep_graph_builder_op(builder, "matmul", pair, 2, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(bad.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(bad.message.find("matmul"), std::string::npos) << bad.message;

  // Builder tensors hold no data and cannot be mixed with other builders or
  // used by mstep_op.
  double item = 0;
  EXPECT_EQ(outcome(mstep_tensor_item(x, &item)).code, MSTEP_FAILED_PRECONDITION);
  EXPECT_EQ(outcome(mstep_op(ctx, "relu", pair, 1, nullptr, 0, &out, 1, &n)).code,
            MSTEP_INVALID_ARGUMENT);
  mstep_graph_builder* other = nullptr;
  MSTEP_ASSERT_OK(mstep_graph_builder_create(ctx, cpu, &other));
  Outcome foreign = outcome(mstep_graph_builder_op(other, "relu", pair, 1, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(foreign.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(foreign.message.find("another graph builder"), std::string::npos);
  mstep_compiled_graph* graph = nullptr;
  EXPECT_EQ(outcome(mstep_graph_builder_compile(other, &x, 1, &graph)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_graph_builder_compile(builder, nullptr, 0, &graph)).code,
            MSTEP_INVALID_ARGUMENT);
  MSTEP_ASSERT_OK(mstep_graph_builder_release(other));

  // The failed matmul left no op behind: x -> relu compiles to one op.
  mstep_tensor* r = nullptr;
  MSTEP_ASSERT_OK(mstep_graph_builder_op(builder, "relu", pair, 1, nullptr, 0, &r, 1, &n));
  keep(r);
  MSTEP_ASSERT_OK(mstep_graph_builder_compile(builder, &r, 1, &graph));
  mstep_tensor* in = f32({-1, 2, -3, 4, -5, 6}, {2, 3});
  mstep_tensor* res = nullptr;
  MSTEP_ASSERT_OK(mstep_compiled_graph_run(graph, &in, 1, &res, 1));
  keep(res);
  EXPECT_EQ(values(res), (std::vector<float>{0, 2, 0, 4, 0, 6}));
  MSTEP_ASSERT_OK(mstep_compiled_graph_release(graph));
  MSTEP_ASSERT_OK(mstep_graph_builder_release(builder));
  EXPECT_EQ(outcome(mstep_graph_builder_release(builder)).code, MSTEP_FAILED_PRECONDITION);
}

constexpr const char* kModule = R"mlir(
func.func @affine(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.add %x, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = mstep.mul %0, %0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
)mlir";

TEST_F(CapiGraphTest, MlirModuleCompilesAndRuns) {
  mstep_compiled_graph* graph = nullptr;
  MSTEP_ASSERT_OK(mstep_compiled_graph_from_mlir(ctx, cpu, kModule, std::strlen(kModule), &graph));
  size_t n_in = 0;
  MSTEP_ASSERT_OK(mstep_compiled_graph_num_inputs(graph, &n_in));
  EXPECT_EQ(n_in, 2u);
  mstep_tensor* x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  mstep_tensor* b = f32({1, 0, -1}, {3});
  mstep_tensor* inputs[] = {x, b};
  mstep_tensor* out = nullptr;
  MSTEP_ASSERT_OK(mstep_compiled_graph_run(graph, inputs, 2, &out, 1));
  keep(out);
  EXPECT_EQ(values(out), (std::vector<float>{4, 4, 4, 25, 25, 25}));
  MSTEP_ASSERT_OK(mstep_compiled_graph_release(graph));
}

TEST_F(CapiGraphTest, MalformedMlirIsAnErrorWithALocation) {
  const std::string broken = "func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                             "  %0 = mstep.frobnicate %x : tensor<2xf32> -> tensor<2xf32>\n"
                             "  return %0 : tensor<2xf32>\n}\n";
  mstep_compiled_graph* graph = nullptr;
  Outcome o = outcome(
      mstep_compiled_graph_from_mlir(ctx, cpu, broken.data(), broken.size(), &graph));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("2:"), std::string::npos) << "names the line: " << o.message;
  EXPECT_NE(o.message.find("frobnicate"), std::string::npos) << o.message;
  const std::string truncated = std::string(kModule).substr(0, 60);
  EXPECT_EQ(outcome(mstep_compiled_graph_from_mlir(ctx, cpu, truncated.data(), truncated.size(),
                                                   &graph))
                .code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_compiled_graph_from_mlir(ctx, cpu, nullptr, 0, &graph)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(graph, nullptr);
}

TEST_F(CapiGraphTest, CapturedCompiledGraphReplaysWithFreshOutputs) {
  mstep_compiled_graph* graph = build_mlp();
  mstep_captured_graph* captured = nullptr;
  MSTEP_ASSERT_OK(mstep_compiled_graph_capture(graph, &captured));
  size_t segments = 0, kernels = 0;
  MSTEP_ASSERT_OK(mstep_captured_graph_stats(captured, &segments, &kernels));
  EXPECT_EQ(segments, 1u);
  EXPECT_GE(kernels, 1u);

  const std::vector<float> x1 = {1, 2, 3, 4, 5, 6}, x2 = {-1, 0, 1, 0.5f, -3, 2};
  const std::vector<float> want1 = expected_mlp(x1), want2 = expected_mlp(x2);
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  mstep_tensor* in1 = f32(x1, {2, 3});
  mstep_tensor* in2 = f32(x2, {2, 3});
  mstep_tensor* out1 = nullptr;
  mstep_tensor* out2 = nullptr;
  MSTEP_ASSERT_OK(mstep_captured_graph_run(captured, &in1, 1, &out1, 1));
  keep(out1);
  MSTEP_ASSERT_OK(mstep_captured_graph_run(captured, &in2, 1, &out2, 1));
  keep(out2);
  EXPECT_EQ(values(out2), want2);
  EXPECT_EQ(values(out1), want1) << "a later replay leaves earlier outputs alone";
  EXPECT_EQ(metric("replays"), 2);
  EXPECT_EQ(metric("graphs_executed"), 0) << "replay runs no lazy graph";

  mstep_tensor* wrong = f32({1, 2, 3}, {1, 3});
  mstep_tensor* out = nullptr;
  Outcome o = outcome(mstep_captured_graph_run(captured, &wrong, 1, &out, 1));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("f32[1, 3]"), std::string::npos) << o.message;
  EXPECT_EQ(outcome(mstep_captured_graph_replay(captured)).code, MSTEP_FAILED_PRECONDITION);
  EXPECT_EQ(outcome(mstep_captured_graph_end(captured)).code, MSTEP_FAILED_PRECONDITION);
  EXPECT_EQ(metric("replays"), 2) << "rejected replays ran nothing";
  MSTEP_ASSERT_OK(mstep_captured_graph_release(captured));
  MSTEP_ASSERT_OK(mstep_compiled_graph_release(graph));
}

TEST_F(CapiGraphTest, CapturedTrainingStepReplaysLikeLazyMode) {
  // Two identical models: one trained lazily, one captured and replayed.
  auto make = [&](mstep_tensor** w, mstep_optimizer** opt) {
    *w = f32({0.5f, -0.25f}, {1, 2});
    MSTEP_EXPECT_OK(mstep_tensor_set_requires_grad(*w, 1));
    mstep_attr lr[] = {attr_float("lr", 0.1)};
    MSTEP_EXPECT_OK(mstep_optimizer_create(ctx, "sgd", w, 1, lr, 1, opt));
  };
  mstep_tensor *w_lazy, *w_replay;
  mstep_optimizer *opt_lazy, *opt_replay;
  make(&w_lazy, &opt_lazy);
  make(&w_replay, &opt_replay);
  mstep_tensor* static_x = f32({0, 0, 0, 0}, {2, 2});
  mstep_tensor* static_y = f32({0, 0}, {2, 1});
  auto step = [&](mstep_tensor* w, mstep_optimizer* opt, mstep_tensor* x, mstep_tensor* y) {
    MSTEP_EXPECT_OK(mstep_optimizer_zero_grad(opt));
    mstep_tensor* pred = op("linear", {x, w});
    mstep_tensor* loss = op("mse_loss", {pred, y});
    MSTEP_EXPECT_OK(mstep_tensor_backward(loss));
    MSTEP_EXPECT_OK(mstep_context_mark_step(ctx));
    MSTEP_EXPECT_OK(mstep_optimizer_step(opt));
    MSTEP_EXPECT_OK(mstep_context_mark_step(ctx));
    return loss;
  };
  mstep_captured_graph* captured = nullptr;
  mstep_tensor* static_loss = nullptr;
  for (int i = 0; i < 6; ++i) {
    const float k = float(i);
    mstep_tensor* x = f32({1 + k, 2, -1, k}, {2, 2});
    mstep_tensor* y = f32({k, 1}, {2, 1});
    double lazy_loss = 0, replay_loss = 0;
    MSTEP_ASSERT_OK(mstep_tensor_item(step(w_lazy, opt_lazy, x, y), &lazy_loss));
    MSTEP_ASSERT_OK(mstep_tensor_copy_(static_x, x));
    MSTEP_ASSERT_OK(mstep_tensor_copy_(static_y, y));
    if (i < 2) {
      MSTEP_ASSERT_OK(mstep_tensor_item(step(w_replay, opt_replay, static_x, static_y),
                                        &replay_loss));
    } else if (i == 2) {
      MSTEP_ASSERT_OK(mstep_capture_begin(ctx, &captured));
      static_loss = step(w_replay, opt_replay, static_x, static_y);
      MSTEP_ASSERT_OK(mstep_captured_graph_end(captured));
      MSTEP_ASSERT_OK(mstep_tensor_item(static_loss, &replay_loss));
    } else {
      MSTEP_ASSERT_OK(mstep_captured_graph_replay(captured));
      MSTEP_ASSERT_OK(mstep_tensor_item(static_loss, &replay_loss));
    }
    EXPECT_NEAR(replay_loss, lazy_loss, 1e-6) << "step " << i;
  }
  EXPECT_EQ(values(w_replay), values(w_lazy));
  mstep_tensor* out = nullptr;
  EXPECT_EQ(outcome(mstep_captured_graph_run(captured, &static_x, 1, &out, 1)).code,
            MSTEP_FAILED_PRECONDITION);
  EXPECT_EQ(outcome(mstep_captured_graph_abort(captured)).code, MSTEP_FAILED_PRECONDITION);
  MSTEP_ASSERT_OK(mstep_captured_graph_release(captured));
  MSTEP_ASSERT_OK(mstep_optimizer_release(opt_lazy));
  MSTEP_ASSERT_OK(mstep_optimizer_release(opt_replay));
}

TEST_F(CapiGraphTest, AbortedCaptureCanBeRetried) {
  mstep_captured_graph* captured = nullptr;
  MSTEP_ASSERT_OK(mstep_capture_begin(ctx, &captured));
  mstep_captured_graph* nested = nullptr;
  Outcome o = outcome(mstep_capture_begin(ctx, &nested));
  EXPECT_EQ(o.code, MSTEP_FAILED_PRECONDITION) << o.message;
  EXPECT_EQ(outcome(mstep_captured_graph_replay(captured)).code, MSTEP_FAILED_PRECONDITION);
  MSTEP_ASSERT_OK(mstep_captured_graph_abort(captured));
  MSTEP_ASSERT_OK(mstep_captured_graph_release(captured));
  MSTEP_ASSERT_OK(mstep_capture_begin(ctx, &captured));
  mstep_tensor* a = f32({1, 2}, {2});
  mstep_tensor* r = op("mul", {a, a});
  MSTEP_ASSERT_OK(mstep_context_mark_step(ctx));
  MSTEP_ASSERT_OK(mstep_captured_graph_end(captured));
  MSTEP_ASSERT_OK(mstep_captured_graph_replay(captured));
  EXPECT_EQ(values(r), (std::vector<float>{1, 4}));
  // A captured input that is released: the replay refuses, naming it.
  MSTEP_ASSERT_OK(mstep_tensor_release(a));
  owned.erase(std::find(owned.begin(), owned.end(), a));
  Outcome freed = outcome(mstep_captured_graph_replay(captured));
  EXPECT_EQ(freed.code, MSTEP_FAILED_PRECONDITION) << freed.message;
  MSTEP_ASSERT_OK(mstep_captured_graph_release(captured));
}

}  // namespace
}  // namespace mstep::capi_test
