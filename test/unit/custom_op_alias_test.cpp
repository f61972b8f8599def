// Declared aliases of custom ops (CustomOpSchema::aliases) in the cpu
// backend's arena plan: an output declared to alias an input runs in place
// (the kernel sees out == in, and the arena is smaller) when that input
// dies at the call; when the input is read later, is held by the user or
// is a graph input, the output has its own buffer and the values stay
// right. Captured and replayed steps equal lazy ones bitwise either way.
#include <atomic>
#include <vector>

#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

std::atomic<int> in_place_calls{0}, separate_calls{0};

/// out = x + 2 w, element by element: reads x[i] before writing out[i], so
/// it is correct in place.
absl::Status axpy2_kernel(const HostKernelCall& call) {
  const auto* x = static_cast<const float*>(call.inputs[0]);
  const auto* w = static_cast<const float*>(call.inputs[1]);
  auto* out = static_cast<float*>(call.outputs[0]);
  ++(static_cast<const void*>(out) == call.inputs[0] ? in_place_calls : separate_calls);
  for (int64_t i = 0; i < call.output_types[0].shape.numel(); ++i) out[i] = x[i] + 2 * w[i];
  return absl::OkStatus();
}

/// "alias_test.axpy2" (output 0 may alias input 0) or, without the alias,
/// "alias_test.axpy2_copy".
std::string axpy2_op(bool alias) {
  const std::string name = alias ? "alias_test.axpy2" : "alias_test.axpy2_copy";
  if (!CustomOpRegistry::global().find(name).ok()) {
    CustomOpSchema schema{.inputs = {{"x", {DType::f32}}, {"w", {DType::f32}}}};
    if (alias) schema.aliases = {{0, 0}};
    register_custom_op({.name = name,
                        .schema = schema,
                        .shape_rule = same_type_as_input(),
                        .kernels = {{"ref", host_kernel(axpy2_kernel)},
                                    {"cpu", host_kernel(axpy2_kernel)}}});
  }
  return name;
}

Tensor axpy2(const Tensor& x, const Tensor& w, bool alias = true) {
  return custom(axpy2_op(alias), {x, w})[0];
}

std::vector<float> values(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 17) - 3.0f;
  return v;
}

struct Counts {
  int in_place, separate;
};
Counts counts() { return {in_place_calls.load(), separate_calls.load()}; }

class CustomOpAlias : public ::testing::Test {
protected:
  /// Fresh inputs of a size no other test uses, so each graph compiles
  /// here (metrics().arena_bytes is the compile's).
  void make_inputs(int64_t n, Device d = kCpu) {
    n_ = n;
    xv_ = values(n, 0.5f);
    wv_ = values(n, -0.25f);
    x_ = from_vector(xv_, {n}, DType::f32, d);
    w_ = from_vector(wv_, {n}, DType::f32, d);
    mark_step();
  }
  /// -x + 2 w, the expected output of axpy2(neg(x), w).
  float want(int64_t i) const { return -xv_[i] + 2 * wv_[i]; }

  int64_t n_ = 0;
  std::vector<float> xv_, wv_;
  Tensor x_, w_;
};

TEST_F(CustomOpAlias, ADyingInputIsOverwrittenInPlaceAndTheArenaShrinks) {
  make_inputs(1000);
  auto run = [&](bool alias) {
    reset_metrics();
    // -x dies at the call. (A step output has a buffer of its own outside
    // the arena, so the call's result feeds one more op here.)
    Tensor c = axpy2(-x_, w_, alias) * 3.0;
    mark_step();
    EXPECT_EQ(metrics().compiles, 1);
    std::vector<float> v = c.to_vector<float>();
    for (int64_t i = 0; i < n_; ++i) EXPECT_EQ(v[i], want(i) * 3.0f) << i;
    return metrics().arena_bytes;
  };
  const Counts before = counts();
  const int64_t copied = run(/*alias=*/false);
  EXPECT_EQ(counts().separate, before.separate + 1);
  const int64_t shared = run(/*alias=*/true);
  EXPECT_EQ(counts().in_place, before.in_place + 1) << "the kernel did not run in place";
  // Without the alias -x and the call's result (4000 bytes each) are live
  // at once; with it they share one slot.
  EXPECT_LT(shared, copied);
  EXPECT_GE(copied, 8000);
}

