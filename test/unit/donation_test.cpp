// The donation protocol (Executable::run): a training step updates its
// parameters and optimizer state in the buffers they hold, and a tensor
// that shares a buffer (a detach()ed alias, a copy_() snapshot, a result
// bound to two tensors) keeps its values, whoever else holds references.
// Run on every host backend: the interpreter (ref) and the compiled cpu
// backend place donated and offered buffers differently.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using testing::values;
using V = std::vector<float>;

class Donation : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    previous_ = default_device();
    set_default_device(Device{GetParam(), 0});
  }
  void TearDown() override { set_default_device(previous_); }

 private:
  Device previous_;
};

const Buffer* buffer_of(const Tensor& t) { return t.impl()->buffer().get(); }

/// A parameter w and a plain training step: loss = sum(w * x), SGD with
/// momentum, mark_step().
struct Trainer {
  Tensor w = from_vector(V{1, 2, 3}, {3}).requires_grad_();
  Tensor x = from_vector(V{1, -1, 2}, {3});
  optim::SGD opt{{w}, {.lr = 0.5, .momentum = 0.9}};

  void step() {
    (w * x).sum().backward();
    opt.step();
    opt.zero_grad();
    mark_step();
  }
  const Buffer* momentum_buffer() const { return buffer_of(opt.state(0, "momentum_buffer")); }
};

TEST_P(Donation, APlainTrainingStepUpdatesParameterAndStateInPlace) {
  Trainer t;
  t.step();  // creates the momentum buffer
  const Buffer* weight = buffer_of(t.w);
  const Buffer* momentum = t.momentum_buffer();
  for (int i = 0; i < 3; ++i) {
    const V before = values(t.w);
    t.step();
    EXPECT_NE(values(t.w), before);
    EXPECT_EQ(buffer_of(t.w), weight) << "step " << i;
    EXPECT_EQ(t.momentum_buffer(), momentum) << "step " << i;
  }
}

TEST_P(Donation, ASecondHandleToTheParameterSeesTheUpdateMadeInPlace) {
  Trainer t;
  t.step();
  const Buffer* weight = buffer_of(t.w);
  Tensor handle = t.w;  // the same tensor: holds no buffer of its own
  t.step();
  EXPECT_EQ(buffer_of(t.w), weight);
  EXPECT_EQ(values(handle), values(t.w));
}

TEST_P(Donation, ADetachedAliasKeepsItsValuesAndTheStepAfterIsInPlaceAgain) {
  Trainer t;
  t.step();
  Tensor alias = t.w.detach();
  const V kept = values(alias);
  t.step();
  EXPECT_EQ(values(alias), kept);
  EXPECT_NE(values(t.w), kept);
  EXPECT_NE(buffer_of(t.w), buffer_of(alias));
  // The update went to a fresh buffer the parameter holds alone.
  const Buffer* fresh = buffer_of(t.w);
  t.step();
  EXPECT_EQ(buffer_of(t.w), fresh);
  EXPECT_EQ(values(alias), kept);
}

TEST_P(Donation, ACopySnapshotKeepsItsValues) {
  Trainer t;
  t.step();
  Tensor snapshot = zeros({3});
  snapshot.copy_(t.w);  // shares the buffer, no copy
  const V kept = values(snapshot);
  t.step();
  t.step();
  EXPECT_EQ(values(snapshot), kept);
  EXPECT_NE(values(t.w), kept);
}

TEST_P(Donation, AnAliasOfThePendingUpdateKeepsItsValues) {
  Trainer t;
  t.step();
  (t.w * t.x).sum().backward();
  t.opt.step();
  Tensor alias = t.w.detach();  // pending on the same result as w
  mark_step();                  // binds one buffer to both
  const V kept = values(alias);
  EXPECT_EQ(values(t.w), kept);
  t.opt.zero_grad();
  t.step();
  EXPECT_EQ(values(alias), kept);
  EXPECT_NE(values(t.w), kept);
}

