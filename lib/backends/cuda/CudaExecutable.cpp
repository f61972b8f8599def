// CudaExecutable: see CudaExecutable.h.
#include "lib/backends/cuda/CudaExecutable.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaErrorWord.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaMemory.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

/// Prints, once per process and call shape, that a cuBLASLt call runs
/// without its epilogue (MSTEP_LOG_FALLBACK=1, as host fallbacks are).
void log_epilogue_fallback(const CudaMatmulInfo& m, bool forced, const std::string& device) {
  static std::mutex mutex;
  static auto* logged = new std::set<std::string>();
  const std::string shape = m.shape.to_string();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!logged->insert(shape).second) return;
  }
  std::fprintf(stderr,
               "mstep fallback: cuda: cublasLt matmul %s (%s): %s; the call runs without its "
               "epilogue and %zu kernel launches do its work\n",
               shape.c_str(), m.origin.c_str(),
               forced ? "epilogues are off (MSTEP_CUDA_NO_EPILOGUES=1)"
                      : absl::StrCat("cuBLASLt has no algorithm for it on ", device).c_str(),
               m.fallback.size());
}

}  // namespace

/// The error word's host side: pinned memory holding zeros (the reset's
/// source) and kSlots readback slots (runs take them in turn, so that a
/// run's check reads its own copy while later runs are queued), and the
/// kernels' names and origins for the error text.
struct CudaExecutable::ErrorWordHost {
  static constexpr size_t kSlots = 64;
  static constexpr size_t kBytes = error_word::kWords * sizeof(int64_t);
  CudaPinnedBuffer pinned;  // zeros, then kSlots readbacks
  CudaPlan names;           // kernels with name and origin only
  size_t next = 0;          // the next run's slot
  std::byte* zeros() const { return pinned.data(); }
  std::byte* slot(size_t i) const { return pinned.data() + kBytes * (1 + i); }
};

CUdeviceptr CudaExecutable::error_word_pointer() const {
  if (plan_.error_word < 0 || scratch_[plan_.error_word] == nullptr) return 0;
  return CudaBackend::device_pointer(*scratch_[plan_.error_word]);
}

absl::Status CudaExecutable::reset_error_word(const RunValues& values) {
  const Buffer* word = values.buffers[plan_.error_word].get();
  const Buffer* writes[] = {word};
  const CUdeviceptr pointer = values.pointers[plan_.error_word];
  return backend_.enqueue(
      "reset of the step's error word",
      [&] {
        return MSTEP_CUDA_CALL(backend_.context().api(), cuMemcpyHtoDAsync, pointer,
                               error_host_->zeros(), ErrorWordHost::kBytes,
                               backend_.context().stream());
      },
      {}, writes);
}

absl::Status CudaExecutable::check_error_word(const RunValues& values,
                                              const std::vector<BufferPtr>& outputs) {
  const Buffer* reads[] = {values.buffers[plan_.error_word].get()};
  // Written "by" the check as well: whoever waits for an output of the
  // step waits for the check, and gets its error.
  std::vector<const Buffer*> writes;
  for (const BufferPtr& out : outputs)
    if (out != nullptr && std::find(writes.begin(), writes.end(), out.get()) == writes.end())
      writes.push_back(out.get());
  const size_t slot = error_host_->next;
  error_host_->next = (slot + 1) % ErrorWordHost::kSlots;
  std::byte* readback = error_host_->slot(slot);
  const CUdeviceptr pointer = values.pointers[plan_.error_word];
  std::shared_ptr<const ErrorWordHost> host = error_host_;
  return backend_.enqueue(
      "check of the step's error word",
      [&] {
        return MSTEP_CUDA_CALL(backend_.context().api(), cuMemcpyDtoHAsync, readback, pointer,
                               ErrorWordHost::kBytes, backend_.context().stream());
      },
      reads, writes,
      [host, readback]() -> absl::Status {
        int64_t word[error_word::kWords];
        std::memcpy(word, readback, sizeof word);
        return error_word::decode(host->names, word);
      });
}

