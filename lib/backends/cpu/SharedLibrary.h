// A shared object loaded from bytes in memory (the fusion JIT's kernels):
// written to an anonymous memory file (memfd_create; a private temporary
// file where that is missing) and dlopen'ed from it, so nothing is left
// on disk. Library-internal; no MLIR or LLVM headers.
//
// Thread-safety: load() may run on any thread; a loaded library is
// immutable and its symbols may be looked up from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::cpu {

class SharedLibrary {
public:
  /// Loads `image`, an ELF shared object for this architecture, with
  /// RTLD_NOW | RTLD_LOCAL: its undefined symbols (libm, libc) resolve
  /// from the process now, and its own symbols are visible only through
  /// symbol(). `what` names it in errors. Bytes that are not such an
  /// object, or that do not load, are an error.
  static absl::StatusOr<std::unique_ptr<SharedLibrary>> load(absl::string_view image,
                                                             absl::string_view what);

  /// dlclose (and close of the memory file): every pointer symbol()
  /// returned dangles after this.
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  /// The address of the library's exported symbol `name`; an error names
  /// it when the library has none.
  absl::StatusOr<void*> symbol(const std::string& name) const;

private:
  SharedLibrary(void* handle, int fd, std::string what)
      : handle_(handle), fd_(fd), what_(std::move(what)) {}

  void* handle_;
  /// The memfd the library was opened from (-1 for a temporary file),
  /// open until dlclose so that its /proc/self/fd path names only it.
  int fd_;
  std::string what_;
};

} // namespace mstep::cpu
