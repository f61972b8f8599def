// Autograd engine: requires_grad, backward, accumulation, zeroing,
// no_grad, detach, retain_graph, errors; and finite-difference checks of
// the elementwise formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mstep/mstep.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using testing::gradcheck;

Tensor f64(std::vector<double> v, Shape s) { return from_vector(v, s); }

TEST(Autograd, SimpleChainRule) {
  Tensor x = f64({1, 2, 3}, {3}).requires_grad_();
  Tensor y = sum(x * x * 3.0);  // dy/dx = 6x
  y.backward();
  mark_step();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 12, 18}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn_name(), "sum_backward");
}

TEST(Autograd, BackwardIsLazyAndLandsInTheStepGraph) {
  reset_metrics();
  Tensor x = f64({1, 2}, {2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  EXPECT_TRUE(x.grad().is_pending());
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, 1);
  auto g = x.grad().to_vector<double>();
  EXPECT_NEAR(g[0], std::exp(1.0), 1e-12);
}

TEST(Autograd, GradientsAccumulateUntilZeroed) {
  Tensor x = f64({1, 2}, {2}).requires_grad_();
  sum(x * 2.0).backward();
  sum(x * 3.0).backward();
  mark_step();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 5}));
  x.set_grad(Tensor());  // zero_grad(set_to_none=true)
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, SharedInputGetsSummedGradient) {
  Tensor x = f64({2}, {1}).requires_grad_();
  Tensor y = x * x + x;  // 2x + 1
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5}));
}

TEST(Autograd, ExplicitGradientForNonScalar) {
  Tensor x = f64({1, 2, 3}, {3}).requires_grad_();
  Tensor y = x * 2.0;
  y.backward(f64({1, 10, 100}, {3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 20, 200}));
}

TEST(Autograd, BroadcastGradientIsReduced) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = f64({10, 20, 30}, {3}).requires_grad_();
  sum(a * b).backward();
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(b.grad().shape(), Shape({3}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = f64({1}, {1}).requires_grad_();
  Tensor y;
  {
    NoGradGuard guard;
    y = x * 2.0;
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(grad_enabled());
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = f64({3}, {1}).requires_grad_();
  Tensor y = x.detach() * x;  // d/dx = x (detached factor is constant)
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3}));
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = f64({1}, {1}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(x.grad().item(), 2 * std::exp(1.0), 1e-12);
}

TEST(Autograd, SecondBackwardWithoutRetainGraphFails) {
  Tensor x = f64({1}, {1}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  try {
    y.backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("retain_graph"));
  }
  mark_step();  // the process stays usable
  EXPECT_NEAR(x.grad().item(), std::exp(1.0), 1e-12);
}

TEST(Autograd, BackwardOnNonScalarWithoutGradientFails) {
  Tensor x = f64({1, 2}, {2}).requires_grad_();
  try {
    (x * 2.0).backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("only for a scalar output"));
    EXPECT_THAT(e.what(), HasSubstr("f64[2]"));
    EXPECT_THAT(e.what(), HasSubstr("ones_like"));
  }
}

TEST(Autograd, BackwardOnTensorWithoutGradFails) {
  Tensor x = f64({1, 2}, {2});
  try {
    sum(x).backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not require grad"));
    EXPECT_THAT(e.what(), HasSubstr("requires_grad_()"));
  }
}

TEST(Autograd, GradientShapeMismatchFails) {
  Tensor x = f64({1, 2}, {2}).requires_grad_();
  EXPECT_THROW((x * 2.0).backward(f64({1, 2, 3}, {3})), Error);
}

TEST(Autograd, IntegerTensorsCannotRequireGrad) {
  Tensor i = from_vector(std::vector<int64_t>{1}, {1});
  try {
    i.requires_grad_();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("floating-point"));
  }
}

TEST(Autograd, ComparisonsCarryNoGradient) {
  Tensor x = f64({1, -1}, {2}).requires_grad_();
  EXPECT_FALSE(gt(x, 0).requires_grad());
  Tensor y = where(gt(x, 0), x, x * 3.0);
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 3}));
}

TEST(AutogradGradcheck, UnaryOps) {
  Tensor x = f64({0.3, -0.7, 1.4, -2.1}, {2, 2});
  Tensor pos = f64({0.3, 0.7, 1.4, 2.1}, {2, 2});
  using V = std::vector<Tensor>;
  EXPECT_TRUE(gradcheck([](const V& v) { return tanh(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return sigmoid(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gelu(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gelu(v[0], "tanh"); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return silu(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return erf(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return sin(v[0]) * cos(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return abs(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return relu(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return log(v[0]) + log1p(v[0]); }, {pos}));
  EXPECT_TRUE(gradcheck([](const V& v) { return sqrt(v[0]) + rsqrt(v[0]); }, {pos}));
  EXPECT_TRUE(gradcheck([](const V& v) { return reciprocal(v[0]); }, {pos}));
}

TEST(AutogradGradcheck, BinaryOpsWithBroadcasting) {
  Tensor a = f64({0.5, 1.5, 2.5, 0.7, 1.1, 1.9}, {2, 3});
  Tensor b = f64({1.2, 0.8, 1.7}, {3});
  using V = std::vector<Tensor>;
  EXPECT_TRUE(gradcheck([](const V& v) { return v[0] + v[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return v[0] - v[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return v[0] * v[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return v[0] / v[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return pow(v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return maximum(v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return minimum(v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return where(gt(v[0], 1.0), v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return 2.0 / v[0] - v[1] * 3.0; }, {a, b}));
}

}  // namespace
}  // namespace mstep