absl::StatusOr<std::unique_ptr<CudaExecutable>>
CudaExecutable::create(CudaBackend& backend, CudaPlan plan,
                       std::shared_ptr<const CublasLtApi> cublaslt,
                       CudaAttentionFactory attention) {
  MSTEP_RETURN_IF_ERROR(validate_cuda_plan(plan));
  std::unique_ptr<CudaExecutable> exe(new CudaExecutable(backend, std::move(plan)));
  if (!exe->plan_.matmuls.empty()) {
    if (cublaslt == nullptr) cublaslt = backend.options().cublaslt;
    if (cublaslt == nullptr) {
      MSTEP_ASSIGN_OR_RETURN(cublaslt, load_cublaslt());
    }
    MSTEP_ASSIGN_OR_RETURN(exe->matmul_,
                           CublasLtMatmul::create(backend.context(), std::move(cublaslt)));
    MSTEP_RETURN_IF_ERROR(exe->choose_epilogue_fallbacks());
  }
  MSTEP_ASSIGN_OR_RETURN(exe->collectives_, CudaCollectives::create(backend, exe->plan_));
  const std::string arch = backend.context().device().arch();
  // The kernels the launches run (an epilogue fallback not taken loads
  // nothing).
  std::vector<bool> launched(exe->plan_.kernels.size(), false);
  for (const CudaLaunchStep& launch : exe->plan_.launches)
    if (launch.matmul < 0 && launch.attention < 0 && launch.collective < 0)
      launched[launch.kernel] = true;
  exe->kernels_.assign(exe->plan_.kernels.size(), nullptr);
  for (size_t k = 0; k < exe->plan_.kernels.size(); ++k) {
    if (!launched[k]) continue;
    const CudaKernelInfo& info = exe->plan_.kernels[k];
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
    MSTEP_ASSIGN_OR_RETURN(exe->kernels_[k], (*module)->kernel(info.name));
    exe->modules_.push_back(std::move(*module));
  }
  exe->arena_allocator_ = backend.shared_allocator();
  if (!exe->plan_.attentions.empty()) {
    if (attention == nullptr) attention = backend.options().attention;
    if (attention == nullptr) {
      MSTEP_ASSIGN_OR_RETURN(attention, cudnn_attention_factory(backend));
    }
    size_t workspace = 0;
    for (const CudaAttentionInfo& info : exe->plan_.attentions) {
      absl::StatusOr<std::unique_ptr<CudaAttentionRunner>> runner = attention(info);
      if (!runner.ok())
        return absl::Status(runner.status().code(),
                            absl::StrCat("cuda: preparing the cuDNN SDPA ",
                                         info.backward ? "backward" : "forward", " of ",
                                         info.origin, ": ", runner.status().message()));
      workspace = std::max(workspace, (*runner)->workspace_size());
      exe->attention_.push_back(std::move(*runner));
    }
    // One workspace for every step: they run one after another on the stream.
    if (workspace > 0) {
      absl::StatusOr<CudaAllocator::Block> block = exe->arena_allocator_->allocate(workspace);
      if (!block.ok())
        return absl::Status(block.status().code(),
                            absl::StrCat("cuda executable: its ", workspace,
                                         "-byte attention workspace: ", block.status().message()));
      exe->workspace_ = *block;
    }
  }
  if (!exe->plan_.arena_offsets.empty()) {
    absl::StatusOr<CudaAllocator::Block> arena =
        exe->arena_allocator_->allocate(static_cast<size_t>(exe->plan_.arena_bytes));
    if (!arena.ok())
      return absl::Status(arena.status().code(),
                          absl::StrCat("cuda executable: its ", exe->plan_.arena_bytes,
                                       "-byte arena: ", arena.status().message()));
    exe->arena_ = *arena;
  }
  // Intermediates the memory plan leaves outside the arena (an op's
  // scratch between its launches): buffers of their own, allocated once
  // like the arena, so that a run allocates only its outputs, and a run
  // recorded into a CUDA graph none.
  std::vector<bool> output(exe->plan_.values.size(), false);
  for (int v : exe->plan_.outputs) output[v] = true;
  exe->scratch_.resize(exe->plan_.values.size());
  for (const CudaAlias& alias : exe->plan_.aliases) output[alias.value] = true;  // no buffer
  for (size_t v = exe->plan_.num_inputs; v < exe->plan_.values.size(); ++v) {
    if (output[v] || (!exe->plan_.arena_offsets.empty() && exe->plan_.arena_offsets[v] >= 0))
      continue;
    absl::StatusOr<BufferPtr> buffer = backend.allocate(exe->plan_.values[v]);
    if (!buffer.ok())
      return absl::Status(buffer.status().code(),
                          absl::StrCat("cuda executable: value %", v, " (",
                                       exe->plan_.values[v].to_string(), ", written by ",
                                       exe->writer_of(static_cast<int>(v)),
                                       "): ", buffer.status().message()));
    exe->scratch_[v] = *std::move(buffer);
  }
  if (exe->plan_.error_word >= 0) {
    auto host = std::make_shared<ErrorWordHost>();
    absl::StatusOr<CudaPinnedBuffer> pinned = CudaPinnedBuffer::allocate(
        backend.context(), ErrorWordHost::kBytes * (1 + ErrorWordHost::kSlots));
    if (!pinned.ok())
      return absl::Status(pinned.status().code(),
                          absl::StrCat("cuda executable: the host side of its error word: ",
                                       pinned.status().message()));
    host->pinned = *std::move(pinned);
    std::memset(host->pinned.data(), 0, host->pinned.size());
    for (const CudaKernelInfo& k : exe->plan_.kernels)
      host->names.kernels.push_back({.name = k.name, .origin = k.origin});
    exe->error_host_ = std::move(host);
  }
  if (backend.options().profile) {
    MSTEP_ASSIGN_OR_RETURN(exe->profile_,
                           CudaStepProfile::create(backend, exe->plan_.launches.size()));
  }
  return exe;
}

