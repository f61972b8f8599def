// launch_kernel: 1. the configuration against CUDA's limits; 2. the
// arguments against the kernel's parameter layout; 3. cuLaunchKernel with
// one pointer per parameter into the packed arguments.
#include "lib/backends/cuda/CudaLaunch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {
namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;

std::string describe_params(const std::vector<CudaKernelParam>& params) {
  return absl::StrCat(params.size(), " (", params.empty() ? "none" : "",
                      absl::StrJoin(params, ", ",
                                    [](std::string* out, const CudaKernelParam& p) {
                                      absl::StrAppend(out, p.size, " bytes at ", p.offset);
                                    }),
                      ")");
}

std::string describe_dims(const std::array<unsigned, 3>& dims) {
  return absl::StrCat(dims[0], "x", dims[1], "x", dims[2]);
}

} // namespace

absl::Status launch_kernel(const CudaContext& context, const CudaKernel& kernel,
                           const CudaLaunchConfig& config, const CudaKernelArgs& args) {
  const auto& grid = config.grid;
  const auto& block = config.block;
  if (std::ranges::count(grid, 0u) + std::ranges::count(block, 0u) > 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: kernel ", kernel.name, ": grid ", describe_dims(grid), " and block ",
                     describe_dims(block), " must have no zero size"));
  if (uint64_t{block[0]} * block[1] * block[2] > kMaxThreadsPerBlock)
    return absl::InvalidArgumentError(absl::StrCat("cuda: kernel ", kernel.name, ": block ",
                                                   describe_dims(block), " has more than ",
                                                   kMaxThreadsPerBlock, " threads"));
  bool same = args.params().size() == kernel.params.size();
  for (size_t i = 0; same && i < kernel.params.size(); ++i)
    same = args.params()[i].offset == kernel.params[i].offset &&
           args.params()[i].size == kernel.params[i].size;
  if (!same)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: kernel ", kernel.name, " takes ", describe_params(kernel.params),
                     " parameters; the launch passes ", describe_params(args.params())));
  std::vector<void*> pointers;
  pointers.reserve(args.params().size());
  for (const CudaKernelParam& param : args.params())
    pointers.push_back(const_cast<std::byte*>(args.data() + param.offset));
  MSTEP_RETURN_IF_ERROR(context.make_current());
  return check_cuda(context.api(),
                    context.api().cuLaunchKernel(kernel.function, grid[0], grid[1], grid[2],
                                                 block[0], block[1], block[2], config.shared_bytes,
                                                 context.stream(), pointers.data(), nullptr),
                    "cuLaunchKernel",
                    absl::StrCat("kernel ", kernel.name, ", grid ", describe_dims(grid), ", block ",
                                 describe_dims(block)));
}

} // namespace mstep::cuda
