// Shape arithmetic shared by the mstep op verifiers: broadcasting, reduced
// shapes, window sizes. Plain C++ on dim lists (no MLIR headers), so the
// rules read like the tracer's checks in lib/api and stay cheap to build.
// Dims and attributes come from untrusted IR: any sum or product of them is
// checked for int64 overflow (std::nullopt) rather than left undefined.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace mstep::dialect::rules {

using Dims = llvm::SmallVector<int64_t, 4>;

/// "[2, 3]"; "[]" for a 0-d shape.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// "2.5", "1e-05", "inf": a double for a diagnostic (%g).
std::string formatDouble(double value);

/// The element count of a static shape, or nullopt when it overflows int64.
std::optional<int64_t> numElements(llvm::ArrayRef<int64_t> shape);

/// numpy broadcasting of two shapes. On a mismatch, nullopt and the
/// offending dim counted from the end (-1 is the last) in `*badDim`.
std::optional<Dims> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                                    int64_t* badDim = nullptr);

/// Why `dims` is not a sorted, duplicate-free list of dims of a rank-`rank`
/// tensor, or nullopt when it is.
std::optional<std::string> checkDimList(llvm::ArrayRef<int64_t> dims, int64_t rank);

/// `shape` without `dims` (set to 1 under keepdim). `dims` must be valid.
Dims reducedShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims, bool keepdim);

/// Elements in [start, end) taken every `step` (end >= start, step >= 1).
int64_t sliceLength(int64_t start, int64_t end, int64_t step);

/// Output size of a convolution along one spatial dim (may be < 1 when the
/// kernel does not fit), or nullopt when the window arithmetic overflows
/// int64. in >= 0, kernel >= 1, stride >= 1, padding >= 0, dilation >= 1.
std::optional<int64_t> convOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                                      int64_t dilation);

/// Output size of a pooling window along one spatial dim, PyTorch's rule
/// (ceil_mode drops a last window that starts in the padding), or nullopt
/// when the arithmetic overflows int64. Same preconditions as conv.
std::optional<int64_t> poolOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                                      int64_t dilation, bool ceilMode);

}  // namespace mstep::dialect::rules
