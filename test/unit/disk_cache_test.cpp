// DiskCache: MSTEP_CACHE parsing, the entry round trip, corruption
// handling, clear_on_start, LRU eviction and several processes sharing one
// directory.
#include "lib/runtime/DiskCache.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/TestFiles.h"

extern char** environ;

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Lookup = DiskCache::Lookup;

constexpr absl::string_view kForm = "expected MSTEP_CACHE=<dir>,<clear_on_start>,<max_mb>";

std::string bytes_of(std::string_view name, size_t size) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i)
    out[i] = static_cast<char>((i * 131 + name.size() * 7) ^ (i >> 3));
  return out;
}

using mstep::testing::read_file;
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// Sets a file's mtime to `seconds` since the epoch.
void set_mtime(const std::string& path, time_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_disk_cache_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  DiskCache::Config config(double max_mb = 1024, bool clear = false) {
    DiskCache::Config c;
    c.dir = dir_;
    c.max_mb = max_mb;
    c.clear_on_start = clear;
    return c;
  }
  /// Opens a cache whose warnings and log lines land in warnings_/logs_.
  std::unique_ptr<DiskCache> open(DiskCache::Config c) {
    auto cache = DiskCache::open(
        std::move(c), [this](absl::string_view m) { warnings_.emplace_back(m); },
        [this](absl::string_view m) { logs_.emplace_back(m); });
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? std::move(*cache) : nullptr;
  }
  void store_now(DiskCache& cache, const std::string& name, const std::string& key,
                 const std::string& payload) {
    cache.store(name, key, [payload] { return payload; });
    cache.flush();
  }

  std::string dir_;
  std::vector<std::string> warnings_, logs_;
};

TEST(DiskCacheConfig, ParsesTheFullForm) {
  auto c = DiskCache::Config::parse("/tmp/mstep,true,0.5");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dir, "/tmp/mstep");
  EXPECT_TRUE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 0.5);
  EXPECT_EQ(c->max_bytes(), 524288u);

  c = DiskCache::Config::parse("/a b/c,0,2048");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dir, "/a b/c");
  EXPECT_FALSE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 2048);

  c = DiskCache::Config::parse(" /tmp/x , 1 , 3 ");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dir, "/tmp/x");
  EXPECT_TRUE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 3);

  c = DiskCache::Config::parse("/tmp/x,FALSE,1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->clear_on_start);
}

TEST(DiskCacheConfig, OmittedFieldsTakeDefaults) {
  auto c = DiskCache::Config::parse("/tmp/mstep");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dir, "/tmp/mstep");
  EXPECT_FALSE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 1024);

  c = DiskCache::Config::parse("/tmp/mstep,true");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 1024);

  c = DiskCache::Config::parse("/tmp/mstep,,64");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->clear_on_start);
  EXPECT_DOUBLE_EQ(c->max_mb, 64);
  EXPECT_EQ(c->also_for, "");

  c = DiskCache::Config::parse("/tmp/mstep,,,cuda");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->max_mb, 1024);
  EXPECT_EQ(c->also_for, "cuda");
}

TEST(DiskCacheConfig, BadValuesNameTheFieldAndTheForm) {
  struct Case {
    const char* text;
    const char* names;
  };
  for (const Case& c : std::vector<Case>{
           {"", "the directory (field 1) is empty"},
           {",true,1", "the directory (field 1) is empty"},
           {"/tmp/x,maybe,1", "clear_on_start (field 2) is \"maybe\""},
           {"/tmp/x,yes", "clear_on_start (field 2) is \"yes\""},
           {"/tmp/x,true,abc", "max_mb (field 3) is \"abc\""},
           {"/tmp/x,true,-1", "max_mb (field 3) is \"-1\""},
           {"/tmp/x,true,0", "max_mb (field 3) is \"0\""},
           {"/tmp/x,true,inf", "max_mb (field 3) is \"inf\""},
           {"/tmp/x,true,nan", "max_mb (field 3) is \"nan\""},
           {"/tmp/x,true,1,cuda,more", "has 5 comma-separated fields"},
       }) {
    auto parsed = DiskCache::Config::parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.names)) << c.text;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(kForm)) << c.text;
  }
}

