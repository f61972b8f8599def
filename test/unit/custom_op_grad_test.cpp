// Autograd through custom ops (CustomOpDef::backward, mstep/api/CustomOp.h):
// one op, y = softplus(beta x) / beta * s * mask with its row sums, whose
// backward is given in both forms: (a) a function of lazy ops, (b) another
// custom op with ref and cpu kernels. Gradients are checked against finite
// differences and against the same function composed of built-in ops, on
// ref and cpu; a training step with the op captured and replayed equals
// the lazy one bitwise, also through make_graphed_callable; inputs that
// are not differentiable get no gradient; and the errors of bad backwards.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "test/unit/GradCheck.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// ---- the op and its kernels ----

double softplus(double z) { return std::log1p(std::exp(z)); }
double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

/// Forward: (x, s, mask) [m, n] -> (y [m, n], row_sum [m]).
template <typename T> absl::Status forward_kernel(const HostKernelCall& call) {
  const double beta = *call.attrs.get_double("beta");
  const Shape& shape = call.input_types[0].shape;
  const auto *x = static_cast<const T*>(call.inputs[0]), *s = static_cast<const T*>(call.inputs[1]),
             *m = static_cast<const T*>(call.inputs[2]);
  auto *y = static_cast<T*>(call.outputs[0]), *rows = static_cast<T*>(call.outputs[1]);
  for (int64_t i = 0; i < shape[0]; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < shape[1]; ++j) {
      const int64_t k = i * shape[1] + j;
      const double v = softplus(beta * x[k]) / beta * s[k] * m[k];
      y[k] = static_cast<T>(v);
      acc += static_cast<T>(v);
    }
    rows[i] = static_cast<T>(acc);
  }
  return absl::OkStatus();
}

/// Backward: (x, s, mask, grad_y, grad_row_sum) -> (grad_x, grad_s).
template <typename T> absl::Status backward_kernel(const HostKernelCall& call) {
  const double beta = *call.attrs.get_double("beta");
  const Shape& shape = call.input_types[0].shape;
  const auto *x = static_cast<const T*>(call.inputs[0]), *s = static_cast<const T*>(call.inputs[1]),
             *m = static_cast<const T*>(call.inputs[2]),
             *gy = static_cast<const T*>(call.inputs[3]),
             *gr = static_cast<const T*>(call.inputs[4]);
  auto *gx = static_cast<T*>(call.outputs[0]), *gs = static_cast<T*>(call.outputs[1]);
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j) {
      const int64_t k = i * shape[1] + j;
      const double g = static_cast<double>(gy[k]) + gr[i];
      gx[k] = static_cast<T>(g * sigmoid(beta * x[k]) * s[k] * m[k]);
      gs[k] = static_cast<T>(g * softplus(beta * x[k]) / beta * m[k]);
    }
  return absl::OkStatus();
}

/// The f32 or f64 instance of `kernel`, for both host backends.
template <absl::Status (*F32)(const HostKernelCall&), absl::Status (*F64)(const HostKernelCall&)>
std::vector<std::pair<std::string, std::shared_ptr<const CustomKernel>>> host_kernels() {
  auto k = host_kernel([](const HostKernelCall& call) {
    return call.input_types[0].dtype == DType::f64 ? F64(call) : F32(call);
  });
  return {{"ref", k}, {"cpu", k}};
}

/// [m, n] inputs of one float dtype: the first output's type and [m].
absl::StatusOr<std::vector<TensorType>> forward_rule(absl::Span<const TensorType> in,
                                                     const CustomAttrView&) {
  for (const TensorType& t : in)
    if (t != in[0] || t.shape.rank() != 2)
      return absl::InvalidArgumentError("x, s and mask are [m, n] matrices of one dtype");
  return std::vector<TensorType>{in[0], TensorType{Shape({in[0].shape[0]}), in[0].dtype}};
}

absl::StatusOr<std::vector<TensorType>> backward_rule(absl::Span<const TensorType> in,
                                                      const CustomAttrView&) {
  return std::vector<TensorType>{in[0], in[0]};
}

