// TileBuilder: writes a TileProgram instruction by instruction. It places
// SBUF/PSUM allocations first-fit among the live ones (PSUM on bank
// boundaries) and hands out DMA engines round-robin; it checks nothing,
// the validator does (so a test can build a program that breaks a rule).
#pragma once

#include <string>

#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

class TileBuilder {
public:
  explicit TileBuilder(std::string name) { program_.name = std::move(name); }

  /// A new HBM tensor of `elements` elements; returns its id.
  int32_t hbm_tensor(std::string name, DType dtype, int64_t elements);
  /// A new SBUF or PSUM region of `bytes_per_partition` bytes on every
  /// partition, live from the next instruction on; returns its id. When
  /// nothing fits it is placed past the end (the validator reports it).
  int32_t allocate(BufferKind kind, int64_t bytes_per_partition, std::string name);
  /// Ends `allocation`'s life before the next instruction.
  void release(int32_t allocation);
  /// A new semaphore, count 0.
  int32_t semaphore() { return program_.num_semaphores++; }

  int64_t dma_copy(const AccessPattern& dst, const AccessPattern& src);
  /// Sync: partition p moves HBM row index[p] (TileInstruction.h); with
  /// `accumulate` a scatter adds into HBM.
  int64_t dma_indirect(const AccessPattern& dst, const AccessPattern& src,
                       const AccessPattern& index, bool accumulate = false);
  /// Pins instruction `index` (a DMA) to DMA engine `engine`, e.g. to keep
  /// HBM writes that must not reorder on one engine.
  void set_dma_engine(int64_t index, int32_t engine) {
    program_.instructions[index].dma_engine = engine;
  }
  int64_t matmul(const AccessPattern& psum_dst, const AccessPattern& stationary,
                 const AccessPattern& moving, bool accumulate);
  int64_t tensor_tensor(Engine engine, const AccessPattern& dst, const AccessPattern& a,
                        const AccessPattern& b, AluOp op);
  int64_t tensor_scalar(Engine engine, const AccessPattern& dst, const AccessPattern& src, AluOp op,
                        float scalar);
  int64_t activation(const AccessPattern& dst, const AccessPattern& src, ActivationFunction f,
                     float scale = 1.0f, float bias = 0.0f);
  int64_t tensor_copy(Engine engine, const AccessPattern& dst, const AccessPattern& src);
  int64_t tensor_reduce(Engine engine, const AccessPattern& dst, const AccessPattern& src,
                        AluOp op);
  /// GpSimd: dst = `expr` at each element (NKI iota).
  int64_t iota(const AccessPattern& dst, const AffineExpr& expr);
  /// GpSimd: dst = cmp(`expr`, 0) ? src : fill (NKI affine_select).
  int64_t affine_select(const AccessPattern& dst, const AccessPattern& src, const AffineExpr& expr,
                        CmpOp cmp, float fill);
  /// Vector: dst = pred != 0 ? on_true : on_false (NKI nl.where): the
  /// unselected side's NaN or inf does not reach dst.
  int64_t select(const AccessPattern& dst, const AccessPattern& pred, const AccessPattern& on_true,
                 const AccessPattern& on_false);
  /// GpSimd: dst = Philox uniforms of the (seed, offset) in `state` at
  /// counter offset + `expr` (TileInstruction.h).
  int64_t philox_uniform(const AccessPattern& dst, const AccessPattern& state,
                         const AffineExpr& expr);
  /// Vector bn_stats / bn_aggr (TileInstruction.h).
  int64_t bn_stats(const AccessPattern& dst, const AccessPattern& src);
  int64_t bn_aggr(const AccessPattern& dst, const AccessPattern& src);
  /// Appends any instruction as is.
  int64_t emit(Instruction inst);

  /// Instruction `index` increments `sem` when it completes.
  void signal(int64_t index, int32_t sem) { program_.instructions[index].signals.push_back(sem); }
  /// Instruction `index` waits until `sem` has been signalled `value` times.
  void wait(int64_t index, int32_t sem, int32_t value) {
    program_.instructions[index].waits.push_back({sem, value});
  }

  Instruction& at(int64_t index) { return program_.instructions[index]; }
  const TileProgram& program() const { return program_; }
  TileProgram take() { return std::move(program_); }

private:
  TileProgram program_;
  int32_t next_dma_engine_ = 0;
};

} // namespace mstep::neuron