TEST_F(DiskCacheTest, OpenFailsNamingADirectoryItCannotCreate) {
  write_file(dir_ + "/plain", "not a directory");
  DiskCache::Config c = config();
  c.dir = dir_ + "/plain/sub";
  auto cache = DiskCache::open(c);
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(std::string(cache.status().message()),
              HasSubstr("cannot create the disk cache directory '" + c.dir + "'"));

  c.dir = dir_ + "/plain";
  cache = DiskCache::open(c);
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(std::string(cache.status().message()),
              HasSubstr("cannot create the disk cache directory '" + c.dir + "'"));
}

TEST_F(DiskCacheTest, OpenCreatesNestedDirectories) {
  DiskCache::Config c = config();
  c.dir = dir_ + "/a/b/c";
  auto cache = DiskCache::open(c);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_TRUE(fs::is_directory(c.dir));
}

TEST_F(DiskCacheTest, StoreFlushLoadRoundTrip) {
  auto cache = open(config());
  std::string payload = bytes_of("e1", 3000);  // holds NUL bytes
  store_now(*cache, "e1", "key one", payload);

  std::string path = dir_ + "/e1.mstep";
  ASSERT_TRUE(fs::exists(path));
  EXPECT_TRUE(DiskCache::verify_file(path).ok()) << DiskCache::verify_file(path);
  EXPECT_EQ(cache->directory_bytes(), fs::file_size(path));

  // A hit returns the bytes and marks the entry used (mtime now).
  set_mtime(path, 1000000);
  DiskCache::LoadResult r = cache->load("e1", "key one");
  ASSERT_EQ(r.lookup, Lookup::hit);
  EXPECT_EQ(r.payload, payload);
  EXPECT_GT(fs::last_write_time(path), fs::file_time_type::clock::now() - std::chrono::hours(1));

  EXPECT_EQ(cache->load("e2", "key one").lookup, Lookup::miss);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"e1.mstep", "eviction.lock"}));
}

TEST_F(DiskCacheTest, AnotherKeyIsCorruptAndRemovesTheEntry) {
  auto cache = open(config());
  store_now(*cache, "e1", "key one", "payload");
  DiskCache::LoadResult r = cache->load("e1", "key two");
  EXPECT_EQ(r.lookup, Lookup::corrupt);
  EXPECT_TRUE(r.payload.empty());
  EXPECT_FALSE(fs::exists(dir_ + "/e1.mstep"));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr(dir_ + "/e1.mstep"));
  EXPECT_THAT(warnings_[0], HasSubstr("key mismatch"));
  EXPECT_THAT(warnings_[0], HasSubstr("recompiled"));
  EXPECT_EQ(cache->load("e1", "key one").lookup, Lookup::miss);
}

TEST_F(DiskCacheTest, EveryCorruptionIsDetectedRemovedAndRecoverable) {
  struct Case {
    const char* what;
    std::function<std::string(std::string)> damage;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"flipped payload byte",
       [](std::string b) {
         b[b.size() - 10] ^= 0x40;
         return b;
       },
       "checksum mismatch"},
      {"truncated payload", [](std::string b) { return b.substr(0, b.size() - 7); },
       "size mismatch: the header says 2000 payload bytes, the file holds 1993"},
      {"trailing bytes", [](std::string b) { return b + "xyz"; }, "size mismatch"},
      {"truncated header", [](std::string b) { return b.substr(0, 10); }, "short read"},
      {"truncated key", [](std::string b) { return b.substr(0, 20); }, "short read"},
      {"empty file", [](std::string) { return std::string(); }, "short read"},
      {"foreign version",
       [](std::string b) {
         b[8] = 99;  // the u32 after the 8-byte magic
         return b;
       },
       "format version 99, this build reads version 3"},
      {"garbage", [](std::string b) { return std::string(b.size(), 'G'); }, "bad magic"},
  };
  auto cache = open(config());
  const std::string payload = bytes_of("entry", 2000), path = dir_ + "/entry.mstep";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    warnings_.clear();
    store_now(*cache, "entry", "the key", payload);
    ASSERT_TRUE(fs::exists(path));
    write_file(path, c.damage(read_file(path)));

    absl::Status verified = DiskCache::verify_file(path);
    EXPECT_EQ(verified.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(verified.message()), HasSubstr(c.reason));
    EXPECT_TRUE(fs::exists(path)) << "verify_file must not remove";

    DiskCache::LoadResult r = cache->load("entry", "the key");
    EXPECT_EQ(r.lookup, Lookup::corrupt);
    EXPECT_TRUE(r.payload.empty());
    EXPECT_FALSE(fs::exists(path));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_THAT(warnings_[0], HasSubstr(path));
    EXPECT_THAT(warnings_[0], HasSubstr(c.reason));
    EXPECT_THAT(warnings_[0], HasSubstr("will be recompiled"));

    // A fresh store replaces it.
    store_now(*cache, "entry", "the key", payload);
    r = cache->load("entry", "the key");
    ASSERT_EQ(r.lookup, Lookup::hit);
    EXPECT_EQ(r.payload, payload);
    EXPECT_EQ(warnings_.size(), 1u);
    ASSERT_TRUE(fs::remove(path));
  }
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"eviction.lock"}));
}

