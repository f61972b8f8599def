// What the kernels of wrapped sets of ops (CudaOpGroups.h) share: their
// parameters as buffers, and a fusion's element computed from its body's
// scalar forms. Library-internal; MLIR.
#pragma once

#include "lib/backends/cuda/CudaLoopNest.h"
#include "llvm/ADT/DenseMap.h"

namespace mstep::cuda {

/// In a wrapped set's kernel func: each of its inputs (op_group_inputs'
/// order) and yielded results as the func's parameters in that order, 1-D.
llvm::DenseMap<mlir::Value, loops::Flat> op_group_buffers(loops::Nest& nest,
                                                          mlir::Operation* group);

/// One element of each result of mstep.fusion `fusion`: its body's scalar
/// forms on `read(input)` for each of its inputs, at `nest`'s insertion
/// point.
llvm::SmallVector<mlir::Value> fusion_elements(
    loops::Nest& nest, mlir::Operation* fusion,
    llvm::function_ref<mlir::Value(mlir::Value)> read);

} // namespace mstep::cuda
