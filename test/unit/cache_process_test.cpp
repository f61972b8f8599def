// The disk cache as the tracer uses it (MSTEP_CACHE): a second run of the
// same training steps loads every graph from disk and computes the same
// bits, corrupt entries are warned about and recompiled, clear_on_start
// empties the directory, a bad setting or a directory other users can
// write turns the cache off with one warning, another user's entries are
// refused and replaced. Then several processes (cache_process_worker.cpp)
// share one small directory through the environment, as the jobs of a
// cluster would.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/OtherUser.h"
#include "test/unit/TestUtil.h"
#include "test/unit/TestFiles.h"

extern char** environ;

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Values = std::vector<std::vector<float>>;

std::string make_temp_dir(const char* prefix) {
  std::string templ = (fs::temp_directory_path() / absl::StrCat(prefix, "_XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << templ;
  return templ;
}

/// The entry files (*.mstep) in `dir`, sorted.
std::vector<std::string> entry_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension().string() == DiskCache::kExtension) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t entry_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& f : entry_files(dir)) total += fs::file_size(f);
  return total;
}

using mstep::testing::read_file;

/// Bitwise equality of two runs' results (== would let -0 equal 0).
bool same_bits(const Values& a, const Values& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

/// A small training run: a matmul + relu + sum step, then three SGD steps
/// of an nn::Linear on an MSE loss. Returns every result and the final
/// parameters.
Values train_run() {
  manual_seed(7);
  Tensor x = testing::filled({6, 8}, 1);
  Tensor w = testing::filled({8, 5}, 2);
  Tensor s = sum(relu(matmul(x, w)));
  mark_step();
  Values out = {testing::values(s)};

  nn::Linear layer(8, 4);
  optim::SGD opt(layer.parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor target = testing::filled({6, 4}, 3);
  for (int step = 0; step < 3; ++step) {
    Tensor loss = mse_loss(relu(layer.forward(x)), target);
    loss.backward();
    opt.step();
    opt.zero_grad();
    mark_step();
    out.push_back(testing::values(loss));
  }
  out.push_back(testing::values(layer.weight));
  out.push_back(testing::values(layer.bias));
  return out;
}

class TracerDiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mark_step();  // flush anything a previous test left pending
    saved_ = Tracer::get().options();
    dir_ = make_temp_dir("mstep_tracer_cache");
    Tracer::get().cache().clear();
    reset_metrics();
    set_warning_handler([this](absl::string_view w) {
      std::lock_guard<std::mutex> lock(mu_);  // the cache also warns from its thread
      warnings_.emplace_back(w);
    });
  }
  void TearDown() override {
    Tracer::get().mutable_options() = saved_;
    Tracer::get().reset_disk_cache();
    Tracer::get().cache().clear();
    set_warning_handler(nullptr);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Points MSTEP_CACHE at `setting` and reopens the disk cache.
  void use_disk_cache(const std::string& setting) {
    Tracer::get().mutable_options().disk_cache = setting;
    Tracer::get().reset_disk_cache();
  }
  /// Finishes the queued writes.
  void flush() {
    DiskCache* disk = Tracer::get().disk_cache();
    ASSERT_NE(disk, nullptr);
    disk->flush();
  }
  /// Trains with MSTEP_CACHE=`setting`, which the test made unusable: the
  /// results equal a run without a disk cache, twice (the second run warns
  /// no more), and no disk lookup happens. Returns the warnings.
  std::vector<std::string> runs_without_the_disk_cache(const std::string& setting) {
    const Values expected = train_run();  // no disk cache
    forget_memory();
    use_disk_cache(setting);
    const Values got = train_run();
    forget_memory();
    EXPECT_TRUE(same_bits(expected, train_run()));
    EXPECT_TRUE(same_bits(expected, got));
    EXPECT_EQ(Tracer::get().disk_cache(), nullptr);
    Metrics m = metrics();
    EXPECT_GT(m.compiles, 0);
    EXPECT_EQ(m.disk_hits + m.disk_misses + m.disk_corrupt, 0);
    return warnings();
  }

  /// The next run starts from an empty memory cache and zero counters.
  void forget_memory() {
    Tracer::get().cache().clear();
    reset_metrics();
  }
  std::vector<std::string> warnings() {
    std::lock_guard<std::mutex> lock(mu_);
    return warnings_;
  }

  RuntimeOptions saved_;
  std::string dir_;
  std::mutex mu_;
  std::vector<std::string> warnings_;
};

TEST_F(TracerDiskCacheTest, ASecondRunLoadsEveryGraphFromDiskAndMatchesBitForBit) {
  use_disk_cache(dir_ + ",false,64");
  ASSERT_NE(Tracer::get().disk_cache(), nullptr);
  const Values first = train_run();
  Metrics m = metrics();
  const int64_t graphs = m.compiles;
  ASSERT_GT(graphs, 1);
  EXPECT_EQ(m.disk_hits, 0);
  EXPECT_EQ(m.disk_misses, graphs);
  EXPECT_EQ(m.disk_corrupt, 0);
  flush();
  std::vector<std::string> files = entry_files(dir_);
  EXPECT_EQ(static_cast<int64_t>(files.size()), graphs) << "one entry per compiled graph";
  for (const std::string& f : files) {
    absl::Status ok = DiskCache::verify_file(f);
    EXPECT_TRUE(ok.ok()) << ok;
  }

  forget_memory();
  const Values second = train_run();
  m = metrics();
  EXPECT_EQ(m.compiles, 0) << metrics_report();
  EXPECT_EQ(m.disk_hits, graphs);
  EXPECT_EQ(m.disk_misses, 0);
  EXPECT_EQ(m.cache_misses, graphs);
  EXPECT_TRUE(m.recompile_reasons.empty());
  EXPECT_TRUE(same_bits(first, second));

  // Warm memory: no disk lookups at all.
  reset_metrics();
  const Values third = train_run();
  m = metrics();
  EXPECT_EQ(m.disk_hits + m.disk_misses, 0);
  EXPECT_EQ(m.compiles, 0);
  EXPECT_GT(m.cache_hits, 0);
  EXPECT_TRUE(same_bits(first, third));
  EXPECT_TRUE(warnings().empty()) << warnings().front();
  EXPECT_EQ(entry_files(dir_).size(), files.size());
}

TEST_F(TracerDiskCacheTest, CorruptEntriesAreWarnedAboutRemovedAndRecompiled) {
  use_disk_cache(dir_ + ",false,64");
  const Values first = train_run();
  flush();
  const std::vector<std::string> files = entry_files(dir_);
  ASSERT_GT(files.size(), 1u);
  for (const std::string& f : files) {
    std::string bytes = read_file(f);
    ASSERT_GT(bytes.size(), 64u);
    bytes[bytes.size() / 2] ^= 0x5a;
    bytes.back() ^= 0x01;
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    ASSERT_FALSE(DiskCache::verify_file(f).ok()) << f;
  }

  forget_memory();
  const Values second = train_run();
  Metrics m = metrics();
  const auto n = static_cast<int64_t>(files.size());
  EXPECT_EQ(m.disk_corrupt, n);
  EXPECT_EQ(m.disk_hits, 0);
  EXPECT_EQ(m.compiles, n);
  EXPECT_TRUE(same_bits(first, second)) << "a corrupt entry must never be run";
  std::vector<std::string> w = warnings();
  ASSERT_EQ(static_cast<int64_t>(w.size()), n);
  for (const std::string& line : w)
    EXPECT_THAT(line, AllOf(HasSubstr(dir_), HasSubstr("recompiled"))) << line;

  // The recompiled graphs were stored again, whole.
  flush();
  EXPECT_EQ(entry_files(dir_).size(), files.size());
  for (const std::string& f : entry_files(dir_)) EXPECT_TRUE(DiskCache::verify_file(f).ok()) << f;
  forget_memory();
  EXPECT_TRUE(same_bits(first, train_run()));
  EXPECT_EQ(metrics().disk_hits, n);
  EXPECT_EQ(metrics().compiles, 0);
}

TEST_F(TracerDiskCacheTest, ClearOnStartEmptiesTheDirectoryOnReopen) {
  use_disk_cache(dir_ + ",false,64");
  const Values first = train_run();
  flush();
  const size_t n = entry_files(dir_).size();
  ASSERT_GT(n, 0u);

  // Reopened without clear_on_start, the entries are still there.
  use_disk_cache(dir_ + ",false,64");
  ASSERT_NE(Tracer::get().disk_cache(), nullptr);
  EXPECT_EQ(entry_files(dir_).size(), n);

  use_disk_cache(dir_ + ",true,64");
  ASSERT_NE(Tracer::get().disk_cache(), nullptr);  // opening clears
  EXPECT_TRUE(entry_files(dir_).empty());
  forget_memory();
  EXPECT_TRUE(same_bits(first, train_run()));
  EXPECT_EQ(metrics().disk_hits, 0);
  EXPECT_EQ(metrics().compiles, static_cast<int64_t>(n));
  EXPECT_TRUE(warnings().empty()) << warnings().front();
}

TEST_F(TracerDiskCacheTest, AnInvalidSettingWarnsOnceAndRunsWithoutTheDiskCache) {
  const std::string setting = dir_ + ",maybe,1";
  const std::vector<std::string> w = runs_without_the_disk_cache(setting);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], AllOf(HasSubstr("MSTEP_CACHE=" + setting), HasSubstr("not valid"),
                          HasSubstr("clear_on_start"), HasSubstr("off for this process")));
  EXPECT_TRUE(entry_files(dir_).empty());
}

