// Names of opcodes, ALU ops and activation functions, for messages.
#include "lib/backends/neuron/TileInstruction.h"

#include "absl/strings/str_cat.h"

namespace mstep::neuron {

absl::string_view opcode_name(Opcode op) {
  switch (op) {
  case Opcode::dma_copy:
    return "dma_copy";
  case Opcode::nc_matmul:
    return "nc_matmul";
  case Opcode::tensor_tensor:
    return "tensor_tensor";
  case Opcode::select:
    return "select";
  case Opcode::tensor_scalar:
    return "tensor_scalar";
  case Opcode::activation:
    return "activation";
  case Opcode::tensor_copy:
    return "tensor_copy";
  case Opcode::tensor_reduce:
    return "tensor_reduce";
  case Opcode::iota:
    return "iota";
  case Opcode::affine_select:
    return "affine_select";
  case Opcode::bn_stats:
    return "bn_stats";
  case Opcode::bn_aggr:
    return "bn_aggr";
  case Opcode::dma_indirect:
    return "dma_indirect";
  case Opcode::philox_uniform:
    return "philox_uniform";
  }
  return "?";
}

absl::string_view alu_op_name(AluOp op) {
  switch (op) {
  case AluOp::add:
    return "add";
  case AluOp::subtract:
    return "subtract";
  case AluOp::multiply:
    return "multiply";
  case AluOp::max:
    return "max";
  case AluOp::min:
    return "min";
  case AluOp::divide:
    return "divide";
  case AluOp::is_ge:
    return "is_ge";
  case AluOp::is_equal:
    return "is_equal";
  case AluOp::not_equal:
    return "not_equal";
  }
  return "?";
}

absl::string_view activation_name(ActivationFunction f) {
  switch (f) {
  case ActivationFunction::identity:
    return "identity";
  case ActivationFunction::exp:
    return "exp";
  case ActivationFunction::tanh:
    return "tanh";
  case ActivationFunction::relu:
    return "relu";
  case ActivationFunction::sigmoid:
    return "sigmoid";
  case ActivationFunction::square:
    return "square";
  case ActivationFunction::rsqrt:
    return "rsqrt";
  case ActivationFunction::log:
    return "log";
  case ActivationFunction::sqrt:
    return "sqrt";
  case ActivationFunction::erf:
    return "erf";
  case ActivationFunction::gelu:
    return "gelu";
  case ActivationFunction::gelu_tanh:
    return "gelu_tanh";
  case ActivationFunction::cos:
    return "cos";
  }
  return "?";
}

std::string describe_instruction(int64_t index, const Instruction& inst) {
  return absl::StrCat("#", index, " ", engine_name(inst.engine), " ", opcode_name(inst.opcode));
}

int completion_queue(const Instruction& inst) {
  switch (inst.engine) {
  case Engine::tensor:
    return 0;
  case Engine::vector:
    return 1;
  case Engine::scalar:
    return 2;
  case Engine::gpsimd:
    return 3;
  case Engine::sync:
    return 4 + inst.dma_engine;
  }
  return 0;
}

} // namespace mstep::neuron
