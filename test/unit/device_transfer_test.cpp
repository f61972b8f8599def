// Tensor::to(Device) and nn::Module::to(Device) between the ref and cpu
// backends: copies through copy_out / copy_in, in-place module moves that
// optimizers follow, and the errors of moves that cannot be done.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include "lib/api/OpBuilder.h"
#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using testing::error_of;

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

/// A device without a usable backend: cuda where there is no GPU (its
/// backend is not built in without the toolkit, and unavailable without a
/// driver). Every other device type has a backend in this binary. nullopt
/// where cuda works.
std::optional<Device> device_without_a_backend() {
  if (BackendRegistry::get(DeviceType::cuda).ok()) return std::nullopt;
  return Device{DeviceType::cuda, 0};
}

/// Why the registry gives no backend for `device`.
std::string no_backend_reason(Device device) {
  return std::string(BackendRegistry::get(device.type).status().message());
}

struct Mlp : nn::Module {
  Mlp() : nn::Module("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 12));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(12, 4));
  }
  Tensor forward(const Tensor& x) { return (*fc2)(relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

/// Batch `i` of a regression task, on `device`.
std::pair<Tensor, Tensor> batch(int i, Device device) {
  std::mt19937 rng(40 + i);
  std::normal_distribution<float> n;
  std::vector<float> x(8 * 6), y(8 * 4);
  for (float& v : x) v = n(rng);
  for (float& v : y) v = n(rng);
  return {from_vector(x, {8, 6}, std::nullopt, device), from_vector(y, {8, 4}, std::nullopt, device)};
}

/// The raw bytes of `t` as its backend holds them.
std::vector<std::byte> bytes_of(const Tensor& t) { return detail::host_bytes(t); }

/// Bit patterns that a conversion through double would change: NaNs with
/// payloads, -0, infinities, subnormals (for floats), and every byte value.
std::vector<std::byte> bit_patterns(DType dtype, int64_t n) {
  std::vector<std::byte> out(n * element_size(dtype));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 37 + 11) & 0xff);
  if (dtype == DType::boolean)
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i % 3 == 0);
  if (dtype == DType::f32) {
    const uint32_t special[] = {0x7fc00123u, 0xffa00001u, 0x80000000u, 0x7f800000u, 0x00000001u};
    std::memcpy(out.data(), special, sizeof special);
  }
  return out;
}

// ---- Tensor::to ------------------------------------------------------------

TEST(TensorTo, ValuesSurviveRefToCpuToRefBitwise) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                      DType::boolean}) {
    const TensorType type{Shape{3, 7}, dtype};
    const std::vector<std::byte> want = bit_patterns(dtype, type.shape.numel());
    Tensor on_ref = from_buffer(want.data(), type, kRef);
    Tensor on_cpu = on_ref.to(kCpu);
    EXPECT_EQ(on_cpu.device(), kCpu);
    EXPECT_EQ(on_cpu.type(), type);
    EXPECT_EQ(bytes_of(on_cpu), want) << dtype_name(dtype) << " on cpu";
    Tensor back = on_cpu.to(kRef);
    EXPECT_EQ(back.device(), kRef);
    EXPECT_EQ(bytes_of(back), want) << dtype_name(dtype) << " back on ref";
    EXPECT_EQ(on_ref.device(), kRef) << "to() copies; the source stays";
  }
}

TEST(TensorTo, SameDeviceIsTheSameTensor) {
  Tensor t = testing::f32({1, 2, 3}, {3});
  EXPECT_EQ(t.to(kRef).impl(), t.impl());
}

TEST(TensorTo, APendingTensorIsComputedFirst) {
  Tensor x = testing::f32({1, 2, 3}, {3});
  Tensor y = x * 2.0 + 1.0;
  ASSERT_TRUE(y.is_pending());
  Tensor moved = y.to(kCpu);
  EXPECT_FALSE(moved.is_pending());
  EXPECT_EQ(moved.to_vector<float>(), (std::vector<float>{3, 5, 7}));
  // Ops on the copy run on cpu.
  EXPECT_EQ((moved * moved).to_vector<float>(), (std::vector<float>{9, 25, 49}));
}

