// The cpu backend's compile half, for the files that build executables
// from a compiled module (CpuCompiler.cpp, and the disk-cache loader until
// the cpu executable format no longer carries module text).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/FusionJit.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cpu {

/// The executable of func @step of `module` (after the cpu pipeline: its
/// arena plan is read from the IR). `jit` holds its compiled fusions.
absl::StatusOr<std::unique_ptr<Executable>> build_cpu_executable(mlir::ModuleOp module,
                                                                 std::shared_ptr<FusionJit> jit,
                                                                 const RuntimeOptions& options);

}  // namespace mstep::cpu
