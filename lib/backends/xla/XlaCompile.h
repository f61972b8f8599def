// The xla backend's compile half as functions: the step function's program
// from an optimized module (XlaCompiler, the backend's BackendCompiler, is
// one user; mstep-aot, which writes the function as a stand-alone shared
// object, the other). Library-internal; MLIR and LLVM stay out of this
// header.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/xla/XlaStep.h"
#include "mstep/runtime/Options.h"

namespace llvm {
class Module;
}
namespace mlir {
class ModuleOp;
}

namespace mstep::xla {

/// Adds to the LLVM module that holds the step function (kXlaStepSymbol)
/// before it is optimized; `program` has its graph, layout and callouts.
using ExtendStepModule = std::function<absl::Status(llvm::Module&, const XlaProgram&)>;

/// Generates the step function of `module` (func @step, after the xla
/// pipeline: the arena is planned) for this host: the program with its
/// shared object (linked with `link_args` appended, see
/// cpu::link_shared_object), not yet loaded.
absl::StatusOr<XlaProgram> compile_xla_program(mlir::ModuleOp module,
                                               const ExtendStepModule& extend = nullptr,
                                               const std::vector<std::string>& link_args = {});

/// The C entry point of an ahead-of-time step (mstep-aot).
inline constexpr char kAotStepSymbol[] = "mstep_step";

/// The step of `module` as a stand-alone shared object exporting
///   int mstep_step(const void* const* inputs, void* const* outputs, void* temp)
/// (kXlaStepSymbol's convention without the XlaRuntimeCalls table: the
/// matmuls call the runtime's oneDNN matmul code linked in (XlaGemm.h),
/// the convolutions' gemms oneDNN's dnnl_sgemm, the loop nests run on the
/// calling thread), linked against libdnnl (and libc, libm) with no other
/// undefined symbol. A step whose function calls out for ops is refused
/// (FailedPrecondition) with an error listing them: a stand-alone object
/// has no runtime kernels to call.
absl::StatusOr<XlaProgram> compile_xla_aot(mlir::ModuleOp module);

/// compile_xla_aot of `graph` (an unfused step graph) after the shared
/// passes and the xla pipeline, as `runtime` sets them (its dump_dir and
/// xla_memory_limit).
absl::StatusOr<XlaProgram> compile_graph_aot(const TraceGraph& graph,
                                             const RuntimeOptions& runtime);

} // namespace mstep::xla
