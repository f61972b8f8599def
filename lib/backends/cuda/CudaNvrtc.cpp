// NVRTC: the loader and one compile (see CudaNvrtc.h).
#include "lib/backends/cuda/CudaNvrtc.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaPtxas.h"

namespace mstep::cuda {

std::vector<std::string> default_nvrtc_candidates() {
  const std::string& root = configured_cuda_toolkit();
  return {"libnvrtc.so.13",
          "libnvrtc.so.12",
          root + "/lib64/libnvrtc.so.13",
          root + "/lib/libnvrtc.so.13",
          root + "/lib64/libnvrtc.so",
          root + "/lib/libnvrtc.so"};
}

namespace {

/// dlopen + dlsym of the table from `path`; "" when it loaded, else why not.
std::string try_load(const std::string& path, NvrtcApi& api) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return error != nullptr ? error : "dlopen failed";
  }
#define MSTEP_NVRTC_LOAD(name)                                                                     \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name));                          \
  if (api.name == nullptr) return absl::StrCat("it has no ", #name);
  MSTEP_NVRTC_FUNCTIONS(MSTEP_NVRTC_LOAD)
#undef MSTEP_NVRTC_LOAD
  if (api.nvrtcVersion(&api.major, &api.minor) != NVRTC_SUCCESS) return "nvrtcVersion failed";
  api.library = path;
  return "";
}

} // namespace

absl::StatusOr<std::shared_ptr<const NvrtcApi>> load_nvrtc(const NvrtcLoadOptions& options) {
  const std::vector<std::string> candidates =
      options.candidates.empty() ? default_nvrtc_candidates() : options.candidates;
  std::vector<std::string> tried;
  for (const std::string& path : candidates) {
    auto api = std::make_shared<NvrtcApi>();
    std::string why = try_load(path, *api);
    if (why.empty()) return std::shared_ptr<const NvrtcApi>(std::move(api));
    tried.push_back(absl::StrCat(path, " (", why, ")"));
  }
  return absl::UnavailableError(absl::StrCat(
      "nvrtc: unavailable: custom ops' CUDA kernels are compiled with NVRTC (libnvrtc from the "
      "CUDA toolkit), which did not load from ",
      absl::StrJoin(tried, "; "),
      ". Install the toolkit's NVRTC or put its lib folder on LD_LIBRARY_PATH"));
}

absl::StatusOr<std::shared_ptr<const NvrtcApi>> default_nvrtc() {
  static const auto* loaded = new absl::StatusOr<std::shared_ptr<const NvrtcApi>>(load_nvrtc());
  return *loaded;
}

absl::StatusOr<NvrtcOutput> nvrtc_compile(const NvrtcApi& api, absl::string_view source,
                                          absl::string_view program, absl::string_view entry,
                                          absl::string_view arch,
                                          const std::vector<std::string>& options) {
  auto failed = [&](absl::string_view call, nvrtcResult result) {
    return absl::InternalError(absl::StrCat("nvrtc: ", call, " failed for ", program, ": ",
                                            api.nvrtcGetErrorString(result)));
  };
  nvrtcProgram prog = nullptr;
  const std::string text(source), name(program), expression(entry);
  if (nvrtcResult r =
          api.nvrtcCreateProgram(&prog, text.c_str(), name.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return failed("nvrtcCreateProgram", r);
  struct Destroy { // on every path out
    const NvrtcApi& api;
    nvrtcProgram& prog;
    ~Destroy() { api.nvrtcDestroyProgram(&prog); }
  } destroy{api, prog};
  if (nvrtcResult r = api.nvrtcAddNameExpression(prog, expression.c_str()); r != NVRTC_SUCCESS)
    return failed("nvrtcAddNameExpression", r);
  std::vector<std::string> all = {absl::StrCat("--gpu-architecture=", arch), "--std=c++17",
                                  absl::StrCat("-I", configured_cuda_toolkit(), "/include")};
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const std::string& option : all) argv.push_back(option.c_str());
  const nvrtcResult compiled =
      api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  NvrtcOutput out;
  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    if (api.nvrtcGetProgramLog(prog, out.log.data()) != NVRTC_SUCCESS) out.log.clear();
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
      out.log.pop_back();
  }
  if (compiled == NVRTC_ERROR_COMPILATION)
    return absl::InvalidArgumentError(
        absl::StrCat("NVRTC (", api.major, ".", api.minor,
                     ") did not compile it (options: ", absl::StrJoin(all, " "), "):\n", out.log));
  if (compiled != NVRTC_SUCCESS) return failed("nvrtcCompileProgram", compiled);
  const char* lowered = nullptr;
  if (nvrtcResult r = api.nvrtcGetLoweredName(prog, expression.c_str(), &lowered);
      r != NVRTC_SUCCESS || lowered == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", entry,
        "' is not a __global__ function of the source (NVRTC: ", api.nvrtcGetErrorString(r), ")"));
  out.lowered_entry = lowered;
  size_t ptx_size = 0;
  if (nvrtcResult r = api.nvrtcGetPTXSize(prog, &ptx_size); r != NVRTC_SUCCESS)
    return failed("nvrtcGetPTXSize", r);
  out.ptx.resize(ptx_size);
  if (nvrtcResult r = api.nvrtcGetPTX(prog, out.ptx.data()); r != NVRTC_SUCCESS)
    return failed("nvrtcGetPTX", r);
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  return out;
}

} // namespace mstep::cuda
