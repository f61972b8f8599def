// The loops of mstep.conv2d and its two gradients on cuda (NCHW), as
// direct loop nests (no im2col, no cuBLASLt: correctness first): one lane
// per output element for the forward op, per input element for the input
// gradient (gathering the output gradient over the taps that reach it)
// and per weight element for the weight gradient (summing over the batch
// and the output positions). Each lane adds in the order RefLinalg.cpp
// and RefLinalgGrad.cpp add that element's terms, in ref's accumulator
// (CudaPoolLoops.h: f64 for f32, f32 for the 16-bit floats), so the
// results are ref's bit for bit; no atomics. Library-internal; MLIR.
#pragma once

#include "mlir/IR/Operation.h"

namespace mstep::cuda {

namespace loops {
class Nest;  // CudaLoopNest.h (not included: its `Value` is MLIR's)
}

/// Whether `op` is one of the ops build_conv_loops builds.
bool builds_conv_loops(mlir::Operation* op);

/// `op`'s loops in `nest` (parameters: its operands, then its result).
void build_conv_loops(mlir::Operation* op, loops::Nest& nest);

}  // namespace mstep::cuda
