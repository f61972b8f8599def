// describe_cuda_plan: the plan as text for dumps.
#include "lib/backends/cuda/CudaPlan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mstep::cuda {

std::vector<std::string> attention_arg_roles(const CudaAttentionInfo& info) {
  std::vector<std::string> roles = {"q", "k", "v"};
  if (info.backward) roles.insert(roles.end(), {"out", "stats", "grad_out"});
  if (info.config.mask != SdpaMaskKind::none) roles.push_back("mask");
  if (info.config.padding != SdpaPadding::none) roles.push_back("valid_seq_len");
  return roles;
}

std::vector<std::string> attention_write_roles(const CudaAttentionInfo& info) {
  if (info.backward) return {"grad_q", "grad_k", "grad_v"};
  return {"out", "stats"};
}

namespace {

/// "q %0, k %1" for `values` by `roles`.
std::string by_role(const std::vector<std::string>& roles, const std::vector<int>& values) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size(); ++i)
    parts.push_back(absl::StrCat(i < roles.size() ? roles[i] : "?", " %", values[i]));
  return absl::StrJoin(parts, ", ");
}

/// A scalar kernel parameter's value: "7", "1.5".
std::string describe_scalar(const CudaKernelSlot& slot) {
  if (!slot.floating)
    return slot.bytes == 4 ? absl::StrCat(static_cast<int32_t>(slot.bits))
                           : absl::StrCat(static_cast<int64_t>(slot.bits));
  if (slot.bytes == 4) {
    const auto bits = static_cast<uint32_t>(slot.bits);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return absl::StrCat(f);
  }
  double d;
  std::memcpy(&d, &slot.bits, sizeof d);
  return absl::StrCat(d);
}

}  // namespace

void place_in_own_arena_slots(CudaPlan& plan, std::vector<int> values) {
  if (plan.arena_offsets.empty() || values.empty()) return;
  plan.arena_offsets.resize(plan.values.size(), -1);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (int v : values) {
    // Step outputs keep their own buffers (each run returns fresh ones);
    // an alias is its root's bytes.
    if (std::find(plan.outputs.begin(), plan.outputs.end(), v) != plan.outputs.end() ||
        plan.alias_of(v) != nullptr)
      continue;
    const int64_t offset =
        (plan.arena_bytes + kCudaArenaAlignment - 1) / kCudaArenaAlignment * kCudaArenaAlignment;
    plan.arena_offsets[v] = offset;
    plan.arena_bytes = offset + static_cast<int64_t>(plan.values[v].bytes());
  }
}

void place_scratch_at_arena_end(CudaPlan& plan, const std::vector<std::vector<int>>& scratch) {
  if (scratch.empty()) return;
  plan.arena_offsets.resize(plan.values.size(), -1);
  auto align = [](int64_t offset) {
    return (offset + kCudaArenaAlignment - 1) / kCudaArenaAlignment * kCudaArenaAlignment;
  };
  const int64_t region = align(plan.arena_bytes);
  int64_t end = region;
  for (const std::vector<int>& values : scratch) {
    int64_t offset = region;
    for (int v : values) {
      offset = align(offset);
      plan.arena_offsets[v] = offset;
      offset += static_cast<int64_t>(plan.values[v].bytes());
    }
    end = std::max(end, offset);
  }
  plan.arena_bytes = end;
}

void apply_epilogue_fallbacks(CudaPlan& plan, const std::vector<int>& matmuls) {
  std::vector<bool> falls(plan.matmuls.size(), false);
  for (int m : matmuls) falls.at(m) = true;
  std::vector<CudaLaunchStep> launches;
  for (CudaLaunchStep& launch : plan.launches) {
    if (launch.matmul < 0 || !falls[launch.matmul]) {
      launches.push_back(std::move(launch));
      continue;
    }
    CudaMatmulInfo& m = plan.matmuls[launch.matmul];
    launch.args.resize(2);  // A, B: no bias
    launch.writes.resize(1);  // C: no bias gradient
    m.shape = m.without_epilogue();
    launches.push_back(std::move(launch));
    for (CudaLaunchStep& kernel : m.fallback) launches.push_back(std::move(kernel));
    m.fallback.clear();
  }
  plan.launches = std::move(launches);
}

namespace {

/// One kernel launch as describe_cuda_plan writes it, `indent` before it.
void describe_kernel_launch(const CudaPlan& plan, const CudaLaunchStep& launch,
                            absl::string_view indent, std::string& text) {
  const CudaKernelInfo& k = plan.kernels[launch.kernel];
  absl::StrAppend(&text, indent, "launch ", k.name, " (", k.origin, ") grid (",
                  absl::StrJoin(k.grid, ", "), ") block (", absl::StrJoin(k.block, ", "),
                  ") args (%", absl::StrJoin(launch.args, ", %"), ") writes (%",
                  absl::StrJoin(launch.writes, ", %"), ")\n");
  if (!k.slots.empty()) {
    // A custom op's kernel: its parameters in order, scalars by value.
    std::vector<std::string> params;
    for (const CudaKernelSlot& slot : k.slots)
      params.push_back(slot.arg >= 0 ? absl::StrCat("%", launch.args[slot.arg])
                                     : describe_scalar(slot));
    absl::StrAppend(&text, indent, "  params (", absl::StrJoin(params, ", "), ") dynamic smem ",
                    k.shared_bytes, " bytes\n");
  }
  for (const PtxasKernelReport& r : k.reports)
    absl::StrAppend(&text, indent, "  ", r.arch, ": ", r.registers, " registers, ",
                    r.shared_bytes, " bytes smem, ", r.stack_bytes, " bytes stack, spills ",
                    r.spill_store_bytes, " stores / ", r.spill_load_bytes, " loads\n");
}

}  // namespace

