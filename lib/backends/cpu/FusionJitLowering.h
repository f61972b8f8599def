// The back half of the fusion JIT: the vectorized kernel module (from
// FusionKernelEmitter.h) through the MLIR lowering to the LLVM dialect, LLVM
// IR with one FusionEntry per nest, the LLVM optimizer and codegen for this
// host, to the bytes of one relocatable object (SharedObjectLink.h links it
// into the shared object the runtime loads). Library-internal.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/FusionKernelEmitter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

namespace llvm {
class Module;
}

namespace mstep::cpu {

/// Declares the dialects and LLVM IR translations the kernels and their
/// lowering use (CpuCompiler::get_dependent_dialects). Loading them is the
/// compiler driver's work; FusionJit::compile checks that it was done.
void declare_kernel_dialects(mlir::DialectRegistry& registry);

/// This host as a code generation target: its CPU and every feature LLVM
/// detects on it that the runtime can check (HostCpuFeatures.h); a feature
/// it cannot check is left off, so the code never needs it.
FusionTarget host_target();

/// Adds functions to the LLVM module of the kernels before it is optimized
/// (the xla backend's step function, which calls the nests' entries).
using ExtendLlvmModule = std::function<absl::Status(llvm::Module&)>;

/// Lowers `kernels` in place and generates a position-independent object
/// for `target` (host_target()), with what `extend` adds. Math functions: exp, log, log1p, tanh and
/// erf on f32 (and on bf16/f16, which compute in f32) use MLIR's polynomial
/// approximations, which vectorize; sin, cos and every f64 transcendental
/// call libm.
absl::StatusOr<std::string> generate_object(mlir::ModuleOp kernels,
                                            const std::vector<NestSignature>& nests,
                                            const FusionTarget& target,
                                            const ExtendLlvmModule& extend = nullptr);

/// Makes LLVM's native target usable (once per process).
void initialize_native_target();

} // namespace mstep::cpu
