// C API: recording ops by name (checked against the same C++ API calls, whose
// numerics the oracle tests check against PyTorch), their errors, autograd
// and optimizers.
#include <cmath>

#include "mstep/mstep.h"
#include "test/capi/CapiTestUtil.h"

namespace mstep::capi_test {
namespace {

using CapiOpTest = CapiTest;

TEST_F(CapiOpTest, OpsMatchTheCppApi) {
  const std::vector<float> av = {1, -2, 3, 4, 5, -6}, bv = {0.5f, 1, -1, 2, 3, 0.25f};
  mstep_tensor* a = f32(av, {2, 3});
  mstep_tensor* b = f32(bv, {3, 2});
  const Tensor ca = from_vector(av, {2, 3}, std::nullopt, Device{DeviceType::cpu, 0});
  const Tensor cb = from_vector(bv, {3, 2}, std::nullopt, Device{DeviceType::cpu, 0});

  mstep_tensor* mm = op("matmul", {a, b});
  EXPECT_EQ(shape(mm), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(mm), matmul(ca, cb).to_vector<float>());

  mstep_tensor* r = op("relu", {a});
  EXPECT_EQ(values(r), relu(ca).to_vector<float>());

  mstep_tensor* plus = op("add", {a}, {attr_float("other", 2.5)});
  EXPECT_EQ(values(plus), (ca + 2.5).to_vector<float>());

  const std::vector<int64_t> dims = {1};
  mstep_tensor* s = op("sum", {a}, {attr_ints("dims", dims), attr_bool("keepdim", true)});
  EXPECT_EQ(shape(s), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values(s), ca.sum({1}, true).to_vector<float>());

  mstep_tensor* ls = op("log_softmax", {a}, {attr_int("dim", 1)});
  EXPECT_EQ(values(ls), log_softmax(ca, 1).to_vector<float>());
}

TEST_F(CapiOpTest, MultiResultOpsAndCapacity) {
  mstep_tensor* a = f32({1, 2, 3, 4}, {4});
  mstep_tensor* inputs[] = {a};
  mstep_attr chunks[] = {attr_int("chunks", 2)};
  mstep_tensor* outs[2] = {};
  size_t n = 0;
  Outcome small = outcome(mstep_op(ctx, "chunk", inputs, 1, chunks, 1, outs, 1, &n));
  EXPECT_EQ(small.code, MSTEP_OUT_OF_RANGE) << small.message;
  MSTEP_ASSERT_OK(mstep_op(ctx, "chunk", inputs, 1, chunks, 1, outs, 2, &n));
  ASSERT_EQ(n, 2u);
  keep(outs[0]);
  keep(outs[1]);
  EXPECT_EQ(values(outs[1]), (std::vector<float>{3, 4}));
}

TEST_F(CapiOpTest, ErrorsNameTheOpAndShapes) {
  mstep_tensor* a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  mstep_tensor* out = nullptr;
  size_t n = 0;
  mstep_tensor* two[] = {a, a};
  Outcome shapes = outcome(mstep_op(ctx, "matmul", two, 2, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(shapes.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(shapes.message.find("matmul"), std::string::npos) << shapes.message;
  EXPECT_NE(shapes.message.find("f32[2, 3]"), std::string::npos) << shapes.message;

  Outcome unknown = outcome(mstep_op(ctx, "frobnicate", two, 2, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(unknown.code, MSTEP_NOT_FOUND);
  EXPECT_NE(unknown.message.find("frobnicate"), std::string::npos);

  Outcome count = outcome(mstep_op(ctx, "relu", two, 2, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(count.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(count.message.find("relu(x)"), std::string::npos) << count.message;

  mstep_attr typo[] = {attr_int("dimm", 1)};
  Outcome attr = outcome(mstep_op(ctx, "softmax", two, 1, typo, 1, &out, 1, &n));
  EXPECT_EQ(attr.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(attr.message.find("dimm"), std::string::npos) << attr.message;

  mstep_tensor* nulls[] = {nullptr};
  EXPECT_EQ(outcome(mstep_op(ctx, "relu", nulls, 1, nullptr, 0, &out, 1, &n)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_op(ctx, nullptr, two, 1, nullptr, 0, &out, 1, &n)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_op(ctx, "relu", two, 1, nullptr, 0, &out, 1, nullptr)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_op(ctx, "relu", two, 1, nullptr, 3, &out, 1, &n)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);

  // Mixing devices is refused by the op, naming both.
  mstep_device* ref = nullptr;
  MSTEP_ASSERT_OK(mstep_context_device(ctx, "ref", &ref));
  const float one = 1;
  const int64_t shape1[] = {1};
  mstep_tensor* on_ref = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_from_host(ctx, ref, MSTEP_F32, shape1, 1, &one, 4, &on_ref));
  keep(on_ref);
  mstep_tensor* mixed[] = {a, on_ref};
  Outcome devices = outcome(mstep_op(ctx, "add", mixed, 2, nullptr, 0, &out, 1, &n));
  EXPECT_EQ(devices.code, MSTEP_INVALID_ARGUMENT) << devices.message;
}

TEST_F(CapiOpTest, SignaturesListEveryOp) {
  const std::string all = mstep_op_signatures();
  for (const char* name : {"matmul(", "linear(", "nll_loss(", "dropout(", "sum("})
    EXPECT_NE(all.find(name), std::string::npos) << name;
}

/// Fits y = 2x + 1 with SGD through the C API; the same run through the C++
/// API gives the same loss.
double fit_line_cpp(int steps) {
  Device cpu{DeviceType::cpu, 0};
  Tensor w = zeros({1, 1}, DType::f32, cpu).requires_grad_();
  Tensor b = zeros({1}, DType::f32, cpu).requires_grad_();
  Tensor x = from_vector(std::vector<float>{0, 1, 2, 3}, {4, 1}, std::nullopt, cpu);
  Tensor y = from_vector(std::vector<float>{1, 3, 5, 7}, {4, 1}, std::nullopt, cpu);
  optim::SGD opt({w, b}, {.lr = 0.05});
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor l = mse_loss(linear(x, w, b), y);
    l.backward();
    opt.step();
    mark_step();
    loss = l.item();
  }
  return loss;
}

TEST_F(CapiOpTest, AutogradAndOptimizerTrainLikeTheCppApi) {
  mstep_tensor* w = f32({0}, {1, 1});
  mstep_tensor* b = f32({0}, {1});
  MSTEP_ASSERT_OK(mstep_tensor_set_requires_grad(w, 1));
  MSTEP_ASSERT_OK(mstep_tensor_set_requires_grad(b, 1));
  mstep_tensor* x = f32({0, 1, 2, 3}, {4, 1});
  mstep_tensor* y = f32({1, 3, 5, 7}, {4, 1});
  mstep_tensor* params[] = {w, b};
  mstep_attr lr[] = {attr_float("lr", 0.05)};
  mstep_optimizer* opt = nullptr;
  MSTEP_ASSERT_OK(mstep_optimizer_create(ctx, "sgd", params, 2, lr, 1, &opt));
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    MSTEP_ASSERT_OK(mstep_optimizer_zero_grad(opt));
    mstep_tensor* pred = op("linear", {x, w, b});
    mstep_tensor* loss = op("mse_loss", {pred, y});
    MSTEP_ASSERT_OK(mstep_tensor_backward(loss));
    if (i == 0) {
      mstep_tensor* g = nullptr;
      MSTEP_ASSERT_OK(mstep_tensor_grad(w, &g));
      ASSERT_NE(g, nullptr);
      keep(g);
      // d/dw mean((wx+b-y)^2) at w=b=0: -2 mean(x*y) = -2 * (0+3+10+21)/4
      EXPECT_NEAR(values(g)[0], -17.0, 1e-5);
    }
    MSTEP_ASSERT_OK(mstep_optimizer_step(opt));
    MSTEP_ASSERT_OK(mstep_context_mark_step(ctx));
    MSTEP_ASSERT_OK(mstep_tensor_item(loss, &last));
    if (i == 0) first = last;
  }
  EXPECT_LT(last, first / 10);
  EXPECT_NEAR(last, fit_line_cpp(30), 1e-6);
  MSTEP_ASSERT_OK(mstep_optimizer_set_lr(opt, 0.01));
  MSTEP_ASSERT_OK(mstep_optimizer_release(opt));
  EXPECT_EQ(outcome(mstep_optimizer_step(opt)).code, MSTEP_FAILED_PRECONDITION);

  mstep_tensor* no_grad = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_grad(x, &no_grad));
  EXPECT_EQ(no_grad, nullptr) << "no gradient: NULL, not an error";
}

TEST_F(CapiOpTest, GradModeOffRecordsNoBackward) {
  mstep_tensor* w = f32({3}, {1});
  MSTEP_ASSERT_OK(mstep_tensor_set_requires_grad(w, 1));
  MSTEP_ASSERT_OK(mstep_context_set_grad_enabled(ctx, 0));
  mstep_tensor* frozen = op("mul", {w, w});
  MSTEP_ASSERT_OK(mstep_context_set_grad_enabled(ctx, 1));
  Outcome o = outcome(mstep_tensor_backward(frozen));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT) << "nothing to differentiate: " << o.message;
  mstep_tensor* tracked = op("mul", {w, w});
  MSTEP_ASSERT_OK(mstep_tensor_backward(tracked));
  mstep_tensor* g = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_grad(w, &g));
  keep(g);
  EXPECT_EQ(values(g), (std::vector<float>{6}));
}

TEST_F(CapiOpTest, OptimizerErrors) {
  mstep_tensor* w = f32({0}, {1});
  MSTEP_ASSERT_OK(mstep_tensor_set_requires_grad(w, 1));
  mstep_tensor* params[] = {w};
  mstep_optimizer* opt = nullptr;
  Outcome kind = outcome(mstep_optimizer_create(ctx, "lion", params, 1, nullptr, 0, &opt));
  EXPECT_EQ(kind.code, MSTEP_NOT_FOUND);
  EXPECT_NE(kind.message.find("adadelta"), std::string::npos) << kind.message;
  mstep_attr typo[] = {attr_float("learning_rate", 0.1)};
  Outcome attr = outcome(mstep_optimizer_create(ctx, "adam", params, 1, typo, 1, &opt));
  EXPECT_EQ(attr.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(attr.message.find("learning_rate"), std::string::npos) << attr.message;
  mstep_attr negative[] = {attr_float("lr", -1)};
  EXPECT_EQ(outcome(mstep_optimizer_create(ctx, "sgd", params, 1, negative, 1, &opt)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_optimizer_create(ctx, "sgd", nullptr, 1, nullptr, 0, &opt)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(opt, nullptr);
  for (const char* k : {"sgd", "adam", "adamw", "adadelta"}) {
    MSTEP_ASSERT_OK(mstep_optimizer_create(ctx, k, params, 1, nullptr, 0, &opt));
    MSTEP_ASSERT_OK(mstep_optimizer_release(opt));
  }
}

}  // namespace
}  // namespace mstep::capi_test
