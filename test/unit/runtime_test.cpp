// Tracer, mark_step, sync points, the graph cache and its warnings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mark_step();  // flush anything a previous test left pending
    reset_metrics();
    Tracer::get().cache().clear();
    set_warning_handler([this](absl::string_view w) { warnings_.emplace_back(w); });
  }
  void TearDown() override { set_warning_handler(nullptr); }
  std::vector<std::string> warnings_;
};

Tensor step_fn(const Tensor& x) { return relu(x * 2.0 + 1.0) - x; }

TEST_F(RuntimeTest, OpsAreLazyUntilMarkStep) {
  Tensor x = from_vector(std::vector<float>{-1, 0, 1, 2}, {4});
  Tensor y = step_fn(x);
  EXPECT_TRUE(y.is_pending());
  EXPECT_EQ(metrics().graphs_executed, 0);
  mark_step();
  EXPECT_FALSE(y.is_pending());
  EXPECT_EQ(metrics().graphs_executed, 1);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 1, 2, 3}));
}

TEST_F(RuntimeTest, SameStepTwiceCompilesOnceAndHitsOnce) {
  for (int i = 0; i < 2; ++i) {
    Tensor x = from_vector(std::vector<float>{1.f * i, 2, 3}, {3});
    Tensor y = step_fn(x);
    mark_step();
  }
  EXPECT_EQ(metrics().cache_misses, 1);
  EXPECT_EQ(metrics().cache_hits, 1);
}

TEST_F(RuntimeTest, NewShapeIsAMiss) {
  Tensor a = step_fn(zeros({3}));
  mark_step();
  Tensor b = step_fn(zeros({4}));
  mark_step();
  EXPECT_EQ(metrics().cache_misses, 2);
  EXPECT_EQ(metrics().cache_hits, 0);
}

TEST_F(RuntimeTest, NewDtypeIsAMiss) {
  Tensor a = step_fn(zeros({3}, DType::f32));
  mark_step();
  Tensor b = step_fn(zeros({3}, DType::f64));
  mark_step();
  EXPECT_EQ(metrics().cache_misses, 2);
}

TEST_F(RuntimeTest, SharingChangesTheKey) {
  // x + x and x + y have the same ops and shapes but different wiring.
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor y = from_vector(std::vector<float>{10, 20}, {2});
  Tensor a = x + x;
  mark_step();
  Tensor b = x + y;
  mark_step();
  EXPECT_EQ(metrics().cache_misses, 2);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{11, 22}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST_F(RuntimeTest, ChangingHostConstantWarnsOnceAndNamesIt) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  for (int step = 0; step < 5; ++step) {
    Tensor y = x * (0.1 * (step + 1));  // a learning-rate-like constant
    mark_step();
  }
  EXPECT_EQ(metrics().cache_misses, 5);
  EXPECT_EQ(metrics().constant_recompiles, 4);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("host constant"));
  EXPECT_THAT(warnings_[0], HasSubstr("operand of mul"));
  EXPECT_THAT(warnings_[0], HasSubstr("0.1, 0.2, 0.3"));
  EXPECT_THAT(warnings_[0], HasSubstr("Tensor::scalar"));
}

TEST_F(RuntimeTest, ConstantThatStaysTheSameDoesNotWarn) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  for (int step = 0; step < 5; ++step) {
    Tensor y = x * 0.5;
    mark_step();
  }
  EXPECT_EQ(metrics().cache_misses, 1);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(RuntimeTest, DeviceScalarDoesNotRecompile) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor lr = Tensor::scalar(0.1);
  std::vector<float> last;
  for (int step = 0; step < 5; ++step) {
    lr.fill_(0.1 * (step + 1));
    Tensor y = x * lr;
    mark_step();
    last = y.to_vector<float>();
  }
  EXPECT_EQ(metrics().cache_misses, 1);
  EXPECT_EQ(metrics().cache_hits, 4);
  EXPECT_TRUE(warnings_.empty());
  EXPECT_FLOAT_EQ(last[0], 0.5f);
  EXPECT_FLOAT_EQ(last[1], 1.0f);
}

TEST_F(RuntimeTest, FillAfterTracingDoesNotChangeRecordedOps) {
  Tensor s = Tensor::scalar(2.0);
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor before = x * s;  // recorded while s == 2
  s.fill_(3.0);
  Tensor after = x * s;
  mark_step();
  EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(after.to_vector<float>(), (std::vector<float>{3, 6}));
}

TEST_F(RuntimeTest, ItemIsASyncPointThatRunsOnlyWhatItNeeds) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor a = x * 2.0;
  Tensor b = x + 100.0;
  EXPECT_DOUBLE_EQ(a.sum().item(), 12.0);
  EXPECT_EQ(metrics().sync_points, 1);
  EXPECT_TRUE(b.is_pending()) << "b is not needed by the read";
  EXPECT_TRUE(a.is_pending()) << "only the read tensor is materialized";
  mark_step();
  EXPECT_FALSE(b.is_pending());
}

TEST_F(RuntimeTest, ToVectorAndPrintingAreSyncPoints) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}) * 1.0;
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(x.to_string(), "tensor(f32[2, 2], [[1, 2],\n [3, 4]])");
  EXPECT_EQ(metrics().sync_points, 1) << "the second read finds it materialized";
}

TEST_F(RuntimeTest, DeadTensorsAreNotComputed) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  { Tensor dead = x * 3.0; }
  Tensor live = x + 1.0;
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, 1);
  // The live graph is x + 1 only: recording the same again hits the cache.
  Tensor again = x + 1.0;
  mark_step();
  EXPECT_EQ(metrics().cache_hits, 1);
}

