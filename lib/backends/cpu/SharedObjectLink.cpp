// link_shared_object: 1. a private directory (mkdtemp, mode 0700) gets the
// object; 2. the linker runs by posix_spawn, its stdout and stderr to a log
// file there; 3. the shared object is read back; 4. the directory goes.
//
//   <linker> -shared -Bsymbolic -z noexecstack -o fusions.so fusions.o
//
// -Bsymbolic binds the library's references to its own definitions, so
// two loaded libraries with the same entry names never interpose.
#include "lib/backends/cpu/SharedObjectLink.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#ifndef MSTEP_SYSTEM_LINKER
#error "MSTEP_SYSTEM_LINKER: the build defines the linker's path (lib/backends/cpu/CMakeLists.txt)"
#endif

extern char** environ;

namespace mstep::cpu {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// A mkdtemp directory and the files named in it, removed on destruction.
class PrivateDirectory {
public:
  ~PrivateDirectory() {
    if (path_.empty()) return;
    for (const std::string& file : files_) ::unlink(file.c_str());
    ::rmdir(path_.c_str());
  }

  absl::Status create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/mstep-link-XXXXXX");
    if (::mkdtemp(templ.data()) == nullptr)
      return absl::InternalError(absl::StrCat("fusion JIT: cannot create a directory for the "
                                              "linker ('",
                                              templ, "'): ", errno_text(errno)));
    path_ = templ;
    return absl::OkStatus();
  }

  /// The path of `name` in the directory, removed with it.
  std::string file(absl::string_view name) {
    files_.push_back(absl::StrCat(path_, "/", name));
    return files_.back();
  }

private:
  std::string path_;
  std::vector<std::string> files_;
};

absl::Status write_file(const std::string& path, absl::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("fusion JIT: cannot create '", path,
                                            "': ", errno_text(errno)));
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("fusion JIT: cannot write '", path,
                                              "': ", errno_text(err)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  ::close(fd);
  return absl::OkStatus();
}

/// The file's bytes; an error when it cannot be read.
absl::StatusOr<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("fusion JIT: cannot open '", path,
                                            "': ", errno_text(errno)));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("fusion JIT: cannot read '", path,
                                              "': ", errno_text(err)));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

/// Runs argv[0] with stdin from /dev/null and stdout and stderr to `log`;
/// its exit status, or an error when it cannot be started.
absl::StatusOr<int> spawn_and_wait(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("fusion JIT: cannot run the linker '", args[0], "': ", errno_text(error),
                     "; mstep links the fused kernels with the linker it was configured with"));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return absl::InternalError(
          absl::StrCat("fusion JIT: waiting for the linker failed: ", errno_text(errno)));
  }
  return status;
}

} // namespace

const std::string& system_linker() {
  static const std::string* linker = new std::string(MSTEP_SYSTEM_LINKER);
  return *linker;
}

absl::StatusOr<std::string> link_shared_object(absl::string_view object,
                                               const std::string& linker) {
  PrivateDirectory dir;
  if (absl::Status status = dir.create(); !status.ok()) return status;
  const std::string input = dir.file("fusions.o");
  const std::string output = dir.file("fusions.so");
  const std::string log = dir.file("linker.log");
  if (absl::Status status = write_file(input, object); !status.ok()) return status;
  absl::StatusOr<int> status = spawn_and_wait(
      {linker, "-shared", "-Bsymbolic", "-z", "noexecstack", "-o", output, input}, log);
  if (!status.ok()) return status.status();
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    absl::StatusOr<std::string> text = read_file(log);
    const std::string how = WIFEXITED(*status)
                                ? absl::StrCat("exit status ", WEXITSTATUS(*status))
                                : absl::StrCat("signal ", WTERMSIG(*status));
    return absl::InternalError(absl::StrCat(
        "fusion JIT: the linker '", linker, "' failed (", how, ") linking the fused kernels: ",
        text.ok() ? absl::StripAsciiWhitespace(*text) : text.status().message()));
  }
  return read_file(output);
}

} // namespace mstep::cpu