absl::Status CudaExecutable::choose_epilogue_fallbacks() {
  const CudaBackendOptions& options = backend_.options();
  const std::string& device = backend_.context().device().name;
  std::vector<int> fallen;
  for (size_t i = 0; i < plan_.matmuls.size(); ++i) {
    const CudaMatmulInfo& m = plan_.matmuls[i];
    auto failed = [&](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat("cuda: loading the cublasLt step (",
                                                      m.origin, "): ", status.message()));
    };
    // The heuristic now, at load, not at the first run.
    bool available = false;
    if (!m.has_epilogue() || !options.no_epilogues) {
      absl::StatusOr<bool> found = matmul_->has_algorithm(m.shape, m.batch_info());
      if (!found.ok()) return failed(found.status());
      available = *found;
    }
    if (available) continue;
    if (!m.has_epilogue())
      return failed(absl::UnimplementedError(absl::StrCat(
          "cublasLt matmul ", m.shape.to_string(), ": the heuristic found no algorithm on ",
          device)));
    if (m.fallback.empty())
      return failed(absl::UnimplementedError(absl::StrCat(
          "cublasLt matmul ", m.shape.to_string(), ": ",
          options.no_epilogues ? "epilogues are off (MSTEP_CUDA_NO_EPILOGUES)"
                               : absl::StrCat("the heuristic found no algorithm on ", device),
          ", and the plan has no fallback for its epilogue (a plan of format 7 or older: "
          "compile the step again)")));
    absl::StatusOr<bool> plain = matmul_->has_algorithm(m.without_epilogue(), m.batch_info());
    if (!plain.ok()) return failed(plain.status());
    if (!*plain)
      return failed(absl::UnimplementedError(absl::StrCat(
          "cublasLt matmul ", m.shape.to_string(),
          ": the heuristic found no algorithm on ", device, ", with or without its epilogue")));
    fallen.push_back(static_cast<int>(i));
    if (options.log_fallback) log_epilogue_fallback(m, options.no_epilogues, device);
  }
  if (fallen.empty()) return absl::OkStatus();
  internal::record_epilogue_fallbacks(static_cast<int64_t>(fallen.size()));
  // serialize() keeps the plan as compiled (another device may have the
  // algorithms); runs use it as this device takes it.
  compiled_plan_ = std::make_unique<CudaPlan>(plan_);
  apply_epilogue_fallbacks(plan_, fallen);
  epilogue_fallbacks_ = std::move(fallen);
  return validate_cuda_plan(plan_);
}

