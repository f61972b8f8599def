// Shape and data-movement ops. Results are new lazy values (no views are
// shared with the input: writes go through copy_() on whole tensors).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep {

/// One dim may be -1 and is inferred.
Tensor reshape(const Tensor& x, absl::Span<const int64_t> shape);
Tensor view(const Tensor& x, absl::Span<const int64_t> shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor permute(const Tensor& x, absl::Span<const int64_t> perm);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
/// Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a dim.
Tensor expand(const Tensor& x, absl::Span<const int64_t> shape);
/// Removes every size-1 dim, or only `dim` when it has size 1.
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);

inline constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();
/// x[start:end:step] along `dim`, with Python's clamping of start and end.
Tensor slice(const Tensor& x, int64_t dim, int64_t start = 0,
             int64_t end = kSliceEnd, int64_t step = 1);
Tensor cat(absl::Span<const Tensor> tensors, int64_t dim = 0);
Tensor stack(absl::Span<const Tensor> tensors, int64_t dim = 0);
/// Splits into `chunks` pieces of ceil(size / chunks) (the last may be
/// smaller), as torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// out[i][j] = x[index[i][j]][j] for dim 0, and so on (torch.gather).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// Rows of `weight` [num, dim] picked by integer `indices` (any shape).
Tensor embedding(const Tensor& indices, const Tensor& weight);
/// Constant padding. `pads` lists (before, after) pairs starting from the
/// last dim, as torch.nn.functional.pad.
Tensor pad(const Tensor& x, absl::Span<const int64_t> pads, double value = 0);
/// Upper / lower triangle of the last two dims.
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);

/// x with src added at the positions `index` names along `dim`:
/// out[index[i][j]][j] += src[i][j] for dim 0, and so on; duplicate
/// indices accumulate (torch.scatter_add). index, src and x have one rank;
/// index may be smaller than src in any dim and than x outside `dim`.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x with slice j of `source` along `dim` added to slice index[j] of x;
/// duplicate indices accumulate (torch.index_add with alpha 1). The index
/// is 1-d (or 0-d); source matches x except in `dim`, of size index.numel().
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
/// x with src written into x[start:end:step] along `dim` (bounds clamped
/// as slice()); src has the slice's shape and is cast to x's dtype
/// (torch.slice_scatter).
Tensor slice_scatter(const Tensor& x, const Tensor& src, int64_t dim = 0, int64_t start = 0,
                     int64_t end = kSliceEnd, int64_t step = 1);

}  // namespace mstep
