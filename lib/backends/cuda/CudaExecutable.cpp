// CudaExecutable: see CudaExecutable.h.
#include "lib/backends/cuda/CudaExecutable.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

absl::Status validate_cuda_plan(const CudaPlan& plan) {
  const int num_values = static_cast<int>(plan.values.size());
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", parts...));
  };
  if (plan.num_inputs > plan.values.size())
    return bad(plan.num_inputs, " inputs but only ", num_values, " values");
  for (size_t l = 0; l < plan.launches.size(); ++l) {
    const CudaLaunchStep& launch = plan.launches[l];
    if (launch.matmul >= 0) {
      if (launch.matmul >= static_cast<int>(plan.matmuls.size()))
        return bad("launch ", l, " names matmul ", launch.matmul, " of ", plan.matmuls.size());
      const CudaMatmulInfo& m = plan.matmuls[launch.matmul];
      const size_t operands = m.shape.bias ? 3 : 2;
      if (launch.args.size() != operands || launch.writes.size() != 1)
        return bad("launch ", l, " (cublasLt matmul ", m.shape.to_string(), ") has ",
                   launch.args.size(), " operands and ", launch.writes.size(),
                   " results; it needs ", operands, " and 1");
      if (m.batch < 1) return bad("launch ", l, " has a batch of ", m.batch);
    } else if (launch.kernel < 0 || launch.kernel >= static_cast<int>(plan.kernels.size())) {
      return bad("launch ", l, " names kernel ", launch.kernel, " of ", plan.kernels.size());
    }
    for (const std::vector<int>* values : {&launch.args, &launch.writes})
      for (int value : *values)
        if (value < 0 || value >= num_values)
          return bad("launch ", l, " uses value ", value, " of ", num_values);
    for (int value : launch.writes)
      if (value < static_cast<int>(plan.num_inputs))
        return bad("launch ", l, " writes step input ", value);
  }
  for (int value : plan.outputs)
    if (value < 0 || value >= num_values) return bad("an output is value ", value, " of ", num_values);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaExecutable>>
CudaExecutable::create(CudaBackend& backend, CudaPlan plan,
                       std::shared_ptr<const CublasLtApi> cublaslt) {
  MSTEP_RETURN_IF_ERROR(validate_cuda_plan(plan));
  std::unique_ptr<CudaExecutable> exe(new CudaExecutable(backend, std::move(plan)));
  if (!exe->plan_.matmuls.empty()) {
    if (cublaslt == nullptr) {
      MSTEP_ASSIGN_OR_RETURN(cublaslt, load_cublaslt());
    }
    MSTEP_ASSIGN_OR_RETURN(exe->matmul_,
                           CublasLtMatmul::create(backend.context(), std::move(cublaslt)));
  }
  const std::string arch = backend.context().device().arch();
  for (const CudaKernelInfo& info : exe->plan_.kernels) {
    absl::string_view cubin;
    for (const CudaCubin& candidate : info.cubins)
      if (candidate.arch == arch) cubin = candidate.image;
    const std::string names[] = {info.name};
    absl::StatusOr<std::unique_ptr<CudaKernelModule>> module =
        CudaKernelModule::load(backend.context(), cubin, info.ptx, names);
    if (!module.ok())
      return absl::Status(module.status().code(),
                          absl::StrCat("cuda: loading the kernel of ", info.origin, " (cubins for ",
                                       absl::StrJoin(info.cubins, ", ",
                                                     [](std::string* out, const CudaCubin& c) {
                                                       out->append(c.arch);
                                                     }),
                                       "): ", module.status().message()));
    MSTEP_ASSIGN_OR_RETURN(const CudaKernel* kernel, (*module)->kernel(info.name));
    exe->kernels_.push_back(kernel);
    exe->modules_.push_back(std::move(*module));
  }
  return exe;
}

absl::Status CudaExecutable::run_matmul(const CudaLaunchStep& launch,
                                        const std::vector<BufferPtr>& values) {
  const CudaMatmulInfo& m = plan_.matmuls[launch.matmul];
  std::vector<const Buffer*> reads;
  for (int value : launch.args) reads.push_back(values[value].get());
  const Buffer* c = values[launch.writes[0]].get();
  const uint64_t element = element_size(m.shape.dtype);
  auto queue = [&]() -> absl::Status {
    const CUdeviceptr a = CudaBackend::device_pointer(*reads[0]);
    const CUdeviceptr b = CudaBackend::device_pointer(*reads[1]);
    const CUdeviceptr bias = m.shape.bias ? CudaBackend::device_pointer(*reads[2]) : 0;
    const CUdeviceptr out = CudaBackend::device_pointer(*c);
    for (int64_t i = 0; i < m.batch; ++i) {
      MSTEP_RETURN_IF_ERROR(matmul_->run(m.shape, a + i * m.a_stride * element,
                                         b + i * m.b_stride * element, bias,
                                         out + i * m.c_stride * element));
    }
    return absl::OkStatus();
  };
  const Buffer* const writes[] = {c};
  return backend_.enqueue(absl::StrCat("cublasLt step (", m.origin, ")"), queue, reads, writes);
}

absl::StatusOr<std::vector<BufferPtr>> CudaExecutable::run(absl::Span<const BufferPtr> inputs,
                                                           const Donation& donation) {
  (void)donation;  // nothing is written in place (see the header)
  if (inputs.size() != plan_.num_inputs)
    return absl::InvalidArgumentError(absl::StrCat("cuda executable: expected ", plan_.num_inputs,
                                                   " inputs, got ", inputs.size()));
  std::vector<BufferPtr> values(plan_.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr || inputs[i]->type() != plan_.values[i])
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda executable: input ", i, " must be ", plan_.values[i].to_string(), ", got ",
          inputs[i] == nullptr ? std::string("no buffer") : inputs[i]->type().to_string()));
    values[i] = inputs[i];
  }
  for (size_t v = plan_.num_inputs; v < values.size(); ++v) {
    MSTEP_ASSIGN_OR_RETURN(values[v], backend_.allocate(plan_.values[v]));
  }
  for (const CudaLaunchStep& launch : plan_.launches) {
    if (launch.matmul >= 0) {
      MSTEP_RETURN_IF_ERROR(run_matmul(launch, values));
      continue;
    }
    const CudaKernelInfo& info = plan_.kernels[launch.kernel];
    CudaKernelArgs args;
    std::vector<const Buffer*> reads, writes;
    for (int value : launch.args) {
      args.add(CudaBackend::device_pointer(*values[value]));
      reads.push_back(values[value].get());
    }
    for (int value : launch.writes) writes.push_back(values[value].get());
    CudaLaunchConfig config;
    config.grid = info.grid;
    config.block = info.block;
    const CudaKernel& kernel = *kernels_[launch.kernel];
    MSTEP_RETURN_IF_ERROR(backend_.enqueue(
        absl::StrCat("kernel ", info.name, " (", info.origin, ")"),
        [&] { return launch_kernel(backend_.context(), kernel, config, args); }, reads, writes));
  }
  std::vector<BufferPtr> outputs;
  for (int value : plan_.outputs) outputs.push_back(values[value]);
  return outputs;
}

}  // namespace mstep::cuda
