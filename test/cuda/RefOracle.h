// The oracle of the cuda host-numerics tests and of the GPU cases: a step
// module run on the ref backend (lib/backends/ref, whose kernels the cuda
// loop nests follow) on the same input bytes.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cuda::testing {

/// The outputs of func @step in `module` on ref for `inputs` (the bytes of
/// each step input), as bytes.
inline absl::StatusOr<std::vector<std::vector<char>>>
ref_outputs(mlir::ModuleOp module, const std::vector<std::vector<char>>& inputs) {
  MSTEP_ASSIGN_OR_RETURN(Backend * ref, BackendRegistry::get(DeviceType::ref));
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get("ref"));
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                         compiler->compile(module, *ref, RuntimeOptions{}));
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  if (!step || step.getNumArguments() != inputs.size())
    return absl::InvalidArgumentError(
        absl::StrCat("ref oracle: the step takes another number of inputs than ", inputs.size()));
  std::vector<BufferPtr> buffers;
  for (size_t i = 0; i < inputs.size(); ++i) {
    MSTEP_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_mlir(step.getArgument(i).getType()));
    if (type.bytes() != inputs[i].size())
      return absl::InvalidArgumentError(absl::StrCat("ref oracle: input ", i, " has ",
                                                     inputs[i].size(), " bytes, ", type.to_string(),
                                                     " needs ", type.bytes()));
    MSTEP_ASSIGN_OR_RETURN(BufferPtr buffer, ref->allocate(type));
    MSTEP_RETURN_IF_ERROR(ref->copy_in(*buffer, inputs[i].data(), inputs[i].size()));
    buffers.push_back(std::move(buffer));
  }
  MSTEP_ASSIGN_OR_RETURN(std::vector<BufferPtr> outputs, exe->run(buffers));
  std::vector<std::vector<char>> result;
  for (const BufferPtr& out : outputs) {
    std::vector<char> bytes(out->type().bytes());
    MSTEP_RETURN_IF_ERROR(ref->copy_out(*out, bytes.data(), bytes.size()));
    result.push_back(std::move(bytes));
  }
  return result;
}

} // namespace mstep::cuda::testing
