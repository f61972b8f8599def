// The xla memory limit as a runtime option (RuntimeOptions::
// xla_memory_limit, set by MSTEP_XLA_MEMORY_LIMIT or the C API): it is
// part of the compile key, so the same step under two limits compiles
// twice, each with its own arena report, and under the same limit again
// is a cache hit; the disk cache keeps one entry per limit; a limit that
// cannot be met fails mark_step with the smallest one, and the process
// goes on. (The pass itself: xla_remat_test.cpp, mstep-xla-remat.mlir.)
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "lib/runtime/DiskCache.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr Device kXla{DeviceType::xla, 0};

Tensor on_xla(Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.01f * static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, kXla);
}

/// Sets the limit while it lives; restores the options after.
struct LimitScope {
  explicit LimitScope(std::string bytes) : saved(Tracer::get().options()) {
    Tracer::get().mutable_options().xla_memory_limit = std::move(bytes);
  }
  ~LimitScope() { Tracer::get().mutable_options() = saved; }
  RuntimeOptions saved;
};

struct Step {
  absl::Status status;
  std::string report;  // what the compile wrote on stderr
  std::vector<float> r;
};

/// One step of the chain of xla_remat_test.cpp: exp(x) read by the first
/// product and by the last, with a chain of products in between.
Step chain_step() {
  Tensor x = on_xla({64, 64}, 1), w1 = on_xla({2, 64}, 2), u = on_xla({32, 2}, 3),
         w2 = on_xla({32, 32}, 4), p = on_xla({32, 64}, 5), v = on_xla({64, 1}, 6);
  mark_step();
  Tensor e = exp(x);
  Tensor h4 = matmul(w2, matmul(w2, matmul(u, matmul(w1, e))));
  Tensor pn = p - h4;
  Tensor r = matmul(e, v);
  ::testing::internal::CaptureStderr();
  Step step;
  step.status = Tracer::get().mark_step();
  step.report = ::testing::internal::GetCapturedStderr();
  if (step.status.ok()) step.r = r.to_vector<float>();
  (void)pn;
  return step;
}

TEST(XlaMemoryLimit, TheLimitIsPartOfTheCompileKey) {
  Tracer::get().cache().clear();
  reset_metrics();
  Step free = chain_step();
  ASSERT_TRUE(free.status.ok()) << free.status;
  EXPECT_THAT(free.report, Not(HasSubstr("MSTEP_XLA_MEMORY_LIMIT")));
  Step tight, loose, tight_again;
  {
    LimitScope limit("40000");
    tight = chain_step();
  }
  {
    LimitScope limit("1000000");
    loose = chain_step();
  }
  {
    LimitScope limit("40000");
    tight_again = chain_step();
  }
  ASSERT_TRUE(tight.status.ok()) << tight.status;
  ASSERT_TRUE(loose.status.ok()) << loose.status;
  ASSERT_TRUE(tight_again.status.ok()) << tight_again.status;
  // Two limits, two compiles, each with its own report (the step's arena,
  // 33024 bytes here, meets both: nothing is recomputed at this level).
  EXPECT_THAT(tight.report, HasSubstr("bytes under MSTEP_XLA_MEMORY_LIMIT=40000 ("));
  EXPECT_THAT(loose.report, HasSubstr("bytes under MSTEP_XLA_MEMORY_LIMIT=1000000 ("));
  // The same limit again: the cached step, no compile, no report.
  EXPECT_EQ(tight_again.report, "");
  EXPECT_EQ(metrics().compiles, 3);
  EXPECT_EQ(tight.r, free.r);
  EXPECT_EQ(tight_again.r, free.r);
}

TEST(XlaMemoryLimit, ALimitThatCannotBeMetFailsTheStepAndTheProcessGoesOn) {
  {
    LimitScope limit("9000");
    Step step = chain_step();
    ASSERT_FALSE(step.status.ok());
    EXPECT_THAT(step.status.message(), HasSubstr("the smallest limit that can be met is"));
  }
  Step step = chain_step();
  EXPECT_TRUE(step.status.ok()) << step.status;
}

/// A private disk cache while it lives; nothing cached in memory.
class XlaMemoryLimitDisk : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("mstep_xla_memory_limit_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    saved_ = Tracer::get().options();
    Tracer::get().mutable_options().disk_cache = dir_ + ",false,64";
    Tracer::get().reset_disk_cache();
    Tracer::get().cache().clear();
  }
  void TearDown() override {
    Tracer::get().mutable_options() = saved_;
    Tracer::get().reset_disk_cache();
    Tracer::get().cache().clear();
    fs::remove_all(dir_);
  }
  /// chain_step() under `limit`, then forgets every graph in memory, as a
  /// new process would start.
  Step run(const std::string& limit) {
    LimitScope scope(limit);
    Step step = chain_step();
    Tracer::get().disk_cache()->flush();
    Tracer::get().cache().clear();
    return step;
  }
  std::string dir_;
  RuntimeOptions saved_;
};

TEST_F(XlaMemoryLimitDisk, EachLimitHasItsOwnEntry) {
  reset_metrics();
  Step tight = run("40000");
  ASSERT_TRUE(tight.status.ok()) << tight.status;
  EXPECT_EQ(metrics().compiles, 1);
  // Another limit is not served the tight entry: it compiles.
  Step loose = run("1000000");
  ASSERT_TRUE(loose.status.ok()) << loose.status;
  EXPECT_EQ(metrics().compiles, 2);
  EXPECT_EQ(metrics().disk_hits, 0);
  EXPECT_THAT(loose.report, HasSubstr("under MSTEP_XLA_MEMORY_LIMIT=1000000 ("));
  // The tight limit again: its entry, from disk.
  Step again = run("40000");
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(metrics().compiles, 2);
  EXPECT_EQ(metrics().disk_hits, 1);
  EXPECT_EQ(again.r, tight.r);
}

} // namespace
} // namespace mstep
