// DiskCache: the on-disk module cache of MSTEP_CACHE (see DiskCache.h).
//
// Entry file layout (integers little-endian):
//   magic "MSTEPDC\n" (8) | version u32 | key length u32 | key bytes |
//   payload size u64 | XXH64 of the payload u64 | payload
#include "lib/runtime/DiskCache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "lib/runtime/TrustedPath.h"
#include "mstep/core/Checksum.h"

namespace mstep {

namespace {

constexpr char kMagic[8] = {'M', 'S', 'T', 'E', 'P', 'D', 'C', '\n'};
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 8;  // all but the key
constexpr absl::string_view kTempMarker = ".mstep.tmp-";
constexpr absl::string_view kLockFile = "eviction.lock";
constexpr absl::string_view kExpectedForm =
    "expected MSTEP_CACHE=<dir>,<clear_on_start>,<max_mb>,<also_for>, e.g. /tmp/mstep,false,1024 "
    "or /tmp/mstep,,,cuda";
// Temporaries older than this were left by a process that died mid-write.
constexpr time_t kStaleTempSeconds = 3600;

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(absl::string_view bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

uint64_t checksum(absl::string_view payload) { return xxhash64(payload); }

std::string encode_header(absl::string_view key_text, absl::string_view payload) {
  std::string h(kMagic, sizeof(kMagic));
  put_u32(h, DiskCache::kFormatVersion);
  put_u32(h, static_cast<uint32_t>(key_text.size()));
  h.append(key_text.data(), key_text.size());
  put_u64(h, payload.size());
  put_u64(h, checksum(payload));
  return h;
}

/// Checks an entry's bytes; on success points `payload` into them. With
/// `expected_key` also checks the stored key. The error message is the
/// exact reason, for the warning.
absl::Status check_entry(absl::string_view bytes, const absl::string_view* expected_key,
                         absl::string_view* payload) {
  if (bytes.size() < kFixedHeaderBytes)
    return absl::DataLossError(absl::StrFormat(
        "short read: the file has %d bytes, a header needs at least %d", bytes.size(),
        kFixedHeaderBytes));
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return absl::DataLossError("bad magic: not an mstep cache entry");
  uint32_t version = get_le(bytes, 8, 4);
  if (version != DiskCache::kFormatVersion)
    return absl::DataLossError(absl::StrFormat(
        "format version %d, this build reads version %d", version, DiskCache::kFormatVersion));
  uint64_t key_len = get_le(bytes, 12, 4);
  if (bytes.size() < kFixedHeaderBytes + key_len)
    return absl::DataLossError(absl::StrFormat(
        "short read: the header names a %d-byte key but the file has only %d bytes", key_len,
        bytes.size()));
  absl::string_view key = bytes.substr(16, key_len);
  if (expected_key && key != *expected_key)
    return absl::DataLossError(
        "key mismatch: the entry was stored for a different key (hash collision)");
  size_t at = 16 + key_len;
  uint64_t size = get_le(bytes, at, 8);
  uint64_t stored_sum = get_le(bytes, at + 8, 8);
  absl::string_view body = bytes.substr(at + 16);
  if (body.size() != size)
    return absl::DataLossError(absl::StrFormat(
        "size mismatch: the header says %d payload bytes, the file holds %d", size, body.size()));
  uint64_t sum = checksum(body);
  if (sum != stored_sum)
    return absl::DataLossError(absl::StrFormat(
        "checksum mismatch: stored %016x, payload hashes to %016x", stored_sum, sum));
  *payload = body;
  return absl::OkStatus();
}

/// Reads an open file to its end.
/// Writes all of `bytes`; returns 0 or the errno.
int write_all(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

bool valid_name(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(absl::string_view("/\0", 2)) == absl::string_view::npos;
}

struct DirEntry {
  std::string file;  // name inside the directory
  uint64_t bytes = 0;
  timespec mtime{};
};

/// The entry files (*.mstep) of `dir`. Files that vanish while we look
/// (another process evicted them) are skipped. With `remove_stale_temps`
/// also removes temporaries a dead writer left behind long ago.
std::vector<DirEntry> list_entries(const std::string& dir, bool remove_stale_temps = false) {
  std::vector<DirEntry> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  time_t now = time(nullptr);
  for (; !ec && it != end; it.increment(ec)) {
    std::string file = it->path().filename().string();
    bool entry = absl::EndsWith(file, DiskCache::kExtension) && file.front() != '.';
    bool temp = absl::StrContains(file, kTempMarker);
    if (!entry && !(temp && remove_stale_temps)) continue;
    std::string path = it->path().string();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!entry) {
      if (now - st.st_mtim.tv_sec > kStaleTempSeconds) ::unlink(path.c_str());
      continue;
    }
    out.push_back({std::move(file), static_cast<uint64_t>(st.st_size), st.st_mtim});
  }
  return out;
}

/// flock(LOCK_EX) on <dir>/eviction.lock for one scope: one process at a
/// time trims or clears the directory.
class EvictionLock {
 public:
  explicit EvictionLock(const std::string& dir) {
    std::string path = absl::StrCat(dir, "/", kLockFile);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) {
      error_ = absl::StrCat("cannot open ", path, ": ", errno_text(errno));
      return;
    }
    int rc;
    while ((rc = ::flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      error_ = absl::StrCat("cannot lock ", path, ": ", errno_text(errno));
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~EvictionLock() {
    if (fd_ >= 0) ::close(fd_);  // closing drops the lock
  }
  bool locked() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

}  // namespace

absl::StatusOr<DiskCache::Config> DiskCache::Config::parse(absl::string_view text) {
  std::vector<absl::string_view> fields = absl::StrSplit(text, ',');
  for (absl::string_view& f : fields) f = absl::StripAsciiWhitespace(f);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("MSTEP_CACHE=\"", text, "\": ", what, "; ", kExpectedForm));
  };
  if (fields.size() > 4)
    return bad(absl::StrCat("has ", fields.size(),
                            " comma-separated fields, at most 4 (a directory name may not "
                            "contain a comma)"));
  Config c;
  c.dir = std::string(fields[0]);
  if (c.dir.empty()) return bad("the directory (field 1) is empty");
  if (fields.size() > 1 && !fields[1].empty()) {
    std::string v = absl::AsciiStrToLower(fields[1]);
    if (v == "true" || v == "1") {
      c.clear_on_start = true;
    } else if (v == "false" || v == "0") {
      c.clear_on_start = false;
    } else {
      return bad(absl::StrCat("clear_on_start (field 2) is \"", fields[1],
                              "\", not true, false, 1 or 0"));
    }
  }
  if (fields.size() > 2 && !fields[2].empty()) {
    double mb = 0;
    if (!absl::SimpleAtod(fields[2], &mb) || !std::isfinite(mb) || mb <= 0)
      return bad(absl::StrCat("max_mb (field 3) is \"", fields[2],
                              "\", not a positive number of megabytes"));
    c.max_mb = mb;
  }
  if (fields.size() > 3) c.also_for = std::string(fields[3]);  // checked by the tracer
  return c;
}

uint64_t DiskCache::Config::max_bytes() const {
  return static_cast<uint64_t>(max_mb * 1048576.0);
}

DiskCache::DiskCache(Config config, Logger warn, Logger log)
    : config_(std::move(config)), warn_(std::move(warn)), log_(std::move(log)) {}

absl::StatusOr<std::unique_ptr<DiskCache>> DiskCache::open(Config config, Logger warn,
                                                           Logger log) {
  if (config.dir.empty())
    return absl::InvalidArgumentError(absl::StrCat("disk cache: no directory; ", kExpectedForm));
  if (!(config.max_mb > 0) || !std::isfinite(config.max_mb))
    return absl::InvalidArgumentError(absl::StrCat(
        "disk cache: max_mb is ", config.max_mb, ", not a positive number; ", kExpectedForm));
  // The walk stops at the first untrusted component, so NotFound means that
  // everything above the missing part is trusted: create it there, 0700. An
  // existing directory with lax permissions is refused, never chmod-ed: it
  // is the user's to fix.
  auto trusted = internal::check_trusted_path(config.dir, internal::PathKind::directory);
  if (trusted.status().code() == absl::StatusCode::kNotFound ||
      trusted.status().code() == absl::StatusCode::kFailedPrecondition) {
    if (absl::Status made = internal::create_private_directories(config.dir); !made.ok())
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create the disk cache directory '", config.dir, "' (MSTEP_CACHE): ",
          made.message(), "; point MSTEP_CACHE at a writable directory"));
    trusted = internal::check_trusted_path(config.dir, internal::PathKind::directory);
  }
  if (!trusted.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        "the disk cache directory '", config.dir, "' (MSTEP_CACHE) is refused: ",
        trusted.status().message(),
        ", or pick another directory with MSTEP_CACHE=<dir> (mstep creates it with mode 0700). "
        "mstep runs code it loads from this directory, so no other user may be able to change "
        "it"));
  std::unique_ptr<DiskCache> cache(
      new DiskCache(std::move(config), std::move(warn), std::move(log)));
  // Opening the lock file also proves the directory is writable.
  EvictionLock lock(cache->config_.dir);
  if (!lock.locked())
    return absl::FailedPreconditionError(
        absl::StrCat("the disk cache directory '", cache->config_.dir,
                     "' (MSTEP_CACHE) is not writable: ", lock.error(),
                     "; point MSTEP_CACHE at a writable directory"));
  if (cache->config_.clear_on_start) {
    for (const DirEntry& e : list_entries(cache->config_.dir, /*remove_stale_temps=*/true)) {
      std::string path = absl::StrCat(cache->config_.dir, "/", e.file);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        cache->warn(absl::StrCat("disk cache: cannot remove ", path, " (clear_on_start): ",
                                 errno_text(errno)));
    }
  }
  return cache;
}