const CustomOpSchema kForwardSchema{
    .inputs = {{"x", {DType::f32, DType::f64}}, {"s"}, {.name = "mask", .differentiable = false}},
    .attrs = {{"beta", CustomAttrType::float64, 1.0}},
    .num_outputs = 2};

/// The gradients with lazy built-in ops (form (a)).
std::vector<Tensor> lazy_backward(const CustomGradContext& c) {
  const double beta = *c.attrs.get_double("beta");
  const Tensor &x = c.inputs[0], &s = c.inputs[1], &mask = c.inputs[2];
  Tensor g = c.grad_outputs[0] + unsqueeze(c.grad_outputs[1], 1);
  EXPECT_FALSE(c.needs_input_grad[2]) << "the mask is not differentiable";
  return {g * sigmoid(x * beta) * s * mask, g * log1p(exp(x * beta)) / beta * mask, Tensor()};
}

/// Registers the backward op and three forward ops: with the lazy function,
/// with the backward op, and with a function that calls the backward op.
void register_ops() {
  if (CustomOpRegistry::global().find("test.grad.softplus_bw").ok()) return;
  register_custom_op({.name = "test.grad.softplus_bw",
                      .schema = {.inputs = {{"x"}, {"s"}, {"mask"}, {"grad_y"}, {"grad_rows"}},
                                 .attrs = {{"beta", CustomAttrType::float64}},
                                 .num_outputs = 2},
                      .shape_rule = backward_rule,
                      .kernels = host_kernels<backward_kernel<float>, backward_kernel<double>>()});
  auto forward = [](std::string name, CustomBackward backward) {
    return CustomOpDef{.name = std::move(name),
                       .schema = kForwardSchema,
                       .shape_rule = forward_rule,
                       .kernels = host_kernels<forward_kernel<float>, forward_kernel<double>>(),
                       .backward = std::move(backward)};
  };
  register_custom_op(forward("test.grad.by_function", backward_function(lazy_backward)));
  register_custom_op(forward("test.grad.by_op", backward_op("test.grad.softplus_bw")));
  register_custom_op(
      forward("test.grad.by_function_calling_op", backward_function([](const CustomGradContext& c) {
                std::vector<Tensor> args(c.inputs.begin(), c.inputs.end());
                args.insert(args.end(), c.grad_outputs.begin(), c.grad_outputs.end());
                std::vector<Tensor> g =
                    custom("test.grad.softplus_bw", args, {{"beta", *c.attrs.get_double("beta")}});
                return std::vector<Tensor>{g[0], g[1], Tensor()};
              })));
}

/// The same function from built-in ops: the reference.
std::vector<Tensor> composed(const Tensor& x, const Tensor& s, const Tensor& mask, double beta) {
  Tensor y = log1p(exp(x * beta)) / beta * s * mask;
  return {y, sum(y, {1})};
}

/// Deterministic values in [-1, 1) (`offset` shifts them), materialized.
Tensor values_of(Shape shape, int seed, DType dtype = DType::f32, double offset = 0,
                 std::optional<Device> device = std::nullopt) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.731 * i + 1.37 * seed) + offset;
  return from_vector(v, shape, dtype, device);
}

/// A 0/1 mask with a few zeros.
Tensor mask_of(Shape shape, DType dtype = DType::f32, std::optional<Device> device = std::nullopt) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 5 == 3 ? 0.0 : 1.0;
  return from_vector(v, shape, dtype, device);
}

/// Tensors (as float vectors) equal up to f32 rounding of different
/// evaluation orders.
void expect_close(const std::vector<std::vector<float>>& got,
                  const std::vector<std::vector<float>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size()) << what;
    for (size_t i = 0; i < got[t].size(); ++i)
      EXPECT_NEAR(got[t][i], want[t][i], 1e-5 * (1 + std::fabs(want[t][i])))
          << what << ": tensor " << t << " [" << i << "]";
  }
}

