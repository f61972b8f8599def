// The machinery the oneDNN kernels share: the CPU engine, dtype and shape
// conversion, and PrimitiveKernel, a CpuKernel that runs a fixed sequence
// of oneDNN primitives over memories bound to its operands and results.
// Each op family (OneDnnMatmul.cpp, OneDnnConv.cpp, OneDnnPool.cpp,
// OneDnnNormalization.cpp) only describes its primitives.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "mstep/core/TensorType.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mstep::cpu::onednn {

/// The process-wide CPU engine; engines are costly to create and every
/// kernel can share one.
const dnnl::engine& cpu_engine();

/// oneDNN's data type for `dtype`: f32 and bf16 (accumulated in f32);
/// nullopt for the dtypes these kernels leave to the ref backend.
std::optional<dnnl::memory::data_type> data_type_of(DType dtype);

dnnl::memory::dims dims_of(const Shape& shape);

/// A dense row-major desc of `dims`.
dnnl::memory::desc dense_desc(const dnnl::memory::dims& dims, dnnl::memory::data_type type);
inline dnnl::memory::desc dense_desc(const Shape& shape, dnnl::memory::data_type type) {
  return dense_desc(dims_of(shape), type);
}

/// Primitive attributes with the scratchpad in user mode, so that
/// PrimitiveKernel allocates it once instead of oneDNN per call.
dnnl::primitive_attr user_scratchpad_attr();

/// `desc` as a primitive computing in `compute` reads or writes it: itself
/// when it holds `compute`, else dense `compute` of its dims (a widened
/// copy, see build_or_widen).
dnnl::memory::desc in_compute(const dnnl::memory::desc& desc, dnnl::memory::data_type compute);

/// A CpuKernel that runs oneDNN primitives in order. Build it with
/// bind_operand/bind_result/owned and add_step; after that it is fixed.
/// run() is not reentrant: one kernel runs on one thread at a time.
class PrimitiveKernel final : public CpuKernel {
 public:
  explicit PrimitiveKernel(std::string name);

  /// A memory whose data is operand `index`'s buffer at each run.
  dnnl::memory bind_operand(int index, const dnnl::memory::desc& desc);
  /// A memory whose data is result `index`'s buffer at each run.
  dnnl::memory bind_result(int index, const dnnl::memory::desc& desc);
  /// A memory the kernel owns and allocates now (a workspace, a converted
  /// copy, an intermediate result).
  dnnl::memory owned(const dnnl::memory::desc& desc);
  /// Appends a primitive run with `args`. The primitive must come from
  /// `pd`, built with user_scratchpad_attr(); its scratchpad is allocated
  /// here, once.
  void add_step(const dnnl::primitive_desc_base& pd, const dnnl::primitive& primitive,
                std::unordered_map<int, dnnl::memory> args);
  /// Appends a step copying `from` into `to`, converting the layout (and
  /// dtype) on the way.
  void add_reorder(const dnnl::memory& from, const dnnl::memory& to);
  /// `from` in the layout `desc`: `from` itself when the layouts match,
  /// else an owned memory that a reorder step, appended now, fills.
  dnnl::memory reordered_to(const dnnl::memory& from, const dnnl::memory::desc& desc);
  /// Result `index` bound as `user`, and the memory a primitive producing
  /// `produced` writes: the result itself when the descs match, else an
  /// owned memory that finish_result() reorders into it (a blocked layout
  /// back to plain, or a widened f32 result rounded once to bf16).
  struct Result {
    dnnl::memory user, produced;
  };
  Result bind_result_as(int index, const dnnl::memory::desc& user,
                        const dnnl::memory::desc& produced);
  /// Appends bind_result_as's reorder, if it needs one (after the step
  /// that writes `result.produced`).
  void finish_result(const Result& result);
  /// Operand `index` bound as `desc` and read by a primitive computing in
  /// `compute`: reordered_to(..., in_compute(desc, compute)).
  dnnl::memory operand_in(int index, const dnnl::memory::desc& desc,
                          dnnl::memory::data_type compute) {
    return reordered_to(bind_operand(index, desc), in_compute(desc, compute));
  }
  /// Result `index` bound as `desc` and written by a primitive computing in
  /// `compute`: bind_result_as(index, desc, in_compute(desc, compute)).
  Result result_in(int index, const dnnl::memory::desc& desc, dnnl::memory::data_type compute) {
    return bind_result_as(index, desc, in_compute(desc, compute));
  }

  void run(const void* const* operands, void* const* results) override;
  absl::string_view name() const override { return name_; }

 private:
  struct Binding {
    dnnl::memory memory;
    int index;
  };
  struct Step {
    dnnl::primitive primitive;
    std::vector<dnnl_exec_arg_t> args;  // the C form, so a run allocates nothing
  };
  std::string name_;
  dnnl::stream stream_;
  std::vector<Binding> operand_bindings_;
  std::vector<Binding> result_bindings_;
  std::vector<dnnl::memory> memories_;  // keeps every memory in args alive
  std::vector<Step> steps_;
};

/// Runs `build` (which creates primitive descriptors and may throw
/// dnnl::error) and turns oneDNN's "unimplemented" into nullptr, so the
/// ref kernel runs instead; other oneDNN errors become a Status naming
/// `what` (the op and its shapes).
absl::StatusOr<std::unique_ptr<CpuKernel>> build_or_decline(
    const std::string& what, const std::function<std::unique_ptr<CpuKernel>()>& build);

/// Whether oneDNN runs bf16 on the CPU's own bf16 dot products
/// (avx512_core_bf16 and up); on avx512_core it emulates them.
bool has_native_bf16();

/// build_or_decline(build(type)), and where oneDNN declines a bf16 kernel
/// (it has none below avx512_core), build(f32): that kernel widens its bf16
/// operands to f32 (exact) and rounds each result once to bf16, the
/// contract of oneDNN's bf16 kernels (f32 arithmetic inside), instead of
/// leaving the op to the ref kernel. `widen_emulated`: build(f32) at once
/// where oneDNN would emulate bf16 (!has_native_bf16()); its emulated
/// matmul pairs the k terms, padding an odd k with a zero that meets an
/// inf as NaN (OneDnnMatmul.PropagatesNaNAndInf with oneDNN held to
/// AVX512_CORE).
absl::StatusOr<std::unique_ptr<CpuKernel>> build_or_widen(
    const std::string& what, dnnl::memory::data_type type,
    const std::function<std::unique_ptr<CpuKernel>(dnnl::memory::data_type compute)>& build,
    bool widen_emulated = false);

/// "conv2d f32[2, 3, 8, 8], f32[4, 3, 3, 3]": the node's op and operand
/// types, for error messages.
std::string describe_node(const KernelRequest& request);

// The op families, one file each. Each returns nullptr for nodes it does
// not handle.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_matmul_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_transposed_matmul_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_conv_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_pool_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_normalization_kernel(const KernelRequest& request);

}  // namespace mstep::cpu::onednn
