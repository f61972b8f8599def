// DiskCache: compiled graphs on disk, shared by every process of one user
// that points MSTEP_CACHE at the same directory (Gaudi's
// PT_HPU_RECIPE_CACHE_CONFIG):
//
//   MSTEP_CACHE=<dir>,<clear_on_start>,<max_mb>,<also_for>   e.g. /tmp/mstep,false,1024
//
// <also_for> (a backend name, e.g. cuda) fills the cache for a device this
// machine may not have: every graph the process compiles is compiled again
// by that backend's compile half (no device needed) and stored under the
// key it has on that device (Tracer.cpp), so a machine with the device,
// running the same program, finds every graph on disk; a runtime-only build
// (no compiler) can then run it.
//
// One file per entry, <dir>/<name>.mstep, written to a temporary file in the
// same directory and renamed, so a reader never sees half an entry. Each
// file carries a magic, a format version, the full key, the payload size
// and an XXH64 checksum of the payload (core/Checksum.h). A file that fails any check is
// removed with a warning and reported as corrupt: it is never handed to a
// backend.
//
// An entry is code the process runs, so the directory and each entry must
// be trusted (TrustedPath.h: owned by this user, not writable by group or
// others, no foreign symlink or directory on the way). The directory is
// created with mode 0700, entries and the lock file with 0600.
//
// store() queues the write on one background thread; after each write the
// directory is trimmed, oldest (least recently used: load() refreshes the
// mtime) first, down to 0.99 x max_mb, by one process at a time under
// flock(<dir>/eviction.lock). Library-internal.
//
// Thread-safety: load(), store(), flush() and directory_bytes() may be
// called from any thread, also while the background thread writes and
// evicts. Several processes may share one directory. The loggers are never
// called concurrently by one DiskCache.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep {

class DiskCache {
 public:
  struct Config {
    std::string dir;
    bool clear_on_start = false;
    double max_mb = 1024;  // may be fractional (tests use small limits)
    /// MSTEP_LOG_CACHE: log each removal and the directory size after it
    /// (to the `log` logger of open(), stderr by default). Off: no lines.
    bool log = false;
    /// Another backend's name: graphs are also compiled for it and stored
    /// under its key (empty: off).
    std::string also_for;

    /// Parses "dir,clear_on_start,max_mb,also_for" (the last three optional
    /// or empty; clear_on_start is true/false/1/0, max_mb a positive number,
    /// also_for a backend name, checked when the tracer opens the cache).
    /// Errors name the bad field and show the expected form.
    static absl::StatusOr<Config> parse(absl::string_view text);

    /// max_mb in bytes (max_mb x 2^20).
    uint64_t max_bytes() const;
  };

  /// Where warnings and MSTEP_LOG_CACHE lines go. A warning comes without
  /// a prefix (the default, stderr, adds "mstep warning: "); a log line is
  /// whole ("mstep cache: removed ..."). Called from the caller's thread and
  /// from the background thread, one call at a time.
  using Logger = std::function<void(absl::string_view)>;

  /// Creates the directory if needed (mkdir -p, mode 0700 for each one it
  /// creates); with clear_on_start removes every entry in it (under the
  /// eviction lock). Fails, naming the directory, if it cannot be created
  /// or written, or if it is not trusted (the message names the offending
  /// path, its owner and mode, and what to do); an existing directory is
  /// never chmod-ed.
  static absl::StatusOr<std::unique_ptr<DiskCache>> open(Config config, Logger warn = nullptr,
                                                         Logger log = nullptr);
  /// Finishes queued writes, then stops the background thread.
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// What a lookup found.
  /// refused: the entry is not trusted (TrustedPath.h); not read.
  enum class Lookup { hit, miss, corrupt, refused };
  struct LoadResult {
    Lookup lookup = Lookup::miss;
    std::string payload;  // set on hit
  };
  /// Reads entry `name` (a file-name-safe id, e.g. "ref-0123abcd...") and
  /// checks that it was stored for `key_text` (the full key, to guard
  /// against hash collisions). A corrupt, truncated, foreign-version or
  /// mismatched entry is removed, warned about and reported as corrupt;
  /// an untrusted one (another user's, writable by group or others, or
  /// reached through another user's symlink) is warned about, left in
  /// place and reported as refused; a hit refreshes the file's mtime
  /// (least-recently-used eviction).
  LoadResult load(const std::string& name, absl::string_view key_text);

  /// Queues a write of entry `name`; `make_payload` runs on the background
  /// thread (it must not touch state the caller changes afterwards). Errors
  /// there (disk full, permissions, a throwing make_payload) are warned
  /// about and the entry is skipped.
  void store(std::string name, std::string key_text, std::function<std::string()> make_payload);

  /// Blocks until every queued write (and its eviction) is done.
  void flush();

  /// Total bytes of the entry files (*.mstep) in the directory now.
  uint64_t directory_bytes() const;
  const Config& config() const { return config_; }
  /// <dir>/<name>.mstep.
  std::string path_of(absl::string_view name) const;

  /// Checks one entry file (all checks but the key) without removing it.
  /// DataLoss names the failed check; NotFound if the file is missing.
  static absl::Status verify_file(const std::string& path);

  /// On-disk format version; bump it when the layout or payload changes.
  /// 2: XXH64 checksums (1 had LLVM's xxh3); ref and cpu payloads in their
  /// native forms. 3: the tracer's payloads start with the custom ops they
  /// need (CustomOpNeeds.h).
  static constexpr uint32_t kFormatVersion = 3;
  /// Entry files end in this; temporaries (".tmp-<pid>-<n>" after it) don't.
  static constexpr absl::string_view kExtension = ".mstep";

 private:
  DiskCache(Config config, Logger warn, Logger log);
  void worker();
  void write_entry(const std::string& name, const std::string& key_text,
                   const std::string& payload);
  void evict();
  void warn(absl::string_view message);
  void log(absl::string_view message);

  Config config_;
  Logger warn_, log_;
  std::mutex log_mu_;  // one logger call at a time

  std::mutex mu_;  // guards the queue, busy_, stop_ and thread_
  std::condition_variable cv_, idle_cv_;
  struct Job {
    std::string name, key_text;
    std::function<std::string()> make_payload;
  };
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;  // started by the first store()
};

}  // namespace mstep
