// The disk cache loads code, so it trusts only what this user alone can
// change (TrustedPath.h): the directory is created 0700 and entries 0600; a
// directory or entry owned by another user, writable by group or others,
// or reached through another user's symlink or an open parent directory
// is refused with an error naming the path, its owner and mode and what to
// do, and the cache keeps working (or, for the directory, is off).
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/runtime/DiskCache.h"
#include "lib/runtime/TrustedPath.h"
#include "test/unit/OtherUser.h"
#include "test/unit/TestFiles.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Lookup = DiskCache::Lookup;
using testing::kOtherUid;

/// "owner <name> (uid N)" as the system's user database has it.
std::string owner_text(uid_t uid) {
  const struct passwd* pw = ::getpwuid(uid);
  return pw ? absl::StrCat("owner ", pw->pw_name, " (uid ", uid, ")")
            : absl::StrCat("owner uid ", uid);
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}
uid_t owner_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_uid;
}

using mstep::testing::read_file;

class DiskCacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_cache_trust_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  absl::StatusOr<std::unique_ptr<DiskCache>> open_at(const std::string& dir) {
    DiskCache::Config c;
    c.dir = dir;
    return DiskCache::open(std::move(c),
                           [this](absl::string_view m) { warnings_.emplace_back(m); });
  }
  std::unique_ptr<DiskCache> open_ok(const std::string& dir) {
    auto cache = open_at(dir);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? std::move(*cache) : nullptr;
  }
  /// The message open_at(dir) fails with ("" and a failure if it opens).
  std::string refusal(const std::string& dir) {
    auto cache = open_at(dir);
    EXPECT_FALSE(cache.ok()) << dir << " was accepted";
    return cache.ok() ? "" : std::string(cache.status().message());
  }
  /// A trusted cache still works: a stored entry comes back.
  void expect_round_trip(const std::string& dir) {
    auto cache = open_ok(dir);
    ASSERT_NE(cache, nullptr);
    cache->store("check", "key", [] { return std::string("payload"); });
    cache->flush();
    DiskCache::LoadResult r = cache->load("check", "key");
    EXPECT_EQ(r.lookup, Lookup::hit);
    EXPECT_EQ(r.payload, "payload");
  }

  std::string root_;  // mkdtemp: ours, 0700
  std::vector<std::string> warnings_;
};