/// Each test runs with its backend as the default device.
class CustomOpGradTest : public ::testing::TestWithParam<std::tuple<DeviceType, const char*>> {
protected:
  void SetUp() override {
    register_ops();
    previous_ = default_device();
    set_default_device(Device{std::get<0>(GetParam()), 0});
  }
  void TearDown() override { set_default_device(previous_); }
  const char* op() const { return std::get<1>(GetParam()); }

private:
  Device previous_;
};

TEST_P(CustomOpGradTest, GradientsMatchFiniteDifferences) {
  const Tensor mask = mask_of({3, 5}, DType::f64);
  // Both outputs feed the checked sum, with different weights.
  auto f = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = custom(op(), {in[0], in[1], mask}, {{"beta", 1.7}});
    return out[0] * 2.0 + unsqueeze(out[1], 1);
  };
  EXPECT_TRUE(
      testing::gradcheck(f, {values_of({3, 5}, 1, DType::f64), values_of({3, 5}, 2, DType::f64)}));
}

TEST_P(CustomOpGradTest, GradientsMatchTheCompositionOfBuiltInOps) {
  const Tensor mask = mask_of({4, 6});
  const Tensor wy = values_of({4, 6}, 7), wr = values_of({4}, 8);
  // Both outputs used, then only the first (the second's gradient is zero).
  for (bool use_rows : {true, false}) {
    auto grads = [&](bool custom_op) {
      Tensor x = values_of({4, 6}, 3).requires_grad_();
      Tensor s = values_of({4, 6}, 4, DType::f32, 0.5).requires_grad_();
      std::vector<Tensor> out =
          custom_op ? custom(op(), {x, s, mask}, {{"beta", 0.8}}) : composed(x, s, mask, 0.8);
      Tensor loss = sum(out[0] * wy);
      if (use_rows) loss = loss + sum(out[1] * wr);
      loss.backward();
      mark_step();
      return std::vector<std::vector<float>>{loss.to_vector<float>(), x.grad().to_vector<float>(),
                                             s.grad().to_vector<float>()};
    };
    expect_close(grads(true), grads(false), use_rows ? "both outputs used" : "rows unused");
  }
}

TEST_P(CustomOpGradTest, ANonDifferentiableInputGetsNoGradient) {
  Tensor x = values_of({2, 3}, 1).requires_grad_();
  Tensor mask = mask_of({2, 3}).requires_grad_();
  sum(custom(op(), {x, values_of({2, 3}, 2), mask})[0]).backward();
  mark_step();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(mask.grad().defined()) << "the schema marks the mask non-differentiable";
  // Only the mask requiring grad: nothing to differentiate, the outputs do
  // not require grad.
  std::vector<Tensor> out = custom(op(), {values_of({2, 3}, 3), values_of({2, 3}, 4), mask});
  EXPECT_FALSE(out[0].requires_grad());
}

