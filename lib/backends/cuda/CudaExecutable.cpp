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

/// An attention step's values against its config: the count of each role,
/// and each value's dtype and element count (packed [B, H, rows, cols]).
absl::Status validate_attention_step(const CudaPlan& plan, size_t l) {
  const CudaLaunchStep& launch = plan.launches[l];
  const CudaAttentionInfo& a = plan.attentions[launch.attention];
  const CudnnSdpaConfig& c = a.config;
  const std::string what = absl::StrCat("cuda plan: launch ", l, " (cudnn sdpa ",
                                        a.backward ? "backward" : "forward", " ", a.origin, ")");
  if (launch.args.size() != a.num_args() || launch.writes.size() != a.num_writes())
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", launch.args.size(), " operands and ", launch.writes.size(),
                     " results; it needs ", a.num_args(), " and ", a.num_writes()));
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, E = c.head_dim, Ev = c.dv();
  auto expected = [&](const std::string& role) -> std::pair<DType, int64_t> {
    if (role == "q" || role == "grad_q") return {c.dtype, B * H * L * E};
    if (role == "k" || role == "grad_k") return {c.dtype, B * H * S * E};
    if (role == "v" || role == "grad_v") return {c.dtype, B * H * S * Ev};
    if (role == "out" || role == "grad_out") return {c.dtype, B * H * L * Ev};
    if (role == "stats") return {DType::f32, B * H * L};
    if (role == "mask")
      return {c.dtype, (c.mask_per_batch ? B : 1) * (c.mask_per_head ? H : 1) * L * S};
    return {DType::i32, B};  // valid_seq_len
  };
  auto check = [&](const std::vector<std::string>& roles,
                   const std::vector<int>& values) -> absl::Status {
    for (size_t i = 0; i < roles.size(); ++i) {
      if (values[i] < 0 || values[i] >= static_cast<int>(plan.values.size())) continue;
      const TensorType& type = plan.values[values[i]];
      const auto [dtype, count] = expected(roles[i]);
      if (type.dtype != dtype || type.shape.numel() != count)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": its ", roles[i], " %", values[i], " is ", type.to_string(), "; ",
            c.to_string(), " needs ", count, " elements of ", dtype_name(dtype)));
    }
    return absl::OkStatus();
  };
  MSTEP_RETURN_IF_ERROR(check(attention_arg_roles(a), launch.args));
  return check(attention_write_roles(a), launch.writes);
}