TEST(TensorTo, ALeafThatRequiresGradKeepsIt) {
  Tensor w = testing::f32({1, -2, 3}, {3});
  w.requires_grad_();
  Tensor moved = w.to(kCpu);
  EXPECT_TRUE(moved.requires_grad());
  EXPECT_TRUE(moved.is_leaf());
  sum(moved * moved).backward();
  mark_step();
  EXPECT_EQ(moved.grad().device(), kCpu);
  EXPECT_EQ(moved.grad().to_vector<float>(), (std::vector<float>{2, -4, 6}));
}

TEST(TensorTo, AComputedTensorThatRequiresGradIsRefused) {
  Tensor w = testing::f32({1, 2}, {2});
  w.requires_grad_();
  Tensor y = w * 3.0;
  const std::string msg = error_of([&] { y.to(kCpu); });
  EXPECT_THAT(msg, HasSubstr("not differentiable"));
  EXPECT_THAT(msg, HasSubstr("cpu:0"));
  EXPECT_THAT(msg, HasSubstr("detach()"));
  // Still usable: the detached value moves.
  EXPECT_EQ(y.detach().to(kCpu).to_vector<float>(), (std::vector<float>{3, 6}));
}

TEST(TensorTo, ADeviceWithoutABackendIsNamed) {
  const std::optional<Device> none = device_without_a_backend();
  if (!none) GTEST_SKIP() << "cuda has a working backend here";
  Tensor t = testing::f32({1, 2}, {2});
  const std::string msg = error_of([&] { t.to(*none); });
  EXPECT_THAT(msg, HasSubstr("Tensor::to"));
  EXPECT_THAT(msg, HasSubstr("cuda:0"));
  EXPECT_THAT(msg, HasSubstr(no_backend_reason(*none)));
  EXPECT_EQ(t.to(kCpu).to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(TensorTo, InsideACaptureIsRefused) {
  Tensor x = testing::f32({1, 2}, {2});
  Tensor y;
  Graph g;
  g.capture_begin();
  const std::string msg = error_of([&] { x.to(kCpu); });
  EXPECT_THAT(msg, HasSubstr("inside a Graph capture"));
  EXPECT_THAT(msg, HasSubstr("ref:0"));
  EXPECT_THAT(msg, HasSubstr("cpu:0"));
  EXPECT_THAT(msg, HasSubstr("before capture_begin()"));
  y = x * 2.0;  // the capture goes on
  g.capture_end();
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST(TensorTo, MarkStepRunsPendingWorkOfTwoDevices) {
  Tensor a = testing::f32({1, 2}, {2}) + 1.0;
  Tensor b = testing::f32({3, 4}, {2}).to(kCpu) * 2.0;
  mark_step();
  EXPECT_FALSE(a.is_pending());
  EXPECT_FALSE(b.is_pending());
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{6, 8}));
}

TEST(TensorTo, SetGradOnAnotherDeviceIsRefused) {
  Tensor w = testing::f32({1, 2}, {2});
  w.requires_grad_();
  const std::string msg = error_of([&] { w.set_grad(testing::f32({1, 1}, {2}).to(kCpu)); });
  EXPECT_THAT(msg, HasSubstr("another device"));
  EXPECT_THAT(msg, HasSubstr("ref:0"));
  EXPECT_THAT(msg, HasSubstr("cpu:0"));
  w.set_grad(testing::f32({1, 1}, {2}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 1}));
}

// ---- Module::to ------------------------------------------------------------