TEST_F(CustomOpAlias, AnInputReadAfterTheCallIsNotOverwritten) {
  make_inputs(1001);
  Tensor d;
  {
    Tensor t = -x_; // not held after the block: only the graph reads it
    d = axpy2(t, w_) * t;
  }
  const Counts before = counts();
  mark_step();
  EXPECT_EQ(counts().separate, before.separate + 1);
  EXPECT_EQ(counts().in_place, before.in_place);
  std::vector<float> vd = d.to_vector<float>();
  for (int64_t i = 0; i < n_; ++i) EXPECT_EQ(vd[i], want(i) * -xv_[i]) << i;
}

TEST_F(CustomOpAlias, AnInputTheUserHoldsOrAGraphInputIsNotOverwritten) {
  make_inputs(1002);
  Tensor t = -x_; // held: an output of the step
  Tensor c = axpy2(t, w_) * 3.0;
  Tensor e = axpy2(x_, w_) * 3.0; // x is a graph input
  const Counts before = counts();
  mark_step();
  EXPECT_EQ(counts().separate, before.separate + 2);
  EXPECT_EQ(counts().in_place, before.in_place);
  std::vector<float> vt = t.to_vector<float>(), vc = c.to_vector<float>(),
                     ve = e.to_vector<float>(), vx = x_.to_vector<float>();
  for (int64_t i = 0; i < n_; ++i) {
    EXPECT_EQ(vt[i], -xv_[i]) << i;
    EXPECT_EQ(vc[i], want(i) * 3.0f) << i;
    EXPECT_EQ(vx[i], xv_[i]) << i;
    EXPECT_EQ(ve[i], (xv_[i] + 2 * wv_[i]) * 3.0f) << i;
  }
}

TEST_F(CustomOpAlias, RefNeverRunsInPlace) {
  make_inputs(1003, kRef);
  const Counts before = counts();
  Tensor c = axpy2(-x_, w_) * 3.0;
  mark_step();
  EXPECT_EQ(counts().in_place, before.in_place);
  std::vector<float> v = c.to_vector<float>();
  for (int64_t i = 0; i < n_; ++i) EXPECT_EQ(v[i], want(i) * 3.0f) << i;
}

/// Lazy and captured + replayed results of `step`, for new x values, are
/// equal bitwise.
void expect_replay_equals_lazy(const std::function<Tensor(const Tensor&, const Tensor&)>& step) {
  const int64_t n = 515;
  Tensor x = from_vector(values(n, 0.5f), {n}, DType::f32, kCpu);
  Tensor w = from_vector(values(n, -0.25f), {n}, DType::f32, kCpu);
  mark_step();
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = step(x, w);
  }
  for (int round = 1; round <= 3; ++round) {
    const std::vector<float> xv = values(n, 0.5f + round);
    Tensor lazy = step(from_vector(xv, {n}, DType::f32, kCpu), w);
    mark_step();
    x.copy_(from_vector(xv, {n}, DType::f32, kCpu));
    g.replay();
    EXPECT_EQ(y.to_vector<float>(), lazy.to_vector<float>()) << "round " << round;
  }
}

TEST_F(CustomOpAlias, ReplayEqualsLazyBitwiseInPlace) {
  const Counts before = counts();
  expect_replay_equals_lazy([](const Tensor& x, const Tensor& w) { return axpy2(-x, w) * 3.0; });
  EXPECT_GT(counts().in_place, before.in_place);
}

TEST_F(CustomOpAlias, ReplayEqualsLazyBitwiseNotInPlace) {
  expect_replay_equals_lazy([](const Tensor& x, const Tensor& w) {
    Tensor t = -x;
    return axpy2(t, w) + t;
  });
}

} // namespace
} // namespace mstep
