// Shape arithmetic shared by the mstep op verifiers (see ShapeRules.h).
#include "lib/ir/dialect/ShapeRules.h"

#include <algorithm>
#include <cstdio>

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace mstep::dialect::rules {

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string formatDouble(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return buf;
}

std::optional<int64_t> numElements(llvm::ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0)) return 0;  // even when the other dims overflow
  std::optional<int64_t> n = 1;
  for (int64_t d : shape)
    if (!(n = llvm::checkedMul(*n, d))) return std::nullopt;
  return n;
}

std::optional<Dims> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                                    int64_t* badDim) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank, 1);
  for (size_t i = 1; i <= rank; ++i) {
    const int64_t x = i <= a.size() ? a[a.size() - i] : 1;
    const int64_t y = i <= b.size() ? b[b.size() - i] : 1;
    if (x != y && x != 1 && y != 1) {
      if (badDim) *badDim = -static_cast<int64_t>(i);
      return std::nullopt;
    }
    out[rank - i] = x == 1 ? y : x;
  }
  return out;
}

std::optional<std::string> checkDimList(llvm::ArrayRef<int64_t> dims, int64_t rank) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank)
      return "dim " + std::to_string(dims[i]) + " is out of range for rank " +
             std::to_string(rank) + " (dims must be in [0, rank))";
    if (i > 0 && dims[i] <= dims[i - 1])
      return "dims " + shapeString(dims) + " must be sorted ascending without duplicates";
  }
  return std::nullopt;
}

Dims reducedShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims, bool keepdim) {
  Dims out;
  size_t next = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (next < dims.size() && dims[next] == d) {
      ++next;
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(shape[d]);
    }
  }
  return out;
}

int64_t sliceLength(int64_t start, int64_t end, int64_t step) {
  return end <= start ? 0 : (end - start - 1) / step + 1;
}

std::optional<int64_t> convOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                                      int64_t dilation) {
  // span = dilation * (kernel - 1) + 1 (>= 1), padded = in + 2 * padding.
  const std::optional<int64_t> span = llvm::checkedMulAdd<int64_t>(dilation, kernel - 1, 1);
  const std::optional<int64_t> padded = llvm::checkedMulAdd<int64_t>(padding, 2, in);
  if (!span || !padded) return std::nullopt;
  if (*span > *padded) return 0;
  return llvm::checkedAdd<int64_t>((*padded - *span) / stride, 1);
}

namespace {
int64_t floorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
}  // namespace

std::optional<int64_t> poolOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                                      int64_t dilation, bool ceilMode) {
  // out = floor((in + 2 * padding - span + (ceilMode ? stride - 1 : 0)) / stride) + 1
  // with span = dilation * (kernel - 1) + 1, every step checked.
  const std::optional<int64_t> span = llvm::checkedMulAdd<int64_t>(dilation, kernel - 1, 1);
  std::optional<int64_t> numerator = llvm::checkedMulAdd<int64_t>(padding, 2, in);
  if (!span || !numerator) return std::nullopt;
  numerator = llvm::checkedSub(*numerator, *span);
  if (numerator && ceilMode) numerator = llvm::checkedAdd<int64_t>(*numerator, stride - 1);
  if (!numerator) return std::nullopt;
  const int64_t out = floorDiv(*numerator, stride) + 1;  // no overflow: span >= 1
  // ceil_mode: a last window that would start in the right padding is dropped.
  const std::optional<int64_t> lastStart = llvm::checkedMul<int64_t>(out - 1, stride);
  if (ceilMode && (!lastStart || *lastStart >= in + padding)) return out - 1;
  return out;
}

}  // namespace mstep::dialect::rules
