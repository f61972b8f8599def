// Validation of a CudaPlan read from disk or built by the compile half:
// see CudaPlanValidation.h.
#include "lib/backends/cuda/CudaPlanValidation.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaAttention.h"
#include "lib/backends/cuda/CudaCollective.h"
#include "lib/backends/cuda/CudaErrorWord.h"
#include "lib/backends/cuda/CublasLt.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

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
  MSTEP_RETURN_IF_ERROR(validate_cuda_definitions(plan));
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

absl::Status validate_cuda_definitions(const CudaPlan& plan) {
  const size_t num_values = plan.values.size();
  // Per root, the byte ranges written so far.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> written(num_values);
  auto range_of = [&](int value) {
    const int64_t bytes = static_cast<int64_t>(plan.values[value].bytes());
    const CudaAlias* alias = plan.alias_of(value);
    const int root = alias ? alias->root : value;
    const int64_t offset = alias ? alias->byte_offset : 0;
    return std::make_tuple(root, offset, offset + bytes);
  };
  auto write = [&](int value) {
    auto [root, lo, hi] = range_of(value);
    if (lo < hi) written[root].emplace_back(lo, hi);
  };
  // The first byte of [lo, hi) no write covers, or hi.
  auto first_unwritten = [&](int root, int64_t lo, int64_t hi) {
    std::vector<std::pair<int64_t, int64_t>>& ranges = written[root];
    std::sort(ranges.begin(), ranges.end());
    for (const auto& [begin, end] : ranges) {
      if (begin > lo) break;
      lo = std::max(lo, end);
      if (lo >= hi) return hi;
    }
    return lo;
  };
  for (size_t v = 0; v < plan.num_inputs && v < num_values; ++v) write(static_cast<int>(v));
  if (plan.error_word >= 0) write(plan.error_word);
  auto check_reads = [&](const CudaLaunchStep& step, const std::string& where) -> absl::Status {
    const bool kernel = step.matmul < 0 && step.attention < 0 && step.collective < 0;
    for (int value : step.args) {
      // A kernel's written arguments are its results; whether it also
      // reads them the plan does not say.
      if (kernel && std::find(step.writes.begin(), step.writes.end(), value) != step.writes.end())
        continue;
      auto [root, lo, hi] = range_of(value);
      const int64_t gap = first_unwritten(root, lo, hi);
      if (gap < hi)
        return absl::InvalidArgumentError(absl::StrCat(
            "cuda plan: ", where, " (", describe_cuda_step(plan, step), ") reads %", value, " (",
            plan.values[value].to_string(), ") before any step writes it: byte ", gap,
            root != value ? absl::StrCat(" of its root %", root) : std::string(),
            " is never written earlier (a read of uninitialized device memory)"));
    }
    for (int value : step.writes) write(value);
    return absl::OkStatus();
  };
  for (size_t l = 0; l < plan.launches.size(); ++l) {
    const CudaLaunchStep& step = plan.launches[l];
    MSTEP_RETURN_IF_ERROR(check_reads(step, absl::StrCat("launch ", l)));
    if (step.matmul >= 0)
      for (const CudaLaunchStep& fallback : plan.matmuls[step.matmul].fallback)
        MSTEP_RETURN_IF_ERROR(check_reads(fallback, absl::StrCat("launch ", l, "'s fallback")));
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

}  // namespace mstep::cuda
