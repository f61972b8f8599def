// Files owned or written by another user, for the disk cache's trust
// tests. Only root can make them; elsewhere the tests skip, saying why.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace mstep::testing {

/// 'nobody' on Debian; any uid other than ours would do.
inline constexpr uid_t kOtherUid = 65534;

/// Empty if this process can hand files to kOtherUid, else the reason it
/// cannot (a skip message).
inline std::string other_user_unavailable() {
  if (::geteuid() == 0) return "";
  return absl::StrCat("needs root to make a file owned by another user (uid ", kOtherUid,
                      "); running as uid ", ::geteuid());
}

/// lchown(path) to kOtherUid: a symlink itself, not what it points to.
inline void give_to_other_user(const std::string& path) {
  ASSERT_EQ(::lchown(path.c_str(), kOtherUid, kOtherUid), 0)
      << "lchown " << path << ": " << std::strerror(errno);
}

/// Writes `bytes` to `path` (mode 0644) from a child process running as
/// kOtherUid: the writer is really another user. The directory of `path`
/// must be writable by that user.
inline void write_as_other_user(const std::string& path, const std::string& bytes) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << "fork: " << std::strerror(errno);
  if (pid == 0) {  // only async-signal-safe calls until _exit
    if (::setgid(kOtherUid) != 0 || ::setuid(kOtherUid) != 0) ::_exit(2);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) ::_exit(3);
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    ::_exit(::close(fd) == 0 && n == static_cast<ssize_t>(bytes.size()) ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the writer as uid " << kOtherUid << " failed on " << path << " (exit "
      << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ": 2 setuid, 3 open, 4 write)";
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(st.st_uid, kOtherUid) << path;
}

}  // namespace mstep::testing