TEST_F(DiskCacheTrustTest, CreatedDirectoriesAre0700AndEntriesAndTheLock0600) {
  const mode_t saved = ::umask(0);  // the modes must not depend on the umask
  const std::string dir = root_ + "/a/b/cache";
  {
    auto cache = open_ok(dir);
    ASSERT_NE(cache, nullptr);
    cache->store("e1", "key", [] { return std::string(100, 'x'); });
    cache->flush();
  }
  ::umask(saved);
  for (const std::string& d : {root_ + "/a", root_ + "/a/b", dir})
    EXPECT_EQ(mode_of(d), 0700u) << d;
  EXPECT_EQ(mode_of(dir + "/e1.mstep"), 0600u);
  EXPECT_EQ(mode_of(dir + "/eviction.lock"), 0600u);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_F(DiskCacheTrustTest, ADirectoryOthersCanWriteIsRefusedAndLeftAsItIs) {
  struct Case {
    mode_t mode;
    const char* writers;
  };
  const std::string dir = root_ + "/cache";
  for (Case c : {Case{0777, "writable by its group and others"},
                 Case{0770, "writable by its group"}, Case{0703, "writable by others"},
                 Case{01777, "writable by its group and others"}}) {
    SCOPED_TRACE(absl::StrFormat("mode %04o", c.mode));
    ASSERT_TRUE(fs::create_directory(dir));
    ASSERT_EQ(::chmod(dir.c_str(), c.mode), 0);
    const std::string message = refusal(dir);
    EXPECT_THAT(message, AllOf(HasSubstr("the disk cache directory '" + dir + "'"),
                               HasSubstr(c.writers), HasSubstr(owner_text(::geteuid())),
                               HasSubstr(absl::StrFormat("mode %04o", c.mode)),
                               HasSubstr("run `chmod 700 " + dir + "`"),
                               HasSubstr("pick another directory with MSTEP_CACHE=")));
    // Never chmod-ed behind the user's back, and nothing written into it.
    EXPECT_EQ(mode_of(dir), c.mode);
    EXPECT_TRUE(fs::is_empty(dir));
    // Once the user follows the advice, the cache works.
    ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
    expect_round_trip(dir);
    fs::remove_all(dir);
  }
}

TEST_F(DiskCacheTrustTest, ADirectoryOfAnotherUserIsRefused) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string dir = root_ + "/theirs";
  ASSERT_TRUE(fs::create_directory(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  testing::give_to_other_user(dir);
  EXPECT_THAT(refusal(dir),
              AllOf(HasSubstr("the disk cache directory '" + dir + "'"),
                    HasSubstr("is owned by another user"), HasSubstr(owner_text(kOtherUid)),
                    HasSubstr("mode 0700"), HasSubstr("`chown "),
                    HasSubstr("pick another directory with MSTEP_CACHE=")));
  EXPECT_EQ(owner_of(dir), kOtherUid);
  expect_round_trip(root_ + "/mine");  // the process goes on
}

TEST_F(DiskCacheTrustTest, ADirectoryReachedThroughAnotherUsersSymlinkIsRefused) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string real = root_ + "/real", link = root_ + "/link";
  ASSERT_TRUE(fs::create_directory(real));
  fs::create_directory_symlink(real, link);
  expect_round_trip(link);  // our own link to our own directory is fine

  testing::give_to_other_user(link);
  const std::string expected_owner = owner_text(kOtherUid);
  // As the directory itself, and as a directory on the way to it.
  for (const std::string& dir : {link, link + "/sub"}) {
    SCOPED_TRACE(dir);
    EXPECT_THAT(refusal(dir), AllOf(HasSubstr("the disk cache directory '" + dir + "'"),
                                    HasSubstr("'" + link + "' is a symlink owned by another user"),
                                    HasSubstr(expected_owner), HasSubstr("mode 0777"),
                                    HasSubstr("use the path it points to")));
  }
  EXPECT_FALSE(fs::exists(real + "/sub")) << "a refused path is not created";
  expect_round_trip(real);
}

TEST_F(DiskCacheTrustTest, AParentDirectoryOthersCanWriteIsRefusedUnlessSticky) {
  const std::string open = root_ + "/open", dir = open + "/cache";
  ASSERT_TRUE(fs::create_directory(open));
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  ASSERT_TRUE(fs::create_directory(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_THAT(refusal(dir),
              AllOf(HasSubstr("'" + open + "' (a directory on the way)"),
                    HasSubstr("writable by its group and others and has no sticky bit"),
                    HasSubstr(owner_text(::geteuid())), HasSubstr("mode 0777"),
                    HasSubstr("run `chmod go-w " + open + "`")));
  // With the sticky bit (as /tmp) others cannot move our directory away.
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  expect_round_trip(dir);
}

TEST_F(DiskCacheTrustTest, AParentDirectoryOfAnotherUserIsRefused) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string theirs = root_ + "/theirs", dir = theirs + "/cache";
  ASSERT_TRUE(fs::create_directory(theirs));
  ASSERT_TRUE(fs::create_directory(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  testing::give_to_other_user(theirs);
  EXPECT_THAT(refusal(dir),
              AllOf(HasSubstr("'" + theirs + "' (a directory on the way)"),
                    HasSubstr("is owned by another user"), HasSubstr(owner_text(kOtherUid)),
                    HasSubstr("use a path outside it")));
}

// --- Entries in a trusted directory -----------------------------------------

class DiskCacheEntryTrustTest : public DiskCacheTrustTest {
 protected:
  void SetUp() override {
    DiskCacheTrustTest::SetUp();
    dir_ = root_ + "/cache";
    cache_ = open_ok(dir_);
    ASSERT_NE(cache_, nullptr);
    path_ = dir_ + "/e1.mstep";
  }
  void store_now(const std::string& payload) {
    cache_->store("e1", "the key", [payload] { return payload; });
    cache_->flush();
  }
  /// Loads e1: refused, nothing read, one warning (returned) naming the
  /// entry and the reason; the file is left in place.
  std::string expect_refused() {
    warnings_.clear();
    DiskCache::LoadResult r = cache_->load("e1", "the key");
    EXPECT_EQ(r.lookup, Lookup::refused);
    EXPECT_TRUE(r.payload.empty());
    EXPECT_TRUE(fs::exists(fs::symlink_status(path_)));
    EXPECT_EQ(warnings_.size(), 1u);
    if (warnings_.empty()) return "";
    EXPECT_THAT(warnings_[0],
                AllOf(HasSubstr("disk cache entry " + path_ + " is refused, not loaded"),
                      HasSubstr("writes a fresh entry in its place")));
    return warnings_[0];
  }
  /// The next store replaces the entry with one of ours, which loads.
  void expect_replaced_and_loaded() {
    store_now("fresh payload");
    EXPECT_EQ(owner_of(path_), ::geteuid());
    EXPECT_EQ(mode_of(path_), 0600u);
    DiskCache::LoadResult r = cache_->load("e1", "the key");
    EXPECT_EQ(r.lookup, Lookup::hit);
    EXPECT_EQ(r.payload, "fresh payload");
  }

  std::string dir_, path_;
  std::unique_ptr<DiskCache> cache_;
};

TEST_F(DiskCacheEntryTrustTest, AnEntryWrittenByAnotherUserIsRefusedNotLoaded) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  // A valid entry (it would be a hit) that another user wrote: they stage
  // it where they may write, and it is moved into place.
  store_now("their payload");
  const std::string bytes = read_file(path_);
  const std::string staging = root_ + "/staging";
  ASSERT_EQ(::chmod(root_.c_str(), 0711), 0);  // they may pass through, not list or write
  ASSERT_TRUE(fs::create_directory(staging));
  testing::give_to_other_user(staging);
  ASSERT_NO_FATAL_FAILURE(testing::write_as_other_user(staging + "/e1.mstep", bytes));
  fs::rename(staging + "/e1.mstep", path_);
  EXPECT_TRUE(DiskCache::verify_file(path_).ok()) << "the entry itself is intact";

  EXPECT_THAT(expect_refused(),
              AllOf(HasSubstr("'" + path_ + "' is owned by another user"),
                    HasSubstr(owner_text(kOtherUid)), HasSubstr("mode 0644"),
                    HasSubstr("remove it (`rm " + path_ + "`)")));
  EXPECT_EQ(read_file(path_), bytes) << "left as it was";
  expect_replaced_and_loaded();
}

TEST_F(DiskCacheEntryTrustTest, AnEntryOthersCanWriteIsRefused) {
  for (mode_t mode : {0664, 0646, 0666}) {
    SCOPED_TRACE(absl::StrFormat("mode %04o", mode));
    store_now("payload");
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
    EXPECT_THAT(expect_refused(),
                AllOf(HasSubstr("'" + path_ + "' is writable by"),
                      HasSubstr(owner_text(::geteuid())),
                      HasSubstr(absl::StrFormat("mode %04o", mode)),
                      HasSubstr("run `chmod 600 " + path_ + "`")));
    expect_replaced_and_loaded();
  }
}

TEST_F(DiskCacheEntryTrustTest, AnEntryReachedThroughAnotherUsersSymlinkIsRefused) {
  if (std::string why = testing::other_user_unavailable(); !why.empty()) GTEST_SKIP() << why;
  store_now("linked payload");
  const std::string elsewhere = root_ + "/elsewhere";
  ASSERT_TRUE(fs::create_directory(elsewhere));
  fs::rename(path_, elsewhere + "/e1.mstep");
  fs::create_symlink(elsewhere + "/e1.mstep", path_);
  // Our own link to our own valid entry is followed.
  DiskCache::LoadResult r = cache_->load("e1", "the key");
  EXPECT_EQ(r.lookup, Lookup::hit);
  EXPECT_EQ(r.payload, "linked payload");

  testing::give_to_other_user(path_);
  EXPECT_THAT(expect_refused(),
              AllOf(HasSubstr("'" + path_ + "' is a symlink owned by another user"),
                    HasSubstr(owner_text(kOtherUid)), HasSubstr("mode 0777")));
  // Our link to another user's file: the file is refused.
  ASSERT_EQ(::lchown(path_.c_str(), ::geteuid(), ::getegid()), 0);
  testing::give_to_other_user(elsewhere + "/e1.mstep");
  EXPECT_THAT(expect_refused(),
              AllOf(HasSubstr("'" + elsewhere + "/e1.mstep' is owned by another user"),
                    HasSubstr(owner_text(kOtherUid))));
  expect_replaced_and_loaded();  // the link is replaced by a file of ours
  EXPECT_FALSE(fs::is_symlink(path_));
}

TEST_F(DiskCacheEntryTrustTest, AMissingEntryIsAQuietMiss) {
  EXPECT_EQ(cache_->load("e1", "the key").lookup, Lookup::miss);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

// --- check_trusted_path itself ----------------------------------------------

TEST(TrustedPath, ResolvesSymlinksDotsAndRelativePaths) {
  std::string templ = (fs::temp_directory_path() / "mstep_trusted_path_XXXXXX").string();
  ASSERT_NE(::mkdtemp(templ.data()), nullptr);
  const std::string root = templ;
  fs::create_directories(root + "/a/b");
  fs::create_directory_symlink("a/b", root + "/rel");  // relative target
  fs::create_directory_symlink(root + "/a", root + "/abs");
  auto check = [](const std::string& p) {
    return internal::check_trusted_path(p, internal::PathKind::directory);
  };
  for (const std::string& p : {root + "/a/b", root + "/rel", root + "/abs/b",
                               root + "/abs/./b/../b", root + "/rel/.."}) {
    auto got = check(p);
    ASSERT_TRUE(got.ok()) << p << ": " << got.status();
    EXPECT_EQ(*got, p == root + "/rel/.." ? root + "/a" : root + "/a/b") << p;
  }
  EXPECT_EQ(check(root + "/missing/x").status().code(), absl::StatusCode::kNotFound);
  fs::create_symlink("loop", root + "/loop");
  EXPECT_THAT(std::string(check(root + "/loop").status().message()),
              HasSubstr("too many levels of symbolic links"));
  std::ofstream(root + "/file") << "x";
  EXPECT_THAT(std::string(check(root + "/file").status().message()),
              HasSubstr("'" + root + "/file' is not a directory"));
  EXPECT_THAT(std::string(check(root + "/file/x").status().message()),
              HasSubstr("'" + root + "/file' is not a directory"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace mstep