TEST_F(RuntimeTest, MarkStepWithNothingPendingDoesNothing) {
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, 0);
  EXPECT_EQ(metrics().mark_steps, 1);
}

TEST_F(RuntimeTest, RandomDiffersPerStepAndReproducesFromSeed) {
  manual_seed(7);
  Tensor a = rand({64});
  mark_step();
  Tensor b = rand({64});
  mark_step();
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(metrics().cache_misses, 1) << "seed and offset are graph inputs";
  manual_seed(7);
  Tensor c = rand({64});
  mark_step();
  EXPECT_EQ(a.to_vector<float>(), c.to_vector<float>());
}

TEST_F(RuntimeTest, TwoRandomCallsInOneStepDiffer) {
  manual_seed(1);
  Tensor a = rand({16});
  Tensor b = rand({16});
  mark_step();
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
}

TEST_F(RuntimeTest, RandomDistributions) {
  manual_seed(3);
  Tensor u = rand({20000});
  Tensor n = randn({20000});
  mark_step();
  std::vector<float> uv = u.to_vector<float>(), nv = n.to_vector<float>();
  double us = 0, ns = 0, nss = 0;
  for (float v : uv) {
    ASSERT_GE(v, 0.f);
    ASSERT_LT(v, 1.f);
    us += v;
  }
  for (float v : nv) {
    ns += v;
    nss += v * v;
  }
  EXPECT_NEAR(us / uv.size(), 0.5, 0.01);
  EXPECT_NEAR(ns / nv.size(), 0.0, 0.02);
  EXPECT_NEAR(nss / nv.size(), 1.0, 0.03);
}

TEST_F(RuntimeTest, DumpDirGetsTextAndDot) {
  auto dir = std::filesystem::temp_directory_path() / "mstep_dump_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Tracer::get().mutable_options().dump_dir = dir.string();
  Tensor y = step_fn(ones({2}));
  mark_step();
  Tracer::get().mutable_options().dump_dir.clear();
  int txt = 0, dot = 0;
  std::string text;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".txt") {
      ++txt;
      std::ifstream in(e.path());
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    dot += e.path().extension() == ".dot";
  }
  EXPECT_EQ(txt, 1);
  EXPECT_EQ(dot, 1);
  EXPECT_THAT(text, HasSubstr("relu("));
  EXPECT_THAT(text, HasSubstr(": f32[2]"));
}

TEST_F(RuntimeTest, DumpDirGetsTheMlirAfterImportAndEveryPass) {
  auto dir = std::filesystem::temp_directory_path() / "mstep_mlir_dump_test";
  std::filesystem::remove_all(dir);
  Tracer::get().mutable_options().dump_dir = dir.string();
  Tensor y = step_fn(ones({2}));
  mark_step();
  Tracer::get().mutable_options().dump_dir.clear();
  std::vector<std::string> files;
  for (const auto& graph : std::filesystem::directory_iterator(dir))
    if (graph.is_directory())
      for (const auto& f : std::filesystem::directory_iterator(graph.path()))
        files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.front(), "00_import.mlir");
  EXPECT_THAT(files, ::testing::Contains("07_mstep-fuse-elementwise.mlir"));
  std::ifstream in(dir / std::filesystem::directory_iterator(dir)->path().filename() /
                   "00_import.mlir");
  std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_THAT(text, HasSubstr("mstep.relu"));
}

TEST_F(RuntimeTest, FusionSettingIsPartOfTheKey) {
  // A graph compiled with fusion must not be served to a run without it.
  const bool fuse = Tracer::get().options().fuse;
  std::vector<float> results[2];
  for (int i = 0; i < 2; ++i) {
    Tracer::get().mutable_options().fuse = i == 0;
    Tensor y = step_fn(from_vector(std::vector<float>{-1, 0, 1, 2}, {4}));
    mark_step();
    results[i] = y.to_vector<float>();
  }
  Tracer::get().mutable_options().fuse = fuse;
  EXPECT_EQ(metrics().cache_misses, 2);
  EXPECT_EQ(results[0], results[1]);
}

TEST_F(RuntimeTest, CopyInPlaceRebindsTheTensor) {
  Tensor w = from_vector(std::vector<float>{1, 2}, {2});
  w.copy_(w * 10.0);
  mark_step();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{10, 20}));
}

TEST_F(RuntimeTest, CopyWithWrongShapeFailsAndKeepsState) {
  Tensor w = from_vector(std::vector<float>{1, 2}, {2});
  try {
    w.copy_(zeros({3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy_"));
    EXPECT_THAT(e.what(), HasSubstr("f32[2]"));
    EXPECT_THAT(e.what(), HasSubstr("f32[3]"));
  }
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST_F(RuntimeTest, UndefinedTensorErrorsClearly) {
  Tensor t;
  try {
    t.item();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("undefined"));
  }
}

TEST_F(RuntimeTest, ItemOnManyElementsErrors) {
  try {
    zeros({2, 2}).item();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("exactly one element"));
    EXPECT_THAT(e.what(), HasSubstr("f32[2, 2]"));
  }
}

TEST_F(RuntimeTest, MetricsReportNamesCounters) {
  Tensor y = step_fn(ones({2}));
  mark_step();
  std::string r = metrics_report();
  EXPECT_THAT(r, HasSubstr("cache_misses        1"));
  EXPECT_THAT(r, HasSubstr("graphs_executed     1"));
}

}  // namespace
}  // namespace mstep
