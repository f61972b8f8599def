// TileBuilder: first-fit placement of allocations and the instruction
// helpers.
#include "lib/backends/neuron/TileBuilder.h"

#include <algorithm>
#include <vector>

namespace mstep::neuron {

int32_t TileBuilder::hbm_tensor(std::string name, DType dtype, int64_t elements) {
  program_.hbm.push_back({std::move(name), dtype, elements});
  return static_cast<int32_t>(program_.hbm.size() - 1);
}

int32_t TileBuilder::allocate(BufferKind kind, int64_t bytes_per_partition, std::string name) {
  const int64_t now = static_cast<int64_t>(program_.instructions.size());
  const int64_t align = kind == BufferKind::psum ? kPsumBankBytes : 64;
  // The live regions of this memory, by offset; the first gap that fits wins.
  std::vector<std::pair<int64_t, int64_t>> live;
  for (const Allocation& a : program_.allocations)
    if (a.kind == kind && a.released_at > now)
      live.push_back({a.byte_offset, a.byte_offset + a.bytes_per_partition});
  std::sort(live.begin(), live.end());
  int64_t offset = 0;
  for (const auto& [begin, end] : live) {
    if (offset + bytes_per_partition <= begin) break;
    offset = std::max(offset, (end + align - 1) / align * align);
  }
  Allocation a;
  a.name = std::move(name);
  a.kind = kind;
  a.byte_offset = offset;
  a.bytes_per_partition = bytes_per_partition;
  a.allocated_at = now;
  program_.allocations.push_back(std::move(a));
  return static_cast<int32_t>(program_.allocations.size() - 1);
}

void TileBuilder::release(int32_t allocation) {
  program_.allocations[allocation].released_at = static_cast<int64_t>(program_.instructions.size());
}

int64_t TileBuilder::emit(Instruction inst) {
  program_.instructions.push_back(std::move(inst));
  return static_cast<int64_t>(program_.instructions.size() - 1);
}

int64_t TileBuilder::dma_copy(const AccessPattern& dst, const AccessPattern& src) {
  Instruction inst;
  inst.engine = Engine::sync;
  inst.opcode = Opcode::dma_copy;
  inst.dst = dst;
  inst.srcs = {src};
  inst.dma_engine = next_dma_engine_;
  next_dma_engine_ = (next_dma_engine_ + 1) % kDmaEngines;
  return emit(std::move(inst));
}

int64_t TileBuilder::dma_indirect(const AccessPattern& dst, const AccessPattern& src,
                                  const AccessPattern& index, bool accumulate) {
  const int64_t i = dma_copy(dst, src);
  Instruction& inst = program_.instructions[i];
  inst.opcode = Opcode::dma_indirect;
  inst.srcs.push_back(index);
  inst.accumulate = accumulate;
  return i;
}

int64_t TileBuilder::philox_uniform(const AccessPattern& dst, const AccessPattern& state,
                                    const AffineExpr& expr) {
  Instruction inst;
  inst.engine = Engine::gpsimd;
  inst.opcode = Opcode::philox_uniform;
  inst.dst = dst;
  inst.srcs = {state};
  inst.affine = expr;
  return emit(std::move(inst));
}

int64_t TileBuilder::matmul(const AccessPattern& psum_dst, const AccessPattern& stationary,
                            const AccessPattern& moving, bool accumulate) {
  Instruction inst;
  inst.engine = Engine::tensor;
  inst.opcode = Opcode::nc_matmul;
  inst.dst = psum_dst;
  inst.srcs = {stationary, moving};
  inst.accumulate = accumulate;
  return emit(std::move(inst));
}

int64_t TileBuilder::tensor_tensor(Engine engine, const AccessPattern& dst, const AccessPattern& a,
                                   const AccessPattern& b, AluOp op) {
  Instruction inst;
  inst.engine = engine;
  inst.opcode = Opcode::tensor_tensor;
  inst.dst = dst;
  inst.srcs = {a, b};
  inst.alu = op;
  return emit(std::move(inst));
}

int64_t TileBuilder::tensor_scalar(Engine engine, const AccessPattern& dst,
                                   const AccessPattern& src, AluOp op, float scalar) {
  Instruction inst;
  inst.engine = engine;
  inst.opcode = Opcode::tensor_scalar;
  inst.dst = dst;
  inst.srcs = {src};
  inst.alu = op;
  inst.scalar = scalar;
  return emit(std::move(inst));
}

int64_t TileBuilder::activation(const AccessPattern& dst, const AccessPattern& src,
                                ActivationFunction f, float scale, float bias) {
  Instruction inst;
  inst.engine = Engine::scalar;
  inst.opcode = Opcode::activation;
  inst.dst = dst;
  inst.srcs = {src};
  inst.function = f;
  inst.scale = scale;
  inst.bias_value = bias;
  return emit(std::move(inst));
}

int64_t TileBuilder::tensor_copy(Engine engine, const AccessPattern& dst,
                                 const AccessPattern& src) {
  Instruction inst;
  inst.engine = engine;
  inst.opcode = Opcode::tensor_copy;
  inst.dst = dst;
  inst.srcs = {src};
  return emit(std::move(inst));
}

int64_t TileBuilder::tensor_reduce(Engine engine, const AccessPattern& dst,
                                   const AccessPattern& src, AluOp op) {
  Instruction inst;
  inst.engine = engine;
  inst.opcode = Opcode::tensor_reduce;
  inst.dst = dst;
  inst.srcs = {src};
  inst.alu = op;
  return emit(std::move(inst));
}

int64_t TileBuilder::iota(const AccessPattern& dst, const AffineExpr& expr) {
  Instruction inst;
  inst.engine = Engine::gpsimd;
  inst.opcode = Opcode::iota;
  inst.dst = dst;
  inst.affine = expr;
  return emit(std::move(inst));
}

int64_t TileBuilder::affine_select(const AccessPattern& dst, const AccessPattern& src,
                                   const AffineExpr& expr, CmpOp cmp, float fill) {
  Instruction inst;
  inst.engine = Engine::gpsimd;
  inst.opcode = Opcode::affine_select;
  inst.dst = dst;
  inst.srcs = {src};
  inst.affine = expr;
  inst.cmp = cmp;
  inst.scalar = fill;
  return emit(std::move(inst));
}

int64_t TileBuilder::select(const AccessPattern& dst, const AccessPattern& pred,
                            const AccessPattern& on_true, const AccessPattern& on_false) {
  Instruction inst;
  inst.engine = Engine::vector;
  inst.opcode = Opcode::select;
  inst.dst = dst;
  inst.srcs = {pred, on_true, on_false};
  return emit(std::move(inst));
}

int64_t TileBuilder::bn_stats(const AccessPattern& dst, const AccessPattern& src) {
  Instruction inst;
  inst.engine = Engine::vector;
  inst.opcode = Opcode::bn_stats;
  inst.dst = dst;
  inst.srcs = {src};
  return emit(std::move(inst));
}

int64_t TileBuilder::bn_aggr(const AccessPattern& dst, const AccessPattern& src) {
  Instruction inst;
  inst.engine = Engine::vector;
  inst.opcode = Opcode::bn_aggr;
  inst.dst = dst;
  inst.srcs = {src};
  return emit(std::move(inst));
}

} // namespace mstep::neuron
