// ModuleCache: LRU order and eviction, the miss explanations
// (explain_miss) on hand-made keys, and the same explanations as the tracer
// reports them after real mark_step()s: metrics().recompile_reasons and the
// MSTEP_LOG_RECOMPILES line on stderr.
#include "mstep/runtime/ModuleCache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using V = std::vector<float>;

GraphKey key_of(uint64_t structure, uint64_t types = 10, uint64_t constants = 100,
                uint64_t backend = 7, uint64_t options = 1) {
  return GraphKey{structure, types, constants, backend, options};
}

ModuleCache::Entry entry(uint32_t nodes = 4, uint32_t inputs = 1) {
  return ModuleCache::Entry{nullptr, nodes, inputs, nullptr};
}

/// The graph `x * c` then relu, for x of `type`, as mark_step() would cut
/// it; nothing runs (the pending tensors die here).
TraceGraph scaled_relu_graph(TensorType type, double c) {
  Tensor x = zeros(type.shape, type.dtype);
  mark_step();  // x becomes a buffer: the graph's input
  Tensor y = relu(x * c);
  return pending_graph();
}

// --- ModuleCache on its own ----------------------------------------------

TEST(ModuleCacheLru, EvictsTheLeastRecentlyUsedAndCountsEvictions) {
  ModuleCache cache(3);
  int evicted = 0;
  cache.insert(key_of(1), entry(), &evicted);
  cache.insert(key_of(2), entry(), &evicted);
  cache.insert(key_of(3), entry(), &evicted);
  EXPECT_EQ(evicted, 0);
  EXPECT_EQ(cache.size(), 3u);

  // A hit on 1 makes 2 the oldest: inserting 4 evicts 2, then 5 evicts 3.
  ASSERT_NE(cache.find(key_of(1), 4, 1), nullptr);
  cache.insert(key_of(4), entry(), &evicted);
  EXPECT_EQ(evicted, 1);
  EXPECT_EQ(cache.find(key_of(2), 4, 1), nullptr);
  cache.insert(key_of(5), entry(), &evicted);
  EXPECT_EQ(evicted, 2);
  EXPECT_EQ(cache.find(key_of(3), 4, 1), nullptr);
  for (uint64_t k : {1, 4, 5}) EXPECT_NE(cache.find(key_of(k), 4, 1), nullptr) << k;
  EXPECT_EQ(cache.size(), 3u);

  // Re-inserting a present key replaces it without evicting anything.
  cache.insert(key_of(4), entry(9, 2), &evicted);
  EXPECT_EQ(evicted, 2);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_NE(cache.find(key_of(4), 9, 2), nullptr);
}

TEST(ModuleCacheLru, TheCollisionGuardRejectsADifferentlySizedGraph) {
  ModuleCache cache(4);
  cache.insert(key_of(1), entry(4, 1));
  EXPECT_NE(cache.find(key_of(1), 4, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(1), 5, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(1), 4, 2), nullptr);
  // Every key component is part of the lookup.
  EXPECT_EQ(cache.find(key_of(1, 11), 4, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(1, 10, 101), 4, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(1, 10, 100, 8), 4, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(1, 10, 100, 7, 2), 4, 1), nullptr);
}

TEST(ModuleCacheLru, ShrinkingTheLimitEvictsTheOldestAndZeroMeansOne) {
  ModuleCache cache(8);
  for (uint64_t k = 1; k <= 5; ++k) cache.insert(key_of(k), entry());
  ASSERT_NE(cache.find(key_of(1), 4, 1), nullptr);  // 1 is now the newest
  cache.set_max_entries(2);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.find(key_of(1), 4, 1), nullptr);
  EXPECT_NE(cache.find(key_of(5), 4, 1), nullptr);
  EXPECT_EQ(cache.find(key_of(4), 4, 1), nullptr);
  cache.set_max_entries(0);
  EXPECT_EQ(cache.max_entries(), 1u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.find(key_of(5), 4, 1), nullptr);  // the last one found
}

