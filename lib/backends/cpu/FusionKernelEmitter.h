// Emits the native kernels of a step's mstep.fusion ops as MLIR: one
// func.func per loop nest, on memrefs, vectorized with linalg::vectorize.
// FusionJitLowering.h takes the module the rest of the way to machine code.
// Library-internal; includes MLIR headers.
#pragma once

#include <string>
#include <vector>

#include "lib/backends/cpu/FusionJitFormat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mstep::cpu {

/// How the entry of one nest (a FusionEntry, added after lowering to LLVM)
/// calls the nest's kernel function. The kernel takes, in order: one
/// pointer per operand it reads, one per result it writes, then `begin`
/// and `end` (i64) over its outer dimension.
struct NestSignature {
  std::string kernel;
  std::string entry;
  /// Fusion operand numbers, in the kernel's argument order.
  std::vector<unsigned> operands;
  /// Fusion result numbers, after the operands.
  std::vector<unsigned> results;
};

struct EmittedKernels {
  /// One per top-level fusion of @step, in program order (no object yet).
  std::vector<FusionInfo> fusions;
  std::vector<NestSignature> nests;
};

/// Emits a kernel function into `kernels` for each loop nest of every
/// top-level mstep.fusion of `step`; `step` is only read. A fusion with an
/// op that has no scalar form is reported as skipped.
///
/// A nest computes the fusion results of one shape:
/// 1. It replays the region ops those results depend on, each as its scalar
///    form (mstep/ir/dialect/ScalarForms.h, as in mstep-lower-to-linalg), at
///    every position.
/// 2. Its dims are collapsed: size-1 dims are dropped, and neighbours that
///    every operand reads alike (both indexed or both broadcast) merge, so
///    an elementwise op on a [B, T, C] tensor with a [C] bias is a 2-D nest.
///    Each operand's memref holds only the dims it is indexed by.
/// 3. The outer dim runs over [begin, end), the others over their extent,
///    and the innermost dim in tiles of a few vector registers: a
///    linalg.generic per tile, vectorized with masks (the last tile of a
///    row is partial).
///    Operands broadcast along the innermost dim are scalars, loaded once
///    per row.
EmittedKernels emit_fusion_kernels(mlir::func::FuncOp step, mlir::ModuleOp kernels);

} // namespace mstep::cpu