TEST_P(Donation, SyncingOneTensorKeepsTheBufferPendingWorkStillReads) {
  Trainer t;
  t.step();
  const V old = values(t.w);
  Tensor doubled = t.w * 2.0;  // pending: reads w's buffer
  (t.w * t.x).sum().backward();
  t.opt.step();  // w's update is donated its buffer only if nothing else reads it
  EXPECT_NE(values(t.w), old);  // syncs w alone
  EXPECT_TRUE(doubled.is_pending());
  V want;
  for (float v : old) want.push_back(2 * v);
  EXPECT_EQ(values(doubled), want);
}

TEST_P(Donation, ACopyOfATensorIntoItselfKeepsOneGraphInputForItsBuffer) {
  Trainer t;
  t.step();
  const V old = values(t.w);
  Tensor doubled = t.w * 2.0;  // reads w's buffer through its data leaf
  t.w.copy_(t.w);              // the same buffer: the leaf stays the one input
  (t.w * t.x).sum().backward();
  t.opt.step();
  mark_step();  // the update is donated w's buffer after every read of it
  V want;
  for (float v : old) want.push_back(2 * v);
  EXPECT_EQ(values(doubled), want);
  EXPECT_NE(values(t.w), old);
}

TEST_P(Donation, FillOverwritesAnExclusiveBufferAndLeavesAnAliasAlone) {
  Tensor t = zeros({3});
  mark_step();
  const Buffer* own = buffer_of(t);
  t.fill_(2.0);
  EXPECT_EQ(buffer_of(t), own);
  EXPECT_EQ(values(t), (V{2, 2, 2}));
  Tensor alias = t.detach();
  t.fill_(3.0);
  EXPECT_EQ(values(alias), (V{2, 2, 2}));
  EXPECT_EQ(values(t), (V{3, 3, 3}));
}

TEST_P(Donation, ReplayUpdatesInPlaceAndADetachedAliasKeepsItsValues) {
  Trainer t;
  t.step();
  Graph g;
  {
    CaptureGuard capture(g);
    t.step();
  }
  g.replay();
  const Buffer* weight = buffer_of(t.w);
  const Buffer* momentum = t.momentum_buffer();
  g.replay();
  EXPECT_EQ(buffer_of(t.w), weight);
  EXPECT_EQ(t.momentum_buffer(), momentum);
  Tensor alias = t.w.detach();
  const V kept = values(alias);
  g.replay();
  EXPECT_EQ(values(alias), kept);
  EXPECT_NE(values(t.w), kept);
  const Buffer* fresh = buffer_of(t.w);
  g.replay();
  EXPECT_EQ(buffer_of(t.w), fresh) << "in place again once the parameter holds its buffer alone";
  EXPECT_EQ(values(alias), kept);
}

TEST_P(Donation, ACapturedOutputTheUserHoldsTwiceSeesEachReplay) {
  Tensor x = from_vector(V{1, 2, 3, 4, 5, 6}, {3, 2});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x.sum({1});  // a reduction: on ref too a kernel of its own, not a fusion
  }
  g.replay();
  Tensor held = y;             // a second handle: the same tensor
  Tensor snapshot = y.detach();  // an alias of its buffer
  const Buffer* out = buffer_of(y);
  x.copy_(from_vector(V{5, 6, 7, 8, 9, 10}, {3, 2}));
  g.replay();
  EXPECT_EQ(values(held), (V{11, 15, 19}));
  EXPECT_EQ(values(snapshot), (V{3, 7, 11}));
  EXPECT_NE(buffer_of(y), out) << "the shared buffer is not written";
  // Held alone again: the next replay writes the output's buffer in place.
  const Buffer* fresh = buffer_of(y);
  x.copy_(from_vector(V{0, 1, 2, 3, 4, 5}, {3, 2}));
  g.replay();
  EXPECT_EQ(buffer_of(y), fresh);
  EXPECT_EQ(values(held), (V{1, 5, 9}));
  EXPECT_EQ(values(snapshot), (V{3, 7, 11}));
}

INSTANTIATE_TEST_SUITE_P(HostBackends, Donation,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const ::testing::TestParamInfo<DeviceType>& info) {
                           return info.param == DeviceType::ref ? "ref" : "cpu";
                         });

}  // namespace
}  // namespace mstep