/// A launch's values (in range, no step input written) and, for a kernel
/// launch, its kernel and parameter slots; `what` names it ("launch 3").
absl::Status validate_kernel_launch(const CudaPlan& plan, const CudaLaunchStep& launch,
                                    const std::string& what) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", what, parts...));
  };
  const int num_values = static_cast<int>(plan.values.size());
  if (launch.matmul < 0 && launch.attention < 0 && launch.collective < 0) {
    if (launch.kernel < 0 || launch.kernel >= static_cast<int>(plan.kernels.size()))
      return bad(" names kernel ", launch.kernel, " of ", plan.kernels.size());
    for (const CudaKernelSlot& slot : plan.kernels[launch.kernel].slots)
      if (slot.arg >= static_cast<int>(launch.args.size()) ||
          (slot.arg < 0 && slot.bytes != 4 && slot.bytes != 8))
        return bad(" of kernel ", plan.kernels[launch.kernel].name,
                   " has a parameter that is argument ", slot.arg, " of ", launch.args.size(),
                   " or a ", int{slot.bytes}, "-byte scalar");
  }
  for (const std::vector<int>* values : {&launch.args, &launch.writes})
    for (int value : *values)
      if (value < 0 || value >= num_values)
        return bad(" uses value ", value, " of ", num_values);
  for (int value : launch.writes)
    if (value < static_cast<int>(plan.num_inputs)) return bad(" writes step input ", value);
  return absl::OkStatus();
}

}  // namespace

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
      if (launch.args.size() != m.num_args() || launch.writes.size() != m.num_writes())
        return bad("launch ", l, " (cublasLt matmul ", m.shape.to_string(), ") has ",
                   launch.args.size(), " operands and ", launch.writes.size(),
                   " results; it needs ", m.num_args(), " and ", m.num_writes());
      if (m.batch < 1) return bad("launch ", l, " has a batch of ", m.batch);
      if (absl::Status call = plan_cublaslt_gemm(m.shape, m.batch_info()).status(); !call.ok())
        return bad("launch ", l, ": ", call.message());
      if (!m.fallback.empty() && !m.has_epilogue())
        return bad("launch ", l, " (cublasLt matmul ", m.shape.to_string(),
                   ") has an epilogue fallback but no epilogue");
      for (const CudaLaunchStep& fallback : m.fallback) {
        if (fallback.matmul >= 0 || fallback.attention >= 0 || fallback.collective >= 0)
          return bad("launch ", l, " (cublasLt matmul ", m.shape.to_string(),
                     ") has a fallback step that is no kernel launch");
        MSTEP_RETURN_IF_ERROR(
            validate_kernel_launch(plan, fallback, absl::StrCat("launch ", l, "'s fallback")));
      }
    } else if (launch.attention >= 0) {
      if (launch.attention >= static_cast<int>(plan.attentions.size()))
        return bad("launch ", l, " names attention step ", launch.attention, " of ",
                   plan.attentions.size());
      MSTEP_RETURN_IF_ERROR(validate_attention_step(plan, l));
    } else if (launch.collective >= 0) {
      if (launch.collective >= static_cast<int>(plan.collectives.size()))
        return bad("launch ", l, " names collective ", launch.collective, " of ",
                   plan.collectives.size());
      if (launch.args.size() != 1 || launch.writes.size() != 1)
        return bad("launch ", l, " (nccl ", plan.collectives[launch.collective].origin, ") has ",
                   launch.args.size(), " operands and ", launch.writes.size(),
                   " results; it needs 1 and 1");
      for (int value : {launch.args[0], launch.writes[0]})
        if (value < 0 || value >= num_values)
          return bad("launch ", l, " uses value ", value, " of ", num_values);
      MSTEP_RETURN_IF_ERROR(check_cuda_collective(plan.collectives[launch.collective],
                                                  plan.values[launch.args[0]],
                                                  plan.values[launch.writes[0]]));
    }
    MSTEP_RETURN_IF_ERROR(validate_kernel_launch(plan, launch, absl::StrCat("launch ", l)));
  }
  for (int value : plan.outputs)
    if (value < 0 || value >= num_values) return bad("an output is value ", value, " of ", num_values);
  if (plan.error_word != -1) {
    const int w = plan.error_word;
    const bool output = std::find(plan.outputs.begin(), plan.outputs.end(), w) != plan.outputs.end();
    if (w < static_cast<int>(plan.num_inputs) || w >= num_values ||
        plan.values[w] != error_word::type() || output ||
        (!plan.arena_offsets.empty() && plan.arena_offsets[w] >= 0))
      return bad("the error word is value ", w, ", which must be a computed value of type ",
                 error_word::type().to_string(), " outside the arena and not an output");
  }
  MSTEP_RETURN_IF_ERROR(validate_cuda_aliases(plan));
  return validate_cuda_arena(plan);
}

absl::Status validate_cuda_aliases(const CudaPlan& plan) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", parts...));
  };
  const int num_values = static_cast<int>(plan.values.size());
  std::vector<bool> aliased(plan.values.size(), false);
  for (const CudaAlias& alias : plan.aliases) {
    if (alias.value < static_cast<int>(plan.num_inputs) || alias.value >= num_values ||
        alias.root < 0 || alias.root >= num_values || alias.root == alias.value)
      return bad("alias %", alias.value, " of %", alias.root, " names a value it cannot (",
                 num_values, " values, ", plan.num_inputs, " inputs)");
    if (aliased[alias.value]) return bad("value %", alias.value, " is aliased twice");
    aliased[alias.value] = true;
  }
  for (const CudaAlias& alias : plan.aliases) {
    const int64_t bytes = static_cast<int64_t>(plan.values[alias.value].bytes());
    const int64_t root_bytes = static_cast<int64_t>(plan.values[alias.root].bytes());
    if (aliased[alias.root])
      return bad("alias %", alias.value, "'s root %", alias.root, " is an alias itself");
    if (alias.byte_offset < 0 || alias.byte_offset > root_bytes - bytes)
      return bad("alias %", alias.value, " (", bytes, " bytes at + ", alias.byte_offset,
                 ") does not fit in its root %", alias.root, " (", root_bytes, " bytes)");
    if (!plan.arena_offsets.empty() && plan.arena_offsets[alias.value] != -1)
      return bad("alias %", alias.value, " has an arena offset of its own");
    for (int output : plan.outputs)
      if (output == alias.value)
        return bad("output %", output, " is an alias (an output needs a buffer of its own)");
    for (size_t l = 0; l < plan.launches.size(); ++l)
      for (int value : plan.launches[l].writes)
        if (value == alias.value && alias.root < static_cast<int>(plan.num_inputs))
          return bad("launch ", l, " writes alias %", value, " of step input %", alias.root);
  }
  return absl::OkStatus();
}