TEST(ModuleCacheExplain, AReMissAfterEvictionSaysEvicted) {
  TraceGraph g = scaled_relu_graph({Shape{3}, DType::f32}, 0.5);
  ModuleCache cache(2);
  cache.note_compile(key_of(1), g, 3);
  cache.insert(key_of(1), entry());
  cache.insert(key_of(2), entry());
  cache.insert(key_of(3), entry());  // evicts 1
  ModuleCache::MissReason r = cache.explain_miss(key_of(1), g);
  EXPECT_EQ(r.category, "evicted from the memory cache");
  EXPECT_THAT(r.detail, AllOf(HasSubstr("2 entries"), HasSubstr("MSTEP_MAX_GRAPHS"),
                              HasSubstr("MSTEP_CACHE")));
  // Inserted again, it is no longer "evicted"; clear() forgets it all.
  cache.insert(key_of(1), entry());
  EXPECT_NE(cache.explain_miss(key_of(1), g).category, "evicted from the memory cache");
  cache.insert(key_of(4), entry());
  cache.insert(key_of(5), entry());
  EXPECT_EQ(cache.explain_miss(key_of(1), g).category, "evicted from the memory cache");
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.explain_miss(key_of(1), g).category, "new structure");
}

TEST(ModuleCacheExplain, NamesTheKeyComponentThatChanged) {
  const TensorType f32_3{Shape{3}, DType::f32};
  TraceGraph g = scaled_relu_graph(f32_3, 0.5);
  ASSERT_EQ(g.input_types.size(), 1u);
  ModuleCache cache(16);

  ModuleCache::MissReason r = cache.explain_miss(key_of(1), g);
  EXPECT_EQ(r.category, "new structure");
  EXPECT_THAT(r.detail, HasSubstr(absl::StrCat(g.nodes.size(), " nodes, 1 inputs")));
  cache.note_compile(key_of(1), g, 3);

  r = cache.explain_miss(key_of(1, 11), scaled_relu_graph({Shape{2, 2}, DType::f32}, 0.5));
  EXPECT_EQ(r.category, "input shape changed");
  EXPECT_THAT(r.detail, AllOf(HasSubstr("input 0"), HasSubstr("was f32[3], now f32[2, 2]"),
                              HasSubstr("ModuleCacher")));

  r = cache.explain_miss(key_of(1, 12), scaled_relu_graph({Shape{3}, DType::f64}, 0.5));
  EXPECT_EQ(r.category, "input dtype changed");
  EXPECT_THAT(r.detail, AllOf(HasSubstr("input 0"), HasSubstr("was f32[3], now f64[3]")));

  // Same inputs, other types: an intermediate shape (a host size) changed.
  r = cache.explain_miss(key_of(1, 13), g);
  EXPECT_EQ(r.category, "intermediate shape changed");

  r = cache.explain_miss(key_of(1, 10, 101), scaled_relu_graph(f32_3, 0.25));
  EXPECT_EQ(r.category, "host constant changed");
  EXPECT_THAT(r.detail, AllOf(HasSubstr("the scalar constant %"), HasSubstr("operand of mul"),
                              HasSubstr("was 0.5, now 0.25")));

  r = cache.explain_miss(key_of(1, 10, 100, 8), g);
  EXPECT_EQ(r.category, "backend changed");

  r = cache.explain_miss(key_of(1, 10, 100, 7, 2), g);
  EXPECT_EQ(r.category, "compile options changed");
  EXPECT_THAT(r.detail, HasSubstr("MSTEP_FUSE"));

  // Backend and options are checked before the types: they explain more.
  r = cache.explain_miss(key_of(1, 11, 100, 7, 2), g);
  EXPECT_EQ(r.category, "compile options changed");

  // An identical key that still missed: the size guard rejected it.
  EXPECT_EQ(cache.explain_miss(key_of(1), g).category, "collision guard");

  // Against the latest compile when no earlier one is nearer.
  cache.note_compile(key_of(1, 11), scaled_relu_graph({Shape{2, 2}, DType::f32}, 0.5), 3);
  r = cache.explain_miss(key_of(1, 14), g);
  EXPECT_EQ(r.category, "input shape changed");
  EXPECT_THAT(r.detail, HasSubstr("was f32[2, 2], now f32[3]"));
}