DiskCache::~DiskCache() {
  flush();
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string DiskCache::path_of(absl::string_view name) const {
  return absl::StrCat(config_.dir, "/", name, kExtension);
}

void DiskCache::warn(absl::string_view message) {
  std::lock_guard<std::mutex> lk(log_mu_);
  if (warn_) {
    warn_(message);
  } else {
    std::fprintf(stderr, "mstep warning: %.*s\n", static_cast<int>(message.size()),
                 message.data());
  }
}

void DiskCache::log(absl::string_view message) {
  if (!config_.log) return;
  std::lock_guard<std::mutex> lk(log_mu_);
  if (log_) {
    log_(message);
  } else {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  }
}

DiskCache::LoadResult DiskCache::load(const std::string& name, absl::string_view key_text) {
  LoadResult result;
  if (!valid_name(name)) {
    warn(absl::StrCat("disk cache: '", name, "' is not a file name; not looked up"));
    return result;
  }
  std::string path = path_of(name);
  // The entry, and every symlink on the way to it, must be this user's:
  // it is code this process will run. Refused entries are left in place; a
  // store() of the same graph replaces them.
  auto refuse = [&](const absl::Status& why) {
    warn(absl::StrCat("disk cache entry ", path, " is refused, not loaded: ", why.message(),
                      ". This process compiles the graph and writes a fresh entry in its place"));
    result.lookup = Lookup::refused;
    return result;
  };
  absl::StatusOr<std::string> real = internal::check_trusted_path(path, internal::PathKind::file);
  if (!real.ok()) {
    if (real.status().code() == absl::StatusCode::kPermissionDenied) return refuse(real.status());
    if (real.status().code() != absl::StatusCode::kNotFound)
      warn(absl::StrCat("disk cache: cannot open ", path, ": ", real.status().message(),
                        "; the graph will be compiled"));
    return result;
  }
  // O_NOFOLLOW and the fstat check: the file read is the file checked.
  int fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno != ENOENT)
      warn(absl::StrCat("disk cache: cannot open ", path, ": ", errno_text(errno),
                        "; the graph will be compiled"));
    return result;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) st = {};
  if (absl::Status trusted = internal::check_trusted_target(*real, st, internal::PathKind::file);
      !trusted.ok()) {
    ::close(fd);
    return refuse(trusted);
  }
  absl::StatusOr<std::string> bytes = internal::read_all(fd, st.st_size);
  absl::string_view payload;
  absl::Status ok = bytes.ok() ? check_entry(*bytes, &key_text, &payload) : bytes.status();
  if (ok.ok()) {
    // A hit is a use: the newest mtime is evicted last. futimens acts on
    // the file we read even if another process replaced the name since.
    ::futimens(fd, nullptr);
    ::close(fd);
    result.lookup = Lookup::hit;
    result.payload = std::string(payload);
    return result;
  }
  ::close(fd);
  // Remove the file only if the name still means the file we read: another
  // writer may have renamed a good entry into place since.
  struct stat now;
  if (::stat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
    ::unlink(path.c_str());
  warn(absl::StrCat("disk cache entry ", path, " is corrupt (", ok.message(),
                    "); removed it, the graph will be recompiled"));
  result.lookup = Lookup::corrupt;
  return result;
}