TEST_P(CustomOpGradTest, CapturedTrainingStepEqualsLazyBitwise) {
  // x -> custom op -> loss; SGD with momentum on x (a parameter), s fixed.
  const Tensor s = values_of({4, 6}, 5, DType::f32, 1.0), mask = mask_of({4, 6});
  struct Run {
    Tensor w;
    std::unique_ptr<optim::SGD> opt;
  };
  auto make = [] {
    Run r{values_of({4, 6}, 9).requires_grad_(), nullptr};
    r.opt = std::make_unique<optim::SGD>(std::vector<Tensor>{r.w},
                                         optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    return r;
  };
  auto step = [&](Run& r, const Tensor& target) {
    r.opt->zero_grad();
    std::vector<Tensor> out = custom(op(), {r.w, s, mask}, {{"beta", 1.3}});
    Tensor d = out[1] - target;
    Tensor loss = sum(d * d) + mean(out[0]);
    loss.backward();
    r.opt->step();
    return loss;
  };
  constexpr int kSteps = 5;
  Run lazy = make();
  std::vector<float> lazy_losses;
  for (int i = 0; i < kSteps; ++i) {
    Tensor loss = step(lazy, values_of({4}, 20 + i));
    mark_step();
    lazy_losses.push_back(static_cast<float>(loss.item()));
  }

  Run replayed = make();
  std::vector<float> losses;
  Tensor first = step(replayed, values_of({4}, 20)); // warmup: creates the momentum buffers
  mark_step();
  losses.push_back(static_cast<float>(first.item()));
  Tensor target = values_of({4}, 21);
  mark_step();
  Graph g;
  Tensor loss;
  {
    CaptureGuard capture(g);
    loss = step(replayed, target);
  }
  losses.push_back(static_cast<float>(loss.item()));
  for (int i = 2; i < kSteps; ++i) {
    target.copy_(values_of({4}, 20 + i));
    g.replay();
    losses.push_back(static_cast<float>(loss.item()));
  }
  EXPECT_EQ(losses, lazy_losses);
  EXPECT_EQ(replayed.w.to_vector<float>(), lazy.w.to_vector<float>());
}

TEST_P(CustomOpGradTest, GraphedCallableMatchesLazyAutograd) {
  const Tensor mask = mask_of({3, 4});
  Tensor s = values_of({3, 4}, 6, DType::f32, 1.0).requires_grad_();
  auto fn = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = custom(op(), {in[0] * 2.0, s, mask}, {{"beta", 0.9}});
    return std::vector<Tensor>{out[0], out[1]};
  };
  GraphedCallable graphed = make_graphed_callable(fn, {values_of({3, 4}, 0).requires_grad_()}, {s});
  ASSERT_TRUE(graphed.has_backward());
  for (int call = 1; call <= 2; ++call) {
    auto run = [&](bool use_graph) {
      Tensor x = values_of({3, 4}, call).requires_grad_();
      std::vector<Tensor> out = use_graph ? graphed({x}) : fn({x});
      sum(out[0] * out[0]).backward(); // out[1] unused: a zero gradient
      mark_step();
      std::vector<std::vector<float>> r{x.grad().to_vector<float>(), s.grad().to_vector<float>()};
      s.set_grad(Tensor());
      return r;
    };
    // Close, not bitwise: the graphed forward and backward compile apart,
    // so the cpu backend may fuse them differently than the lazy step.
    expect_close(run(true), run(false), "call " + std::to_string(call));
  }
}

INSTANTIATE_TEST_SUITE_P(BothFormsOnRefAndCpu, CustomOpGradTest,
                         ::testing::Combine(::testing::Values(DeviceType::ref, DeviceType::cpu),
                                            ::testing::Values("test.grad.by_function",
                                                              "test.grad.by_op",
                                                              "test.grad.by_function_calling_op")),
                         [](const auto& info) {
                           const std::string op = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param) == DeviceType::ref ? "ref_"
                                                                                         : "cpu_") +
                                  op.substr(op.rfind('.') + 1);
                         });

// ---- integer inputs ----

/// y = x * k, k an i64 tensor: k is differentiable by the schema (the
/// default) but, being an integer, gets no gradient; the backward op still
/// gives it an output, which is dropped.
absl::Status scale_kernel(const HostKernelCall& call) {
  const auto* x = static_cast<const float*>(call.inputs[0]);
  const auto* k = static_cast<const int64_t*>(call.inputs[1]);
  auto* y = static_cast<float*>(call.outputs[0]);
  for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i) y[i] = x[i] * k[i];
  return absl::OkStatus();
}

/// (x, k, grad_y) -> (grad_x = grad_y * k, an unused zero for k).
absl::Status scale_bw_kernel(const HostKernelCall& call) {
  const auto* k = static_cast<const int64_t*>(call.inputs[1]);
  const auto* g = static_cast<const float*>(call.inputs[2]);
  auto* gx = static_cast<float*>(call.outputs[0]);
  auto* gk = static_cast<int64_t*>(call.outputs[1]);
  for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i) {
    gx[i] = g[i] * k[i];
    gk[i] = 0;
  }
  return absl::OkStatus();
}

