#include "lib/backends/cpu/CpuExecutable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <cstring>

#include <omp.h>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/CollectiveKernel.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/KernelSelection.h"
#include "lib/backends/cpu/NativeFormat.h"
#include "lib/backends/cpu/OneDnnKernels.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

namespace {

constexpr Device kCpu{DeviceType::cpu, 0};

std::byte* data_of(const BufferPtr& b) { return static_cast<host::HostBuffer&>(*b).bytes(); }

}  // namespace

CpuExecutable::CpuExecutable(TraceGraph graph, ArenaPlan plan, std::shared_ptr<FusionJit> jit,
                             BuildOptions options)
    : graph_(std::move(graph)),
      plan_(std::move(plan)),
      jit_(std::move(jit)),
      options_(std::move(options)) {}

namespace {
// BuildOptions::profile (MSTEP_CPU_PROFILE=1): the profiled executables,
// reported at exit (the module cache keeps executables for the life of the
// process).
std::mutex g_profiled_mutex;
std::vector<CpuExecutable*>* g_profiled = nullptr;
void report_profiles() {
  std::lock_guard<std::mutex> lock(g_profiled_mutex);
  if (g_profiled)
    for (CpuExecutable* e : *g_profiled) e->report_profile();
}
}  // namespace

CpuExecutable::~CpuExecutable() {
  if (profile_.empty()) return;
  report_profile();
  std::lock_guard<std::mutex> lock(g_profiled_mutex);
  std::erase(*g_profiled, this);
}

void CpuExecutable::report_profile() {
  if (profile_.empty() || runs_ == 0) return;
  // BuildOptions::profile: where this executable's time went, per call.
  std::vector<size_t> order(calls_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return profile_[a] > profile_[b]; });
  double total = 0;
  for (double t : profile_) total += t;
  std::fprintf(stderr, "mstep cpu profile: %zu calls, %.3f ms per run over %lld runs\n",
               calls_.size(), total * 1e3 / runs_, static_cast<long long>(runs_));
  std::map<std::string, double> by_kernel;
  for (size_t i = 0; i < calls_.size(); ++i)
    by_kernel[std::string(calls_[i].kernel->name())] += profile_[i];
  std::vector<std::pair<double, std::string>> kernels;
  for (const auto& [name, t] : by_kernel) kernels.push_back({t, name});
  std::sort(kernels.rbegin(), kernels.rend());
  std::fprintf(stderr, "  by kernel:");
  for (const auto& [t, name] : kernels)
    std::fprintf(stderr, " %s %.3f ms (%.0f%%);", name.c_str(), t * 1e3 / runs_, 100 * t / total);
  std::fprintf(stderr, "\n  slowest calls:\n");
  for (size_t i = 0; i < std::min<size_t>(order.size(), 10); ++i)
    std::fprintf(stderr, "  %8.3f ms  %5.1f%%  #%zu %.*s\n", profile_[order[i]] * 1e3 / runs_,
                 100 * profile_[order[i]] / total, order[i],
                 static_cast<int>(calls_[order[i]].kernel->name().size()),
                 calls_[order[i]].kernel->name().data());
  if (!collectives_.empty()) {
    // The overlap of the collectives: a wait that found its transfer
    // complete cost nothing beyond the MPI_Test calls between kernels.
    int64_t waits = 0, done = 0;
    for (const auto& run : collectives_) {
      waits += run->waits();
      done += run->waits_found_done();
    }
    std::fprintf(stderr,
                 "  collectives: %lld of %lld waits found the transfer already complete "
                 "(overlapped with the calls before the wait)\n",
                 static_cast<long long>(done), static_cast<long long>(waits));
  }
  runs_ = 0;  // reported once
}

absl::StatusOr<std::unique_ptr<CpuExecutable>> CpuExecutable::create(
    TraceGraph graph, ArenaPlan plan, std::shared_ptr<FusionJit> jit, BuildOptions options) {
  std::unique_ptr<CpuExecutable> exe(
      new CpuExecutable(std::move(graph), std::move(plan), std::move(jit), std::move(options)));
  MSTEP_RETURN_IF_ERROR(exe->build());
  return exe;
}

