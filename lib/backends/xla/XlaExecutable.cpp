// XlaExecutable (XlaExecutable.h) and the runtime entry points the step
// function calls (XlaRuntimeCalls): oneDNN's sgemm (the convolutions'), the
// matmul primitives (XlaGemm.h), the OpenMP split of a fusion nest, and
// the callouts.
#include "lib/backends/xla/XlaExecutable.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/KernelSelection.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/xla/XlaGemm.h"
#include "lib/backends/xla/XlaStepFailure.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/core/Error.h"
#include "oneapi/dnnl/dnnl.h"

namespace mstep::xla {

namespace {

constexpr Device kXla{DeviceType::xla, 0};

void gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a, const float* a,
              int64_t a_stride, int64_t trans_b, const float* b, int64_t b_stride, float* c) {
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < batch; ++i) {
    float* ci = c + i * m * n;
    if (k == 0) {
      std::fill(ci, ci + m * n, 0.0f);
      continue;
    }
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a + i * a_stride,
               trans_a ? m : k, b + i * b_stride, trans_b ? k : n, 0.0f, ci, n);
  }
}

/// As the cpu backend's fusion kernel splits a nest (FusionJit.cpp). With
/// one unit of work the nest runs here: an OpenMP region of one thread
/// still costs a futex wake per call.
void parallel_nest(cpu::FusionEntry nest, const void* const* operands, void* const* results,
                   int64_t outer, int64_t grain) {
  if (outer <= grain) {
    nest(operands, results, 0, outer);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t units = (outer + grain - 1) / grain;
    const int64_t begin = std::min(outer, units * thread / threads * grain);
    const int64_t end = std::min(outer, units * (thread + 1) / threads * grain);
    if (begin < end) nest(operands, results, begin, end);
  }
}

/// parallel_nest for a run on one thread, or inside a parallel region:
/// every nest on the calling thread. run() picks it once per run rather
/// than asking OpenMP at each nest.
void serial_nest(cpu::FusionEntry nest, const void* const* operands, void* const* results,
                 int64_t outer, int64_t /*grain*/) {
  nest(operands, results, 0, outer);
}

/// The gemm library's thread slot (mstep_xla_gemm_set_thread_slot): 0
/// outside a parallel region, 1 + the thread's index inside one.
int gemm_thread_slot() { return omp_in_parallel() ? 1 + omp_get_thread_num() : 0; }

/// f(arg) with this thread's OpenMP thread count 1 (the primitive it makes
/// plans for the one thread it will run on).
void on_one_thread(void (*f)(void*), void* arg) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  f(arg);
  omp_set_num_threads(threads);
}

} // namespace

bool XlaExecutable::last_run_split_nests() const {
  return calls_.parallel_nest == parallel_nest;
}

absl::StatusOr<std::unique_ptr<XlaExecutable>>
XlaExecutable::create(XlaProgram program, const std::string& disabled_families,
                      bool log_rebuilds) {
  std::unique_ptr<XlaExecutable> exe(new XlaExecutable(std::move(program)));
  const XlaProgram& p = exe->program_;
  MSTEP_ASSIGN_OR_RETURN(exe->library_,
                         cpu::SharedLibrary::load(p.shared_object, "xla backend: the step's code"));
  MSTEP_ASSIGN_OR_RETURN(void* step, exe->library_->symbol(kXlaStepSymbol));
  exe->step_ = reinterpret_cast<XlaStepFunction>(step);
  exe->disabled_families_ = disabled_families;
  exe->log_rebuilds_ = log_rebuilds;
  // The gemm library makes a primitive per thread count (oneDNN's keep the
  // count they were made under).
  // and per thread of a parallel region (the bf16 convolutions' gemms run
  // on every thread at once, each on a primitive made for one thread).
  mstep_xla_gemm_set_thread_count(omp_get_max_threads);
  mstep_xla_gemm_set_thread_slot(gemm_thread_slot, on_one_thread);
  MSTEP_RETURN_IF_ERROR(exe->build_for_thread_count());
  exe->calls_ = {gemm_f32,
                 serial_nest,
                 run_callout,
                 exe.get(),
                 mstep_xla_gemm_bf16,
                 mstep_xla_gemm_f32,
                 mstep_xla_gemm_bf16_f32};
  const size_t align = 64;
  const size_t arena = static_cast<size_t>(std::max<int64_t>(p.layout.arena_bytes, 1));
  exe->arena_ = {
      static_cast<std::byte*>(std::aligned_alloc(align, (arena + align - 1) / align * align)),
      [](std::byte* b) { std::free(b); }};
  if (!exe->arena_)
    return absl::ResourceExhaustedError(
        absl::StrCat("xla backend: cannot allocate the step's arena of ", arena, " bytes"));
  exe->input_ptrs_.resize(p.graph.input_types.size());
  exe->output_ptrs_.resize(p.layout.output_values.size());
  exe->output_buffers_.resize(p.layout.output_values.size());
  return exe;
}