absl::Status validate_cuda_arena(const CudaPlan& plan) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", parts...));
  };
  if (plan.arena_offsets.empty()) return absl::OkStatus();
  const size_t num_values = plan.values.size();
  if (plan.arena_offsets.size() != num_values)
    return bad(plan.arena_offsets.size(), " arena offsets for ", num_values, " values");
  if (plan.arena_bytes < 0) return bad("an arena of ", plan.arena_bytes, " bytes");
  const auto in_arena = [&](size_t v) { return plan.arena_offsets[v] >= 0; };
  for (size_t v = 0; v < num_values; ++v) {
    const int64_t offset = plan.arena_offsets[v];
    if (offset < -1) return bad("value %", v, " has arena offset ", offset);
    if (!in_arena(v)) continue;
    const int64_t bytes = static_cast<int64_t>(plan.values[v].bytes());
    if (v < plan.num_inputs) return bad("step input %", v, " is placed in the arena");
    if (offset % kCudaArenaAlignment != 0 || bytes > plan.arena_bytes ||
        offset > plan.arena_bytes - bytes)
      return bad("value %", v, " (", bytes, " bytes at arena + ", offset,
                 ") is not at an offset aligned to ", kCudaArenaAlignment, " inside the ",
                 plan.arena_bytes, "-byte arena");
  }
  // An output in the arena would be overwritten by the next run.
  for (int value : plan.outputs)
    if (in_arena(value)) return bad("output %", value, " is placed in the arena");
  // Lifetimes in launches: from the first launch that uses a value to the
  // last. Two arena values whose lifetimes meet must not share a byte (no
  // launch writes over what it reads: the kernels' buffers are restrict).
  // A use of an alias is a use of its root's bytes.
  std::vector<int> owner(num_values);
  for (size_t v = 0; v < num_values; ++v) owner[v] = static_cast<int>(v);
  for (const CudaAlias& alias : plan.aliases)
    if (alias.value >= 0 && static_cast<size_t>(alias.value) < num_values && alias.root >= 0 &&
        static_cast<size_t>(alias.root) < num_values)
      owner[alias.value] = alias.root;
  // A matmul's epilogue fallback launches run in its place.
  std::vector<int64_t> first(num_values, -1), last(num_values, -1);
  auto use = [&](const CudaLaunchStep& launch, size_t l) {
    for (const std::vector<int>* values : {&launch.args, &launch.writes})
      for (int used : *values) {
        const int value = owner[used];
        if (first[value] < 0) first[value] = static_cast<int64_t>(l);
        last[value] = static_cast<int64_t>(l);
      }
  };
  for (size_t l = 0; l < plan.launches.size(); ++l) {
    use(plan.launches[l], l);
    if (plan.launches[l].matmul >= 0)
      for (const CudaLaunchStep& fallback : plan.matmuls[plan.launches[l].matmul].fallback)
        use(fallback, l);
  }
  std::vector<size_t> placed;
  for (size_t v = 0; v < num_values; ++v)
    if (in_arena(v) && first[v] >= 0 && plan.values[v].bytes() > 0) placed.push_back(v);
  std::sort(placed.begin(), placed.end(),
            [&](size_t a, size_t b) { return plan.arena_offsets[a] < plan.arena_offsets[b]; });
  // By offset: each value against the following ones that start before it ends.
  for (size_t i = 0; i < placed.size(); ++i) {
    const size_t a = placed[i];
    const int64_t end = plan.arena_offsets[a] + static_cast<int64_t>(plan.values[a].bytes());
    for (size_t j = i + 1; j < placed.size() && plan.arena_offsets[placed[j]] < end; ++j) {
      const size_t b = placed[j];
      if (first[a] <= last[b] && first[b] <= last[a])
        return bad("values %", a, " and %", b, " overlap in the arena (at ", plan.arena_offsets[a],
                   " and ", plan.arena_offsets[b], ") while both are live (launches ", first[a],
                   "..", last[a], " and ", first[b], "..", last[b], ")");
    }
  }
  return absl::OkStatus();
}

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
  for (const CudaLaunchStep& launch : plan_.launches) {
    if (launch.matmul >= 0) {
      MSTEP_RETURN_IF_ERROR(run_matmul(launch, values));
      continue;
    }
    if (launch.attention >= 0) {
      MSTEP_RETURN_IF_ERROR(run_attention(launch, values));
      continue;
    }
    if (launch.collective >= 0) {
      MSTEP_RETURN_IF_ERROR(run_collective(launch, values));
      continue;
    }
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
    MSTEP_RETURN_IF_ERROR(backend_.enqueue(
        absl::StrCat("kernel ", info.name, " (", info.origin, ")"),
        [&] { return launch_kernel(backend_.context(), kernel, config, args); }, reads, writes));
  }
  std::vector<BufferPtr> outputs;
  for (int value : plan_.outputs) outputs.push_back(values.buffers[value]);
  if (error_host_) MSTEP_RETURN_IF_ERROR(check_error_word(values, outputs));
  return outputs;
}

}  // namespace mstep::cuda
