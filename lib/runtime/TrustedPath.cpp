// TrustedPath: the StrictModes rule for what mstep loads code from (see
// TrustedPath.h).
#include "lib/runtime/TrustedPath.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace mstep::internal {

namespace {

constexpr int kMaxSymlinks = 40;  // as the kernel's ELOOP limit

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// The user's name, or "" without a passwd entry.
std::string user_name(uid_t uid) {
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr)
    return found->pw_name;
  return "";
}

/// "nobody (uid 65534)", or "uid 1234" without a passwd entry.
std::string user_text(uid_t uid) {
  std::string name = user_name(uid);
  return name.empty() ? absl::StrCat("uid ", uid) : absl::StrCat(name, " (uid ", uid, ")");
}

/// Who besides the owner may write it: "its group", "others", "its group and others".
std::string writers(mode_t mode) {
  if ((mode & S_IWGRP) && (mode & S_IWOTH)) return "its group and others";
  return (mode & S_IWGRP) ? "its group" : "others";
}

absl::Status refuse(absl::string_view path, absl::string_view problem, const struct stat& st,
                    absl::string_view fix) {
  return absl::PermissionDeniedError(absl::StrFormat("'%s' %s (owner %s, mode %04o); %s", path,
                                                     problem, user_text(st.st_uid),
                                                     st.st_mode & 07777, fix));
}

bool trusted_owner(uid_t uid) { return uid == ::geteuid() || uid == 0; }

/// A directory above the target: ours or root's, and not writable by
/// others unless sticky.
absl::Status check_above(const std::string& path, const struct stat& st) {
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a directory"));
  if (!trusted_owner(st.st_uid))
    return refuse(path, "(a directory on the way) is owned by another user", st,
                  "that user can replace what it holds: use a path outside it");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return refuse(path,
                  absl::StrCat("(a directory on the way) is writable by ", writers(st.st_mode),
                               " and has no sticky bit"),
                  st,
                  absl::StrCat("run `chmod go-w ", path, "`, or use a path outside it"));
  return absl::OkStatus();
}

}  // namespace

absl::Status check_trusted_target(const std::string& path, const struct stat& st, PathKind kind) {
  const bool dir = kind == PathKind::directory;
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return absl::FailedPreconditionError(
        absl::StrCat("'", path, "' is not a ", dir ? "directory" : "regular file"));
  if (st.st_uid != ::geteuid()) {
    const std::string me = user_name(::geteuid());
    return refuse(path, "is owned by another user", st,
                  dir ? absl::StrCat("make it yours (as root: `chown ",
                                     me.empty() ? absl::StrCat(::geteuid()) : me, " ", path, "`)")
                      : absl::StrCat("remove it (`rm ", path, "`)"));
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return refuse(path, absl::StrCat("is writable by ", writers(st.st_mode)), st,
                  absl::StrCat("run `chmod ", dir ? "700 " : "600 ", path, "`"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> check_trusted_path(absl::string_view path, PathKind kind) {
  if (path.empty()) return absl::InvalidArgumentError("empty path");
  std::string start(path);
  if (start.front() != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr)
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resolve '", path, "': getcwd: ", errno_text(errno)));
    start = absl::StrCat(cwd, "/", start);
  }
  // Components still to resolve, the next one last; a symlink's target is
  // pushed in its place.
  std::vector<std::string> todo;
  auto push = [&todo](absl::string_view p) {
    std::vector<std::string> parts = absl::StrSplit(p, '/', absl::SkipEmpty());
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push(start);

  struct stat st;
  if (::lstat("/", &st) != 0)
    return absl::FailedPreconditionError(absl::StrCat("lstat /: ", errno_text(errno)));
  if (!todo.empty()) {
    if (absl::Status s = check_above("/", st); !s.ok()) return s;
  }
  std::string done;  // resolved so far, no symlinks in it; "" is "/"
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {  // `done` holds no symlinks, so ".." is lexical
      done.resize(done.rfind('/') == std::string::npos ? 0 : done.rfind('/'));
      continue;
    }
    std::string next = absl::StrCat(done, "/", part);
    if (::lstat(next.c_str(), &st) != 0) {
      const int err = errno;
      std::string what = absl::StrCat("'", next, "': ", errno_text(err));
      if (err == ENOENT) return absl::NotFoundError(what);
      return absl::FailedPreconditionError(what);
    }
    if (S_ISLNK(st.st_mode)) {
      if (!trusted_owner(st.st_uid))
        return refuse(next, "is a symlink owned by another user", st,
                      "that user can point it anywhere: use the path it points to, or a link you "
                      "own");
      if (++links > kMaxSymlinks)
        return absl::FailedPreconditionError(
            absl::StrCat("'", path, "': too many levels of symbolic links"));
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
      if (n < 0 || static_cast<size_t>(n) >= target.size())
        return absl::FailedPreconditionError(
            absl::StrCat("cannot read the symlink '", next, "'", n < 0 ? ": " : "",
                         n < 0 ? errno_text(errno) : ""));
      target.resize(static_cast<size_t>(n));
      if (!target.empty() && target.front() == '/') done.clear();
      push(target);
      continue;
    }
    if (!todo.empty()) {
      if (absl::Status s = check_above(next, st); !s.ok()) return s;
    }
    done = std::move(next);
  }
  // The target, checked last: a trailing ".." may have moved it up.
  const std::string resolved = done.empty() ? "/" : done;
  if (::lstat(resolved.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat("'", resolved, "': ", errno_text(errno)));
  if (absl::Status s = check_trusted_target(resolved, st, kind); !s.ok()) return s;
  return resolved;
}

absl::Status create_private_directories(const std::string& path) {
  auto failed = [&](const std::string& at, int err) {
    return absl::FailedPreconditionError(absl::StrCat(
        at == path ? "" : absl::StrCat("'", at, "': "), errno_text(err)));
  };
  // Every prefix, then the path itself; existing ones stay as they are.
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string at = path.substr(0, slash);
    if (!at.empty() && at.back() != '/' && ::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST)
      return failed(at, errno);
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return failed(path, errno);
  if (!S_ISDIR(st.st_mode)) return failed(path, ENOTDIR);
  return absl::OkStatus();
}

absl::StatusOr<std::string> read_all(int fd, off_t size_hint) {
  std::string out;
  out.reserve(size_hint > 0 ? static_cast<size_t>(size_hint) : 0);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat("read failed: ", errno_text(errno)));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

absl::Status write_all(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(errno_text(errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> read_trusted_file(const std::string& path) {
  absl::StatusOr<std::string> real = check_trusted_path(path, PathKind::file);
  if (!real.ok())
    return absl::Status(real.status().code(),
                        absl::StrCat("cannot load ", path, ": ", real.status().message()));
  const int fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", errno_text(errno)));
  struct stat st {};
  absl::Status status = ::fstat(fd, &st) == 0
                            ? check_trusted_target(*real, st, PathKind::file)
                            : absl::DataLossError(absl::StrCat("fstat: ", errno_text(errno)));
  absl::StatusOr<std::string> bytes =
      status.ok() ? read_all(fd, st.st_size) : absl::StatusOr<std::string>(status);
  ::close(fd);
  if (!bytes.ok())
    return absl::Status(bytes.status().code(),
                        absl::StrCat("cannot load ", path, ": ", bytes.status().message()));
  return bytes;
}

}  // namespace mstep::internal