TEST_F(TracerDiskCacheTest, ADirectoryThatCannotBeCreatedWarnsOnceAndRunsWithoutIt) {
  std::ofstream(dir_ + "/plain") << "a file, not a directory";
  use_disk_cache(dir_ + "/plain/cache,false,1");
  const Values got = train_run();
  EXPECT_EQ(Tracer::get().disk_cache(), nullptr);
  EXPECT_GT(metrics().compiles, 0);
  EXPECT_EQ(metrics().disk_misses, 0);
  std::vector<std::string> w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], AllOf(HasSubstr("cannot open the disk cache"), HasSubstr(dir_ + "/plain"),
                          HasSubstr("off for this process")));
  EXPECT_EQ(got.size(), 6u);
}

TEST_F(TracerDiskCacheTest, ADirectoryOthersCanWriteWarnsOnceAndRunsWithoutTheDiskCache) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  const std::vector<std::string> w = runs_without_the_disk_cache(dir_ + ",false,64");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], AllOf(HasSubstr("cannot open the disk cache"),
                          HasSubstr("'" + dir_ + "' is writable by its group and others"),
                          HasSubstr("(uid " + std::to_string(::geteuid()) + ")"),
                          HasSubstr("mode 0777"), HasSubstr("run `chmod 700 " + dir_ + "`"),
                          HasSubstr("MSTEP_CACHE="), HasSubstr("off for this process")));
  EXPECT_TRUE(fs::is_empty(dir_)) << "nothing is written to a refused directory";
  EXPECT_EQ(fs::status(dir_).permissions(), fs::perms::all) << "and it is not chmod-ed";
}