absl::StatusOr<std::string> CudaExecutable::serialize(absl::string_view module_text) const {
  (void)module_text;  // the plan is all a load needs
  return serialize_cuda_plan(compiled_plan_ ? *compiled_plan_ : plan_);
}

absl::StatusOr<std::unique_ptr<Executable>> load_cuda_executable(
    CudaBackend& backend, absl::string_view blob, std::shared_ptr<const CublasLtApi> cublaslt,
    CudaAttentionFactory attention) {
  MSTEP_ASSIGN_OR_RETURN(CudaPlan plan, deserialize_cuda_plan(blob));
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> exe,
                         CudaExecutable::create(backend, std::move(plan), std::move(cublaslt),
                                                std::move(attention)));
  return std::unique_ptr<Executable>(std::move(exe));
}

CudaExecutable::~CudaExecutable() {
  if (profile_ && profile_->runs() > 0)
    std::fprintf(stderr, "%s", profile_->report(plan_, /*top=*/40).c_str());
  // Stream-ordered (CudaAllocator.h): work still queued on the arena runs
  // before whatever gets the block next.
  if (arena_.pointer != 0) arena_allocator_->release(arena_);
  if (workspace_.pointer != 0) arena_allocator_->release(workspace_);
}

absl::Status CudaExecutable::run_attention(const CudaLaunchStep& launch, const RunValues& values) {
  const CudaAttentionInfo& info = plan_.attentions[launch.attention];
  CudaAttentionRunner& runner = *attention_[launch.attention];
  std::vector<const Buffer*> reads, writes;
  values.add_buffers(launch.args, reads);
  values.add_buffers(launch.writes, writes);
  // Each role's device pointer (base + offset for arena values).
  auto pointer = [&](const std::vector<std::string>& roles, const std::vector<int>& ids,
                     absl::string_view role) -> CUdeviceptr {
    for (size_t i = 0; i < roles.size(); ++i)
      if (roles[i] == role) return values.pointers[ids[i]];
    return 0;
  };
  const std::vector<std::string> in = attention_arg_roles(info), out = attention_write_roles(info);
  auto queue = [&]() -> absl::Status {
    if (!info.backward) {
      CudnnSdpaForwardArgs a;
      a.q = pointer(in, launch.args, "q");
      a.k = pointer(in, launch.args, "k");
      a.v = pointer(in, launch.args, "v");
      a.mask = pointer(in, launch.args, "mask");
      a.valid_seq_len = pointer(in, launch.args, "valid_seq_len");
      a.out = pointer(out, launch.writes, "out");
      a.stats = pointer(out, launch.writes, "stats");
      return runner.forward(a, workspace_.pointer);
    }
    CudnnSdpaBackwardArgs a;
    a.q = pointer(in, launch.args, "q");
    a.k = pointer(in, launch.args, "k");
    a.v = pointer(in, launch.args, "v");
    a.out = pointer(in, launch.args, "out");
    a.stats = pointer(in, launch.args, "stats");
    a.grad_out = pointer(in, launch.args, "grad_out");
    a.mask = pointer(in, launch.args, "mask");
    a.valid_seq_len = pointer(in, launch.args, "valid_seq_len");
    a.grad_q = pointer(out, launch.writes, "grad_q");
    a.grad_k = pointer(out, launch.writes, "grad_k");
    a.grad_v = pointer(out, launch.writes, "grad_v");
    return runner.backward(a, workspace_.pointer);
  };
  return backend_.enqueue(absl::StrCat("cudnn sdpa step (", info.origin, ")"), queue, reads,
                          writes);
}

