// The loops of the 2-D pools on cuda (NCHW): mstep.max_pool2d,
// mstep.avg_pool2d and their gradients, one lane per output element for
// the forward ops and one lane per input element for the gradients, which
// gather from the windows that hold the element in ref's window order
// (RefLinalg.cpp, RefLinalgGrad.cpp): no atomics, the same sums as ref
// bit for bit. Also the accumulator and bounds test those kernels and the
// convolutions' (CudaConvLoops.h) share. Library-internal; MLIR.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mstep::cuda {

namespace loops {
class Nest;  // CudaLoopNest.h (not included: its `Value` is MLIR's)

/// ref's linalg accumulator for the float `element` type: f64 for f32 and
/// f64, f32 for the 16-bit floats (RefLinalg.cpp's Accumulator).
mlir::Type accumulator_of(mlir::Type element);
/// `v` (of `element` type) widened to accumulator_of(element), exact.
mlir::Value widen(Nest& nest, mlir::Value v, mlir::Type element);
/// An accumulator `v` rounded to `element` as ref narrows: through f32
/// for the 16-bit floats.
mlir::Value narrow(Nest& nest, mlir::Value v, mlir::Type element);
/// a && b (i1s).
mlir::Value both(Nest& nest, mlir::Value a, mlir::Value b);
/// Whether 0 <= i < n, `i` a signed index (a window's tap in the padding
/// is negative).
mlir::Value inside(Nest& nest, mlir::Value i, int64_t n);
}  // namespace loops

/// Whether `op` is one of the ops build_pool_loops builds.
bool builds_pool_loops(mlir::Operation* op);

/// `op`'s loops in `nest` (parameters: its operands, then its result). An
/// error (not_lowered_for_cuda) for a max_pool2d of bool.
absl::Status build_pool_loops(mlir::Operation* op, loops::Nest& nest);

}  // namespace mstep::cuda