TEST(ModuleCacheExplain, NoteCompileWarnsOnceAtTheThreshold) {
  ModuleCache cache(16);
  const TensorType t{Shape{3}, DType::f32};
  EXPECT_FALSE(cache.note_compile(key_of(1, 10, 1), scaled_relu_graph(t, 1.0), 3).constants_only);
  ModuleCache::CompileNote n = cache.note_compile(key_of(1, 10, 2), scaled_relu_graph(t, 2.0), 3);
  EXPECT_TRUE(n.constants_only);
  EXPECT_TRUE(n.warning.empty());
  n = cache.note_compile(key_of(1, 10, 3), scaled_relu_graph(t, 3.0), 3);
  EXPECT_TRUE(n.constants_only);
  EXPECT_THAT(n.warning, AllOf(HasSubstr("compiled 3 times"), HasSubstr("1, 2, 3"),
                               HasSubstr("Tensor::scalar")));
  n = cache.note_compile(key_of(1, 10, 4), scaled_relu_graph(t, 4.0), 3);
  EXPECT_TRUE(n.warning.empty()) << "warned twice";
}

// --- Through the tracer ---------------------------------------------------

class RecompileReasonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mark_step();  // flush anything a previous test left pending
    saved_ = Tracer::get().options();
    saved_max_ = Tracer::get().cache().max_entries();
    Tracer::get().cache().clear();
    reset_metrics();
    set_warning_handler([this](absl::string_view w) { warnings_.emplace_back(w); });
  }
  void TearDown() override {
    Tracer::get().mutable_options() = saved_;
    Tracer::get().cache().set_max_entries(saved_max_);
    Tracer::get().cache().clear();
    set_warning_handler(nullptr);
  }

  /// Runs `step` under MSTEP_LOG_RECOMPILES and returns what it printed.
  template <typename F> std::string logged(F&& step) {
    Tracer::get().mutable_options().log_recompiles = true;
    ::testing::internal::CaptureStderr();
    step();
    std::string out = ::testing::internal::GetCapturedStderr();
    Tracer::get().mutable_options().log_recompiles = false;
    return out;
  }

  RuntimeOptions saved_;
  size_t saved_max_ = 0;
  std::vector<std::string> warnings_;
};

/// One step: relu(x * c) + 1 with x = -1, 0, 1, ... of `n` elements.
std::vector<float> run_step(int64_t n, double c) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) - 1.f;
  Tensor x = from_vector(v, {n});
  Tensor y = relu(x * c) + 1.0;
  mark_step();
  return y.to_vector<float>();
}

TEST_F(RecompileReasonTest, EachCompileIsCountedUnderItsReason) {
  EXPECT_EQ(run_step(3, 2.0), (V{1, 1, 3}));
  Metrics m = metrics();
  const int64_t first = m.compiles;  // the step plus any conversion graph
  ASSERT_GT(first, 0);
  EXPECT_EQ(m.recompile_reasons.at("new structure"), first);

  run_step(3, 2.0);  // all hits
  EXPECT_EQ(metrics().compiles, first);

  run_step(5, 2.0);  // a new input shape
  run_step(5, 0.5);  // a new host constant
  Tracer::get().mutable_options().fuse = false;
  EXPECT_EQ(run_step(5, 0.5), (V{1, 1, 1.5, 2, 2.5}));  // other compile options
  m = metrics();
  EXPECT_EQ(m.recompile_reasons.at("input shape changed"), 1);
  EXPECT_EQ(m.recompile_reasons.at("host constant changed"), 1);
  EXPECT_GE(m.recompile_reasons.at("compile options changed"), 1);
  int64_t total = 0;
  for (const auto& [reason, count] : m.recompile_reasons) total += count;
  EXPECT_EQ(total, m.compiles) << "every compile has exactly one reason";
  EXPECT_EQ(m.cache_misses, m.compiles);
}

TEST_F(RecompileReasonTest, LogLineNamesTheChangedInputAndItsTypes) {
  run_step(3, 2.0);
  std::string log = logged([] { EXPECT_EQ(run_step(4, 2.0), (V{1, 1, 3, 5})); });
  EXPECT_THAT(log, AllOf(HasSubstr("mstep: compiling graph "), HasSubstr("input shape changed"),
                         HasSubstr("input 0 (input) was f32[3], now f32[4]")))
      << log;
  // One line per compile, and nothing on a hit.
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), metrics().recompile_reasons.at(
                                                          "input shape changed"));
  EXPECT_EQ(logged([] { run_step(4, 2.0); }), "");
}

