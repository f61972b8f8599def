// The ref backend's kernel interface: one plain C++ function per op,
// registered into a table by op family, plus the helpers kernels share
// (dtype dispatch, broadcast indexing, index tensors).
#pragma once

#include <array>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "lib/backends/host/HostBuffer.h"
#include "mstep/core/HalfTypes.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Backend.h"

namespace mstep::ref {

// Ref kernels read and write host buffers, so the cpu backend can run them on
// its own (lib/backends/host).
using host::HostBuffer;

struct KernelArgs {
  const GraphNode& node;
  absl::Span<const HostBuffer* const> inputs;
  absl::Span<HostBuffer* const> outputs;  // allocated with the result types

  const HostBuffer& in(size_t i) const { return *inputs[i]; }
  HostBuffer& out(size_t i = 0) const { return *outputs[i]; }
};

using RefKernel = absl::Status (*)(const KernelArgs&);
using KernelTable = std::array<RefKernel, kNumOpKinds>;

// One registration function per op family (one file each).
void register_creation_kernels(KernelTable& table);
void register_elementwise_kernels(KernelTable& table);
void register_reduction_kernels(KernelTable& table);
void register_reshape_kernels(KernelTable& table);
void register_shape_kernels(KernelTable& table);
void register_scatter_kernels(KernelTable& table);
void register_linalg_kernels(KernelTable& table);
void register_linalg_grad_kernels(KernelTable& table);
void register_nn_kernels(KernelTable& table);
void register_attention_kernels(KernelTable& table);
void register_attention_grad_kernels(KernelTable& table);
void register_loss_kernels(KernelTable& table);
void register_optimizer_kernels(KernelTable& table);
void register_custom_kernels(KernelTable& table);
void register_collective_kernels(KernelTable& table);

/// OK when the user registered a "ref" host kernel for the custom op of
/// `node`; else an error naming the op and the backend (RefCustom.cpp).
absl::Status check_custom_kernel(const GraphNode& node);

/// The ref kernel of `op` (nullptr if it has none). The cpu backend runs
/// these for the ops it has no kernel of its own for.
RefKernel ref_kernel(OpKind op);
/// An interpreter of `graph` (as the ref backend's compile() builds), for a
/// fusion region another backend could not compile.
absl::StatusOr<std::unique_ptr<Executable>> make_ref_executable(TraceGraph graph);

/// The arithmetic type used for storage type T: float for the 16-bit
/// floats and f32, double for f64, T itself for integers and bool.
template <typename T>
using Compute =
    std::conditional_t<std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>,
                       float, T>;

/// Calls `f.template operator()<T>()` with T the storage type of `dtype`.
template <typename F>
decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::bf16: return f.template operator()<BFloat16>();
    case DType::f16: return f.template operator()<Float16>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::boolean: return f.template operator()<bool>();
  }
  return f.template operator()<float>();
}

/// Like dispatch() for the floating dtypes only.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f64: return f.template operator()<double>();
    case DType::bf16: return f.template operator()<BFloat16>();
    case DType::f16: return f.template operator()<Float16>();
    default: return f.template operator()<float>();
  }
}

/// Strides (in elements) that read `in` as if broadcast to `out`: 0 for
/// broadcast dims and for leading dims `in` does not have.
Shape::Dims broadcast_strides(const Shape& in, const Shape& out);

/// Walks every index of `shape` in row-major order, keeping one offset per
/// operand (each with its own strides). `fn(out_index, offsets)` is called
/// per element; offsets[k] indexes operand k.
template <size_t N, typename F>
void for_each_strided(const Shape& shape,
                      const std::array<Shape::Dims, N>& strides, F&& fn) {
  const int64_t total = shape.numel();
  if (total == 0) return;
  const int64_t rank = shape.rank();
  Shape::Dims idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

/// Product of shape[begin, end).
inline int64_t span_numel(const Shape& shape, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

/// Element i of an integer (i32 or i64) index buffer.
inline int64_t load_index(const HostBuffer& index, int64_t i) {
  if (index.type().dtype == DType::i32) return index.data<int32_t>()[i];
  return index.data<int64_t>()[i];
}

/// Checks that every value of `index` is in [0, size), the extent of dim
/// `dim` of `input`, before a kernel reads or writes through it. As in
/// PyTorch, negative indices are not wrapped. `note` ends the message.
inline absl::Status check_indices(absl::string_view op, const HostBuffer& index,
                                  const HostBuffer& input, int64_t dim, int64_t size,
                                  absl::string_view note = "") {
  for (int64_t i = 0; i < index.numel(); ++i) {
    const int64_t v = load_index(index, i);
    if (v < 0 || v >= size)
      return absl::InvalidArgumentError(
          absl::StrCat("mstep::", op, ": index ", v, " (element ", i, " of the index ",
                       index.type().to_string(), ") is out of range [0, ", size, ") for dim ", dim,
                       " of the input ", input.type().to_string(),
                       ". Indices must be in [0, size); negative indices are not wrapped.", note));
  }
  return absl::OkStatus();
}

}  // namespace mstep::ref
