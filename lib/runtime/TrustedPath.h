// TrustedPath: may mstep load code from this path? A disk-cache entry of
// the cpu backend is object code that mstep links and runs, so whoever can
// change the entry, its directory, or a directory or symlink on the way to
// them can run code in every process that uses the cache. The rule is
// OpenSSH's StrictModes rule for ~/.ssh:
//
//  - the target (the cache directory, or an entry) is owned by this user
//    (geteuid()) and is not writable by its group or others;
//  - every directory above it is owned by this user or root and is not
//    writable by group or others, unless it has the sticky bit (as /tmp,
//    where others cannot rename or remove what we own);
//  - every symlink on the way (followed by hand, checked with lstat) is
//    owned by this user or root.
//
// Refusals are PermissionDenied and name the offending path, its owner
// (name and uid) and mode (octal), and what to do. Library-internal.
#pragma once

#include <sys/stat.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::internal {

enum class PathKind { directory, file };

/// Resolves `path` (relative to the working directory unless absolute)
/// component by component and checks the rule above. Returns the resolved
/// path (no symlinks left in it). NotFound if a component is missing;
/// PermissionDenied if the rule is broken; FailedPrecondition if the target
/// is not a `kind` or a component above it is not a directory.
absl::StatusOr<std::string> check_trusted_path(absl::string_view path, PathKind kind);

/// The target part of the rule alone, for a file already open (its fstat):
/// closes the window between check_trusted_path and open.
absl::Status check_trusted_target(const std::string& path, const struct stat& st, PathKind kind);

/// All of the file open at `fd` (`size_hint`: its size, or 0).
absl::StatusOr<std::string> read_all(int fd, off_t size_hint);

/// Writes all of `bytes` to `fd` (retrying short writes and EINTR);
/// DataLoss with strerror on failure.
absl::Status write_all(int fd, absl::string_view bytes);

/// The bytes of the file at `path`, which must pass the rule above (the file
/// read is the file checked: it is opened without following a final symlink
/// and checked again by fstat). Errors name the path.
absl::StatusOr<std::string> read_trusted_file(const std::string& path);

/// mkdir -p where every directory it creates gets mode 0700 (before the
/// umask); existing directories are left as they are (check them with
/// check_trusted_path). FailedPrecondition naming the path it could not
/// create, or that is not a directory.
absl::Status create_private_directories(const std::string& path);

}  // namespace mstep::internal