TEST(ModuleTo, MovesParametersAndGradsInPlace) {
  manual_seed(7);
  auto model = std::make_shared<Mlp>();
  auto [x, y] = batch(0, kRef);
  mse_loss(model->forward(x), y).backward();
  mark_step();
  std::vector<Tensor> params = model->parameters();
  std::vector<const TensorImpl*> impls, grad_impls;
  std::vector<std::vector<std::byte>> values, grads;
  for (const Tensor& p : params) {
    impls.push_back(p.impl());
    grad_impls.push_back(p.grad().impl());
    values.push_back(bytes_of(p));
    grads.push_back(bytes_of(p.grad()));
  }

  model->to(kCpu);
  std::vector<Tensor> moved = model->parameters();
  ASSERT_EQ(moved.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(moved[i].impl(), impls[i]) << "parameter " << i << " keeps its identity";
    EXPECT_EQ(params[i].device(), kCpu) << "an old handle follows";
    EXPECT_TRUE(params[i].requires_grad());
    EXPECT_EQ(bytes_of(params[i]), values[i]);
    EXPECT_EQ(params[i].grad().impl(), grad_impls[i]);
    EXPECT_EQ(params[i].grad().device(), kCpu);
    EXPECT_EQ(bytes_of(params[i].grad()), grads[i]);
  }

  // Same device: nothing changes, not even the buffers.
  std::vector<const Buffer*> buffers;
  for (const Tensor& p : params) buffers.push_back(p.impl()->buffer().get());
  model->to(kCpu);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].impl()->buffer().get(), buffers[i]);
}

/// Losses of 5 SGD-with-momentum steps; the model moves to cpu before step
/// `move_at` (never when move_at >= 5), the optimizer is built on ref
/// before anything moves. Ref steps end without mark_step() when
/// `lazy_move`, so the move finds pending parameters and state.
std::vector<float> train(int move_at, bool lazy_move = false) {
  manual_seed(11);
  auto model = std::make_shared<Mlp>();
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  Device device = kRef;
  std::vector<float> losses;
  for (int step = 0; step < 5; ++step) {
    if (step == move_at) {
      model->to(kCpu);
      device = kCpu;
    }
    auto [x, y] = batch(step, device);
    opt.zero_grad();
    Tensor loss = mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    if (!(lazy_move && step + 1 == move_at)) mark_step();
    losses.push_back(static_cast<float>(loss.item()));
  }
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), move_at < 5 ? kCpu : kRef);
  return losses;
}

TEST(ModuleTo, AnOptimizerBuiltBeforeTheMoveTrainsAsOneBuiltAfterIt) {
  // Moved before the first step (the optimizer's hyperparameters live on
  // ref) against a model moved before its optimizer was built: both runs
  // execute the same cpu kernels, so they agree bitwise.
  manual_seed(11);
  auto model = std::make_shared<Mlp>();
  model->to(kCpu);
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  std::vector<float> want;
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = batch(step, kCpu);
    opt.zero_grad();
    Tensor loss = mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    mark_step();
    want.push_back(static_cast<float>(loss.item()));
  }
  EXPECT_EQ(train(/*move_at=*/0), want);
  EXPECT_LT(want.back(), want.front());
}

TEST(ModuleTo, TrainingGoesOnAfterAMoveWithStateOnTheOldDevice) {
  // Two steps on ref build momentum buffers there; three more on cpu must
  // continue the same run. Against the run done entirely on ref: the
  // backends sum the length-6 and length-12 f32 dot products in other
  // orders, a few ulps per step, so 5 steps stay within 1e-5 relative.
  const std::vector<float> on_ref = train(/*move_at=*/5);
  for (bool lazy : {false, true}) {
    const std::vector<float> moved = train(/*move_at=*/2, lazy);
    ASSERT_EQ(moved.size(), on_ref.size());
    for (size_t s = 0; s < on_ref.size(); ++s)
      EXPECT_NEAR(moved[s], on_ref[s], 1e-5 * std::fabs(on_ref[s])) << "step " << s << " lazy " << lazy;
  }
}

TEST(ModuleTo, OptimizerStateFollowsInPlace) {
  manual_seed(3);
  auto model = std::make_shared<Mlp>();
  optim::Adam opt(model->parameters(), {.lr = 0.01});
  auto [x, y] = batch(0, kRef);
  mse_loss(model->forward(x), y).backward();
  opt.step();
  mark_step();
  Tensor exp_avg = opt.state(0, "exp_avg");
  const std::vector<std::byte> before = bytes_of(exp_avg);
  ASSERT_EQ(exp_avg.device(), kRef);
  model->to(kCpu);
  EXPECT_EQ(exp_avg.device(), kRef) << "state moves at the next step()";
  auto [xc, yc] = batch(1, kCpu);
  opt.zero_grad();
  mse_loss(model->forward(xc), yc).backward();
  opt.step();
  EXPECT_EQ(exp_avg.device(), kCpu);
  EXPECT_EQ(opt.state(0, "exp_avg").impl(), exp_avg.impl());
  mark_step();
  EXPECT_EQ(opt.state(0, "step").item(), 2);
  EXPECT_NE(bytes_of(exp_avg), before) << "the step updated the moved state";
}