std::string describe_cuda_step(const CudaPlan& plan, const CudaLaunchStep& step) {
  if (step.matmul >= 0) {
    const CudaMatmulInfo& m = plan.matmuls[step.matmul];
    std::string text = absl::StrCat("cublaslt matmul (", m.origin, ") ", m.shape.to_string());
    if (m.batch > 1) absl::StrAppend(&text, " x ", m.batch);
    return text;
  }
  if (step.attention >= 0) {
    const CudaAttentionInfo& a = plan.attentions[step.attention];
    return absl::StrCat("cudnn sdpa ", a.backward ? "backward" : "forward", " (", a.origin, ") ",
                        a.config.to_string());
  }
  if (step.collective >= 0) {
    const CudaCollectiveInfo& c = plan.collectives[step.collective];
    return absl::StrCat("nccl (", c.origin, ") world ", c.world_size);
  }
  const CudaKernelInfo& k = plan.kernels[step.kernel];
  return absl::StrCat("kernel ", k.name, " (", k.origin, ") grid (", absl::StrJoin(k.grid, ", "),
                      ") block (", absl::StrJoin(k.block, ", "), ")");
}

std::string describe_cuda_plan(const CudaPlan& plan) {
  std::string text = absl::StrCat("cuda plan: ", plan.num_inputs, " inputs, ",
                                  plan.values.size() - plan.num_inputs, " computed values, ",
                                  plan.launches.size(), " launches\n");
  if (!plan.arena_offsets.empty())
    absl::StrAppend(&text, "  arena: ", plan.arena_bytes, " bytes, allocated once\n");
  for (size_t v = 0; v < plan.values.size(); ++v) {
    absl::StrAppend(&text, "  %", v, ": ", plan.values[v].to_string());
    if (v < plan.num_inputs)
      absl::StrAppend(&text, " (input)");
    else if (const CudaAlias* alias = plan.alias_of(static_cast<int>(v)))
      absl::StrAppend(&text, " = the bytes of %", alias->root, " + ", alias->byte_offset);
    else if (!plan.arena_offsets.empty() && plan.arena_offsets[v] >= 0)
      absl::StrAppend(&text, " at arena + ", plan.arena_offsets[v]);
    else
      absl::StrAppend(&text, " (own buffer)");
    absl::StrAppend(&text, "\n");
  }
  for (const CudaLaunchStep& launch : plan.launches) {
    if (launch.matmul >= 0) {
      const CudaMatmulInfo& m = plan.matmuls[launch.matmul];
      absl::StrAppend(&text, "  cublaslt matmul (", m.origin, ") ", m.shape.to_string());
      if (m.batch > 1)
        absl::StrAppend(&text, " x ", m.batch, " (strides ", m.a_stride, ", ", m.b_stride, ", ",
                        m.c_stride, ")");
      absl::StrAppend(&text, " args (%", absl::StrJoin(launch.args, ", %"), ") writes (%",
                      absl::StrJoin(launch.writes, ", %"), ")\n");
      // Where cuBLASLt has no algorithm for the epilogue: the call without
      // it, then these.
      for (const CudaLaunchStep& fallback : m.fallback)
        describe_kernel_launch(plan, fallback, "    fallback: ", text);
      continue;
    }
    if (launch.attention >= 0) {
      const CudaAttentionInfo& a = plan.attentions[launch.attention];
      absl::StrAppend(&text, "  cudnn sdpa ", a.backward ? "backward" : "forward", " (", a.origin,
                      ") ", a.config.to_string(), " reads (",
                      by_role(attention_arg_roles(a), launch.args), ") writes (",
                      by_role(attention_write_roles(a), launch.writes), ")\n");
      continue;
    }
    if (launch.collective >= 0) {
      const CudaCollectiveInfo& c = plan.collectives[launch.collective];
      absl::StrAppend(&text, "  nccl (", c.origin, ") world ", c.world_size, " reduce_op ",
                      c.reduce_op, " root ", c.root, " dim ", c.dim, " args (%",
                      absl::StrJoin(launch.args, ", %"), ") writes (%",
                      absl::StrJoin(launch.writes, ", %"), ")\n");
      continue;
    }
    describe_kernel_launch(plan, launch, "  ", text);
  }
  absl::StrAppend(&text, "  outputs (%", absl::StrJoin(plan.outputs, ", %"), ")\n");
  return text;
}

}  // namespace mstep::cuda
