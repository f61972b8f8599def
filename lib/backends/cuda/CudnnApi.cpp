// cuDNN: the search for the library, the loader, status messages and
// the handle.
#include "lib/backends/cuda/CudnnApi.h"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace mstep::cuda {

namespace {

absl::Status unavailable(absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat("cudnn: unavailable: ", reason));
}

constexpr const char* kLibraryFile = "libcudnn.so.9";

/// Where `python` finds the nvidia.cudnn package (the nvidia-cudnn wheel
/// PyTorch depends on), or the reason it does not.
CudnnCandidate python_candidate(const std::string& python) {
  CudnnCandidate c{"python", "", ""};
  // The python name is quoted for the shell; a quote in it is refused.
  if (python.find('\'') != std::string::npos) {
    c.note = absl::StrCat("the python name ", python, " has a quote");
    return c;
  }
  const std::string command = absl::StrCat(
      "'", python,
      "' -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], \"lib\"))' "
      "2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    c.note = absl::StrCat("cannot run ", python);
    return c;
  }
  std::string out;
  std::array<char, 512> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) out += buffer.data();
  const int rc = pclose(pipe);
  std::string dir(absl::StripAsciiWhitespace(out));
  if (rc != 0 || dir.empty()) {
    c.note = absl::StrCat(python, " has no nvidia.cudnn package (or no ", python, ")");
    return c;
  }
  c.path = absl::StrCat(dir, "/", kLibraryFile);
  return c;
}

/// dlopen + dlsym of the table from one path; "" when it loaded, else why not.
std::string try_load(const CudnnCandidate& candidate, CudnnApi& api) {
  void* library = dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return error != nullptr ? error : "dlopen failed";
  }
#define MSTEP_CUDNN_LOAD(name)                                                                     \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name));                          \
  if (api.name == nullptr) return absl::StrCat(candidate.path, " has no ", #name);
  MSTEP_CUDNN_FUNCTIONS(MSTEP_CUDNN_LOAD)
#undef MSTEP_CUDNN_LOAD
  api.cudnnGetLastErrorString = reinterpret_cast<decltype(api.cudnnGetLastErrorString)>(
      dlsym(library, "cudnnGetLastErrorString"));
  api.version = api.cudnnGetVersion();
  if (api.version / 10000 != CUDNN_MAJOR)
    return absl::StrCat(candidate.path, " is cuDNN ", api.version,
                        "; this build needs major version ", CUDNN_MAJOR);
  // The sub-libraries (libcudnn_graph.so.9, ...) load on first use.
  cudnnBackendDescriptor_t probe = nullptr;
  cudnnStatus_t status = api.cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &probe);
  if (status != CUDNN_STATUS_SUCCESS)
    return absl::StrCat(candidate.path, " loaded but cudnnBackendCreateDescriptor failed: ",
                        describe_cudnn_status(api, status),
                        " (its sub-libraries libcudnn_graph.so.9, libcudnn_engines_*.so.9 must "
                        "be in the same folder or on the loader's path)");
  api.cudnnBackendDestroyDescriptor(probe);
  api.path = candidate.path;
  api.source = candidate.source;
  return "";
}

} // namespace

std::string CudnnLoadOptions::default_toolkit_lib_dir() {
  const char* home = std::getenv("CUDA_HOME");
  return absl::StrCat(home != nullptr && *home != '\0' ? home : "/usr/local/cuda", "/lib64");
}

std::vector<CudnnCandidate> cudnn_library_candidates(const CudnnLoadOptions& options) {
  std::vector<CudnnCandidate> candidates;
  if (!options.library.empty()) candidates.push_back({"name", options.library, ""});
  if (!options.env_variable.empty()) {
    const char* value = std::getenv(options.env_variable.c_str());
    if (value != nullptr && *value != '\0')
      candidates.push_back({options.env_variable, value, ""});
    else
      candidates.push_back(
          {options.env_variable, "", absl::StrCat(options.env_variable, " is not set")});
  }
  if (!options.toolkit_lib_dir.empty())
    candidates.push_back({"toolkit", absl::StrCat(options.toolkit_lib_dir, "/", kLibraryFile), ""});
  if (!options.python.empty()) candidates.push_back(python_candidate(options.python));
  return candidates;
}

absl::StatusOr<std::shared_ptr<const CudnnApi>> load_cudnn(const CudnnLoadOptions& options) {
  std::vector<std::string> refused;
  for (const CudnnCandidate& candidate : cudnn_library_candidates(options)) {
    if (candidate.path.empty()) {
      refused.push_back(absl::StrCat(candidate.source, ": ", candidate.note));
      continue;
    }
    auto api = std::make_shared<CudnnApi>();
    std::string why = try_load(candidate, *api);
    if (why.empty()) return std::shared_ptr<const CudnnApi>(std::move(api));
    refused.push_back(absl::StrCat(candidate.source, " (", candidate.path, "): ", why));
  }
  if (refused.empty()) return unavailable("no place to look for libcudnn.so.9 was given");
  return unavailable(absl::StrCat(
      "no usable libcudnn.so.9; tried, in order: ", absl::StrJoin(refused, "; "),
      " (install cuDNN 9, put its folder on LD_LIBRARY_PATH, or set MSTEP_CUDNN_LIBRARY to its "
      "libcudnn.so.9)"));
}

std::string describe_cudnn_status(const CudnnApi& api, cudnnStatus_t status) {
  std::string text = api.cudnnGetErrorString != nullptr ? api.cudnnGetErrorString(status)
                                                        : absl::StrCat("cudnnStatus ", status);
  if (api.cudnnGetLastErrorString != nullptr) {
    std::array<char, 1024> last{};
    api.cudnnGetLastErrorString(last.data(), last.size());
    if (last[0] != '\0') absl::StrAppend(&text, " (", last.data(), ")");
  }
  return text;
}

absl::Status cudnn_error(const CudnnApi& api, cudnnStatus_t status, absl::string_view call,
                         absl::string_view what) {
  const int family = static_cast<int>(status) / 1000; // 2xxx bad param, 3xxx not supported
  absl::StatusCode code = status == CUDNN_STATUS_ALLOC_FAILED ? absl::StatusCode::kResourceExhausted
                          : family == 2                       ? absl::StatusCode::kInvalidArgument
                          : family == 3                       ? absl::StatusCode::kUnimplemented
                                                              : absl::StatusCode::kInternal;
  return absl::Status(
      code, absl::StrCat("cudnn: ", what, ": ", call, ": ", describe_cudnn_status(api, status)));
}

absl::StatusOr<std::unique_ptr<CudnnHandle>>
CudnnHandle::create(std::shared_ptr<const CudnnApi> api, void* stream) {
  std::unique_ptr<CudnnHandle> handle(new CudnnHandle(std::move(api)));
  const CudnnApi& a = *handle->api_;
  cudnnStatus_t status = a.cudnnCreate(&handle->handle_);
  if (status != CUDNN_STATUS_SUCCESS) {
    handle->handle_ = nullptr;
    return unavailable(absl::StrCat("cudnnCreate: ", describe_cudnn_status(a, status),
                                    " (a handle needs a GPU and its driver)"));
  }
  if (absl::Status s =
          check_cudnn(a, a.cudnnSetStream(handle->handle_, static_cast<cudaStream_t>(stream)),
                      "cudnnSetStream", "binding the handle to the backend's stream");
      !s.ok())
    return s;
  return handle;
}

CudnnHandle::~CudnnHandle() {
  if (handle_ != nullptr) api_->cudnnDestroy(handle_);
}

} // namespace mstep::cuda
