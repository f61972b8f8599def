// CudaViews' attention views (CudaViews::find_attention_views): the
// operands and results of a cuDNN SDPA step that are another value's bytes
// at strides (the heads' 4-D permutes, the q/k/v slices of a packed
// projection), so that no copy kernel makes them packed.
#include <numeric>

#include "lib/backends/cuda/CudaAttentionLowering.h"
#include "lib/backends/cuda/CudaViews.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mstep::cuda {

namespace {

/// A value's elements in another value's buffer: element strides per dim
/// and an element offset.
struct StridedLayout {
  llvm::SmallVector<int64_t> shape, strides;
  int64_t offset = 0;
};

llvm::ArrayRef<int64_t> dims_of(mlir::Value value) {
  return llvm::cast<mlir::ShapedType>(value.getType()).getShape();
}

int64_t bytes_per_element(mlir::Value value) {
  return (llvm::cast<mlir::ShapedType>(value.getType()).getElementTypeBitWidth() + 7) / 8;
}

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> packed_strides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The strides of `to` (as many elements as `from`) read from a layout of
/// `from`'s shape and strides without moving an element, or nullopt (a
/// reshape that mixes dims the strides keep apart). PyTorch's view rule
/// (computeStride): each run of dims contiguous with each other splits or
/// merges freely.
std::optional<llvm::SmallVector<int64_t>> reshaped_strides(llvm::ArrayRef<int64_t> from,
                                                           llvm::ArrayRef<int64_t> strides,
                                                           llvm::ArrayRef<int64_t> to) {
  llvm::SmallVector<int64_t> result(to.size(), 1);
  if (from.empty()) return result;
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t base = strides.back(), numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    numel *= from[d];
    if (d == 0 || (from[d - 1] != 1 && strides[d - 1] != numel * base)) {
      while (view_d >= 0 && (view_numel < numel || to[view_d] == 1)) {
        result[view_d] = view_numel * base;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != numel) return std::nullopt;
      if (d > 0) {
        base = strides[d - 1];
        numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return result;
}

/// `op` applied to `layout` (a permute, a reshape, a slice of unit steps),
/// or nullopt; `delta` gets the element offset `op` adds.
std::optional<StridedLayout> apply(mlir::Operation* op, StridedLayout layout, int64_t& delta) {
  delta = 0;
  if (auto permute = llvm::dyn_cast<dialect::PermuteOp>(op)) {
    StridedLayout out;
    for (int64_t d : permute.getPerm()) {
      out.shape.push_back(layout.shape[d]);
      out.strides.push_back(layout.strides[d]);
    }
    out.offset = layout.offset;
    return out;
  }
  if (llvm::isa<dialect::ReshapeOp>(op)) {
    llvm::ArrayRef<int64_t> to = dims_of(op->getResult(0));
    std::optional<llvm::SmallVector<int64_t>> strides =
        reshaped_strides(layout.shape, layout.strides, to);
    if (!strides) return std::nullopt;
    return StridedLayout{llvm::SmallVector<int64_t>(to), *strides, layout.offset};
  }
  if (auto slice = llvm::dyn_cast<dialect::SliceOp>(op)) {
    const int64_t dim = static_cast<int64_t>(slice.getDim());
    const int64_t length = dims_of(slice.getResult())[dim];
    if (slice.getStep() != 1 && length > 1) return std::nullopt;
    delta = static_cast<int64_t>(slice.getStart()) * layout.strides[dim];
    layout.offset += delta;
    layout.shape[dim] = length;
    return layout;
  }
  return std::nullopt;
}

/// `layout` (mstep's [..., rows, cols]) as cuDNN's [B, H, rows, cols]
/// strides (B dim 0, H the dims between), or nullopt when the head dims
/// do not merge, the last stride is not 1 or a stride is not a multiple of
/// 16 bytes (cuDNN's vector loads).
std::optional<SdpaStrides> cudnn_strides(const StridedLayout& layout, int64_t element_bytes) {
  const size_t r = layout.shape.size();
  if (r < 2) return std::nullopt;
  int64_t heads = 1;
  for (size_t d = 1; d + 2 < r; ++d) heads *= layout.shape[d];
  const llvm::SmallVector<int64_t> four = {r >= 3 ? layout.shape[0] : 1, heads,
                                           layout.shape[r - 2], layout.shape[r - 1]};
  std::optional<llvm::SmallVector<int64_t>> strides =
      reshaped_strides(layout.shape, layout.strides, four);
  if (!strides || (*strides)[3] != 1) return std::nullopt;
  for (int d = 0; d < 3; ++d)
    if ((*strides)[d] * element_bytes % 16 != 0) return std::nullopt;
  return SdpaStrides{(*strides)[0], (*strides)[1], (*strides)[2], (*strides)[3]};
}

/// Whether every use of `value` is as q, k, v or grad_out of an attention
/// op that cuDNN runs.
bool read_only_as_attention_input(mlir::Value value, const CudaRunsOnCudnn& on_cudnn) {
  if (value.use_empty()) return false;
  for (mlir::Operation* user : value.getUsers()) {
    if (!CudaAttentionLowering::is_attention(user) || !on_cudnn(user)) return false;
    const AttentionOperands a = attention_operands(user);
    mlir::Value grad_out;
    if (auto grad = llvm::dyn_cast<dialect::SdpaBackwardOp>(user)) grad_out = grad.getGradOut();
    if (value == a.mask || value == a.valid_seq_len || value == a.rng ||
        (value != a.q && value != a.k && value != a.v && value != grad_out))
      return false;
  }
  return true;
}

}  // namespace

void CudaViews::find_attention_views(mlir::Block& body,
                                     const llvm::DenseSet<mlir::Value>& returned,
                                     const CudaRunsOnCudnn& on_cudnn) {
  if (!on_cudnn) return;
  for (mlir::Operation& op : body) {
    if (!CudaAttentionLowering::is_attention(&op) || !on_cudnn(&op)) continue;
    for (mlir::Value operand : op.getOperands())
      if (!attention_strides_.count(operand) && !returned.contains(operand) &&
          read_only_as_attention_input(operand, on_cudnn))
        read_through_strides(operand, returned);
    for (mlir::Value result : op.getResults()) write_through_strides(result, returned);
  }
}

void CudaViews::read_through_strides(mlir::Value value,
                                     const llvm::DenseSet<mlir::Value>& returned) {
  // The permutes, reshapes and slices that made `value`, back to a value
  // whose bytes are packed (its own, or a packed view's); each between
  // read by the next alone.
  llvm::SmallVector<mlir::Operation*> chain;
  mlir::Value root = value;
  while (mlir::Operation* op = root.getDefiningOp()) {
    if (!llvm::isa<dialect::PermuteOp, dialect::ReshapeOp, dialect::SliceOp>(op) ||
        (root != value && (!root.hasOneUse() || returned.contains(root))))
      break;
    // A silent op that is not a view of its operand (a permute a matmul
    // writes transposed) holds bytes of its own.
    if (silent_.contains(op)) {
      auto it = views_.find(root);
      if (it == views_.end() || it->second.value != op->getOperand(0)) break;
    }
    chain.push_back(op);
    root = op->getOperand(0);
  }
  if (chain.empty() || attention_strides_.count(root)) return;
  StridedLayout layout{llvm::SmallVector<int64_t>(dims_of(root)), packed_strides(dims_of(root)), 0};
  llvm::SmallVector<int64_t> deltas;
  for (mlir::Operation* op : llvm::reverse(chain)) {
    int64_t delta = 0;
    std::optional<StridedLayout> next = apply(op, std::move(layout), delta);
    if (!next) return;
    layout = std::move(*next);
    deltas.push_back(delta);
  }
  const int64_t element_bytes = bytes_per_element(value);
  std::optional<SdpaStrides> strides = cudnn_strides(layout, element_bytes);
  if (!strides || layout.offset * element_bytes % 16 != 0) return;
  size_t i = 0;
  for (mlir::Operation* op : llvm::reverse(chain)) {
    views_[op->getResult(0)] = {op->getOperand(0), deltas[i++] * element_bytes};
    silent_.insert(op);
  }
  attention_strides_[value] = *strides;
}

void CudaViews::write_through_strides(mlir::Value value,
                                      const llvm::DenseSet<mlir::Value>& returned) {
  if (returned.contains(value) || !value.hasOneUse() || views_.count(value)) return;
  auto permute = llvm::dyn_cast<dialect::PermuteOp>(*value.getUsers().begin());
  if (!permute || silent_.contains(permute)) return;
  // The permute's result, packed, holds the bytes: value's dim perm[j] is
  // its dim j.
  llvm::ArrayRef<int64_t> shape = dims_of(permute.getResult());
  const llvm::SmallVector<int64_t> packed = packed_strides(shape);
  StridedLayout layout{llvm::SmallVector<int64_t>(dims_of(value)),
                       llvm::SmallVector<int64_t>(shape.size(), 0), 0};
  llvm::ArrayRef<int64_t> perm = permute.getPerm();
  for (size_t j = 0; j < perm.size(); ++j) layout.strides[perm[j]] = packed[j];
  std::optional<SdpaStrides> strides = cudnn_strides(layout, bytes_per_element(value));
  if (!strides) return;
  views_[value] = {permute.getResult(), 0};
  silent_.insert(permute);
  attention_strides_[value] = *strides;
}

std::optional<SdpaStrides> CudaViews::attention_strides(mlir::Value value) const {
  auto it = attention_strides_.find(value);
  if (it == attention_strides_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mstep::cuda