TEST_F(RecompileReasonTest, LogLineNamesTheHostConstantAndBothValues) {
  run_step(3, 2.0);
  std::string log = logged([] { EXPECT_EQ(run_step(3, 3.0), (V{1, 1, 4})); });
  EXPECT_THAT(log, AllOf(HasSubstr("host constant changed"), HasSubstr("operand of mul"),
                         HasSubstr("was 2, now 3")))
      << log;
  EXPECT_EQ(metrics().recompile_reasons.at("host constant changed"), 1);
}

TEST_F(RecompileReasonTest, FlippingFusionIsACompileOptionsChange) {
  run_step(3, 2.0);
  Tracer::get().mutable_options().fuse = false;
  std::string log = logged([] { EXPECT_EQ(run_step(3, 2.0), (V{1, 1, 3})); });
  EXPECT_THAT(log, AllOf(HasSubstr("compile options changed"), HasSubstr("MSTEP_FUSE"))) << log;
  EXPECT_GE(metrics().recompile_reasons.at("compile options changed"), 1);
  // Flipping back finds the fused graph still cached.
  Tracer::get().mutable_options().fuse = true;
  const int64_t compiles = metrics().compiles;
  EXPECT_EQ(logged([] { run_step(3, 2.0); }), "");
  EXPECT_EQ(metrics().compiles, compiles);
}

TEST_F(RecompileReasonTest, FlippingTheCudaColumnReductionIsACompileOptionsChange) {
  // Part of the key whatever the device (the cuda compile half reads it).
  run_step(3, 2.0);
  Tracer::get().mutable_options().cuda_column_reduction = "thread";
  std::string log = logged([] { EXPECT_EQ(run_step(3, 2.0), (V{1, 1, 3})); });
  EXPECT_THAT(log, AllOf(HasSubstr("compile options changed"),
                         HasSubstr("MSTEP_CUDA_COLUMN_REDUCTION")))
      << log;
}

TEST_F(RecompileReasonTest, FlippingTheCudaConvFormIsACompileOptionsChange) {
  run_step(3, 2.0);
  Tracer::get().mutable_options().cuda_conv = "direct";
  std::string log = logged([] { EXPECT_EQ(run_step(3, 2.0), (V{1, 1, 3})); });
  EXPECT_THAT(log, AllOf(HasSubstr("compile options changed"), HasSubstr("MSTEP_CUDA_CONV")))
      << log;
}

TEST_F(RecompileReasonTest, AGraphEvictedByTheLruIsExplainedAsEvicted) {
  Tracer::get().cache().set_max_entries(1);
  Tensor x = from_vector(V{-1, 0, 2}, {3});
  auto a = [&] {
    Tensor y = relu(x) * 3.0;
    mark_step();
    return y.to_vector<float>();
  };
  auto b = [&] {
    Tensor y = exp(x) - x;
    mark_step();
    return y.to_vector<float>();
  };
  EXPECT_EQ(a(), (V{0, 0, 6}));
  b();  // evicts a
  std::string log = logged([&] { EXPECT_EQ(a(), (V{0, 0, 6})); });  // evicts b
  EXPECT_THAT(log, AllOf(HasSubstr("evicted from the memory cache"), HasSubstr("(1 entries)")))
      << log;
  Metrics m = metrics();
  EXPECT_EQ(m.memory_evictions, 2);
  EXPECT_EQ(m.compiles, 3);
  EXPECT_THAT(m.recompile_reasons, UnorderedElementsAre(Pair("new structure", 2),
                                                        Pair("evicted from the memory cache", 1)));
  EXPECT_EQ(Tracer::get().cache().size(), 1u);

  // With room for both, the two alternate without compiling.
  Tracer::get().cache().set_max_entries(2);
  b();
  const int64_t compiles = metrics().compiles;
  for (int i = 0; i < 3; ++i) {
    a();
    b();
  }
  EXPECT_EQ(metrics().compiles, compiles);
  EXPECT_EQ(metrics().memory_evictions, 2);
}

}  // namespace
}  // namespace mstep
