// The mstep compile pipeline: the passes a trace graph goes through between
// import and a backend, in order. This file orders the shared passes; a
// backend adds its own between them and the final check
// (BackendCompiler::build_target_pipeline). Includes MLIR headers.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "mlir/Pass/PassManager.h"

namespace mstep::passes {

struct PipelineOptions {
  /// Run the fusion passes (attention, optimizer, elementwise). Off, the
  /// module keeps one op per trace node: the unfused reference.
  bool fuse = true;
  /// With `fuse`: mstep-fuse-elementwise's custom-scalar-forms (calls of
  /// custom ops with a scalar form fuse instead of running their kernel).
  bool custom_scalar_forms = true;
};

/// The passes a backend adds (BackendCompiler::build_target_pipeline).
using TargetPasses = llvm::function_ref<void(mlir::OpPassManager&)>;

/// Adds, to a module-level pass manager:
///   canonicalize, cse,
///   [mstep-fuse-attention, mstep-fuse-optimizer, canonicalize, cse,
///    mstep-fuse-elementwise,]               (with options.fuse)
///   target_passes(pm)                        (the backend's own)
///   [mstep-verify-backend-contract]          (with options.fuse: the
///                                             contract assumes fused form)
void build_pipeline(mlir::OpPassManager& pm, const PipelineOptions& options,
                    TargetPasses target_passes);

/// The cpu backend's target passes: mstep-sink-collective-readers (an
/// asynchronous collective overlaps the ops before its first reader), then
/// the arena plan (mstep-plan-memory).
/// Here rather than with the cpu compiler so that pass-level tests and
/// benchmarks can build the planned pipeline without a backend.
void add_arena_plan(mlir::OpPassManager& pm);

/// build_pipeline with add_arena_plan: the planned pipeline.
inline void build_planned_pipeline(mlir::OpPassManager& pm, const PipelineOptions& options = {}) {
  build_pipeline(pm, options, add_arena_plan);
}

}  // namespace mstep::passes
