// User handles (TensorImpl::has_handles): what mstep::Tensor counts, and how
// a captured graph's replay decides from them, not from reference counts,
// that a tensor is gone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

TEST(TensorHandles, CopiesCountMovesHandOverAndDestructionDrops) {
  Tensor a = from_vector(std::vector<float>{1, 2}, {2});
  const std::shared_ptr<TensorImpl> impl = a.impl_ptr();  // not a handle
  Tensor b = a;
  a = Tensor();
  EXPECT_TRUE(impl->has_handles()) << "b is left";
  Tensor c = std::move(b);
  b = c;  // a moved-from handle becomes a handle again by copy
  c = std::move(b);  // move-assigning the same impl: one handle is dropped
  EXPECT_TRUE(impl->has_handles());
  const Tensor& same = c;
  c = same;  // self-assignment keeps it
  EXPECT_TRUE(impl->has_handles());
  c = from_vector(std::vector<float>{3}, {1});  // the last handle now refers elsewhere
  EXPECT_FALSE(impl->has_handles());
}

TEST(TensorHandles, ConcurrentCopiesOnOtherThreadsAreCounted) {
  // A data loader copies and drops handles on its own threads.
  Tensor t = from_vector(std::vector<float>{1}, {1});
  const std::shared_ptr<TensorImpl> impl = t.impl_ptr();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&t] {
      for (int k = 0; k < 20000; ++k) {
        Tensor copy = t;
        std::vector<Tensor> more(3, copy);
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(impl->has_handles());
  t = Tensor();
  EXPECT_FALSE(impl->has_handles()) << "every copy was dropped";
}

TEST(TensorHandles, AReplayFreesAnOutputWhoseHandlesAreAllDropped) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor y;
  Graph g;
  {
    CaptureGuard capture(g);
    y = x * 5.0;
  }
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 10}));
  // Something other than a handle keeps the tensor (as an extension or a
  // second graph would): it still has no reader, so replay frees its memory.
  const std::shared_ptr<TensorImpl> kept = y.impl_ptr();
  y = Tensor();
  g.replay();
  EXPECT_EQ(kept->buffer(), nullptr);
}

TEST(TensorHandles, AReplayWritesAnOutputWhileAHandleIsLeft) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor y;
  Graph g;
  {
    CaptureGuard capture(g);
    y = x * 5.0;
  }
  const Tensor other = y;  // a second handle
  y = Tensor();
  x.copy_(from_vector(std::vector<float>{3, 4}, {2}));
  g.replay();
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{15, 20}));
}

TEST(TensorHandles, AReplayRefusesAnInputTheGraphAlsoWritesOnceItsHandleIsGone) {
  // The graph binds w twice (read and updated in place): its own references
  // are not handles, so dropping the user's is still noticed.
  auto w = std::make_unique<Tensor>(from_vector(std::vector<float>{1, 2}, {2}));
  Graph g;
  {
    CaptureGuard capture(g);
    w->copy_(*w * 2.0);
  }
  g.replay();
  EXPECT_EQ(w->to_vector<float>(), (std::vector<float>{4, 8}));
  const std::shared_ptr<TensorImpl> kept = w->impl_ptr();
  w.reset();
  try {
    g.replay();
    FAIL() << "replayed an input nobody holds";
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::input_freed);
    EXPECT_THAT(e.what(), HasSubstr("f32[2]"));
    EXPECT_THAT(e.what(), HasSubstr("was freed"));
  }
  // Nothing ran: the value is the one the last replay left.
  Tensor again(kept);
  EXPECT_EQ(again.to_vector<float>(), (std::vector<float>{4, 8}));
}

}  // namespace
}  // namespace mstep
