// The arithmetic of the row-wise ops softmax, log_softmax, layer_norm and
// rms_norm, apart from where their rows are: each op's statistics of a row
// and the value of element j, all in f64 (RefNN.cpp's kernels), given how
// to read element j of the input (and of the weight and bias). The op's
// own loops (CudaOpLoops.cpp) and the row groups' kernels
// (CudaRowGroupLoops.cpp) build the same arithmetic from them, so that a
// norm inside a group gives the bytes it gives alone. Library-internal;
// MLIR.
#pragma once

#include <functional>

#include "lib/backends/cuda/CudaBlockRows.h"

namespace mstep::cuda::loops {

/// Element j of a row, as an f64.
using RowElement = std::function<Value(Value)>;

struct RowForm {
  /// The row's statistics, in order (RowStat::term reads the earlier
  /// ones, finished, at stats[0 ..)).
  std::vector<RowStat> stats;
  /// Output element j, in f64 (the caller rounds it to the result's
  /// dtype), given all the statistics, finished.
  std::function<Value(Value, ArrayRef<Value>)> element;
};

/// softmax or log_softmax of a row of n elements: the max, then the sum of
/// exp(x - max) (its log for log_softmax).
RowForm softmax_form(Nest& nest, bool log, RowElement x);

/// layer_norm (mean, then 1 / sqrt(var + eps)) or rms_norm (1 / sqrt(mean
/// of squares + eps)) of a row of `cols` elements; `weight`, `bias` may be
/// empty.
RowForm norm_form(Nest& nest, int64_t cols, double eps, bool rms, RowElement x,
                  RowElement weight, RowElement bias);

/// std::max(m, v) as ref takes it: v when m < v (a NaN is skipped; it
/// poisons a sum instead).
Value max_as_ref(ImplicitLocOpBuilder& b, Value m, Value v);

} // namespace mstep::cuda::loops
