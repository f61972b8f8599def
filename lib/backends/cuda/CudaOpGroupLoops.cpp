// Shared parts of wrapped sets' kernels: see CudaOpGroupLoops.h.
#include "lib/backends/cuda/CudaOpGroupLoops.h"

#include "lib/backends/cuda/CudaOpGroups.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/ir/dialect/ScalarForms.h"

namespace mstep::cuda {

using namespace mlir;

llvm::DenseMap<Value, loops::Flat> op_group_buffers(loops::Nest& nest, Operation* group) {
  llvm::DenseMap<Value, loops::Flat> buffers;
  unsigned param = 0;
  for (Value input : op_group_inputs(group)) buffers[input] = nest.flat(param++);
  for (Value result : group->getRegion(0).front().getTerminator()->getOperands())
    buffers[result] = nest.flat(param++);
  return buffers;
}

SmallVector<Value> fusion_elements(loops::Nest& nest, Operation* fusion_op,
                                   function_ref<Value(Value)> read) {
  auto fusion = cast<dialect::FusionOp>(fusion_op);
  Block& inner = fusion.getBody().front();
  llvm::DenseMap<Value, Value> element;
  for (auto [arg, input] : llvm::zip(inner.getArguments(), fusion.getInputs()))
    element[arg] = read(input);
  for (Operation& scalar : inner.without_terminator()) {
    SmallVector<Value> operands;
    for (Value operand : scalar.getOperands()) operands.push_back(element.at(operand));
    element[scalar.getResult(0)] = dialect::emitScalarOp(nest.b, &scalar, operands);
  }
  SmallVector<Value> results;
  for (Value yielded : inner.getTerminator()->getOperands()) results.push_back(element.at(yielded));
  return results;
}

} // namespace mstep::cuda
