// run_external_tool: 1. a private directory (mkdtemp, mode 0700) gets the
// inputs; 2. the tool runs by posix_spawn, its stdout and stderr to a log
// file there; 3. the outputs are read back; 4. the directory goes.
#include "lib/compiler/ExternalTool.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace mstep {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// A mkdtemp directory and the files named in it, removed on destruction.
class PrivateDirectory {
 public:
  explicit PrivateDirectory(const ExternalToolRun& run) : run_(run) {}
  ~PrivateDirectory() {
    if (path_.empty()) return;
    for (const std::string& file : files_) ::unlink(file.c_str());
    ::rmdir(path_.c_str());
  }

  absl::Status create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/mstep-tool-XXXXXX");
    if (::mkdtemp(templ.data()) == nullptr)
      return absl::InternalError(absl::StrCat(run_.who, ": cannot create a directory for ",
                                              run_.tool, " ('", templ, "'): ", errno_text(errno)));
    path_ = templ;
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }
  /// The path of `name` in the directory, removed with it.
  std::string file(absl::string_view name) {
    files_.push_back(absl::StrCat(path_, "/", name));
    return files_.back();
  }

 private:
  const ExternalToolRun& run_;
  std::string path_;
  std::vector<std::string> files_;
};

absl::Status write_file(const ExternalToolRun& run, const std::string& path,
                        absl::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat(run.who, ": cannot create '", path, "': ", errno_text(errno)));
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat(run.who, ": cannot write '", path, "': ", errno_text(err)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  ::close(fd);
  return absl::OkStatus();
}

/// The file's bytes; an error when it cannot be read.
absl::StatusOr<std::string> read_file(const ExternalToolRun& run, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat(run.who, ": cannot open '", path, "': ", errno_text(errno)));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat(run.who, ": cannot read '", path, "': ", errno_text(err)));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

/// Runs argv[0] with stdin from /dev/null and stdout and stderr to `log`;
/// its exit status, or an error when it cannot be started.
absl::StatusOr<int> spawn_and_wait(const ExternalToolRun& run,
                                   const std::vector<std::string>& args, const std::string& log) {
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
    return absl::FailedPreconditionError(absl::StrCat(run.who, ": cannot run ", run.tool, " '",
                                                      args[0], "': ", errno_text(error), "; ",
                                                      run.hint));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return absl::InternalError(
          absl::StrCat(run.who, ": waiting for ", run.tool, " failed: ", errno_text(errno)));
  }
  return status;
}

}  // namespace

absl::StatusOr<ExternalToolResult> run_external_tool(const ExternalToolRun& run) {
  if (run.args.empty()) return absl::InvalidArgumentError(absl::StrCat(run.who, ": no tool to run"));
  PrivateDirectory dir(run);
  if (absl::Status status = dir.create(); !status.ok()) return status;
  for (const auto& [name, bytes] : run.inputs)
    if (absl::Status status = write_file(run, dir.file(name), bytes); !status.ok()) return status;
  std::vector<std::string> args;
  for (const std::string& arg : run.args)
    args.push_back(absl::StrReplaceAll(arg, {{"{dir}", dir.path()}}));
  std::vector<std::string> outputs;
  for (const std::string& name : run.outputs) outputs.push_back(dir.file(name));
  const std::string log = dir.file("tool.log");
  absl::StatusOr<int> status = spawn_and_wait(run, args, log);
  if (!status.ok()) return status.status();
  ExternalToolResult result;
  absl::StatusOr<std::string> text = read_file(run, log);
  if (text.ok()) result.log = std::move(*text);
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    const std::string how = WIFEXITED(*status)
                                ? absl::StrCat("exit status ", WEXITSTATUS(*status))
                                : absl::StrCat("signal ", WTERMSIG(*status));
    return absl::InternalError(absl::StrCat(
        run.who, ": ", run.tool, " '", args[0], "' failed (", how, "): ",
        text.ok() ? absl::StripAsciiWhitespace(result.log) : text.status().message()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::StatusOr<std::string> bytes = read_file(run, outputs[i]);
    if (!bytes.ok()) return bytes.status();
    result.outputs[run.outputs[i]] = std::move(*bytes);
  }
  return result;
}

}  // namespace mstep