TEST_F(TracerDiskCacheTest, EntriesOfAnotherUserAreRefusedRecompiledAndReplaced) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  use_disk_cache(dir_ + ",false,64");
  const Values first = train_run();
  flush();
  const std::vector<std::string> files = entry_files(dir_);
  ASSERT_GT(files.size(), 1u);
  for (const std::string& f : files) testing::give_to_other_user(f);

  forget_memory();
  const Values second = train_run();
  Metrics m = metrics();
  const auto n = static_cast<int64_t>(files.size());
  EXPECT_EQ(m.disk_hits, 0) << "another user's entry must never be run";
  EXPECT_EQ(m.disk_misses, n);
  EXPECT_EQ(m.compiles, n);
  EXPECT_TRUE(same_bits(first, second));
  std::vector<std::string> w = warnings();
  ASSERT_EQ(static_cast<int64_t>(w.size()), n);
  for (const std::string& line : w)
    EXPECT_THAT(line, AllOf(HasSubstr(dir_), HasSubstr("is refused, not loaded"),
                            HasSubstr("is owned by another user"),
                            HasSubstr("(uid " + std::to_string(testing::kOtherUid) + ")")))
        << line;

  // Replaced by entries of ours, which load.
  flush();
  for (const std::string& f : entry_files(dir_)) {
    struct stat st;
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid()) << f;
  }
  forget_memory();
  EXPECT_TRUE(same_bits(first, train_run()));
  EXPECT_EQ(metrics().disk_hits, n);
  EXPECT_EQ(metrics().compiles, 0);
}

