// permute on the host: the common case in training graphs swaps the last
// two dims of a matrix or a batch of matrices (a weight gradient, a
// transposed activation). f32 and bf16 go through oneDNN's reorder (a JIT
// transpose) into the result read with transposed strides; other element
// types copy 16x16 tiles, so reads and writes stay within a few cache
// lines, split over the cores. Other permutations: StridedCopyKernel.
#include <algorithm>
#include <cstring>

#include "lib/backends/cpu/HostKernels.h"
#include "lib/backends/cpu/HostSimd.h"
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"

namespace mstep::cpu {

namespace {

constexpr int64_t kTile = 16;

template <typename T>
class TransposeKernel final : public CpuKernel {
 public:
  TransposeKernel(int64_t batch, int64_t rows, int64_t cols)
      : batch_(batch), rows_(rows), cols_(cols) {}

  /// out[b, j, i] = in[b, i, j] for in [batch, rows, cols].
  void run(const void* const* operands, void* const* results) override {
    const T* in = static_cast<const T*>(operands[0]);
    T* out = static_cast<T*>(results[0]);
    const int64_t row_tiles = (rows_ + kTile - 1) / kTile;
    simd::parallel_ranges(batch_ * row_tiles, batch_ * rows_ * cols_, [&](int, int64_t begin,
                                                                          int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t b = t / row_tiles, i0 = (t % row_tiles) * kTile;
        const int64_t i1 = std::min(rows_, i0 + kTile);
        const T* src = in + b * rows_ * cols_;
        T* dst = out + b * rows_ * cols_;
        for (int64_t j0 = 0; j0 < cols_; j0 += kTile) {
          const int64_t j1 = std::min(cols_, j0 + kTile);
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j) dst[j * rows_ + i] = src[i * cols_ + j];
        }
      }
    });
  }
  absl::string_view name() const override { return "host.transpose"; }

 private:
  int64_t batch_, rows_, cols_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_transpose_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (!is_matrix_transpose(node)) return nullptr;
  const TensorType& in = request.graph.type_of(node.operands[0]);
  const int64_t rank = in.shape.rank();
  int64_t batch = 1;
  for (int64_t d = 0; d < rank - 2; ++d) batch *= in.shape[d];
  const int64_t rows = in.shape[rank - 2], cols = in.shape[rank - 1];
  if (auto type = onednn::data_type_of(in.dtype); type && in.numel() > 0) {
    using dnnl::memory;
    auto kernel = std::make_unique<onednn::PrimitiveKernel>("onednn.transpose");
    const memory::dims dims = {batch, rows, cols};
    memory from = kernel->bind_operand(0, onednn::dense_desc(dims, *type));
    memory to = kernel->bind_result(0, memory::desc(dims, *type, memory::dims{rows * cols, 1, rows}));
    kernel->add_reorder(from, to);
    return kernel;
  }
  switch (element_size(in.dtype)) {
    case 4: return std::make_unique<TransposeKernel<uint32_t>>(batch, rows, cols);
    case 8: return std::make_unique<TransposeKernel<uint64_t>>(batch, rows, cols);
    case 2: return std::make_unique<TransposeKernel<uint16_t>>(batch, rows, cols);
    default: return nullptr;
  }
}

}  // namespace mstep::cpu