void DiskCache::store(std::string name, std::string key_text,
                      std::function<std::string()> make_payload) {
  if (!valid_name(name)) {
    warn(absl::StrCat("disk cache: '", name, "' is not a file name; not stored"));
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back({std::move(name), std::move(key_text), std::move(make_payload)});
  if (!thread_.joinable()) thread_ = std::thread([this] { worker(); });
  cv_.notify_one();
}

void DiskCache::flush() {
  std::unique_lock<std::mutex> lk(mu_);
  idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void DiskCache::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    try {
      std::string payload = job.make_payload();
      write_entry(job.name, job.key_text, payload);
    } catch (const std::exception& e) {
      warn(absl::StrCat("disk cache: entry ", job.name, " not stored: ", e.what()));
    } catch (...) {
      warn(absl::StrCat("disk cache: entry ", job.name, " not stored: unknown exception"));
    }
    job = Job{};  // the closure dies here, outside the lock
    lk.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void DiskCache::write_entry(const std::string& name, const std::string& key_text,
                            const std::string& payload) {
  static std::atomic<uint64_t> counter{0};
  std::string path = path_of(name);
  // Same directory (rename is atomic only within a file system); pid and
  // counter keep processes and DiskCache objects of one process apart.
  std::string temp = absl::StrCat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
  auto fail = [&](absl::string_view what, int err) {
    ::unlink(temp.c_str());
    warn(absl::StrCat("disk cache: cannot write ", path, " (", what, ": ", errno_text(err),
                      "); the entry is not cached"));
  };
  // 0600: entries are code only this user may change (see TrustedPath.h).
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {  // the directory was removed under us
    (void)internal::create_private_directories(config_.dir);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) return fail("create", errno);
  int err = write_all(fd, encode_header(key_text, payload));
  if (!err) err = write_all(fd, payload);
  if (err) {
    ::close(fd);
    return fail("write", err);
  }
  if (::close(fd) != 0) return fail("close", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  evict();
}

void DiskCache::evict() {
  EvictionLock lock(config_.dir);
  if (!lock.locked()) {
    warn(absl::StrCat("disk cache: not trimmed: ", lock.error()));
    return;
  }
  std::vector<DirEntry> entries = list_entries(config_.dir, /*remove_stale_temps=*/true);
  uint64_t total = 0;
  for (const DirEntry& e : entries) total += e.bytes;
  const uint64_t max = config_.max_bytes();
  if (total <= max) return;
  const uint64_t target = static_cast<uint64_t>(static_cast<double>(max) * 0.99);
  // Oldest mtime first; the name breaks ties so every process agrees.
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.file < b.file;
  });
  for (const DirEntry& e : entries) {
    if (total <= target) break;
    std::string path = absl::StrCat(config_.dir, "/", e.file);
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT) {  // a reader found it corrupt and removed it
        total -= e.bytes;
      } else {
        warn(absl::StrCat("disk cache: cannot remove ", path, ": ", errno_text(errno)));
      }
      continue;
    }
    total -= e.bytes;
    log(absl::StrCat("mstep cache: removed ", e.file, " (", e.bytes, " bytes), cache now ", total,
                     " bytes of ", max, " max"));
  }
}

uint64_t DiskCache::directory_bytes() const {
  uint64_t total = 0;
  for (const DirEntry& e : list_entries(config_.dir)) total += e.bytes;
  return total;
}

absl::Status DiskCache::verify_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string what = absl::StrCat(path, ": ", errno_text(err));
    return err == ENOENT ? absl::NotFoundError(what) : absl::UnavailableError(what);
  }
  struct stat st;
  absl::StatusOr<std::string> bytes = absl::DataLossError("fstat failed");
  if (::fstat(fd, &st) == 0) bytes = internal::read_all(fd, st.st_size);
  ::close(fd);
  absl::string_view payload;
  absl::Status ok = bytes.ok() ? check_entry(*bytes, nullptr, &payload) : bytes.status();
  if (!ok.ok()) return absl::DataLossError(absl::StrCat(path, ": ", ok.message()));
  return absl::OkStatus();
}

}  // namespace mstep