TEST_F(DiskCacheTest, EntriesSurviveReopenAndClearOnStartRemovesThem) {
  {
    auto cache = open(config());
    for (int i = 0; i < 3; ++i)
      cache->store(absl::StrCat("e", i), "k", [i] { return std::string(100 + i, 'x'); });
    // No flush: the destructor finishes the queued writes.
  }
  write_file(dir_ + "/notes.txt", "not an entry");
  {
    auto cache = open(config());
    for (int i = 0; i < 3; ++i) {
      DiskCache::LoadResult r = cache->load(absl::StrCat("e", i), "k");
      ASSERT_EQ(r.lookup, Lookup::hit) << i;
      EXPECT_EQ(r.payload, std::string(100 + i, 'x'));
    }
  }
  auto cache = open(config(1024, /*clear=*/true));
  EXPECT_EQ(cache->directory_bytes(), 0u);
  EXPECT_EQ(cache->load("e0", "k").lookup, Lookup::miss);
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"eviction.lock", "notes.txt"}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DiskCacheTest, EvictsLeastRecentlyUsedDownToTheLimit) {
  // 0.01 MB = 10485 bytes holds ten 1035-byte entries.
  DiskCache::Config c = config(0.01);
  c.log = true;
  auto cache = open(c);
  const uint64_t max = c.max_bytes();
  ASSERT_EQ(max, 10485u);
  const time_t base = time(nullptr) - 100000;
  uint64_t entry_bytes = 0;
  auto store_entry = [&](int i) {
    std::string name = absl::StrCat("e", i);
    store_now(*cache, name, "key", bytes_of(name, 1000));
    // Distinct, increasing mtimes (file system clocks are coarse).
    std::string path = dir_ + "/" + name + ".mstep";
    ASSERT_TRUE(fs::exists(path)) << name;
    entry_bytes = fs::file_size(path);
    set_mtime(path, base + i);
  };
  for (int i = 0; i < 20; ++i) store_entry(i);
  EXPECT_LE(cache->directory_bytes(), max);
  std::vector<std::string> expected = {"eviction.lock"};
  for (int i = 10; i < 20; ++i) expected.push_back(absl::StrCat("e", i, ".mstep"));
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files_in(dir_), expected);

  // One line per removal, oldest first, with the size after it.
  ASSERT_EQ(logs_.size(), 10u);
  EXPECT_EQ(logs_[0], absl::StrCat("mstep cache: removed e0.mstep (", entry_bytes,
                                   " bytes), cache now ", 10 * entry_bytes, " bytes of ", max,
                                   " max"));
  EXPECT_THAT(logs_[9], HasSubstr("removed e9.mstep"));

  // Loading e10 makes it the most recently used: the next store evicts e11.
  ASSERT_EQ(cache->load("e10", "key").lookup, Lookup::hit);
  store_entry(20);
  EXPECT_TRUE(fs::exists(dir_ + "/e10.mstep"));
  EXPECT_FALSE(fs::exists(dir_ + "/e11.mstep"));
  EXPECT_TRUE(fs::exists(dir_ + "/e12.mstep"));
  EXPECT_LE(cache->directory_bytes(), max);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DiskCacheTest, EvictionLogsNothingWithoutMstepLogCache) {
  auto cache = open(config(0.001));  // 1048 bytes: one 1035-byte entry
  for (int i = 0; i < 3; ++i) store_now(*cache, absl::StrCat("e", i), "key", bytes_of("x", 1000));
  EXPECT_TRUE(logs_.empty());
  EXPECT_LE(cache->directory_bytes(), cache->config().max_bytes());
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DiskCacheTest, AnEntryLargerThanTheLimitIsNotKept) {
  auto cache = open(config(0.001));
  store_now(*cache, "big", "key", std::string(5000, 'b'));
  EXPECT_EQ(cache->directory_bytes(), 0u);
  EXPECT_EQ(cache->load("big", "key").lookup, Lookup::miss);
}