absl::Status CudaExecutable::run_matmul(const CudaLaunchStep& launch, const RunValues& values) {
  const CudaMatmulInfo& m = plan_.matmuls[launch.matmul];
  std::vector<const Buffer*> reads, writes;
  values.add_buffers(launch.args, reads);
  values.add_buffers(launch.writes, writes);
  auto queue = [&]() -> absl::Status {
    const CUdeviceptr a = values.pointers[launch.args[0]];
    const CUdeviceptr b = values.pointers[launch.args[1]];
    // The bias, or where the bias gradient goes.
    const CUdeviceptr bias = m.shape.bias               ? values.pointers[launch.args[2]]
                             : launch.writes.size() > 1 ? values.pointers[launch.writes[1]]
                                                        : 0;
    const CUdeviceptr out = values.pointers[launch.writes[0]];
    return matmul_->run(m.shape, a, b, bias, out, m.batch_info());
  };
  return backend_.enqueue(absl::StrCat("cublasLt step (", m.origin, ")"), queue, reads, writes);
}

absl::Status CudaExecutable::run_collective(const CudaLaunchStep& launch, const RunValues& values) {
  const CudaCollectiveInfo& c = plan_.collectives[launch.collective];
  std::vector<const Buffer*> reads, writes;
  values.add_buffers(launch.args, reads);
  values.add_buffers(launch.writes, writes);
  const TensorType& input = plan_.values[launch.args[0]];
  const TensorType& result = plan_.values[launch.writes[0]];
  return backend_.enqueue(
      absl::StrCat("nccl step (", c.origin, ")"),
      [&] {
        return collectives_->issue(c, input, result, values.pointers[launch.args[0]],
                                   values.pointers[launch.writes[0]]);
      },
      reads, writes);
}

void CudaExecutable::RunValues::add_buffers(const std::vector<int>& ids,
                                            std::vector<const Buffer*>& out) const {
  for (int value : ids)
    if (buffers[value] != nullptr) out.push_back(buffers[value].get());
}

std::string CudaExecutable::writer_of(int value) const {
  for (const CudaLaunchStep& launch : plan_.launches) {
    if (std::find(launch.writes.begin(), launch.writes.end(), value) == launch.writes.end())
      continue;
    if (launch.matmul >= 0) return absl::StrCat("cublasLt step (", plan_.matmuls[launch.matmul].origin, ")");
    if (launch.attention >= 0)
      return absl::StrCat("cudnn sdpa step (", plan_.attentions[launch.attention].origin, ")");
    if (launch.collective >= 0)
      return absl::StrCat("nccl step (", plan_.collectives[launch.collective].origin, ")");
    const CudaKernelInfo& info = plan_.kernels[launch.kernel];
    return absl::StrCat("kernel ", info.name, " (", info.origin, ")");
  }
  return "no launch";
}

absl::Status CudaExecutable::run_kernel(const CudaLaunchStep& launch, const RunValues& values) {
  const CudaKernelInfo& info = plan_.kernels[launch.kernel];
  CudaKernelArgs args;
  if (info.slots.empty()) {
    for (int value : launch.args) args.add(values.pointers[value]);
  } else {
    for (const CudaKernelSlot& slot : info.slots) {
      if (slot.arg >= 0)
        args.add(values.pointers[launch.args[slot.arg]]);
      else if (slot.bytes == 4)
        args.add(static_cast<uint32_t>(slot.bits));
      else
        args.add(slot.bits);
    }
  }
  std::vector<const Buffer*> reads, writes;
  values.add_buffers(launch.args, reads);
  values.add_buffers(launch.writes, writes);
  CudaLaunchConfig config;
  config.grid = info.grid;
  config.block = info.block;
  config.shared_bytes = info.shared_bytes;
  const CudaKernel& kernel = *kernels_[launch.kernel];
  return backend_.enqueue(
      absl::StrCat("kernel ", info.name, " (", info.origin, ")"),
      [&] { return launch_kernel(backend_.context(), kernel, config, args); }, reads, writes);
}

absl::Status CudaExecutable::run_step(const CudaLaunchStep& launch, const RunValues& values) {
  if (launch.matmul >= 0) return run_matmul(launch, values);
  if (launch.attention >= 0) return run_attention(launch, values);
  if (launch.collective >= 0) return run_collective(launch, values);
  return run_kernel(launch, values);
}

