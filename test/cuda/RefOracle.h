// The oracle of the cuda host-numerics tests: a step module run on the ref
// backend (lib/backends/ref, whose kernels the cuda loop nests follow) on
// the same input bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cuda::testing {

/// The outputs of func @step in `module` on ref for `inputs` (the bytes of
/// each step input), as bytes.
inline std::vector<std::vector<char>> run_on_ref(mlir::ModuleOp module,
                                                 const std::vector<std::vector<char>>& inputs) {
  Backend* ref = *BackendRegistry::get(DeviceType::ref);
  auto exe = (*CompilerRegistry::get("ref"))->compile(module, *ref, RuntimeOptions{});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  std::vector<BufferPtr> buffers(inputs.size());
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto type = tensor_type_from_mlir(step.getArgument(i).getType());
    EXPECT_TRUE(type.ok()) << type.status();
    if (!type.ok()) return {};
    auto buffer = ref->allocate(*type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return {};
    EXPECT_TRUE(ref->copy_in(**buffer, inputs[i].data(), inputs[i].size()).ok());
    buffers[i] = *buffer;
  }
  auto outputs = (*exe)->run(buffers);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  std::vector<std::vector<char>> result;
  for (const BufferPtr& out : outputs.ok() ? *outputs : std::vector<BufferPtr>{}) {
    std::vector<char> bytes(out->type().bytes());
    EXPECT_TRUE(ref->copy_out(*out, bytes.data(), bytes.size()).ok());
    result.push_back(std::move(bytes));
  }
  return result;
}

}  // namespace mstep::cuda::testing