TEST_F(DiskCacheTest, WorkerErrorsAreWarnedAndNeverThrown) {
  auto cache = open(config());
  cache->store("e1", "k", []() -> std::string { throw std::runtime_error("serializer broke"); });
  cache->flush();
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("e1"));
  EXPECT_THAT(warnings_[0], HasSubstr("serializer broke"));

  // The directory became a file: the write fails, is warned about, and
  // leaves no temporary behind.
  fs::remove_all(dir_);
  write_file(dir_, "in the way");
  store_now(*cache, "e2", "k", "payload");
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_THAT(warnings_[1], HasSubstr(dir_ + "/e2.mstep"));
  EXPECT_THAT(warnings_[1], HasSubstr("not cached"));
  EXPECT_EQ(cache->load("e2", "k").lookup, Lookup::miss);
  ASSERT_EQ(warnings_.size(), 3u);
  EXPECT_THAT(warnings_[2], HasSubstr("cannot open " + dir_ + "/e2.mstep"));
  fs::remove(dir_);

  // A removed directory is created again.
  store_now(*cache, "e3", "k", "payload");
  EXPECT_EQ(cache->load("e3", "k").lookup, Lookup::hit);
  EXPECT_EQ(warnings_.size(), 3u);
}

TEST_F(DiskCacheTest, NamesThatAreNotFileNamesAreRefused) {
  auto cache = open(config());
  cache->store("../escape", "k", [] { return std::string("p"); });
  cache->flush();
  EXPECT_EQ(cache->load("a/b", "k").lookup, Lookup::miss);
  EXPECT_EQ(warnings_.size(), 2u);
  EXPECT_FALSE(fs::exists(fs::path(dir_).parent_path() / "escape.mstep"));
}

TEST_F(DiskCacheTest, ProcessesShareOneDirectory) {
  // Six processes load and store 64 names (700..2699-byte payloads) in a
  // 48 KiB cache, so they evict each other's entries all the time. Each
  // fails on a wrong payload or a corrupt entry.
  const double max_mb = 0.046875;
  const int kWorkers = 6;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    std::vector<std::string> args = {MSTEP_DISK_CACHE_WORKER, dir_, absl::StrCat(max_mb),
                                     absl::StrCat(w + 1), "64", "400"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "worker " << pid << " died";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "worker " << pid;
  }

  // Every rename is followed by its writer's eviction, and the last
  // eviction sees every file: the limit holds exactly.
  auto cache = open(config(max_mb));
  EXPECT_LE(cache->directory_bytes(), cache->config().max_bytes());
  EXPECT_GT(cache->directory_bytes(), 0u);
  int entries = 0;
  for (const std::string& f : files_in(dir_)) {
    if (f == "eviction.lock") continue;
    EXPECT_TRUE(absl::EndsWith(f, ".mstep")) << "left behind: " << f;
    absl::Status ok = DiskCache::verify_file(dir_ + "/" + f);
    EXPECT_TRUE(ok.ok()) << ok;
    ++entries;
  }
  EXPECT_GT(entries, 5);

  // And every remaining entry holds exactly its name's payload.
  std::vector<std::string> args = {MSTEP_DISK_CACHE_WORKER, dir_, "1024", "0", "64", "0", "check"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(warnings_.empty());
}

}  // namespace
}  // namespace mstep
