// CudaKernelModule::load: 1. the cubin through cuLibraryLoadData, then for
// each kernel cuLibraryGetKernel, cuKernelGetFunction (the driver loads
// lazily, so a cubin for another architecture may fail only here) and
// cuKernelGetParamInfo; 2. if any of that fails, the PTX the same way,
// with the JIT's error and information logs captured; 3. if that fails
// too, one error with everything a reader needs to see why.
#include "lib/backends/cuda/CudaModule.h"

#include <elf.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {
namespace {

constexpr size_t kLogBytes = 16 << 10;
constexpr unsigned char kCudaOsAbi = 0x41; // EI_OSABI of NVIDIA cubins

/// One attempt: `image` loaded as a library and every kernel found in it.
struct Attempt {
  CUlibrary library = nullptr;
  std::vector<CudaKernel> kernels;
  std::string error_log;
  std::string info_log;
};

/// Reads parameter `index` of `kernel`; false past the last one.
absl::StatusOr<bool> param_info(const CudaDriverApi& api, CudaKernel& kernel, size_t index) {
  CudaKernelParam param;
  CUresult result = api.cuKernelGetParamInfo(kernel.kernel, index, &param.offset, &param.size);
  if (result == CUDA_ERROR_INVALID_VALUE) return false; // past the last parameter
  MSTEP_RETURN_IF_ERROR(check_cuda(api, result, "cuKernelGetParamInfo",
                                   absl::StrCat("kernel ", kernel.name, " parameter ", index)));
  kernel.params.push_back(param);
  return true;
}

/// Loads `image` (a NUL-terminated cubin or PTX) and finds the kernels.
/// On failure the library is unloaded and `attempt`'s logs are kept.
absl::Status try_load(const CudaContext& context, const std::string& image,
                      std::span<const std::string> kernel_names, Attempt& attempt) {
  const CudaDriverApi& api = context.api();
  std::string error_log(kLogBytes, '\0');
  std::string info_log(kLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(uintptr_t{kLogBytes - 1}),
                    info_log.data(), reinterpret_cast<void*>(uintptr_t{kLogBytes - 1})};
  CUresult loaded = api.cuLibraryLoadData(&attempt.library, image.data(), options, values, 4,
                                          nullptr, nullptr, 0);
  attempt.error_log = error_log.c_str();
  attempt.info_log = info_log.c_str();
  MSTEP_RETURN_IF_ERROR(check_cuda(api, loaded, "cuLibraryLoadData"));
  absl::Status status = [&]() -> absl::Status {
    for (const std::string& name : kernel_names) {
      CudaKernel kernel;
      kernel.name = name;
      MSTEP_RETURN_IF_ERROR(
          check_cuda(api, api.cuLibraryGetKernel(&kernel.kernel, attempt.library, name.c_str()),
                     "cuLibraryGetKernel", absl::StrCat("kernel ", name)));
      MSTEP_RETURN_IF_ERROR(check_cuda(api,
                                       api.cuKernelGetFunction(&kernel.function, kernel.kernel),
                                       "cuKernelGetFunction", absl::StrCat("kernel ", name)));
      for (size_t index = 0;; ++index) {
        MSTEP_ASSIGN_OR_RETURN(bool more, param_info(api, kernel, index));
        if (!more) break;
      }
      attempt.kernels.push_back(std::move(kernel));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    (void)api.cuLibraryUnload(attempt.library);
    attempt.library = nullptr;
    attempt.kernels.clear();
  }
  return status;
}

} // namespace

std::string describe_cubin_arch(absl::string_view cubin) {
  Elf64_Ehdr header;
  if (cubin.size() < sizeof(header)) return "not a cubin (too short for an ELF header)";
  std::memcpy(&header, cubin.data(), sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_machine != EM_CUDA)
    return "not a cubin (an ELF for NVIDIA GPUs)";
  // Cubin ABI version 8 (CUDA 13's ptxas) keeps the SM in bits 8-15 of
  // e_flags; earlier versions in bits 0-7.
  bool v8 = header.e_ident[EI_OSABI] == kCudaOsAbi && header.e_ident[EI_ABIVERSION] >= 8;
  unsigned sm = v8 ? (header.e_flags >> 8) & 0xff : header.e_flags & 0xff;
  return absl::StrCat("sm_", sm);
}

std::string describe_ptx_target(absl::string_view ptx) {
  size_t at = ptx.find(".target ");
  if (at == absl::string_view::npos) return "no .target line";
  absl::string_view rest = ptx.substr(at + 8);
  absl::string_view target = rest.substr(0, rest.find_first_of(" ,\n\r\t"));
  if (absl::StartsWith(target, "sm_")) return absl::StrCat("compute_", target.substr(3));
  return std::string(target);
}

absl::StatusOr<std::unique_ptr<CudaKernelModule>>
CudaKernelModule::load(const CudaContext& context, absl::string_view cubin, absl::string_view ptx,
                       std::span<const std::string> kernel_names) {
  if (kernel_names.empty()) return absl::InvalidArgumentError("cuda: a module with no kernels");
  if (cubin.empty() && ptx.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda: kernels ", absl::StrJoin(kernel_names, ", "), ": neither a cubin nor PTX to load"));
  MSTEP_RETURN_IF_ERROR(context.make_current());
  std::unique_ptr<CudaKernelModule> module(new CudaKernelModule(context));
  Attempt attempt;
  absl::Status cubin_status = absl::NotFoundError("no cubin");
  if (!cubin.empty()) {
    cubin_status = try_load(context, std::string(cubin), kernel_names, attempt);
    if (cubin_status.ok()) {
      module->library_ = attempt.library;
      module->kernels_ = std::move(attempt.kernels);
      return module;
    }
  }
  absl::Status ptx_status = absl::NotFoundError("no PTX");
  Attempt jit;
  if (!ptx.empty()) {
    ptx_status = try_load(context, std::string(ptx), kernel_names, jit);
    if (ptx_status.ok()) {
      module->library_ = jit.library;
      module->kernels_ = std::move(jit.kernels);
      module->source_ = Source::kPtx;
      module->cubin_failure_ = std::string(cubin_status.message());
      module->jit_log_ = jit.info_log;
      return module;
    }
  }
  const CudaDeviceInfo& device = context.device();
  std::string message = absl::StrCat(
      "cuda: cannot load kernel(s) ", absl::StrJoin(kernel_names, ", "), " on device ",
      device.ordinal, " (", device.name, ", ", device.arch(), "): the cubin (",
      cubin.empty() ? "none given" : absl::StrCat("built for ", describe_cubin_arch(cubin)),
      ") failed: ", cubin_status.message(), "; the PTX (",
      ptx.empty() ? "none given" : absl::StrCat("for ", describe_ptx_target(ptx)),
      ") failed: ", ptx_status.message());
  if (!jit.error_log.empty()) absl::StrAppend(&message, "; JIT log:\n", jit.error_log);
  // The code of the last failure (a kernel not found is NotFound).
  return absl::Status(ptx.empty() ? cubin_status.code() : ptx_status.code(), message);
}

CudaKernelModule::~CudaKernelModule() {
  if (library_ != nullptr) (void)context_.api().cuLibraryUnload(library_);
}

absl::StatusOr<const CudaKernel*> CudaKernelModule::kernel(absl::string_view name) const {
  for (const CudaKernel& kernel : kernels_)
    if (kernel.name == name) return &kernel;
  std::vector<absl::string_view> names;
  for (const CudaKernel& kernel : kernels_) names.push_back(kernel.name);
  return absl::NotFoundError(absl::StrCat("cuda: no kernel ", name, " in this module (it has ",
                                          absl::StrJoin(names, ", "), ")"));
}

} // namespace mstep::cuda