TEST(ModuleTo, AMixedDeviceOpNamesBothDevices) {
  auto model = std::make_shared<Mlp>();
  model->to(kCpu);
  auto [x, y] = batch(0, kRef);
  const std::string msg = error_of([&] { model->forward(x); });
  EXPECT_THAT(msg, HasSubstr("different devices"));
  EXPECT_THAT(msg, HasSubstr("ref:0"));
  EXPECT_THAT(msg, HasSubstr("cpu:0"));
  EXPECT_EQ(model->forward(x.to(kCpu)).shape(), (Shape{8, 4}));
}

TEST(ModuleTo, ADeviceWithoutABackendChangesNothing) {
  const std::optional<Device> none = device_without_a_backend();
  if (!none) GTEST_SKIP() << "cuda has a working backend here";
  auto model = std::make_shared<Mlp>();
  const std::string msg = error_of([&] { model->to(*none); });
  EXPECT_THAT(msg, HasSubstr("Module::to"));
  EXPECT_THAT(msg, HasSubstr("cuda:0"));
  EXPECT_THAT(msg, HasSubstr("fc1.weight"));
  EXPECT_THAT(msg, HasSubstr(no_backend_reason(*none)));
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), kRef);
  model->to(kCpu);
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), kCpu);
}

TEST(ModuleTo, InsideACaptureIsAClearError) {
  auto model = std::make_shared<Mlp>();
  auto [x, y] = batch(0, kRef);
  Graph g;
  g.capture_begin();
  const std::string msg = error_of([&] { model->to(kCpu); });
  EXPECT_THAT(msg, HasSubstr("inside a Graph capture"));
  EXPECT_THAT(msg, HasSubstr("fc1.weight on ref:0, target cpu:0"));
  g.capture_abort();
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), kRef);
  EXPECT_EQ(model->forward(x).to_vector<float>().size(), 32u);
}

TEST(ModuleTo, AnOptimizerStepInACaptureAfterAMoveNamesTheParameter) {
  manual_seed(5);
  auto model = std::make_shared<Mlp>();
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  Tensor x, y;  // static inputs of the capture below
  auto step = [&](Device device) {
    std::tie(x, y) = batch(0, device);
    opt.zero_grad();
    mse_loss(model->forward(x), y).backward();
    opt.step();
    mark_step();
  };
  step(kRef);
  model->to(kCpu);
  {
    Graph g;
    g.capture_begin();
    const std::string msg = error_of([&] { step(kCpu); });
    EXPECT_THAT(msg, HasSubstr("optim::SGD::step"));
    EXPECT_THAT(msg, HasSubstr("of parameter 0 on ref:0, target cpu:0"));
    EXPECT_THAT(msg, HasSubstr("inside a Graph capture"));
    g.capture_abort();
  }
  step(kCpu);  // a lazy step moves the state; capturing works after it
  Graph g;
  {
    CaptureGuard capture(g);
    opt.zero_grad();
    mse_loss(model->forward(x), y).backward();
    opt.step();
  }
  g.replay();
  EXPECT_EQ(opt.state(0, "momentum_buffer").device(), kCpu);
}

TEST(ModuleTo, AnOptimizerOverTwoDevicesIsAClearError) {
  auto a = std::make_shared<nn::Linear>(2, 2), b = std::make_shared<nn::Linear>(2, 2);
  std::vector<Tensor> params = a->parameters();
  for (const Tensor& p : b->parameters()) params.push_back(p);
  optim::SGD opt(params, {.lr = 0.1});
  b->to(kCpu);
  const std::string msg = error_of([&] { opt.step(); });
  EXPECT_THAT(msg, HasSubstr("different devices"));
  EXPECT_THAT(msg, HasSubstr("parameter 0 on ref:0, parameter 2 on cpu:0"));
  b->to(kRef);
  opt.step();  // usable again
}

}  // namespace
}  // namespace mstep