absl::StatusOr<std::vector<BufferPtr>> CudaExecutable::run(absl::Span<const BufferPtr> inputs,
                                                           const Donation& donation) {
  if (inputs.size() != plan_.num_inputs)
    return absl::InvalidArgumentError(absl::StrCat("cuda executable: expected ", plan_.num_inputs,
                                                   " inputs, got ", inputs.size()));
  RunValues values;
  values.buffers.resize(plan_.values.size());
  values.pointers.resize(plan_.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr || inputs[i]->type() != plan_.values[i])
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda executable: input ", i, " must be ", plan_.values[i].to_string(), ", got ",
          inputs[i] == nullptr ? std::string("no buffer") : inputs[i]->type().to_string()));
    values.buffers[i] = inputs[i];
  }
  // Intermediates: base + offset in the arena (stream order makes reusing
  // it in the next run safe); outputs go to the buffer offered for them,
  // the rest get buffers of their own.
  for (size_t k = 0; k < donation.outputs.size() && k < plan_.outputs.size(); ++k) {
    const BufferPtr& offered = donation.outputs[k];
    const int v = plan_.outputs[k];
    if (offered == nullptr || v < static_cast<int>(plan_.num_inputs) || values.buffers[v] != nullptr)
      continue;
    if (offered->type() != plan_.values[v] || offered->device().type != DeviceType::cuda)
      return absl::InvalidArgumentError(
          absl::StrCat("cuda executable: the buffer offered for output ", k, " is ",
                       offered->type().to_string(), " on ", offered->device().to_string(),
                       "; the output is ", plan_.values[v].to_string(), " on cuda"));
    values.buffers[v] = offered;
  }
  std::vector<bool> aliased(plan_.values.size(), false);
  for (const CudaAlias& alias : plan_.aliases) aliased[alias.value] = true;
  for (size_t v = plan_.num_inputs; v < plan_.values.size(); ++v) {
    if (aliased[v]) continue;  // below, from its root
    if (!plan_.arena_offsets.empty() && plan_.arena_offsets[v] >= 0) {
      values.pointers[v] = arena_.pointer + static_cast<CUdeviceptr>(plan_.arena_offsets[v]);
      continue;
    }
    if (values.buffers[v] != nullptr) continue;  // offered
    if (scratch_[v] != nullptr) {
      values.buffers[v] = scratch_[v];
      continue;
    }
    absl::StatusOr<BufferPtr> buffer = backend_.allocate(plan_.values[v]);
    if (!buffer.ok())
      return absl::Status(buffer.status().code(),
                          absl::StrCat("cuda executable: value %", v, " (",
                                       plan_.values[v].to_string(), ", written by ",
                                       writer_of(static_cast<int>(v)),
                                       "): ", buffer.status().message()));
    values.buffers[v] = *std::move(buffer);
  }
  for (size_t v = 0; v < plan_.values.size(); ++v)
    if (values.buffers[v] != nullptr)
      values.pointers[v] = CudaBackend::device_pointer(*values.buffers[v]);
  // An alias is its root's bytes: its address, and its buffer (so that a
  // step using it is ordered after the root's writers and before its
  // readers).
  for (const CudaAlias& alias : plan_.aliases) {
    values.pointers[alias.value] =
        values.pointers[alias.root] + static_cast<CUdeviceptr>(alias.byte_offset);
    values.buffers[alias.value] = values.buffers[alias.root];
  }
  if (error_host_) MSTEP_RETURN_IF_ERROR(reset_error_word(values));
  // Not inside a CUDA graph capture: its timing events would be nodes.
  CudaStepProfile* profile = profile_ && !backend_.capturing() ? profile_.get() : nullptr;
  if (profile) MSTEP_RETURN_IF_ERROR(profile->mark(0));
  for (size_t i = 0; i < plan_.launches.size(); ++i) {
    MSTEP_RETURN_IF_ERROR(run_step(plan_.launches[i], values));
    if (profile) MSTEP_RETURN_IF_ERROR(profile->mark(i + 1));
  }
  if (profile) MSTEP_RETURN_IF_ERROR(profile->collect());
  std::vector<BufferPtr> outputs;
  for (int value : plan_.outputs) outputs.push_back(values.buffers[value]);
  if (error_host_) MSTEP_RETURN_IF_ERROR(check_error_word(values, outputs));
  return outputs;
}

}  // namespace mstep::cuda