TEST(CustomOpGradIntegers, AnIntegerInputGetsNoGradient) {
  if (!CustomOpRegistry::global().find("test.grad.scale").ok()) {
    auto same = [](absl::Span<const TensorType> in, const CustomAttrView&) {
      return absl::StatusOr<std::vector<TensorType>>(
          std::vector<TensorType>(in.begin(), in.begin() + 2));
    };
    register_custom_op({.name = "test.grad.scale_bw",
                        .schema = {.inputs = {{"x"}, {"k"}, {"grad_y"}}, .num_outputs = 2},
                        .shape_rule = same,
                        .kernels = {{"ref", host_kernel(scale_bw_kernel)}}});
    register_custom_op({.name = "test.grad.scale",
                        .schema = {.inputs = {{"x", {DType::f32}}, {"k", {DType::i64}}}},
                        .shape_rule = same_type_as_input(),
                        .kernels = {{"ref", host_kernel(scale_kernel)}},
                        .backward = backward_op("test.grad.scale_bw")});
  }
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3}, DType::f32, Device{DeviceType::ref, 0});
  x.requires_grad_();
  Tensor k =
      from_vector(std::vector<int64_t>{2, -1, 4}, {3}, DType::i64, Device{DeviceType::ref, 0});
  sum(custom("test.grad.scale", {x, k})[0] * 3.0).backward();
  mark_step();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6, -3, 12}));
}

// ---- errors ----

TEST(CustomOpGradErrors, RegistrationNeedsExactlyOneFormOfBackward) {
  CustomOpRegistry registry; // private: the global one is untouched
  auto def = [](std::string name, CustomBackward backward) {
    return CustomOpDef{.name = std::move(name),
                       .schema = kForwardSchema,
                       .shape_rule = forward_rule,
                       .backward = std::move(backward)};
  };
  CustomBackward both = backward_function(lazy_backward);
  both.op = "other";
  EXPECT_THAT(registry.add(def("a", both)).message(),
              HasSubstr("custom op 'a': its backward has both a function and an op ('other')"));
  EXPECT_THAT(registry.add(def("b", CustomBackward{})).message(),
              HasSubstr("its backward is empty"));
  EXPECT_THAT(registry.add(def("c", backward_function(nullptr))).message(),
              HasSubstr("its backward is empty"));
  EXPECT_THAT(registry.add(def("d", backward_op("other", -2))).message(),
              HasSubstr("has version -2; versions start at 1"));
  // A backward op registered later is fine: it is looked up at the call.
  EXPECT_TRUE(registry.add(def("e", backward_op("not.yet"))).ok());
}