// --- Several processes ------------------------------------------------------

/// What one worker printed and how it ended.
struct WorkerRun {
  int exit_code = -1;
  std::map<std::string, int64_t> stats;  // compiles, disk_hits, ...
  std::string output;                     // stdout and stderr, for failures
};

class CacheProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_dir_ = make_temp_dir("mstep_shared_cache");
    log_dir_ = make_temp_dir("mstep_worker_logs");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cache_dir_, ec);
    fs::remove_all(log_dir_, ec);
  }

  /// Starts a worker on graphs [first, first + count) with MSTEP_CACHE at
  /// the shared directory; its output goes to <log_dir>/<tag>.out/.err.
  pid_t spawn(const std::string& tag, int first, int count, int rounds, int seed) {
    std::vector<std::string> args = {MSTEP_CACHE_PROCESS_WORKER, absl::StrCat(first),
                                     absl::StrCat(count), absl::StrCat(rounds),
                                     absl::StrCat(seed)};
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
      if (!absl::StartsWith(*e, "MSTEP_CACHE=") && !absl::StartsWith(*e, "MSTEP_MAX_GRAPHS=") &&
          !absl::StartsWith(*e, "MSTEP_LOG_CACHE="))
        env.emplace_back(*e);
    env.push_back(absl::StrCat("MSTEP_CACHE=", cache_dir_, ",false,", kMaxMb));
    env.push_back("MSTEP_MAX_GRAPHS=2");
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    const std::string out = log_dir_ + "/" + tag + ".out", err = log_dir_ + "/" + tag + ".err";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "cannot start " << argv[0] << ": " << std::strerror(rc);
    tags_[pid] = tag;
    return rc == 0 ? pid : -1;
  }

  WorkerRun wait(pid_t pid) {
    WorkerRun run;
    if (pid <= 0) return run;
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string base = log_dir_ + "/" + tags_[pid];
    const std::string out = read_file(base + ".out");
    run.output = out + read_file(base + ".err");
    for (absl::string_view field : absl::StrSplit(out, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (absl::SimpleAtoi(kv.second, &v)) run.stats[kv.first] = v;
    }
    return run;
  }

  WorkerRun run_one(const std::string& tag, int first, int count, int rounds, int seed) {
    return wait(spawn(tag, first, count, rounds, seed));
  }

  // 20971 bytes: about 16 of the workers' entries (each about 1.2 KB, a ref
  // executable's native form), so 40 overflow it and 4 fit.
  static constexpr double kMaxMb = 0.02;
  static uint64_t max_bytes() {
    DiskCache::Config c;
    c.max_mb = kMaxMb;
    return c.max_bytes();
  }
  std::string cache_dir_, log_dir_;
  std::map<pid_t, std::string> tags_;
};