absl::Status CpuExecutable::build() {
  // The count the kernels below size their thread split and scratch for.
  built_threads_ = omp_get_max_threads();
  // build() runs again when that count changes: start from empty lists of
  // everything it appends to (the rest it assigns).
  kernels_.clear();
  calls_.clear();
  collectives_.clear();
  waits_.clear();
  fallbacks_.clear();
  operand_slots_.clear();
  result_slots_.clear();
  outputs_.clear();
  output_values_.clear();
  dynamic_operands_.clear();
  dynamic_results_.clear();
  output_buffers_.clear();
  const size_t num_args = graph_.input_types.size();
  if (plan_.ops.size() + num_args != graph_.nodes.size())
    return absl::InternalError(absl::StrCat("cpu backend: the memory plan covers ", plan_.ops.size(),
                                            " ops but the step has ",
                                            graph_.nodes.size() - num_args));
  // Slots: one per value. Arguments first (the exporter puts the parameter
  // nodes first, in argument order), then each op's results.
  value_base_.resize(graph_.nodes.size());
  uint32_t slots = 0;
  for (uint32_t i = 0; i < graph_.nodes.size(); ++i) {
    value_base_[i] = slots;
    slots += static_cast<uint32_t>(graph_.nodes[i].results.size());
  }
  slot_kind_.assign(slots, SlotKind::arena);
  slot_arg_.assign(slots, -1);
  slot_ptr_.assign(slots, nullptr);
  std::vector<int64_t> slot_offset(slots, -1), slot_alias(slots, -1);
  for (uint32_t i = 0; i < num_args; ++i) {
    const GraphNode& n = graph_.nodes[i];
    if (n.op != OpKind::parameter || attr_int(n.attrs, AttrName::index) != i)
      return absl::InternalError("cpu backend: the step's arguments are not its first nodes");
    slot_kind_[value_base_[i]] = SlotKind::input;
    slot_arg_[value_base_[i]] = i;
  }
  for (size_t k = 0; k < plan_.ops.size(); ++k) {
    const uint32_t node = static_cast<uint32_t>(num_args + k);
    const ArenaPlan::OpPlacement& p = plan_.ops[k];
    if (p.offsets.size() != graph_.nodes[node].results.size())
      return absl::InternalError(absl::StrCat("cpu backend: plan/graph mismatch at op '",
                                              op_name(graph_.nodes[node].op), "'"));
    for (size_t r = 0; r < p.offsets.size(); ++r) {
      slot_offset[value_base_[node] + r] = p.offsets[r];
      slot_alias[value_base_[node] + r] = p.aliased_arg[r];
    }
  }
  // Outputs get their own memory each run (a caller keeps last step's
  // results), or the donated argument's buffer when the plan writes there.
  for (ValueRef v : graph_.outputs) {
    Output out;
    out.slot = value_base_[v.node] + v.index;
    if (slot_kind_[out.slot] == SlotKind::input) {
      out.input = static_cast<int32_t>(slot_arg_[out.slot]);
    } else {
      out.donated_arg = static_cast<int32_t>(slot_alias[out.slot]);
      if (slot_kind_[out.slot] != SlotKind::output) output_values_.push_back(out.slot);
      slot_kind_[out.slot] = SlotKind::output;
    }
    outputs_.push_back(out);
  }
  for (uint32_t s = 0; s < slots; ++s)
    if (slot_kind_[s] == SlotKind::arena && slot_offset[s] < 0)
      return absl::InternalError("cpu backend: a value written into a donated argument is not "
                                 "a step output");

  // The arena is allocated now, so a run never allocates it; arena slots
  // get their fixed addresses.
  const size_t arena = static_cast<size_t>(std::max<int64_t>(plan_.arena_bytes, 1));
  const size_t align = static_cast<size_t>(std::max<int64_t>(plan_.alignment, 64));
  if (!arena_)
    arena_ = {
        static_cast<std::byte*>(std::aligned_alloc(align, (arena + align - 1) / align * align)),
        [](std::byte* p) { std::free(p); }};
  if (!arena_)
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu backend: cannot allocate the step's arena of ", arena, " bytes"));
  for (uint32_t s = 0; s < slots; ++s)
    if (slot_kind_[s] == SlotKind::arena) slot_ptr_[s] = arena_.get() + slot_offset[s];

  // The first op that writes each donated argument in place: a kernel
  // after it may not read that argument (see below).
  std::vector<uint32_t> first_write_of_arg(num_args, UINT32_MAX);
  for (size_t k = 0; k < plan_.ops.size(); ++k)
    for (int64_t a : plan_.ops[k].aliased_arg)
      if (a >= 0) first_write_of_arg[a] = std::min<uint32_t>(first_write_of_arg[a], num_args + k);
  auto slot_of = [&](ValueRef v) { return value_base_[v.node] + v.index; };
  // A oneDNN matmul reads a transposed parameter in place of its permuted
  // copy (transposed_source), which is safe unless an earlier op already
  // overwrote that parameter in place.
  auto lookthrough_safe = [&](uint32_t node) {
    for (ValueRef v : graph_.nodes[node].operands)
      if (auto src = transposed_source(graph_, v, &see_through_);
          src && src->node < num_args && first_write_of_arg[src->node] < node)
        return false;
    return true;
  };
  auto read_operand = [&](uint32_t node, ValueRef v, absl::string_view family) {
    if (graph_.nodes[node].op == OpKind::matmul && family == "onednn")
      if (auto src = transposed_source(graph_, v, &see_through_)) return slot_of(*src);
    return slot_of(v);
  };
  plan_see_through(slot_offset);
  auto add_call = [&](CpuKernel* kernel, std::vector<uint32_t> operands,
                      std::vector<uint32_t> results,
                      std::optional<HostFallbackOp> fallback = std::nullopt) {
    calls_.push_back({kernel, static_cast<uint32_t>(operand_slots_.size()),
                      static_cast<uint32_t>(operands.size()),
                      static_cast<uint32_t>(result_slots_.size()),
                      static_cast<uint32_t>(results.size()), fallback, kernel->can_fail()});
    operand_slots_.insert(operand_slots_.end(), operands.begin(), operands.end());
    result_slots_.insert(result_slots_.end(), results.begin(), results.end());
  };

  // matmul + bias (+ relu/gelu) (+ residual) fusions become one oneDNN matmul with an
  // epilogue, run at the matmul's place and writing the fusion's result.
  // That is safe when the result's memory is free there: the fusion was
  // planned in place over the matmul's result, or is a step output (its own
  // buffer); and when the bias already exists at the matmul.
  std::vector<int64_t> epilogue_fusion(graph_.nodes.size(), -1);
  std::vector<bool> absorbed(graph_.nodes.size(), false);
  if (!kernel_family_disabled(options_.disabled_families, "onednn")) {
    for (uint32_t f = static_cast<uint32_t>(num_args); f < graph_.nodes.size(); ++f) {
      if (graph_.nodes[f].op != OpKind::fusion) continue;
      auto e = find_matmul_epilogue(graph_, f);
      // The bias and residual must exist at the matmul's place.
      if (!e || (e->bias && e->bias->node >= e->matmul) ||
          (e->residual && e->residual->node >= e->matmul) || !lookthrough_safe(e->matmul))
        continue;
      const uint32_t result = value_base_[f], mm = value_base_[e->matmul];
      if (slot_kind_[result] != SlotKind::output && slot_offset[result] != slot_offset[mm]) continue;
      epilogue_fusion[e->matmul] = f;
    }
  }

  // A matmul whose only reader is the next op, a permute swapping the
  // last two dims (a weight gradient), writes its result transposed
  // straight into the permute's result. Safe when that memory is free at
  // the matmul: a step output, or arena bytes that none of the matmul's
  // operands occupy (nothing else is live at the matmul but not at the
  // permute).
  std::vector<int64_t> transposed_into(graph_.nodes.size(), -1);
  std::vector<int> readers(slots, 0);
  for (const GraphNode& n : graph_.nodes)
    for (ValueRef v : n.operands) ++readers[slot_of(v)];
  std::vector<int64_t> slot_bytes(slots);
  for (uint32_t n = 0; n < graph_.nodes.size(); ++n)
    for (uint32_t r = 0; r < graph_.nodes[n].results.size(); ++r)
      slot_bytes[value_base_[n] + r] = static_cast<int64_t>(graph_.nodes[n].results[r].bytes());
  auto overlaps = [&](uint32_t a, uint32_t b) {
    if (slot_kind_[a] != SlotKind::arena || slot_kind_[b] != SlotKind::arena) return false;
    const int64_t a_end = slot_offset[a] + slot_bytes[a];
    const int64_t b_end = slot_offset[b] + slot_bytes[b];
    return slot_offset[a] < b_end && slot_offset[b] < a_end;
  };
  if (!kernel_family_disabled(options_.disabled_families, "onednn")) {
    for (uint32_t m = static_cast<uint32_t>(num_args); m + 1 < graph_.nodes.size(); ++m) {
      const GraphNode& mm = graph_.nodes[m];
      const uint32_t p = m + 1;
      if (mm.op != OpKind::matmul || epilogue_fusion[m] >= 0 || !lookthrough_safe(m)) continue;
      const uint32_t result = value_base_[m];
      if (readers[result] != 1 || slot_kind_[result] != SlotKind::arena) continue;
      if (!is_matrix_transpose(graph_.nodes[p]) || slot_of(graph_.nodes[p].operands[0]) != result)
        continue;
      bool free = true;
      for (ValueRef v : mm.operands)
        free &= !overlaps(read_operand(m, v, "onednn"), value_base_[p]) &&
                !overlaps(slot_of(v), value_base_[p]);
      if (free) transposed_into[m] = p, see_through_[p] = false;
    }
  }

  // One kernel per op, in program order.
  int fusion_index = 0;
  for (uint32_t node = static_cast<uint32_t>(num_args); node < graph_.nodes.size(); ++node) {
    const GraphNode& n = graph_.nodes[node];
    const int this_fusion = n.op == OpKind::fusion ? fusion_index++ : -1;
    if (absorbed[node]) continue;
    if (epilogue_fusion[node] >= 0) {
      const uint32_t f = static_cast<uint32_t>(epilogue_fusion[node]);
      auto e = find_matmul_epilogue(graph_, f);
      MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel,
                             make_onednn_matmul_epilogue_kernel(graph_, *e, &see_through_));
      if (kernel) {
        absorbed[f] = true;
        std::vector<uint32_t> operands = {read_operand(node, n.operands[0], "onednn"),
                                          read_operand(node, n.operands[1], "onednn")};
        if (e->bias) operands.push_back(slot_of(*e->bias));
        if (e->residual) operands.push_back(slot_of(*e->residual));
        add_call(kernel.get(), operands, {value_base_[f]});
        kernels_.push_back(std::move(kernel));
        continue;
      }
    }
    if (transposed_into[node] >= 0) {
      const uint32_t p = static_cast<uint32_t>(transposed_into[node]);
      MSTEP_ASSIGN_OR_RETURN(
          std::unique_ptr<CpuKernel> kernel,
          make_onednn_transposed_matmul_kernel(KernelRequest{graph_, node, &see_through_}));
      if (kernel) {
        absorbed[p] = true;
        add_call(kernel.get(),
                 {read_operand(node, n.operands[0], "onednn"),
                  read_operand(node, n.operands[1], "onednn")},
                 {value_base_[p]});
        kernels_.push_back(std::move(kernel));
        continue;
      }
    }
    if (op_family(n.op) == OpFamily::collective) {
      // Started here; its wait goes before the first reader (below).
      CollectiveKernels c = make_collective_kernels(KernelRequest{graph_, node, &see_through_});
      add_call(c.start.get(), {slot_of(n.operands[0])}, {value_base_[node]});
      waits_.push_back({c.start.get(), c.wait.get(), value_base_[node]});
      kernels_.push_back(std::move(c.start));
      kernels_.push_back(std::move(c.wait));
      collectives_.push_back(std::move(c.run));
      continue;
    }
    MSTEP_ASSIGN_OR_RETURN(SelectedKernel selected,
                           select_kernel(KernelRequest{graph_, node, &see_through_}, jit_.get(),
                                         this_fusion, options_.disabled_families,
                                         /*skip_onednn=*/!lookthrough_safe(node)));
    std::optional<HostFallbackOp> fallback;
    if (selected.fallback)
      fallback = HostFallbackOp{n.op, n.results.empty() ? DType::f32 : n.results[0].dtype};
    std::vector<uint32_t> operands, results;
    for (ValueRef v : n.operands) operands.push_back(read_operand(node, v, selected.family));
    for (uint32_t r = 0; r < n.results.size(); ++r) results.push_back(value_base_[node] + r);
    add_call(selected.kernel.get(), std::move(operands), std::move(results), fallback);
    kernels_.push_back(std::move(selected.kernel));
  }
  place_collective_waits();
  drop_unread_calls();
  if (options_.profile) {
    profile_.assign(calls_.size(), 0.0);
    std::lock_guard<std::mutex> lock(g_profiled_mutex);
    if (!g_profiled) {
      g_profiled = new std::vector<CpuExecutable*>();
      std::atexit(report_profiles);
    }
    if (!profile_registered_) g_profiled->push_back(this);
    profile_registered_ = true;
  }
  // Arena addresses are fixed: fill them in once; a run patches only the
  // positions that name an input or an output.
  operand_ptrs_.resize(operand_slots_.size());
  result_ptrs_.resize(result_slots_.size());
  for (size_t i = 0; i < operand_slots_.size(); ++i) {
    operand_ptrs_[i] = slot_ptr_[operand_slots_[i]];
    if (slot_kind_[operand_slots_[i]] != SlotKind::arena) dynamic_operands_.push_back(i);
  }
  for (size_t i = 0; i < result_slots_.size(); ++i) {
    result_ptrs_[i] = slot_ptr_[result_slots_[i]];
    if (slot_kind_[result_slots_[i]] != SlotKind::arena) dynamic_results_.push_back(i);
  }
  output_buffers_.resize(slots);
  return absl::OkStatus();
}

