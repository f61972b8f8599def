// SharedLibrary: 1. the ELF header is checked (a clear error for bytes that
// are not a shared object for this machine); 2. the bytes go to a memfd, or
// to a mkstemp file where memfd_create fails; 3. dlopen of the memfd by its
// /proc/self/fd path (the temporary file is unlinked once opened).
//
// The dynamic loader knows a library by the path it was opened with and
// returns the library already loaded under a path for a second dlopen of
// it. So the memfd stays open until dlclose (no other live library can
// have its number), and a path that still names a loaded library (one
// dlclose did not unload) is not used: the bytes go to a temporary file.
#include "lib/backends/cpu/SharedLibrary.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mstep::cpu {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;
#endif

absl::Status check_header(absl::string_view image, absl::string_view what) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(what, " is not a loadable shared object: ", why));
  };
  Elf64_Ehdr header;
  if (image.size() < sizeof header) return bad("shorter than an ELF header");
  std::memcpy(&header, image.data(), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return bad("no ELF magic");
  if (header.e_ident[EI_CLASS] != ELFCLASS64) return bad("not a 64-bit ELF file");
  if (header.e_type != ET_DYN) return bad("not a shared object");
  if (kHostMachine != EM_NONE && header.e_machine != kHostMachine)
    return absl::FailedPreconditionError(absl::StrCat(
        what, " holds machine code for ELF machine ", header.e_machine,
        ", this host is machine ", kHostMachine, "; compile the step on this host"));
  // Every segment inside the bytes: the loader maps a truncated file, and
  // touching a page past its end would be SIGBUS, not an error.
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phoff > image.size() ||
      uint64_t{header.e_phnum} * sizeof(Elf64_Phdr) > image.size() - header.e_phoff)
    return bad("truncated (program headers)");
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, image.data() + header.e_phoff + i * sizeof segment, sizeof segment);
    if (segment.p_offset > image.size() || segment.p_filesz > image.size() - segment.p_offset)
      return bad("truncated (a segment ends past the end of the bytes)");
  }
  return absl::OkStatus();
}

absl::Status write_all(int fd, absl::string_view bytes, absl::string_view what) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return absl::InternalError(
          absl::StrCat("cannot write ", what, " to a memory file: ", errno_text(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

/// A file holding `image` that dlopen can open by `path`; a memfd, or a
/// mkstemp file that `unlink_path` names until it is opened.
struct ImageFile {
  int fd = -1;
  std::string path;
  std::string unlink_path;

  ~ImageFile() {
    if (!unlink_path.empty()) ::unlink(unlink_path.c_str());
    if (fd >= 0) ::close(fd);
  }
};

/// Whether the dynamic loader holds a library opened as `path`.
bool loaded_as(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

absl::Status make_image_file(absl::string_view image, absl::string_view what, ImageFile& file) {
  file.fd = ::memfd_create("mstep-fusions", MFD_CLOEXEC);
  if (file.fd >= 0) file.path = absl::StrCat("/proc/self/fd/", file.fd);
  if (file.fd >= 0 && loaded_as(file.path)) {
    ::close(file.fd);
    file.fd = -1;
  }
  if (file.fd < 0) {
    // Kernels before 3.17, a seccomp filter, or a stale /proc/self/fd path:
    // a private temporary file.
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/mstep-fusions-XXXXXX");
    file.fd = ::mkostemp(templ.data(), O_CLOEXEC);
    if (file.fd < 0)
      return absl::InternalError(absl::StrCat("cannot create a file for ", what,
                                              ": memfd_create and mkstemp in '", templ,
                                              "' failed: ", errno_text(errno)));
    file.path = file.unlink_path = templ;
  }
  return write_all(file.fd, image, what);
}

} // namespace

absl::StatusOr<std::unique_ptr<SharedLibrary>> SharedLibrary::load(absl::string_view image,
                                                                   absl::string_view what) {
  if (absl::Status status = check_header(image, what); !status.ok()) return status;
  ImageFile file;
  if (absl::Status status = make_image_file(image, what, file); !status.ok()) return status;
  void* handle = ::dlopen(file.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return absl::DataLossError(
        absl::StrCat(what, " does not load: ", error ? error : "dlopen failed"));
  }
  // The memfd stays open while the library is loaded; a temporary file's
  // name is gone already.
  int fd = -1;
  if (file.unlink_path.empty()) std::swap(fd, file.fd);
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(handle, fd, std::string(what)));
}

SharedLibrary::~SharedLibrary() {
  ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<void*> SharedLibrary::symbol(const std::string& name) const {
  ::dlerror(); // clear a stale error: a symbol's address may be null
  void* address = ::dlsym(handle_, name.c_str());
  if (const char* error = ::dlerror(); error != nullptr || address == nullptr)
    return absl::DataLossError(absl::StrCat(what_, " has no symbol '", name,
                                            "': ", error ? error : "null address"));
  return address;
}

} // namespace mstep::cpu