TEST(CustomOpGradErrors, ABadBackwardOpIsAnErrorAtTheForwardCall) {
  register_ops();
  const Device ref{DeviceType::ref, 0};
  auto bad_op = [&](std::string name, CustomOpSchema backward_schema) {
    if (CustomOpRegistry::global().find(name).ok()) return;
    register_custom_op(
        {.name = name + "_bw",
         .schema = std::move(backward_schema),
         .shape_rule = backward_rule,
         .kernels = host_kernels<backward_kernel<float>, backward_kernel<double>>()});
    register_custom_op({.name = name,
                        .schema = kForwardSchema,
                        .shape_rule = forward_rule,
                        .kernels = host_kernels<forward_kernel<float>, forward_kernel<double>>(),
                        .backward = backward_op(name + "_bw")});
  };
  const CustomAttrSpec beta{"beta", CustomAttrType::float64};
  bad_op("test.grad.bad_arity",
         {.inputs = {{"x"}, {"s"}, {"mask"}, {"grad_y"}}, .attrs = {beta}, .num_outputs = 2});
  bad_op("test.grad.bad_outputs",
         {.inputs = {{"x"}, {"s"}, {"mask"}, {"gy"}, {"gr"}}, .attrs = {beta}, .num_outputs = 3});
  bad_op("test.grad.bad_attrs",
         {.inputs = {{"x"}, {"s"}, {"mask"}, {"gy"}, {"gr"}}, .num_outputs = 2});
  if (!CustomOpRegistry::global().find("test.grad.missing").ok())
    register_custom_op({.name = "test.grad.missing",
                        .schema = kForwardSchema,
                        .shape_rule = forward_rule,
                        .backward = backward_op("test.grad.nowhere")});

  Tensor x = values_of({2, 3}, 1, DType::f32, 0, ref).requires_grad_();
  Tensor s = values_of({2, 3}, 2, DType::f32, 0, ref), mask = mask_of({2, 3}, DType::f32, ref);
  auto call = [&](const char* op) { return error_of([&] { custom(op, {x, s, mask}); }); };
  std::string msg = call("test.grad.bad_arity");
  EXPECT_THAT(msg, HasSubstr("custom_op 'test.grad.bad_arity'"));
  EXPECT_THAT(msg,
              HasSubstr("its backward op 'test.grad.bad_arity_bw' takes 4 inputs; it is called "
                        "on the 3 forward inputs and 2 output gradients (5)"));
  EXPECT_THAT(call("test.grad.bad_outputs"),
              HasSubstr("has 3 outputs; it must give one gradient per differentiable input (2)"));
  EXPECT_THAT(call("test.grad.bad_attrs"),
              HasSubstr("must declare attribute 'beta' of type float"));
  msg = call("test.grad.missing");
  EXPECT_THAT(msg, HasSubstr("its backward op is missing"));
  EXPECT_THAT(msg, HasSubstr("test.grad.nowhere"));
  // Without grad the same calls are fine: no backward will run.
  NoGradGuard no_grad;
  std::vector<Tensor> out = custom("test.grad.bad_arity", {x, s, mask});
  mark_step();
  EXPECT_EQ(out[1].shape(), Shape({2}));
}

TEST(CustomOpGradErrors, ABadBackwardFunctionIsAnErrorAtBackward) {
  register_ops();
  const Device ref{DeviceType::ref, 0};
  auto with_backward = [](std::string name, CustomGradFunction fn) {
    if (CustomOpRegistry::global().find(name).ok()) return;
    register_custom_op({.name = name,
                        .schema = kForwardSchema,
                        .shape_rule = forward_rule,
                        .kernels = host_kernels<forward_kernel<float>, forward_kernel<double>>(),
                        .backward = backward_function(std::move(fn))});
  };
  with_backward("test.grad.too_few",
                [](const CustomGradContext& c) { return std::vector<Tensor>{c.grad_outputs[0]}; });
  with_backward("test.grad.wrong_type", [](const CustomGradContext& c) {
    return std::vector<Tensor>{c.grad_outputs[1], Tensor(), Tensor()};
  });
  auto backward_of = [&](const char* op) {
    Tensor x = values_of({2, 3}, 1, DType::f32, 0, ref).requires_grad_();
    std::vector<Tensor> out =
        custom(op, {x, values_of({2, 3}, 2, DType::f32, 0, ref), mask_of({2, 3}, DType::f32, ref)});
    return error_of([&] { sum(out[0]).backward(); });
  };
  EXPECT_THAT(backward_of("test.grad.too_few"),
              HasSubstr("custom op 'test.grad.too_few': its backward function returned 1 gradients "
                        "for 3 inputs"));
  EXPECT_THAT(backward_of("test.grad.wrong_type"),
              HasSubstr("its backward gives input 0 ('x') a gradient f32[2] on ref:0; the input is "
                        "f32[2, 3] on ref:0"));
  // The process keeps working.
  Tensor x = values_of({2, 3}, 1, DType::f32, 0, ref).requires_grad_();
  sum(custom("test.grad.by_function",
             {x, values_of({2, 3}, 2, DType::f32, 0, ref), mask_of({2, 3}, DType::f32, ref)})[0])
      .backward();
  mark_step();
  EXPECT_EQ(x.grad().shape(), Shape({2, 3}));
}

} // namespace
} // namespace mstep