absl::Status CpuExecutable::rebuild_for_threads(int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  const int from = built_threads_;
  report_profile();  // the calls it timed go away
  MSTEP_RETURN_IF_ERROR(build());
  internal::record_thread_rebuild(
      "cpu", from, threads,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      options_.log_rebuilds);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BufferPtr>> CpuExecutable::run(absl::Span<const BufferPtr> inputs,
                                                           const Donation& donation) {
  // One ICV read per run; a changed count rebuilds the kernels once.
  if (const int threads = omp_get_max_threads(); threads != built_threads_) [[unlikely]]
    MSTEP_RETURN_IF_ERROR(rebuild_for_threads(threads));
  if (inputs.size() != graph_.input_types.size())
    return absl::InvalidArgumentError(absl::StrCat("cpu executable expects ",
                                                   graph_.input_types.size(), " inputs, got ",
                                                   inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferPtr& b = inputs[i];
    if (!b || b->type() != graph_.input_types[i] || b->device().type != DeviceType::cpu)
      return absl::InvalidArgumentError(absl::StrCat(
          "cpu executable input ", i, " should be a cpu ", graph_.input_types[i].to_string(),
          ", got ", b ? absl::StrCat(b->device().to_string(), " ", b->type().to_string()) : "null"));
    slot_ptr_[value_base_[i]] = data_of(b);
  }
  for (const Output& out : outputs_) {
    if (out.input >= 0 || output_buffers_[out.slot]) continue;
    // The plan aliases the argument (donated_arg) and the caller donates
    // it, or the caller offers a buffer for the output (Donation).
    const size_t k = &out - outputs_.data();
    const TensorType& type = graph_.type_of(graph_.outputs[k]);
    BufferPtr buf;
    const BufferPtr* offered = donation.outputs.empty() ? nullptr : &donation.outputs[k];
    if (out.donated_arg >= 0 && !donation.inputs.empty() && donation.inputs[out.donated_arg])
      buf = inputs[out.donated_arg];
    else if (offered && *offered && (*offered)->device().type == DeviceType::cpu &&
             (*offered)->type() == type)
      buf = *offered;
    else
      buf = std::make_shared<host::HostBuffer>(type, kCpu);
    slot_ptr_[out.slot] = data_of(buf);
    output_buffers_[out.slot] = std::move(buf);
  }
  for (uint32_t i : dynamic_operands_) operand_ptrs_[i] = slot_ptr_[operand_slots_[i]];
  for (uint32_t i : dynamic_results_) result_ptrs_[i] = slot_ptr_[result_slots_[i]];
  for (const Call& c : calls_) {
    const auto t0 = profile_.empty() ? std::chrono::steady_clock::time_point{}
                                     : std::chrono::steady_clock::now();
    c.kernel->run(operand_ptrs_.data() + c.first_operand, result_ptrs_.data() + c.first_result);
    if (!profile_.empty())
      profile_[&c - calls_.data()] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (c.can_fail) {
      absl::Status s = c.kernel->last_error();
      if (!s.ok()) {
        for (uint32_t slot : output_values_) output_buffers_[slot].reset();
        // Complete the collectives this run started (the other ranks run
        // them too), so the next run can start them again.
        for (const auto& run : collectives_)
          if (run->in_flight()) (void)run->wait();
        return s;
      }
    }
    // MPI moves a nonblocking collective's data only inside MPI calls.
    for (const auto& run : collectives_)
      if (run->in_flight()) run->progress();
  }

  ++runs_;
  std::vector<BufferPtr> results;
  results.reserve(outputs_.size());
  for (const Output& out : outputs_)
    results.push_back(out.input >= 0 ? inputs[out.input] : output_buffers_[out.slot]);
  for (uint32_t s : output_values_) output_buffers_[s].reset();
  return results;
}

void CpuExecutable::plan_see_through(const std::vector<int64_t>& slot_offset) {
  // A matmul may read a transposed intermediate `s` in place of
  // permute(s) when s's arena bytes are not written by any op from the
  // permute up to the permute's last reader (the plan freed s's slot after
  // the permute, its last reader in the graph).
  see_through_.assign(graph_.nodes.size(), false);
  std::vector<uint32_t> last_reader(graph_.nodes.size(), 0);
  for (uint32_t n = 0; n < graph_.nodes.size(); ++n)
    for (ValueRef v : graph_.nodes[n].operands) last_reader[v.node] = n;
  for (ValueRef v : graph_.outputs) last_reader[v.node] = UINT32_MAX;
  for (uint32_t p = 0; p < graph_.nodes.size(); ++p) {
    const GraphNode& permute = graph_.nodes[p];
    if (permute.op != OpKind::permute || last_reader[p] == UINT32_MAX) continue;
    const uint32_t source = value_base_[permute.operands[0].node] + permute.operands[0].index;
    if (slot_kind_[source] != SlotKind::arena) {
      see_through_[p] = slot_kind_[source] == SlotKind::output;  // its own buffer
      continue;
    }
    const int64_t begin = slot_offset[source];
    const int64_t end = begin + static_cast<int64_t>(graph_.type_of(permute.operands[0]).bytes());
    bool intact = true;
    for (uint32_t n = p + 1; n <= last_reader[p] && intact; ++n)
      for (uint32_t r = 0; r < graph_.nodes[n].results.size(); ++r) {
        const uint32_t slot = value_base_[n] + r;
        if (slot_kind_[slot] != SlotKind::arena) continue;
        const int64_t b = slot_offset[slot];
        const int64_t e = b + static_cast<int64_t>(graph_.nodes[n].results[r].bytes());
        if (b < end && begin < e) intact = false;
      }
    see_through_[p] = intact;
  }
}

void CpuExecutable::place_collective_waits() {
  if (waits_.empty()) return;
  std::vector<Call> placed;
  std::vector<bool> started(waits_.size(), false), waited(waits_.size(), false);
  // A wait reads the result (so drop_unread_calls keeps its start).
  auto add_wait = [&](size_t w) {
    placed.push_back({waits_[w].kernel, static_cast<uint32_t>(operand_slots_.size()), 1,
                      static_cast<uint32_t>(result_slots_.size()), 0, std::nullopt, true});
    operand_slots_.push_back(waits_[w].result_slot);
    waited[w] = true;
  };
  for (const Call& c : calls_) {
    for (size_t w = 0; w < waits_.size(); ++w) {
      if (!started[w] || waited[w]) continue;
      for (uint32_t o = 0; o < c.num_operands; ++o)
        if (operand_slots_[c.first_operand + o] == waits_[w].result_slot) {
          add_wait(w);
          break;
        }
    }
    placed.push_back(c);
    for (size_t w = 0; w < waits_.size(); ++w) started[w] = started[w] || c.kernel == waits_[w].start;
  }
  for (size_t w = 0; w < waits_.size(); ++w)
    if (!waited[w]) add_wait(w);  // a step output: complete before run() returns
  calls_ = std::move(placed);
  waits_.clear();
}

void CpuExecutable::drop_unread_calls() {
  // Backwards: a call is needed if a later needed call or the caller reads
  // one of its results (a permute whose only readers look through it is
  // not), or if it has effects (a collective's wait, which keeps its start:
  // every rank runs every collective of the step).
  std::vector<bool> read(slot_kind_.size(), false);
  for (const Output& out : outputs_) read[out.slot] = true;
  std::vector<Call> kept;
  for (size_t i = calls_.size(); i-- > 0;) {
    const Call& c = calls_[i];
    bool needed = c.kernel->has_effects();
    for (uint32_t r = 0; r < c.num_results; ++r) needed |= read[result_slots_[c.first_result + r]];
    if (!needed) continue;
    for (uint32_t o = 0; o < c.num_operands; ++o) read[operand_slots_[c.first_operand + o]] = true;
    kept.push_back(c);
  }
  calls_.assign(kept.rbegin(), kept.rend());
  for (const Call& c : calls_)
    if (c.fallback) fallbacks_.push_back(*c.fallback);
}

std::vector<std::string> CpuExecutable::kernel_names() const {
  std::vector<std::string> names;
  for (const Call& c : calls_) names.emplace_back(c.kernel->name());
  return names;
}

absl::StatusOr<std::string> CpuExecutable::serialize(absl::string_view) const {
  return write_native_format(graph_, plan_, jit_ ? jit_->object() : std::string());
}

}  // namespace mstep::cpu