absl::Status XlaExecutable::build_for_thread_count() {
  const XlaProgram& p = program_;
  // The count the callouts and gemm primitives size their thread split
  // and scratch for.
  built_threads_ = omp_get_max_threads();
  callouts_.clear();
  fallbacks_.clear();
  // The callouts: the cpu backend's kernels, minus the fusion JIT (a
  // fusion here is one the function could not compile) and minus oneDNN's
  // matmul, which reads transposed operands through permutes the step
  // function has already materialized.
  // A callout that runs a ref kernel is a host fallback, as on cpu.
  const std::string disabled =
      disabled_families_.empty() ? "jit" : absl::StrCat("jit,", disabled_families_);
  for (uint32_t node : p.callouts) {
    const GraphNode& n = p.graph.nodes[node];
    MSTEP_ASSIGN_OR_RETURN(cpu::SelectedKernel selected,
                           cpu::select_kernel(cpu::KernelRequest{p.graph, node}, nullptr, -1,
                                              disabled, /*skip_onednn=*/n.op == OpKind::matmul));
    if (selected.fallback)
      fallbacks_.push_back({n.op, n.results.empty() ? DType::f32 : n.results[0].dtype});
    callouts_.push_back(std::move(selected.kernel));
  }
  // The gemms' primitives, made now rather than in the first run.
  if (absl::StatusOr<void*> table = library_->symbol(kXlaGemmCallsSymbol); table.ok()) {
    const auto* calls = static_cast<const int64_t*>(*table);
    for (int64_t i = 0; i < calls[0]; ++i)
      mstep_xla_gemm_prepare(calls + 1 + i * MSTEP_GEMM_CALL_LENGTH);
    prepared_gemms_ = static_cast<size_t>(calls[0]);
  }
  return absl::OkStatus();
}

int32_t XlaExecutable::run_callout(void* context, int64_t k, const void* const* operands,
                                   void* const* results) {
  auto* self = static_cast<XlaExecutable*>(context);
  if (k < 0 || static_cast<size_t>(k) >= self->callouts_.size()) {
    self->callout_error_ = absl::InternalError(absl::StrCat(
        "xla executable: the step function calls out for op ", k, " of ", self->callouts_.size()));
    return 1;
  }
  cpu::CpuKernel& kernel = *self->callouts_[k];
  kernel.run(operands, results);
  if (!kernel.can_fail()) return 0;
  self->callout_error_ = kernel.last_error();
  return self->callout_error_.ok() ? 0 : 1;
}

std::vector<std::string> XlaExecutable::callout_names() const {
  std::vector<std::string> names;
  for (uint32_t node : program_.callouts)
    names.emplace_back(op_name(program_.graph.nodes[node].op));
  return names;
}

absl::StatusOr<std::vector<BufferPtr>> XlaExecutable::run(absl::Span<const BufferPtr> inputs,
                                                          const Donation& donation) {
  const TraceGraph& graph = program_.graph;
  const XlaLayout& layout = program_.layout;
  // One ICV read per run (it also picks the nest splitter below); a changed
  // count rebuilds the callouts once. The function's loops and sgemm read
  // the count as they run.
  const int threads = omp_get_max_threads();
  if (threads != built_threads_) [[unlikely]] {
    const auto t0 = std::chrono::steady_clock::now();
    const int from = built_threads_;
    MSTEP_RETURN_IF_ERROR(build_for_thread_count());
    if (!program_.callouts.empty() || prepared_gemms_ > 0)
      internal::record_thread_rebuild(
          "xla", from, threads,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          log_rebuilds_);
  }
  if (inputs.size() != graph.input_types.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "xla executable expects ", graph.input_types.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferPtr& b = inputs[i];
    if (!b || b->type() != graph.input_types[i] || b->device().type != DeviceType::xla)
      return absl::InvalidArgumentError(absl::StrCat(
          "xla executable input ", i, " should be an xla ", graph.input_types[i].to_string(),
          ", got ",
          b ? absl::StrCat(b->device().to_string(), " ", b->type().to_string()) : "null"));
    input_ptrs_[i] = static_cast<host::HostBuffer&>(*b).bytes();
  }
  // Each output value's buffer: the donated input the plan writes it into
  // when the caller donates it, a buffer the caller offers, or a new one.
  for (size_t k = 0; k < layout.outputs.size(); ++k) {
    const XlaLayout::Output& out = layout.outputs[k];
    if (out.input >= 0 || output_buffers_[out.output]) continue;
    const TensorType& type = graph.type_of(graph.outputs[k]);
    BufferPtr buf;
    const BufferPtr* offered = donation.outputs.empty() ? nullptr : &donation.outputs[k];
    if (out.donated_arg >= 0 && !donation.inputs.empty() && donation.inputs[out.donated_arg])
      buf = inputs[out.donated_arg];
    else if (offered && *offered && (*offered)->device().type == DeviceType::xla &&
             (*offered)->type() == type)
      buf = *offered;
    else
      buf = std::make_shared<host::HostBuffer>(type, kXla);
    output_ptrs_[out.output] = static_cast<host::HostBuffer&>(*buf).bytes();
    output_buffers_[out.output] = std::move(buf);
  }
  // The thread count and nesting hold for the whole call (every nest and
  // callout returns before the next starts).
  calls_.parallel_nest = threads == 1 || omp_in_parallel() ? serial_nest : parallel_nest;
  const int32_t status = step_(input_ptrs_.data(), output_ptrs_.data(), arena_.get(), &calls_);
  // A loop of the function that found bad data names it (the buffers
  // still hold what the step read).
  if (status < 0)
    callout_error_ = loop_failure(program_, node_of_loop_failure(status), input_ptrs_.data(),
                                  output_ptrs_.data(), arena_.get());
  std::vector<BufferPtr> results;
  if (status == 0) {
    results.reserve(layout.outputs.size());
    for (const XlaLayout::Output& out : layout.outputs)
      results.push_back(out.input >= 0 ? inputs[out.input] : output_buffers_[out.output]);
  }
  for (BufferPtr& b : output_buffers_) b.reset();
  if (status != 0) return callout_error_;
  return results;
}

} // namespace mstep::xla