TEST_F(CacheProcessesTest, WorkersShareOneSmallDirectoryAndStayWithinItsLimit) {
  const uint64_t max_bytes = CacheProcessesTest::max_bytes();
  // One worker alone first: it measures the entries and must fit nothing
  // but whole, verified files.
  WorkerRun solo = run_one("solo", 0, 4, 1, 1);
  ASSERT_EQ(solo.exit_code, 0) << solo.output;
  ASSERT_EQ(entry_files(cache_dir_).size(), 4u) << solo.output;
  const uint64_t per_entry = entry_bytes(cache_dir_) / 4;
  // Enough graphs that their entries overflow the directory three times.
  const int graphs = static_cast<int>(3 * max_bytes / per_entry) + 4;
  ASSERT_LT(graphs, 200) << "entries of " << per_entry << " bytes are unexpectedly small";

  const int kWorkers = 4, kRounds = 3;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w)
    pids.push_back(spawn(absl::StrCat("worker", w), 0, graphs, kRounds, 100 + w));
  int64_t hits = 0;
  for (pid_t pid : pids) {
    WorkerRun run = wait(pid);
    SCOPED_TRACE(run.output);
    ASSERT_EQ(run.exit_code, 0) << "3: wrong result, 4: corrupt entry or warning";
    EXPECT_EQ(run.stats["lookups"], graphs * kRounds);
    EXPECT_EQ(run.stats["disk_corrupt"], 0);
    EXPECT_EQ(run.stats["warnings"], 0);
    EXPECT_EQ(run.stats["compiles"], run.stats["disk_misses"]);
    EXPECT_GT(run.stats["compiles"], 0) << "the directory cannot hold every graph";
    hits += run.stats["disk_hits"];
  }
  EXPECT_GT(hits, 0) << "no worker found another's (or its own) entry";

  // Every write was followed by its writer's eviction: the limit holds.
  EXPECT_LE(entry_bytes(cache_dir_), max_bytes);
  EXPECT_GT(entry_files(cache_dir_).size(), 0u);
  EXPECT_LT(entry_files(cache_dir_).size(), static_cast<size_t>(graphs));
  for (const auto& e : fs::directory_iterator(cache_dir_)) {
    const std::string name = e.path().filename().string();
    if (name == "eviction.lock") continue;
    EXPECT_TRUE(absl::EndsWith(name, DiskCache::kExtension)) << "left behind: " << name;
    absl::Status ok = DiskCache::verify_file(e.path().string());
    EXPECT_TRUE(ok.ok()) << ok;
  }
}

TEST_F(CacheProcessesTest, APopulatedCacheServesTheGraphsThatFitWithoutCompiling) {
  // Fill the directory past its limit with other graphs first.
  WorkerRun filler = run_one("filler", 10, 40, 1, 7);
  ASSERT_EQ(filler.exit_code, 0) << filler.output;
  ASSERT_EQ(filler.stats["compiles"], 40) << filler.output;
  ASSERT_LT(entry_files(cache_dir_).size(), 40u) << "the filler should overflow the directory";

  // Four graphs fit; the first run compiles them, the second only loads.
  WorkerRun populate = run_one("populate", 0, 4, 1, 8);
  ASSERT_EQ(populate.exit_code, 0) << populate.output;
  EXPECT_EQ(populate.stats["compiles"], 4) << populate.output;
  WorkerRun served = run_one("served", 0, 4, 2, 9);
  ASSERT_EQ(served.exit_code, 0) << served.output;
  EXPECT_EQ(served.stats["compiles"], 0) << served.output;
  EXPECT_GE(served.stats["disk_hits"], 4) << served.output;
  EXPECT_EQ(served.stats["disk_misses"], 0) << served.output;
  EXPECT_EQ(served.stats["lookups"], 8) << served.output;
  EXPECT_LE(entry_bytes(cache_dir_), max_bytes());
}

}  // namespace
}  // namespace mstep
